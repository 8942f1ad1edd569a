"""Members curve (3 → 5 members): the keys curve's get-lin and put cells at 256 clients over
10k keys, on clusters of each size (README.md)."""

import time

from curve_keys import Phases, cells_ok, load_keys, throughput_cells
from scalelib.plots import STYLE, save, series
from scalelib.tables import dig, fmt, mean, ratio, systems_at, table
from scalelib.util import MIB

NAME = "members"
XKEY = "members"


def points(args):
    return args.members


def run_point(cluster, bench, m, args):
    """Fresh m-member cluster, --members-keys keys loaded, get-lin and put at 256 clients."""
    n = args.members_keys
    rec = {"members": m, "keys": n}
    phase = Phases(rec)
    cluster.set_members(m)
    cluster.use_dir(f"members-{m}")
    try:
        cluster.start()
        phase("start")
        term0 = cluster.term()
        load_keys(cluster, bench, n, rec)
        phase("load")
        time.sleep(args.settle)
        rec["rss_bytes"] = [cluster.rss_bytes(i) for i in range(1, m + 1)]
        throughput_cells(cluster, bench, n, rec, phase)
        rec["term_changes"] = cluster.term() - term0
        rec["ok"] = rec["load_ok"] and cells_ok(rec)
    finally:
        cluster.finish(args.keep_data)
        cluster.set_members(3)
        phase("stop")
    return rec


def report(recs, args, ctx):
    return [f"MEMBERS ({args.members_keys} keys of 256 B; get-lin and put at 256 clients on "
            "12 connections spread over every member; fresh cluster per point)",
            members_table(recs), ""]


def members_table(recs):
    rows = [["members", "get-lin ops/s e", "etcd", "ratio", "get-lin p99 ms e", "etcd",
             "put ops/s e", "etcd", "ratio", "put p99 ms e", "etcd", "rss MiB/member e", "etcd",
             "elections e/etcd", "ok e/etcd"]]
    for m in sorted({r["members"] for r in recs}):
        e, d = systems_at(recs, "members", m)
        rss_e, rss_d = (mean(dig(x, "rss_bytes") or []) for x in (e, d))
        rows.append([
            m, fmt(dig(e, "get_lin", "ops_per_sec")), fmt(dig(d, "get_lin", "ops_per_sec")),
            ratio(dig(e, "get_lin", "ops_per_sec"), dig(d, "get_lin", "ops_per_sec")),
            fmt(dig(e, "get_lin", "p99_ms"), 1), fmt(dig(d, "get_lin", "p99_ms"), 1),
            fmt(dig(e, "put", "ops_per_sec")), fmt(dig(d, "put", "ops_per_sec")),
            ratio(dig(e, "put", "ops_per_sec"), dig(d, "put", "ops_per_sec")),
            fmt(dig(e, "put", "p99_ms"), 1), fmt(dig(d, "put", "p99_ms"), 1),
            fmt(rss_e and rss_e / MIB), fmt(rss_d and rss_d / MIB),
            f"{e.get('term_changes')}/{d.get('term_changes')}", f"{e.get('ok')}/{d.get('ok')}"])
    return table(rows)


def plottable(rec):
    return "get_lin" in rec and "put" in rec


def plot(plt, out, recs, title, ctx):
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    for ax, (t, key) in zip(axes, [("ops/s, 256 clients (solid get-lin, dashed put)",
                                    "ops_per_sec"),
                                   ("p99 ms (solid get-lin, dashed put)", "p99_ms")]):
        for cell, ls in (("get_lin", "-"), ("put", "--")):
            for s, x, y in series(recs, "members", lambda r, c=cell, k=key: r[c].get(k)):
                ax.plot(x, y, linestyle=ls, label=f"{s} {cell.replace('_', '-')}", **STYLE[s])
        ax.set_title(t)
        ax.set_xlabel("members")
        ax.set_xticks(sorted({r["members"] for r in recs}))
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Members curve: Epoch vs etcd — {title}")
    fig.tight_layout()
    return save(plt, fig, out, "members.png")
