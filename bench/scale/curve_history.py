"""History curve (1M revisions over 1,000 keys): memory and disk with that history, Range at an
old revision and at the head, then a physical Compact to head - 1,000: its time, a light
writer's put p99 before and during it, memory and disk after (README.md)."""

import random
import time

from scalelib.bench import summary
from scalelib.plots import STYLE, save, series
from scalelib.proto import compaction_request, header_revision, range_at_request
from scalelib.tables import fmt, mean, ratio, systems_at, table
from scalelib.util import MIB, quantile, tree_bytes
from scalelib.writer import PacedWriter

NAME = "history"
XKEY = "revisions"
KEYS = 1000
KEEP = 1000  # revisions the compaction keeps
RANGES = 200  # sequential Ranges per revision measured


def points(args):
    return args.history_revisions


def run_point(cluster, bench, n, args):
    import grpc

    rec = {"revisions": n, "keys": KEYS}
    cluster.use_dir(f"history-{n}")
    channel, writer = None, None
    try:
        cluster.start()
        term0 = cluster.term()
        channel = grpc.insecure_channel(cluster.client_endpoint(1))
        write_history(cluster, bench, n, channel, rec)
        time.sleep(args.settle)
        rec["rss_bytes"], rec["disk_bytes"] = memory_disk(cluster)
        head = rec["head_revision"]
        rnd = random.Random(n)
        rec["range_old"] = range_latency(channel, max(1, head // 10), rnd)
        rec["range_head"] = range_latency(channel, 0, rnd)
        writer = PacedWriter(cluster.client_endpoint(1), b"scale/hw/", args.history_put_rate)
        writer.start()
        compact(channel, writer, head - KEEP, 1.0 if args.quick else 3.0, rec)
        writer.stop()
        writer = None
        time.sleep(args.settle)
        rec["rss_bytes_after"], rec["disk_bytes_after"] = memory_disk(cluster)
        rec["term_changes"] = cluster.term() - term0
        rec["ok"] = (rec["write_ok"] and rec["compact_s"] is not None
                     and rec["range_old"]["errors"] == 0 and rec["range_head"]["errors"] == 0
                     and rec["put_before"]["errors"] == 0 and rec["put_during"]["errors"] == 0)
    finally:
        if writer:
            writer.stop()
        if channel:
            channel.close()
        cluster.finish(args.keep_data)
    return rec


def write_history(cluster, bench, n, channel, rec):
    """Puts of 256 B over KEYS keys at 256 clients (epoch_bench) until the head revision is
    within 2 % of n: the first run 1 s, each next one 60 % of what remains at the fastest rate
    seen so far (a cluster that sped up after a cold first second does not overshoot):
    head_revision, write_s, write_ok."""
    t0 = time.monotonic()
    head, rate, runs, ok = head_revision(channel), None, [], True
    while n - head > n / 50:
        seconds = 1.0 if rate is None else min(60.0, max(0.1, 0.6 * (n - head) / rate))
        r = bench.run(cluster, f"history-{len(runs)}", "put", 256, KEYS, 256, prefill=False,
                      duration=seconds, warmup=0)
        runs.append(summary(r))
        ok = ok and r.get("rc") == 0 and r.get("errors") == 0
        before, head = head, head_revision(channel)
        if not ok or head <= before:
            ok = False
            break
        rate = max(rate or 0, (head - before) / seconds)
    rec["head_revision"], rec["write_s"], rec["write_runs"] = head, time.monotonic() - t0, runs
    rec["write_ok"] = ok


def head_revision(channel):
    return header_revision(channel.unary_unary("/etcdserverpb.KV/Range")(
        range_at_request(b"scale/k/00000000", 0), timeout=10))


def memory_disk(cluster):
    members = range(1, cluster.members + 1)
    return ([cluster.rss_bytes(i) for i in members],
            [tree_bytes(cluster.data_dir(i)) for i in members])


def range_latency(channel, revision, rnd):
    """RANGES sequential linearizable Ranges of a random key at revision (0: the head)."""
    import grpc

    rng = channel.unary_unary("/etcdserverpb.KV/Range")
    lat, errors = [], 0
    for _ in range(RANGES):
        key = b"scale/k/%08d" % rnd.randrange(KEYS)
        t = time.monotonic()
        try:
            rng(range_at_request(key, revision), timeout=10)
            lat.append((time.monotonic() - t) * 1000)
        except grpc.RpcError:
            errors += 1
    return {"revision": revision, "p50_ms": quantile(lat, 0.5), "p99_ms": quantile(lat, 0.99),
            "errors": errors}


def compact(channel, writer, revision, before_s, rec):
    """The writer's puts for before_s, then Compact(revision, physical) timed; the writer's
    figures before, during and in the second after it."""
    import grpc

    time.sleep(before_s)
    t0 = time.monotonic()
    rec["compact_revision"] = revision
    try:
        channel.unary_unary("/etcdserverpb.KV/Compact")(compaction_request(revision, True),
                                                        timeout=900)
        t1 = time.monotonic()
        rec["compact_s"] = t1 - t0
    except grpc.RpcError as e:
        t1 = time.monotonic()
        rec["compact_s"], rec["compact_error"] = None, str(e.code())
    time.sleep(1.0)
    rec["put_before"] = writer.summary(t0 - before_s, t0)
    rec["put_during"] = writer.summary(t0, t1, overlap=True)
    rec["put_after"] = writer.summary(t1, t1 + 1.0)


def report(recs, args, ctx):
    return [f"HISTORY ({KEYS} keys, 256 B puts at 256 clients up to the revisions; memory and "
            f"disk with that history, then after Compact(head - {KEEP}, physical); range = "
            f"{RANGES} sequential linearizable Ranges of one random key at head/10 (old) and at "
            f"the head; writer = {args.history_put_rate:g} puts/s from one client)",
            history_table(recs), ""]


def history_table(recs):
    rows = [["revisions", "head e", "etcd", "rss MiB/member e", "etcd", "disk MiB/member e",
             "etcd", "old range p50/p99 ms e", "etcd", "head range p50/p99 ms e", "etcd",
             "compact s e", "etcd", "ratio", "put p99 before ms e", "etcd", "during e", "etcd",
             "rss after e", "etcd", "disk after e", "etcd", "elections e/etcd", "ok e/etcd"]]
    for n in sorted({r["revisions"] for r in recs}):
        e, d = systems_at(recs, "revisions", n)
        rows.append([n, e.get("head_revision", "-"), d.get("head_revision", "-"),
                     mib(e, "rss_bytes"), mib(d, "rss_bytes"), mib(e, "disk_bytes"),
                     mib(d, "disk_bytes"), p50_99(e, "range_old"), p50_99(d, "range_old"),
                     p50_99(e, "range_head"), p50_99(d, "range_head"),
                     fmt(e.get("compact_s"), 2), fmt(d.get("compact_s"), 2),
                     ratio(e.get("compact_s"), d.get("compact_s")),
                     fmt(e.get("put_before", {}).get("p99_ms"), 1),
                     fmt(d.get("put_before", {}).get("p99_ms"), 1),
                     fmt(e.get("put_during", {}).get("p99_ms"), 1),
                     fmt(d.get("put_during", {}).get("p99_ms"), 1),
                     mib(e, "rss_bytes_after"), mib(d, "rss_bytes_after"),
                     mib(e, "disk_bytes_after"), mib(d, "disk_bytes_after"),
                     f"{e.get('term_changes')}/{d.get('term_changes')}",
                     f"{e.get('ok')}/{d.get('ok')}"])
    return table(rows)


def mib(r, key):
    m = mean(r.get(key) or [])
    return fmt(m and m / MIB)


def p50_99(r, key):
    x = r.get(key, {})
    return f"{fmt(x.get('p50_ms'), 1)}/{fmt(x.get('p99_ms'), 1)}"


def plottable(rec):
    return "rss_bytes" in rec and "range_head" in rec


def plot(plt, out, recs, title, ctx):
    fig, axes = plt.subplots(1, 4, figsize=(20, 5))
    panels = [
        ("resident memory per member (MiB)", [("rss_bytes", "-", "with history"),
                                              ("rss_bytes_after", "--", "after compaction")]),
        ("disk per member (MiB)", [("disk_bytes", "-", "with history"),
                                   ("disk_bytes_after", "--", "after compaction")])]
    for ax, (t, lines) in zip(axes, panels):
        for key, ls, label in lines:
            for s, x, y in series(recs, "revisions",
                                  lambda r, k=key: mean(r[k]) / MIB if r.get(k) else None):
                ax.plot(x, y, linestyle=ls, label=f"{s} {label}", **STYLE[s])
        ax.set_title(t)
    ax = axes[2]
    for key, ls in (("range_old", "--"), ("range_head", "-")):
        for s, x, y in series(recs, "revisions", lambda r, k=key: r[k].get("p99_ms")):
            ax.plot(x, y, linestyle=ls, label=f"{s} {key[6:]}", **STYLE[s])
    ax.set_title("Range p99 (ms): old revision (dashed), head")
    ax = axes[3]
    for s, x, y in series(recs, "revisions", lambda r: r.get("compact_s")):
        ax.plot(x, y, label=s, **STYLE[s])
    ax.set_title(f"Compact(head - {KEEP}, physical) (s)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel(f"revisions over {KEYS} keys")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"History curve: Epoch vs etcd — {title}")
    fig.tight_layout()
    return save(plt, fig, out, "history.png")
