"""Watchers curve (1 → 1k → 10k → 50k watchers, on distinct keys and on one shared prefix):
event delivery after a put's acknowledgement, server CPU per delivered event, the put throughput
with and without the watchers, and the members' memory per watcher (README.md)."""

import json
import os
import random
import subprocess
import threading
import time

from scalelib.plots import STYLE, save, series
from scalelib.proto import header_revision, put_request, watch_create_request, watch_response
from scalelib.tables import fmt, ratio, systems_at, table
from scalelib.util import quantile

NAME = "watchers"
XKEY = "point"  # "<watchers>/<mode>"


def points(args):
    """One point per watcher count and mode; the Python client only runs distinct keys."""
    modes = args.watch_modes if args.watch_load else ["distinct"]
    return [f"{n}/{m}" for n in args.watchers for m in modes]


def run_point(cluster, bench, point, args):
    n, mode = int(point.split("/")[0]), point.split("/")[1]
    if args.watch_load:
        return watchers_point_cpp(cluster, n, mode, args)
    rec = watchers_point(cluster, n, args)
    rec.update(point=point, mode=mode, client="python")
    return rec


def prefix_put_rate(n, args):
    """The writer's rate with every put going to all n watchers: --watch-put-rate, lowered so
    that it asks for at most --watch-prefix-deliveries events per second (both systems get the
    same schedule; 2 cores deliver a few 10k events/s)."""
    return min(args.watch_put_rate, max(1.0, args.watch_prefix_deliveries / n))


def watchers_point_cpp(cluster, n, mode, args):
    """Fresh cluster, then bench/scale's epoch_watch_load: n watchers (1000 per stream, spread
    over the members) on distinct keys or on one prefix, a closed-loop put phase of
    --watch-put-clients without and with them, and one writer at a fixed rate whose events are
    timed against its acknowledgements."""
    rate = args.watch_put_rate if mode == "distinct" else prefix_put_rate(n, args)
    rec = {"point": f"{n}/{mode}", "watchers": n, "mode": mode, "client": "c++",
           "put_rate_target": rate}
    cluster.use_dir(f"watchers-{n}-{mode}")
    try:
        cluster.start()
        cmd = [args.watch_load, "--endpoints", ",".join(cluster.endpoints()),
               "--watchers", str(n), "--mode", mode, "--put-rate", f"{rate:g}",
               "--warmup", str(args.warmup), "--window", str(args.duration),
               "--settle", str(args.settle), "--grace", "5",
               "--put-clients", str(args.watch_put_clients)]
        for pid in cluster.pids():
            cmd += ["--server-pids", str(pid)]
        timeout = 120 + 3 * (args.warmup + args.duration) + args.settle + n / 500
        with open(os.path.join(cluster.dir, "bench.log"), "a") as log_file:
            log_file.write(f"\n$ {' '.join(cmd)}\n")
            log_file.flush()
            out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=log_file, text=True,
                                 timeout=timeout)
            log_file.write(out.stdout)
        lines = out.stdout.strip().splitlines()
        if out.returncode not in (0, 1) or not lines:
            raise RuntimeError(f"epoch_watch_load exited {out.returncode}")
        r = json.loads(lines[-1])
        rec.update(r)
        rec["mode"] = mode  # the client's own field, spelled as the point's
        rec["delivery_from_ack_ms"] = {"p50": r.get("delivery_p50_ms"),
                                       "p99": r.get("delivery_p99_ms"),
                                       "max": r.get("delivery_max_ms")}
        rec["put_latency_ms"] = {"p50": r.get("put_p50_ms"), "p99": r.get("put_p99_ms")}
        rss0, rss1 = r.get("rss_bytes_before") or [], r.get("rss_bytes_created") or []
        rec["bytes_per_watcher"] = ((sum(rss1) - sum(rss0)) / n
                                    if rss0 and len(rss0) == len(rss1) else None)
        rec["ok"] = out.returncode == 0 and bool(r.get("ok"))
    finally:
        cluster.finish(args.keep_data)
    return rec


