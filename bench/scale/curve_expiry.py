"""Lease expiry (10k leases of TTL 5 s, one 256 B key attached to each, not kept alive): how long
after the last lease's deadline every key is gone, the longest any key outlived its lease, the
elections, and the put latency of a light writer meanwhile (README.md)."""

import threading
import time

from scalelib.plots import STYLE, save, series
from scalelib.proto import (lease_grant_request, lease_id, prefix_end, put_request, range_count,
                            range_count_request, watch_create_request, watch_events)
from scalelib.tables import fmt, ratio, systems_at, table
from scalelib.util import quantile
from scalelib.writer import PacedWriter

NAME = "expiry"
XKEY = "leases"
TTL_S = 5
PREFIX = b"scale/x/"
BATCH = 256  # grants (then their puts) in flight


def points(args):
    return args.expire_leases


def run_point(cluster, bench, n, args):
    """Fresh cluster; a watch on the keys' prefix records when each key is deleted; grant n
    leases and attach a key to each (a batch of grants, then their puts); then poll a count-only
    Range over the prefix every 50 ms until it is 0, with a writer putting at
    --expiry-put-rate meanwhile."""
    import grpc

    rec = {"leases": n, "ttl_s": TTL_S}
    cluster.use_dir(f"expiry-{n}")
    channels, writer, watch = [], None, None
    try:
        cluster.start()
        term0 = cluster.term()
        channels = [grpc.insecure_channel(e) for e in cluster.endpoints()]
        watch = DeleteWatch(channels[0]).start()
        deadlines = grant_and_attach(channels, n, rec)
        first_deadline = min(deadlines.values(), default=time.monotonic())
        last_deadline = max(deadlines.values(), default=time.monotonic())
        writer = PacedWriter(cluster.client_endpoint(1), b"scale/xw/", args.expiry_put_rate)
        writer.start()
        timeout = 2 * TTL_S + 60 + n / 200
        gone_at = poll_until_empty(channels[0], last_deadline + timeout)
        rec["expire_s"] = None if gone_at is None else gone_at - last_deadline
        # The grants take seconds at 10k, so leases expire while the last are granted: the rate
        # from the first deadline to the empty prefix is the figure that does not depend on it.
        rec["expired_per_s"] = (len(deadlines) / (gone_at - first_deadline)
                                if gone_at is not None and gone_at > first_deadline else None)
        rec["writer"] = writer.summary()
        time.sleep(0.5)  # the last delete events on their way
        overdue = watch.overdue_s(deadlines)
        rec["keys_deleted"] = len(overdue)
        rec["overdue_s"] = {"p50": quantile(overdue, 0.5), "p99": quantile(overdue, 0.99),
                            "max": max(overdue, default=None)}
        rec["watch_errors"] = watch.errors
        rec["term_changes"] = cluster.term() - term0
        rec["ok"] = (rec["grant_errors"] == 0 and rec["attach_errors"] == 0
                     and rec["expire_s"] is not None and rec["keys_deleted"] == n
                     and not watch.errors and rec["writer"]["errors"] == 0)
    finally:
        if writer:
            writer.stop()
        if watch:
            watch.stop()
        for ch in channels:
            ch.close()
        cluster.finish(args.keep_data)
    return rec


def grant_and_attach(channels, n, rec):
    """Grants n leases of TTL_S round-robin over the members, BATCH at a time, and puts one key
    with each; returns {key: its lease's deadline} (the grant's acknowledgement + TTL_S, on the
    monotonic clock)."""
    import grpc

    grants = [ch.unary_unary("/etcdserverpb.Lease/LeaseGrant") for ch in channels]
    puts = [ch.unary_unary("/etcdserverpb.KV/Put") for ch in channels]
    value = b"x" * 256
    deadlines, grant_errors, attach_errors = {}, 0, 0
    t0 = time.monotonic()
    for first in range(0, n, BATCH):
        idx = range(first, min(n, first + BATCH))
        futs = [(i, grants[i % len(grants)].future(lease_grant_request(TTL_S), timeout=10))
                for i in idx]
        leases = []
        for i, f in futs:
            try:
                leases.append((i, lease_id(f.result()), time.monotonic() + TTL_S))
            except grpc.RpcError:
                grant_errors += 1
        pending = []
        for i, lid, deadline in leases:
            key = PREFIX + b"%08d" % i
            req = put_request(key, value, lease=lid)
            pending.append((key, deadline, puts[i % len(puts)].future(req, timeout=10)))
        for key, deadline, f in pending:
            try:
                f.result()
                deadlines[key] = deadline
            except grpc.RpcError:
                attach_errors += 1
    rec["grant_s"] = time.monotonic() - t0
    rec["grant_errors"], rec["attach_errors"] = grant_errors, attach_errors
    return deadlines


