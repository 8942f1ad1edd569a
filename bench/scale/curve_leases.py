"""Leases curve (1k → 10k → 100k leases kept alive, TTL 10 s, renewed every TTL/3): renewals
answered per second and the members' CPU per renewal (README.md)."""

import json
import queue
import subprocess
import threading
import time

from scalelib.plots import STYLE, save, series
from scalelib.proto import pb_fields, varint
from scalelib.tables import fmt, mean, ratio, systems_at, table
from scalelib.util import MIB, cpu_seconds

NAME = "leases"
XKEY = "leases"


def points(args):
    return args.leases


def run_point(cluster, bench, n, args):
    """bench/scale's epoch_lease_load as the client when built, else the Python one."""
    point = leases_point_cpp if args.lease_load else leases_point
    return point(cluster, n, args)


def leases_point_cpp(cluster, n, args):
    """leases_point with bench/scale's epoch_lease_load as the client: the same schedule, streams
    and measurements, at the rates 100k leases need (30,000 renewals/s)."""
    ttl_s = 10
    period = ttl_s / 3
    rec = {"leases": n, "ttl_s": ttl_s, "client": "c++"}
    cluster.use_dir(f"leases-{n}")
    try:
        cluster.start()
        term0 = cluster.term()
        window = args.duration if args.quick else max(args.duration, 2 * period)
        cmd = [args.lease_load, "--endpoints", ",".join(cluster.endpoints()), "--leases", str(n),
               "--ttl", str(ttl_s), "--per-stream", "2000", "--window", str(window),
               "--warmup", str(1.0 if args.quick else period)]
        for pid in cluster.pids():
            cmd += ["--server-pids", str(pid)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600 + n / 100)
        if out.returncode != 0:
            raise RuntimeError(f"epoch_lease_load exited {out.returncode}: {out.stderr[-500:]}")
        rec.update(json.loads(out.stdout.strip().splitlines()[-1]))
        rec["rss_bytes"] = [cluster.rss_bytes(i) for i in range(1, cluster.members + 1)]
        rec["term_changes"] = cluster.term() - term0
        rec["ok"] = (rec["grant_errors"] == 0 and not rec["stream_errors"]
                     and rec["expired_answers"] == 0
                     and rec["renewals_per_s"] >= 0.9 * rec["renewals_needed_per_s"])
    finally:
        cluster.finish(args.keep_data)
    return rec


def leases_point(cluster, n, args):
    """Fresh cluster, n leases of TTL 10 s granted, then kept alive as clientv3 does (every lease
    renewed each TTL/3) on LeaseKeepAlive streams of 2000 leases spread over the members: the
    renewals answered per second and the members' CPU per renewal, in a window of --duration
    (at least two renewal periods) after one period of warm-up."""
    import grpc

    ttl_s = 10
    period = ttl_s / 3
    rec = {"leases": n, "ttl_s": ttl_s}
    cluster.use_dir(f"leases-{n}")
    channels = [grpc.insecure_channel(e) for e in cluster.endpoints()]
    streams = None
    try:
        cluster.start()
        term0 = cluster.term()
        ids, rec["grant_errors"], rec["grant_per_s"] = grant_leases(channels, n, ttl_s)
        streams = KeepAliveStreams(channels, ids, period).start()
        time.sleep(1.0 if args.quick else period)  # warm-up: one full renewal round
        window = args.duration if args.quick else max(args.duration, 2 * period)
        rec.update(renewal_window(cluster, streams, window))
        rec["renewals_needed_per_s"] = len(ids) / period
        rec["rss_bytes"] = [cluster.rss_bytes(i) for i in range(1, cluster.members + 1)]
        rec["expired_answers"] = streams.expired
        rec["stream_errors"] = streams.errors
        rec["term_changes"] = cluster.term() - term0
        # Kept up: at least 90 % of the renewals due were answered, none found its lease gone.
        rec["ok"] = (rec["grant_errors"] == 0 and not streams.errors and streams.expired == 0
                     and rec["renewals_per_s"] >= 0.9 * rec["renewals_needed_per_s"])
    finally:
        if streams:
            streams.close()
        for ch in channels:
            ch.close()
        cluster.finish(args.keep_data)
    return rec


def grant_leases(channels, n, ttl_s):
    """n LeaseGrants of ttl_s, up to 256 in flight, round-robin over the members:
    (lease IDs, errors, grants per second)."""
    import grpc

    grants = [ch.unary_unary("/etcdserverpb.Lease/LeaseGrant") for ch in channels]
    ids, pending, grant_errors = [], [], 0
    req = varint(1 << 3) + varint(ttl_s)  # LeaseGrantRequest{TTL}
    t0 = time.monotonic()
    for i in range(n):
        pending.append(grants[i % len(grants)].future(req, timeout=10))
        if len(pending) >= 256 or i == n - 1:
            for f in pending:
                try:
                    ids.append(dict(pb_fields(f.result())).get(2, 0))
                except grpc.RpcError:
                    grant_errors += 1
            pending = []
    return ids, grant_errors, n / (time.monotonic() - t0)