def watchers_point(cluster, n, args):
    """Fresh cluster, n watchers on n distinct keys (1000 per gRPC stream, the streams spread
    over the members), then puts at a fixed rate to those keys from one client: delivery latency
    from each put's acknowledgement to its event, and the members' memory per watcher (the
    Python client, when epoch_watch_load is not built)."""
    rec = {"watchers": n}
    cluster.use_dir(f"watchers-{n}")
    watchers = None
    try:
        cluster.start()
        term0 = cluster.term()
        keys = [b"scale/w/%08d" % i for i in range(n)]
        time.sleep(args.settle)
        rss0 = [cluster.rss_bytes(i) for i in range(1, cluster.members + 1)]
        watchers = WatcherStreams(cluster, keys)
        rec["created"] = watchers.wait_created(n, 60)
        time.sleep(args.settle)
        rss1 = [cluster.rss_bytes(i) for i in range(1, cluster.members + 1)]
        rec["rss_bytes_before"], rec["rss_bytes"] = rss0, rss1
        rec["bytes_per_watcher"] = (sum(rss1) - sum(rss0)) / n
        t0 = time.monotonic()
        sent, acked, put_errors = paced_puts(cluster, keys, args, random.Random(n))
        got = watchers.wait_delivered(acked, 5)
        delivery_figures(rec, sent, acked, got, time.monotonic() - t0)
        rec["put_errors"] = put_errors
        rec["stream_errors"] = watchers.errors
        rec["canceled"] = watchers.canceled
        rec["term_changes"] = cluster.term() - term0
        count = int(args.watch_put_rate * args.duration)
        rec["ok"] = (rec["created"] == n and not watchers.errors and watchers.canceled == 0
                     and put_errors == 0 and len(got) == len(acked) == count)
    finally:
        if watchers:
            watchers.close()
        cluster.finish(args.keep_data)
    return rec