def poll_until_empty(channel, give_up):
    """Monotonic time of the first count-only Range over the prefix that returned 0 (polled every
    50 ms), or None at give_up."""
    import grpc

    rng = channel.unary_unary("/etcdserverpb.KV/Range")
    req = range_count_request(PREFIX, prefix_end(PREFIX))
    while time.monotonic() < give_up:
        try:
            if range_count(rng(req, timeout=5)) == 0:
                return time.monotonic()
        except grpc.RpcError:
            pass  # a leader change: poll again
        time.sleep(0.05)
    return None


class DeleteWatch:
    """A watch on PREFIX: the receive time of each key's delete event."""

    def __init__(self, channel):
        import queue

        self.q = queue.Queue()
        self.q.put(watch_create_request(PREFIX, prefix_end(PREFIX)))
        self.call = channel.stream_stream("/etcdserverpb.Watch/Watch")(self._requests())
        self.deleted = {}  # key -> monotonic receive time
        self.errors = []
        self.thread = threading.Thread(target=self._read, daemon=True)

    def _requests(self):
        while True:
            r = self.q.get()
            if r is None:
                return
            yield r

    def _read(self):
        import grpc

        try:
            for resp in self.call:
                now = time.monotonic()
                for kind, key, _ in watch_events(resp):
                    if kind == 1:
                        self.deleted.setdefault(key, now)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                self.errors.append(str(e.code()))

    def start(self):
        self.thread.start()
        time.sleep(0.2)  # created before the first put
        return self

    def stop(self):
        self.q.put(None)
        self.call.cancel()
        self.thread.join(timeout=5)

    def overdue_s(self, deadlines):
        """Seconds each deleted key outlived its lease's deadline."""
        return [t - deadlines[k] for k, t in list(self.deleted.items()) if k in deadlines]


def report(recs, args, ctx):
    return [f"LEASE EXPIRY (leases of TTL {TTL_S} s, one 256 B key each, not kept alive; expire = "
            "from the last lease's deadline to a count-only Range over the keys returning 0; expired/s = "
            "leases / (empty - first deadline); "
            "overdue = a key's delete event minus its lease's deadline; writer = "
            f"{args.expiry_put_rate:g} puts/s from one client meanwhile)", expiry_table(recs), ""]


def expiry_table(recs):
    rows = [["leases", "grant+attach s e", "etcd", "expire s e", "etcd", "ratio",
             "expired/s e", "etcd",
             "overdue p99 s e", "etcd", "overdue max s e", "etcd", "writer p99 ms e", "etcd",
             "ratio", "writer max ms e", "etcd", "elections e/etcd", "ok e/etcd"]]
    for n in sorted({r["leases"] for r in recs}):
        e, d = systems_at(recs, "leases", n)
        oe, od = e.get("overdue_s", {}), d.get("overdue_s", {})
        we, wd = e.get("writer", {}), d.get("writer", {})
        rows.append([
            n, fmt(e.get("grant_s"), 1), fmt(d.get("grant_s"), 1),
            fmt(e.get("expire_s"), 2), fmt(d.get("expire_s"), 2),
            ratio(e.get("expire_s"), d.get("expire_s")),
            fmt(e.get("expired_per_s")), fmt(d.get("expired_per_s")),
            fmt(oe.get("p99"), 2), fmt(od.get("p99"), 2), fmt(oe.get("max"), 2),
            fmt(od.get("max"), 2), fmt(we.get("p99_ms"), 1), fmt(wd.get("p99_ms"), 1),
            ratio(we.get("p99_ms"), wd.get("p99_ms")), fmt(we.get("max_ms"), 1),
            fmt(wd.get("max_ms"), 1), f"{e.get('term_changes')}/{d.get('term_changes')}",
            f"{e.get('ok')}/{d.get('ok')}"])
    return table(rows)


def plottable(rec):
    return "expire_s" in rec


def plot(plt, out, recs, title, ctx):
    fig, axes = plt.subplots(1, 3, figsize=(15, 5))
    for ax, (t, f) in zip(axes, [
            ("all keys gone, after the last deadline (s)", lambda r: r.get("expire_s")),
            ("longest a key outlived its lease (s)", lambda r: r["overdue_s"].get("max")),
            ("light writer's put p99 meanwhile (ms)", lambda r: r["writer"].get("p99_ms"))]):
        for s, x, y in series(recs, "leases", f):
            ax.plot(x, y, label=s, **STYLE[s])
        ax.set_title(t, fontsize=10)
        ax.set_xscale("log")
        ax.set_xlabel(f"leases expiring (TTL {TTL_S} s, one key each)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Lease expiry: Epoch vs etcd — {title}")
    fig.tight_layout()
    return save(plt, fig, out, "expiry.png")
