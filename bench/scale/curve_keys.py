"""Keys curve (10k → 100k → 1M keys of 256 B): per point and system a fresh cluster, the load,
memory and disk, a follower's restart, get-lin and put at 256 clients, elections (README.md)."""

import time

from scalelib.bench import summary
from scalelib.cluster import wait_serving_linearizable
from scalelib.plots import STYLE, save, series
from scalelib.tables import dig, fmt, mean, ratio, systems_at, table
from scalelib.util import MIB, pid_alive, process_start_boottime, tree_bytes

NAME = "keys"
XKEY = "keys"


def points(args):
    return args.keys


def run_point(cluster, bench, n, args):
    """Fresh cluster with n keys of 256 B: memory, disk, restart, catch-up of a new member,
    get-lin and put at 256 clients."""
    rec = {"keys": n}
    phase = Phases(rec)
    cluster.use_dir(f"keys-{n}")
    try:
        cluster.start()
        phase("start")
        term0 = cluster.term()
        load_keys(cluster, bench, n, rec)
        phase("load")
        time.sleep(args.settle)
        rec["rss_bytes"] = [cluster.rss_bytes(i) for i in range(1, cluster.members + 1)]
        rec["disk_bytes"] = [tree_bytes(cluster.data_dir(i))
                             for i in range(1, cluster.members + 1)]
        phase("memory_disk")
        rec["restart_member"], rec["restart_ms"] = restart_follower(cluster, args)
        phase("restart")
        rec.update(catch_up(cluster, args))
        phase("catch_up")
        throughput_cells(cluster, bench, n, rec, phase)
        rec["term_changes"] = cluster.term() - term0
        rec["ok"] = (rec["load_ok"] and rec["restart_ms"] is not None
                     and rec["catch_up_ms"] is not None and cells_ok(rec))
    finally:
        cluster.finish(args.keep_data)
        phase("stop")
    return rec


class Phases:
    """rec["phase_s"][name] = seconds since the previous phase ended, when called with name."""

    def __init__(self, rec):
        self.phases = rec["phase_s"] = {}
        self.t = time.monotonic()

    def __call__(self, name):
        now = time.monotonic()
        self.phases[name] = round(now - self.t, 2)
        self.t = now


def load_keys(cluster, bench, n, rec):
    """Puts every key once, 256 in flight (epoch_bench's prefill), then a 0.1 s put run whose
    figures are not used: load_keys_per_s, load_ok."""
    load = bench.run(cluster, f"load-{n}", "put", 256, n, 256, prefill=True, duration=0.1,
                     warmup=0)
    rec["load_keys_per_s"] = (load.get("prefill_keys", 0) / load["prefill_s"]
                              if load.get("prefill_s") else None)
    rec["load_ok"] = load.get("prefill_keys") == n and load.get("prefill_errors") == 0


def restart_follower(cluster, args):
    """SIGTERM one follower, start it again on its data: (member, ms from the new process's start
    to its first answered linearizable read, None if it did not serve)."""
    m = cluster.a_follower()
    cluster.stop_member(m)
    proc = cluster.start_member(m)
    served = wait_serving_linearizable(cluster.client_endpoint(m), args.restart_timeout)
    started = process_start_boottime(cluster.pid(m)) if pid_alive(cluster.pid(m)) else None
    proc.wait(timeout=120)
    ms = (served - started) * 1000 if served is not None and started is not None else None
    return m, ms


def catch_up(cluster, args):
    """Adds a member on an empty data dir at runtime (learner, then promoted once caught up) and
    times it from the accepted member add to its first answered linearizable Range on its own
    port; then removes it, so the cells after run on the cluster's own members.

    catch_up_ms = the script's add-to-promotion time + the wait from the script's exit to that
    Range (the Epoch script checks the cluster's health after the promotion, etcd's does not:
    the new member may already answer when the probe starts)."""
    i = cluster.members + 1
    out = {"catch_up_member": i, "catch_up_ms": None}
    try:
        out["catch_up_promote_ms"] = cluster.add_member(i, args.catch_up_timeout)
        t = time.clock_gettime(time.CLOCK_BOOTTIME)
        served = wait_serving_linearizable(cluster.client_endpoint(i), 60)
        if served is not None:
            out["catch_up_ms"] = out["catch_up_promote_ms"] + (served - t) * 1000
        cluster.remove_member(i)
    except Exception as e:  # not promoted in time, a script that failed: the point fails
        out["catch_up_error"] = repr(e)
        out["catch_up_ms"] = None
    return out


def throughput_cells(cluster, bench, n, rec, phase):
    """get-lin, then put, of 256 B over the n keys at 256 clients."""
    rec["get_lin"] = summary(bench.run(cluster, f"get-lin-{n}", "get", 256, n, 256,
                                       prefill=False))
    phase("get_lin")
    rec["put"] = summary(bench.run(cluster, f"put-{n}", "put", 256, n, 256, prefill=False))
    phase("put")


