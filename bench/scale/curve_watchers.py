"""Watchers curve (1 → 1k → 10k watchers on distinct keys): event delivery after a put's
acknowledgement, and the members' memory per watcher (README.md)."""

import random
import time

from scalelib.plots import STYLE, save, series
from scalelib.proto import header_revision, put_request, watch_create_request, watch_response
from scalelib.tables import fmt, ratio, systems_at, table
from scalelib.util import quantile

NAME = "watchers"
XKEY = "watchers"


def points(args):
    return args.watchers


def run_point(cluster, bench, n, args):
    """Fresh cluster, n watchers on n distinct keys (1000 per gRPC stream, the streams spread
    over the members), then puts at a fixed rate to those keys from one client: delivery latency
    from each put's acknowledgement to its event, and the members' memory per watcher."""
    import queue
    import threading

    import grpc

    rec = {"watchers": n}
    cluster.use_dir(f"watchers-{n}")
    streams, threads, channels = [], [], []
    lock = threading.Lock()
    created = [0]
    canceled = [0]
    received = {}  # mod revision -> receive time (monotonic)
    stream_errors = []
    try:
        cluster.start()
        term0 = cluster.term()
        keys = [b"scale/w/%08d" % i for i in range(n)]
        time.sleep(args.settle)
        rss0 = [cluster.rss_bytes(i) for i in range(1, cluster.members + 1)]
        per_stream = 1000
        for s_i, first in enumerate(range(0, n, per_stream)):
            ch = grpc.insecure_channel(cluster.client_endpoint(1 + s_i % cluster.members))
            channels.append(ch)
            q = queue.Queue()
            for k in keys[first:first + per_stream]:
                q.put(watch_create_request(k))

            def requests(q=q):
                while True:
                    r = q.get()
                    if r is None:
                        return
                    yield r

            call = ch.stream_stream("/etcdserverpb.Watch/Watch")(requests())
            streams.append((q, call))

            def reader(call=call):
                try:
                    for resp in call:
                        now = time.monotonic()
                        c, x, evs = watch_response(resp)
                        with lock:
                            created[0] += c
                            canceled[0] += x
                            for _, rev in evs:
                                received[rev] = now
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.CANCELLED:
                        stream_errors.append(str(e.code()))

            t = threading.Thread(target=reader, daemon=True)
            t.start()
            threads.append(t)
        end = time.monotonic() + 60
        while created[0] < n and time.monotonic() < end and not stream_errors:
            time.sleep(0.05)
        rec["created"] = created[0]
        time.sleep(args.settle)
        rss1 = [cluster.rss_bytes(i) for i in range(1, cluster.members + 1)]
        rec["rss_bytes_before"], rec["rss_bytes"] = rss0, rss1
        rec["bytes_per_watcher"] = (sum(rss1) - sum(rss0)) / n
        # Puts at a fixed rate, each to a uniformly chosen watched key, one at a time.
        pch = grpc.insecure_channel(cluster.client_endpoint(1))
        channels.append(pch)
        put = pch.unary_unary("/etcdserverpb.KV/Put")
        value = b"v" * 256
        sent, acked, put_errors = {}, {}, 0
        period = 1.0 / args.watch_put_rate
        count = int(args.watch_put_rate * args.duration)
        rnd = random.Random(n)
        t0 = time.monotonic()
        for i in range(count):
            due = t0 + i * period
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            ts = time.monotonic()
            try:
                resp = put(put_request(keys[rnd.randrange(n)], value), timeout=5)
            except grpc.RpcError:
                put_errors += 1
                continue
            ta = time.monotonic()
            rev = header_revision(resp)
            sent[rev], acked[rev] = ts, ta
        end = time.monotonic() + 5
        while time.monotonic() < end:
            with lock:
                if all(r in received for r in acked):
                    break
            time.sleep(0.05)
        with lock:
            got = {r: received[r] for r in acked if r in received}
        from_ack = [(got[r] - acked[r]) * 1000 for r in got]
        from_send = [(got[r] - sent[r]) * 1000 for r in got]
        rec["puts"] = len(acked)
        rec["put_errors"] = put_errors
        rec["put_rate"] = len(acked) / (time.monotonic() - t0)
        rec["events_delivered"] = len(got)
        rec["delivery_from_ack_ms"] = {"p50": quantile(from_ack, 0.5),
                                       "p99": quantile(from_ack, 0.99),
                                       "max": max(from_ack, default=None)}
        rec["delivery_from_send_ms"] = {"p50": quantile(from_send, 0.5),
                                        "p99": quantile(from_send, 0.99)}
        rec["put_latency_ms"] = {
            "p50": quantile([(acked[r] - sent[r]) * 1000 for r in acked], 0.5),
            "p99": quantile([(acked[r] - sent[r]) * 1000 for r in acked], 0.99)}
        rec["stream_errors"] = stream_errors
        rec["canceled"] = canceled[0]
        rec["term_changes"] = cluster.term() - term0
        rec["ok"] = (created[0] == n and not stream_errors and canceled[0] == 0
                     and put_errors == 0 and len(got) == len(acked) == count)
    finally:
        for q, call in streams:
            q.put(None)
            call.cancel()
        for ch in channels:
            ch.close()
        for t in threads:
            t.join(timeout=5)
        cluster.stop()
        if not args.keep_data:
            cluster.drop_data()
    return rec


