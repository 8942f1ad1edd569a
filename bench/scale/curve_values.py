"""Values curve (256 B → 16 KiB → 256 KiB → 1 MiB puts over 1000 keys), next to the disk's own
figures: write + fdatasync per value, and sequential writes with one fdatasync (README.md)."""

import os
import time

from scalelib.bench import summary
from scalelib.plots import STYLE, save, series
from scalelib.tables import fmt, ratio, systems_at, table
from scalelib.util import MIB, tree_bytes

NAME = "values"
XKEY = "value_bytes"


def points(args):
    return args.values


def prepare(work, args, emit):
    """The disk's sequential bandwidth, once before the curve's points."""
    bulk = disk_bulk(work, (32 if args.quick else 256) * MIB)
    emit(dict(kind="disk", test="bulk", **bulk))
    return {"bulk": bulk, "floors": []}


def before_point(v, work, args, emit, ctx):
    """The disk's write + fdatasync of one value at a time, before the point of value size v."""
    f = disk_floor(work, v, 1.0 if args.quick else 3.0, (64 if args.quick else 512) * MIB)
    emit(dict(kind="disk", test="fdatasync-per-write", **f))
    ctx["floors"].append(f)


def values_clients(v):
    """Clients for value size v: 256 up to 16 KiB, then as many as keep 4 MiB in flight (>= 8)."""
    return 256 if v <= 16384 else max(8, (4 * MIB) // v)


def run_point(cluster, bench, v, args):
    rec = {"value_bytes": v}
    cluster.use_dir(f"values-{v}")
    try:
        cluster.start()
        term0 = cluster.term()
        r = bench.run(cluster, f"put-{v}", "put", values_clients(v), 1000, v, prefill=False)
        rec["put"] = summary(r)
        rec["mb_per_s"] = r.get("ops_per_sec", 0) * v / MIB
        rec["term_changes"] = cluster.term() - term0
        rec["disk_bytes"] = [tree_bytes(cluster.data_dir(i))
                             for i in range(1, cluster.members + 1)]
        rec["ok"] = r.get("rc") == 0 and r.get("errors") == 0
    finally:
        cluster.finish(args.keep_data)
    return rec


def disk_floor(path, block, seconds, max_bytes):
    """Sequential writes of `block` bytes, each followed by fdatasync (a WAL that syncs every
    append): MB/s and per-write p50/p99 ms. The file is removed afterwards."""
    name = os.path.join(path, f"ddsync-{block}")
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    buf = os.urandom(block)
    lat = []
    written = 0
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < seconds and written < max_bytes:
            s = time.monotonic()
            os.write(fd, buf)
            os.fdatasync(fd)
            lat.append(time.monotonic() - s)
            written += block
    finally:
        os.close(fd)
        os.remove(name)
    el = time.monotonic() - t0
    lat.sort()
    return {"block_bytes": block, "writes": len(lat), "mb_per_s": written / MIB / el,
            "p50_ms": lat[len(lat) // 2] * 1000, "p99_ms": lat[int(len(lat) * 0.99)] * 1000}


def disk_bulk(path, total):
    """dd bs=1M conv=fdatasync: `total` bytes of 1 MiB writes, one fdatasync at the end."""
    name = os.path.join(path, "ddbulk")
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    buf = os.urandom(MIB)
    t0 = time.monotonic()
    try:
        for _ in range(total // MIB):
            os.write(fd, buf)
        os.fdatasync(fd)
    finally:
        os.close(fd)
        os.remove(name)
    return {"bytes": total, "mb_per_s": total / MIB / (time.monotonic() - t0)}


def report(recs, args, ctx):
    text = ["VALUES (puts over 1000 keys; fresh cluster per point; disk columns: this machine's "
            "write+fdatasync of one value at a time)", values_table(recs, ctx["floors"])]
    if ctx["bulk"]:
        text.append(f"disk sequential write, 1 MiB blocks and one fdatasync: "
                    f"{ctx['bulk']['mb_per_s']:.0f} MB/s")
    return text + [""]


def values_table(recs, floors):
    rows = [["value B", "clients", "put MB/s e", "etcd", "ratio", "ops/s e", "etcd",
             "p50 ms e", "etcd", "p99 ms e", "etcd", "p99 ratio", "disk fdatasync MB/s",
             "fdatasync p99 ms", "elections e/etcd", "ok e/etcd"]]
    for v in sorted({r["value_bytes"] for r in recs}):
        e, d = systems_at(recs, "value_bytes", v)
        f = next((x for x in floors if x["block_bytes"] == v), {})
        pe, pd = e.get("put", {}), d.get("put", {})
        rows.append([
            v, values_clients(v), fmt(e.get("mb_per_s"), 1), fmt(d.get("mb_per_s"), 1),
            ratio(e.get("mb_per_s"), d.get("mb_per_s")),
            fmt(pe.get("ops_per_sec")), fmt(pd.get("ops_per_sec")),
            fmt(pe.get("p50_ms"), 1), fmt(pd.get("p50_ms"), 1),
            fmt(pe.get("p99_ms"), 1), fmt(pd.get("p99_ms"), 1),
            ratio(pe.get("p99_ms"), pd.get("p99_ms")),
            fmt(f.get("mb_per_s"), 2), fmt(f.get("p99_ms"), 2),
            f"{e.get('term_changes')}/{d.get('term_changes')}", f"{e.get('ok')}/{d.get('ok')}"])
    return table(rows)


def plottable(rec):
    return "put" in rec


def plot(plt, out, recs, title, ctx):
    floors, bulk = ctx["floors"], ctx["bulk"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    ax = axes[0]
    for s, x, y in series(recs, "value_bytes", lambda r: r.get("mb_per_s")):
        ax.plot(x, y, label=f"{s} put", **STYLE[s])
    if floors:
        ax.plot([f["block_bytes"] for f in floors], [f["mb_per_s"] for f in floors],
                color="gray", linestyle=":", marker="^", label="disk: write+fdatasync per value")
    if bulk:
        ax.axhline(bulk["mb_per_s"], color="gray", linestyle="--",
                   label=f"disk: sequential, one fdatasync ({bulk['mb_per_s']:.0f} MB/s)")
    ax.set_yscale("log")
    ax.set_title("put throughput (MiB/s)")
    ax = axes[1]
    for s, x, y in series(recs, "value_bytes", lambda r: r["put"].get("p99_ms")):
        ax.plot(x, y, label=f"{s} put p99", **STYLE[s])
    ax.set_yscale("log")
    ax.set_title("put p99 (ms)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("value bytes")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Values curve: Epoch vs etcd — {title}")
    fig.tight_layout()
    return save(plt, fig, out, "values.png")