def renewal_window(cluster, streams, window):
    """Renewals answered per second and the members' CPU over window seconds."""
    pids = cluster.pids()
    a0 = streams.answered_so_far()
    c0, w0 = cpu_seconds(pids), time.monotonic()
    time.sleep(window)
    a1 = streams.answered_so_far()
    c1, w1 = cpu_seconds(pids), time.monotonic()
    return {"renewals_per_s": (a1 - a0) / (w1 - w0),
            "server_cpu_cores": (c1 - c0) / (w1 - w0),
            "server_cpu_us_per_renewal": ((c1 - c0) * 1e6 / (a1 - a0)) if a1 > a0 else None}


class KeepAliveStreams:
    """LeaseKeepAlive streams of per_stream leases each, round-robin over the channels: a writer
    thread per stream sends each lease's renewal once per period, evenly paced; a reader thread
    counts the answers and those that say the lease is gone (TTL <= 0)."""

    def __init__(self, channels, ids, period, per_stream=2000):
        self.period = period
        self.per_stream = per_stream
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.answered = self.expired = 0
        self.errors = []
        self.calls, self.threads = [], []
        for s_i, first in enumerate(range(0, len(ids), per_stream)):
            self._open(channels[s_i % len(channels)], ids[first:first + per_stream])

    def _open(self, ch, my_ids):
        q = queue.Queue(maxsize=4 * self.per_stream)

        def requests():
            while True:
                r = q.get()
                if r is None:
                    return
                yield r

        call = ch.stream_stream("/etcdserverpb.Lease/LeaseKeepAlive")(requests())
        self.calls.append(call)
        self.threads += [threading.Thread(target=self._write, args=(q, my_ids), daemon=True),
                         threading.Thread(target=self._read, args=(call,), daemon=True)]

    def _write(self, q, my_ids):
        msgs = [varint(1 << 3) + varint(i) for i in my_ids]
        gap = self.period / len(msgs)
        start = time.monotonic()
        k = 0
        while not self.stop.is_set():
            due = start + k * gap
            now = time.monotonic()
            if due > now:
                self.stop.wait(due - now)
            q.put(msgs[k % len(msgs)])
            k += 1
        q.put(None)

    def _read(self, call):
        import grpc

        try:
            for resp in call:
                ttl = dict(pb_fields(resp)).get(3, 0)
                with self.lock:
                    self.answered += 1
                    self.expired += ttl <= 0 or ttl >= 1 << 63
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                self.errors.append(str(e.code()))

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def answered_so_far(self):
        with self.lock:
            return self.answered

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=5)
        for call in self.calls:
            call.cancel()


def report(recs, args, ctx):
    return ["LEASES (TTL 10 s, each renewed every TTL/3 on keep-alive streams of 2000 "
            "leases; server cpu = all members' user+sys in the window / its length)",
            leases_table(recs), ""]


def leases_table(recs):
    rows = [["leases", "renewals/s needed", "answered/s e", "etcd", "server cpu cores e",
             "etcd", "ratio", "cpu us/renewal e", "etcd", "rss MiB/member e", "etcd",
             "grant/s e", "etcd", "elections e/etcd", "ok e/etcd"]]
    for n in sorted({r["leases"] for r in recs}):
        e, d = systems_at(recs, "leases", n)
        rse, rsd = mean(e.get("rss_bytes") or []), mean(d.get("rss_bytes") or [])
        rows.append([
            n, fmt(e.get("renewals_needed_per_s") or d.get("renewals_needed_per_s")),
            fmt(e.get("renewals_per_s")), fmt(d.get("renewals_per_s")),
            fmt(e.get("server_cpu_cores"), 2), fmt(d.get("server_cpu_cores"), 2),
            ratio(e.get("server_cpu_cores"), d.get("server_cpu_cores")),
            fmt(e.get("server_cpu_us_per_renewal")), fmt(d.get("server_cpu_us_per_renewal")),
            fmt(rse and rse / MIB), fmt(rsd and rsd / MIB),
            fmt(e.get("grant_per_s")), fmt(d.get("grant_per_s")),
            f"{e.get('term_changes')}/{d.get('term_changes')}", f"{e.get('ok')}/{d.get('ok')}"])
    return table(rows)


def plottable(rec):
    return "renewals_per_s" in rec


def plot(plt, out, recs, title, ctx):
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    for ax, (t, f) in zip(axes, [
            ("server CPU, all members (cores)", lambda r: r.get("server_cpu_cores")),
            ("keep-alive renewals answered per second", lambda r: r.get("renewals_per_s"))]):
        for s, x, y in series(recs, "leases", f):
            ax.plot(x, y, label=s, **STYLE[s])
        ax.set_title(t)
        ax.set_xscale("log")
        ax.set_xlabel("leases kept alive (TTL 10 s, renewed every TTL/3)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Leases curve: Epoch vs etcd — {title}")
    fig.tight_layout()
    return save(plt, fig, out, "leases.png")