def report(recs, args, ctx):
    return [f"WATCHERS (one watcher per distinct key, 1000 per stream; "
            f"{args.watch_put_rate:g} puts/s from one client for {args.duration:g} s; "
            "delivery = event received - put acknowledged, negative when the event "
            "arrives first; memory = growth of all members' RSS / watchers)",
            watchers_table(recs), ""]


def watchers_table(recs):
    rows = [["watchers", "created e/etcd", "bytes/watcher e", "etcd", "ratio",
             "delivery p50 ms e", "etcd", "delivery p99 ms e", "etcd", "p99 ratio",
             "put p50 ms e", "etcd", "puts/s e/etcd", "elections e/etcd", "ok e/etcd"]]
    for n in sorted({r["watchers"] for r in recs}):
        e, d = systems_at(recs, "watchers", n)
        de, dd = e.get("delivery_from_ack_ms", {}), d.get("delivery_from_ack_ms", {})
        pe, pd = e.get("put_latency_ms", {}), d.get("put_latency_ms", {})
        rows.append([
            n, f"{e.get('created')}/{d.get('created')}", fmt(e.get("bytes_per_watcher")),
            fmt(d.get("bytes_per_watcher")),
            ratio(e.get("bytes_per_watcher"), d.get("bytes_per_watcher")),
            fmt(de.get("p50"), 2), fmt(dd.get("p50"), 2), fmt(de.get("p99"), 2),
            fmt(dd.get("p99"), 2), ratio(de.get("p99"), dd.get("p99")),
            fmt(pe.get("p50"), 2), fmt(pd.get("p50"), 2),
            f"{fmt(e.get('put_rate'))}/{fmt(d.get('put_rate'))}",
            f"{e.get('term_changes')}/{d.get('term_changes')}", f"{e.get('ok')}/{d.get('ok')}"])
    return table(rows)


def plottable(rec):
    return "delivery_from_ack_ms" in rec


def plot(plt, out, recs, title, ctx):
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    ax = axes[0]
    for q, ls in (("p50", "--"), ("p99", "-")):
        for s, x, y in series(recs, "watchers",
                              lambda r, q=q: r.get("delivery_from_ack_ms", {}).get(q)):
            ax.plot(x, y, linestyle=ls, label=f"{s} {q}", **STYLE[s])
    ax.set_title("event delivery after the put's acknowledgement (ms)")
    ax = axes[1]
    for s, x, y in series(recs, "watchers", lambda r: r.get("bytes_per_watcher")):
        ax.plot(x, y, label=s, **STYLE[s])
    ax.set_title("resident memory per watcher, all members (bytes)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("watchers (distinct keys)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Watchers curve: Epoch vs etcd — {title}")
    fig.tight_layout()
    return save(plt, fig, out, "watchers.png")