class WatcherStreams:
    """Watchers on keys, per_stream of them on each raw gRPC Watch stream, the streams
    round-robin over the members; a reader thread per stream records each event's receive time
    by its revision."""

    def __init__(self, cluster, keys, per_stream=1000):
        import queue

        import grpc

        self.lock = threading.Lock()
        self.created = self.canceled = 0
        self.received = {}  # mod revision -> receive time (monotonic)
        self.errors = []
        self.streams, self.threads, self.channels = [], [], []
        for s_i, first in enumerate(range(0, len(keys), per_stream)):
            ch = grpc.insecure_channel(cluster.client_endpoint(1 + s_i % cluster.members))
            self.channels.append(ch)
            q = queue.Queue()
            for k in keys[first:first + per_stream]:
                q.put(watch_create_request(k))
            call = ch.stream_stream("/etcdserverpb.Watch/Watch")(self._requests(q))
            self.streams.append((q, call))
            t = threading.Thread(target=self._read, args=(call,), daemon=True)
            t.start()
            self.threads.append(t)

    @staticmethod
    def _requests(q):
        while True:
            r = q.get()
            if r is None:
                return
            yield r

    def _read(self, call):
        import grpc

        try:
            for resp in call:
                now = time.monotonic()
                c, x, evs = watch_response(resp)
                with self.lock:
                    self.created += c
                    self.canceled += x
                    for _, rev in evs:
                        self.received[rev] = now
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                self.errors.append(str(e.code()))

    def wait_created(self, n, timeout_s):
        """The watchers created once n are, a stream erred, or timeout_s passed."""
        end = time.monotonic() + timeout_s
        while self.created < n and time.monotonic() < end and not self.errors:
            time.sleep(0.05)
        return self.created

    def wait_delivered(self, acked, timeout_s):
        """{revision: receive time} of the acknowledged puts' events, once all arrived or after
        timeout_s."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            with self.lock:
                if all(r in self.received for r in acked):
                    break
            time.sleep(0.05)
        with self.lock:
            return {r: self.received[r] for r in acked if r in self.received}

    def close(self):
        for q, call in self.streams:
            q.put(None)
            call.cancel()
        for ch in self.channels:
            ch.close()
        for t in self.threads:
            t.join(timeout=5)


def paced_puts(cluster, keys, args, rnd):
    """Puts of 256 B at --watch-put-rate for --duration, each to a uniformly chosen watched key,
    one at a time, on member 1: ({revision: send time}, {revision: ack time}, errors)."""
    import grpc

    ch = grpc.insecure_channel(cluster.client_endpoint(1))
    put = ch.unary_unary("/etcdserverpb.KV/Put")
    value = b"v" * 256
    sent, acked, put_errors = {}, {}, 0
    period = 1.0 / args.watch_put_rate
    count = int(args.watch_put_rate * args.duration)
    t0 = time.monotonic()
    try:
        for i in range(count):
            due = t0 + i * period
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            ts = time.monotonic()
            try:
                resp = put(put_request(keys[rnd.randrange(len(keys))], value), timeout=5)
            except grpc.RpcError:
                put_errors += 1
                continue
            ta = time.monotonic()
            rev = header_revision(resp)
            sent[rev], acked[rev] = ts, ta
    finally:
        ch.close()
    return sent, acked, put_errors


def delivery_figures(rec, sent, acked, got, elapsed_s):
    """Delivery latency from each put's acknowledgement (and send) to its event, put latency and
    the put rate reached (over the puts and the wait for their events, as before the split)."""
    from_ack = [(got[r] - acked[r]) * 1000 for r in got]
    from_send = [(got[r] - sent[r]) * 1000 for r in got]
    rec["puts"] = len(acked)
    rec["put_rate"] = len(acked) / elapsed_s
    rec["events_delivered"] = len(got)
    rec["delivery_from_ack_ms"] = {"p50": quantile(from_ack, 0.5),
                                   "p99": quantile(from_ack, 0.99),
                                   "max": max(from_ack, default=None)}
    rec["delivery_from_send_ms"] = {"p50": quantile(from_send, 0.5),
                                    "p99": quantile(from_send, 0.99)}
    put_ms = [(acked[r] - sent[r]) * 1000 for r in acked]
    rec["put_latency_ms"] = {"p50": quantile(put_ms, 0.5), "p99": quantile(put_ms, 0.99)}


def report(recs, args, ctx):
    text = [f"WATCHERS (1000 watchers per stream; distinct: one key per watcher, "
            f"{args.watch_put_rate:g} puts/s from one client; prefix: every watcher on one "
            f"prefix, every put to all of them, at most {args.watch_prefix_deliveries:g} "
            f"deliveries/s asked; {args.duration:g} s; delivery = event received - put "
            "acknowledged, negative when the event arrives first; memory = growth of all "
            "members' RSS / watchers)",
            watchers_table(recs), ""]
    if any("throughput_with" in r for r in recs):
        text += [f"WATCHERS: CPU per delivered event (all members, writer's window) and put "
                 f"throughput of {args.watch_put_clients} closed-loop clients without and with "
                 "the watchers (distinct: puts to the watched keys; prefix: puts outside the "
                 "prefix)", cost_table(recs), ""]
    return text


def point_order(recs):
    """The points in the order they ran (watcher count, then mode)."""
    seen = []
    for r in recs:
        if r[XKEY] not in seen:
            seen.append(r[XKEY])
    return seen


def cost_table(recs):
    rows = [["point", "µs/event e", "etcd", "ratio", "puts/s alone e", "with", "etcd alone",
             "with", "with/alone e", "etcd"]]
    for x in point_order(recs):
        e, d = systems_at(recs, XKEY, x)
        we, wd = e.get("throughput_without", {}), d.get("throughput_without", {})
        te, td = e.get("throughput_with", {}), d.get("throughput_with", {})
        rows.append([
            x, fmt(e.get("server_cpu_us_per_delivery"), 1),
            fmt(d.get("server_cpu_us_per_delivery"), 1),
            ratio(e.get("server_cpu_us_per_delivery"), d.get("server_cpu_us_per_delivery")),
            fmt(we.get("ops_per_s")), fmt(te.get("ops_per_s")), fmt(wd.get("ops_per_s")),
            fmt(td.get("ops_per_s")), ratio(te.get("ops_per_s"), we.get("ops_per_s")),
            ratio(td.get("ops_per_s"), wd.get("ops_per_s"))])
    return table(rows)


def watchers_table(recs):
    rows = [["point", "created e/etcd", "bytes/watcher e", "etcd", "ratio",
             "delivery p50 ms e", "etcd", "delivery p99 ms e", "etcd", "p99 ratio",
             "put p50 ms e", "etcd", "puts/s e/etcd", "elections e/etcd", "ok e/etcd"]]
    for n in point_order(recs):
        e, d = systems_at(recs, XKEY, n)
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
    return "delivery_from_ack_ms" in rec and "watchers" in rec


def plot(plt, out, recs, title, ctx):
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    ax = axes[0]
    for mode, marker in (("distinct", None), ("prefix", "^")):
        of_mode = [r for r in recs if r.get("mode", "distinct") == mode]
        for q, ls in (("p50", "--"), ("p99", "-")):
            for s, x, y in series(of_mode, "watchers",
                                  lambda r, q=q: r.get("delivery_from_ack_ms", {}).get(q)):
                style = dict(STYLE[s], **({"marker": marker} if marker else {}))
                ax.plot(x, y, linestyle=ls, label=f"{s} {mode} {q}", **style)
    ax.set_title("event delivery after the put's acknowledgement (ms)")
    ax = axes[1]
    distinct = [r for r in recs if r.get("mode", "distinct") == "distinct"]
    for s, x, y in series(distinct, "watchers", lambda r: r.get("bytes_per_watcher")):
        ax.plot(x, y, label=s, **STYLE[s])
    ax.set_title("resident memory per watcher, all members (bytes)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("watchers")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Watchers curve: Epoch vs etcd — {title}")
    fig.tight_layout()
    return save(plt, fig, out, "watchers.png")