def cells_ok(rec):
    return all(rec[c].get("rc") == 0 and rec[c].get("errors") == 0 for c in ("get_lin", "put"))


def report(recs, args, ctx):
    return ["KEYS (256 B values; fresh cluster per point; memory and disk after loading; "
            "ratio = epoch/etcd)", keys_table(recs), ""]


def keys_table(recs):
    rows = [["keys", "rss MiB/member e", "etcd", "ratio", "disk MiB/member e", "etcd", "ratio",
             "load keys/s e", "etcd", "get-lin ops/s e", "etcd", "ratio", "get-lin p99 ms e",
             "etcd", "put ops/s e", "etcd", "ratio", "put p99 ms e", "etcd", "restart ms e",
             "etcd", "ratio", "catch-up s e", "etcd", "ratio", "elections e/etcd",
             "ok e/etcd"]]
    for n in sorted({r["keys"] for r in recs}):
        e, d = systems_at(recs, "keys", n)
        rss_e, rss_d = (mean(dig(x, "rss_bytes") or []) for x in (e, d))
        disk_e, disk_d = (mean(dig(x, "disk_bytes") or []) for x in (e, d))
        rows.append([
            n, fmt(rss_e and rss_e / MIB), fmt(rss_d and rss_d / MIB), ratio(rss_e, rss_d),
            fmt(disk_e and disk_e / MIB), fmt(disk_d and disk_d / MIB), ratio(disk_e, disk_d),
            fmt(dig(e, "load_keys_per_s")), fmt(dig(d, "load_keys_per_s")),
            fmt(dig(e, "get_lin", "ops_per_sec")), fmt(dig(d, "get_lin", "ops_per_sec")),
            ratio(dig(e, "get_lin", "ops_per_sec"), dig(d, "get_lin", "ops_per_sec")),
            fmt(dig(e, "get_lin", "p99_ms"), 1), fmt(dig(d, "get_lin", "p99_ms"), 1),
            fmt(dig(e, "put", "ops_per_sec")), fmt(dig(d, "put", "ops_per_sec")),
            ratio(dig(e, "put", "ops_per_sec"), dig(d, "put", "ops_per_sec")),
            fmt(dig(e, "put", "p99_ms"), 1), fmt(dig(d, "put", "p99_ms"), 1),
            fmt(dig(e, "restart_ms")), fmt(dig(d, "restart_ms")),
            ratio(dig(e, "restart_ms"), dig(d, "restart_ms")),
            fmt(seconds(dig(e, "catch_up_ms")), 2), fmt(seconds(dig(d, "catch_up_ms")), 2),
            ratio(dig(e, "catch_up_ms"), dig(d, "catch_up_ms")),
            f"{dig(e, 'term_changes')}/{dig(d, 'term_changes')}",
            f"{dig(e, 'ok')}/{dig(d, 'ok')}"])
    return table(rows)


def seconds(ms):
    return None if ms is None else ms / 1000


def plottable(rec):
    return rec.get("ok") is not None and "rss_bytes" in rec


def plot(plt, out, recs, title, ctx):
    panels = [
        ("resident memory per member (MiB)", lambda r: mean(r["rss_bytes"]) / MIB),
        ("disk per member (MiB)", lambda r: mean(r["disk_bytes"]) / MIB),
        ("get-lin ops/s, 256 clients", lambda r: r["get_lin"].get("ops_per_sec")),
        ("put ops/s, 256 clients", lambda r: r["put"].get("ops_per_sec")),
        ("p99 ms (solid get-lin, dashed put)", None),
        ("restart of one member (ms)", lambda r: r.get("restart_ms")),
        ("catch-up of a new member: add to promoted, serving (s)",
         lambda r: seconds(r.get("catch_up_ms"))),
    ]
    fig, axes = plt.subplots(2, 4, figsize=(20, 8))
    axes.flat[-1].set_visible(False)
    for ax, (t, f) in zip(axes.flat, panels):
        if f is None:
            for s, x, y in series(recs, "keys", lambda r: r["get_lin"].get("p99_ms")):
                ax.plot(x, y, label=f"{s} get-lin", **STYLE[s])
            for s, x, y in series(recs, "keys", lambda r: r["put"].get("p99_ms")):
                ax.plot(x, y, linestyle="--", label=f"{s} put", **STYLE[s])
        else:
            for s, x, y in series(recs, "keys", f):
                ax.plot(x, y, label=s, **STYLE[s])
        ax.set_xscale("log")
        ax.set_xlabel("keys (256 B values)")
        ax.set_title(t)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"Keys curve: Epoch vs etcd, 3 members each — {title}")
    fig.tight_layout()
    return save(plt, fig, out, "keys.png")
