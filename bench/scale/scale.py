#!/usr/bin/python3
"""Epoch vs etcd scale curves: how each cost grows with keys, value size, watchers.

Run through bench/scale/run.sh (README.md there). For every point of a curve it starts a fresh
3-member Epoch cluster (deploy/local-cluster.sh) and a fresh 3-member etcd cluster
(bench/lib/etcd-cluster.sh), one after the other and never both at once, puts the same load on
each with the same client (bench/kv epoch_bench), measures, stops it and removes its data. The
order alternates by point so neither system always runs first. Writes results.jsonl, tables.txt
and one PNG per curve to --out; exits 1 if any request failed on either system, a member did not
come back, or a cluster did not start.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import curve_expiry
import curve_history
import curve_keys
import curve_leases
import curve_members
import curve_values
import curve_watchers
from scalelib.bench import Bench
from scalelib.cluster import EpochCluster, EtcdCluster
from scalelib.plots import pyplot
from scalelib.util import ROOT, git_commit, loadavg, log, parse_sizes

# In the order they run and are reported.
CURVES = [curve_keys, curve_values, curve_watchers, curve_leases, curve_expiry,
          curve_history, curve_members]


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", required=True, help="results directory (results.jsonl, tables, PNGs)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--quick", action="store_true", help="small sizes, short cells: proves it runs")
    ap.add_argument("--curves", default=",".join(c.NAME for c in CURVES))
    ap.add_argument("--keys", help="key counts (default 10k,100k,1m; quick 2k)")
    ap.add_argument("--values", help="value sizes (default 256,16kib,256kib,1mib; quick 64kib)")
    ap.add_argument("--watchers",
                    help="watcher counts (default 1,1k,10k,50k; Python client 1,1k,10k; quick 100)")
    ap.add_argument("--watch-put-rate", type=float, default=100.0,
                    help="puts per second during the watchers curve (one client, one at a time)")
    ap.add_argument("--watch-client", choices=["c++", "python"], default="c++",
                    help="watch client: bench/scale's epoch_watch_load (when built) or Python "
                         "(distinct keys only, no CPU or throughput figures)")
    ap.add_argument("--watch-modes", default="distinct,prefix",
                    help="watchers on distinct keys and/or all on one prefix (C++ client)")
    ap.add_argument("--watch-prefix-deliveries", type=float, default=50000.0,
                    help="prefix mode: the writer's rate is lowered to ask for at most this many "
                         "events per second")
    ap.add_argument("--watch-put-clients", type=int, default=256,
                    help="closed-loop put clients of the throughput without/with the watchers "
                         "(C++ client; 0: not measured)")
    ap.add_argument("--leases", help="lease counts (default 1k,10k,100k; quick 100)")
    ap.add_argument("--lease-client", choices=["c++", "python"], default="c++",
                    help="keep-alive client: bench/scale's epoch_lease_load (when built) or Python")
    ap.add_argument("--expire-leases", help="leases let expire at once (default 10k; quick 200)")
    ap.add_argument("--expiry-put-rate", type=float, default=50.0,
                    help="puts per second of the light writer during the lease expiry")
    ap.add_argument("--history-revisions",
                    help="revisions of the history curve (default 1m; quick 20k)")
    ap.add_argument("--history-put-rate", type=float, default=50.0,
                    help="puts per second of the light writer around the compaction")
    ap.add_argument("--members", help="cluster sizes of the members curve (default 3,5; quick 3)")
    ap.add_argument("--members-keys", help="keys loaded in the members curve (10k; quick 2k)")
    ap.add_argument("--duration", type=float, help="measured seconds per cell (8; quick 1)")
    ap.add_argument("--warmup", type=float, help="warm-up seconds per cell (2; quick 0.5)")
    ap.add_argument("--settle", type=float, default=2.0,
                    help="seconds between loading and sampling memory and disk")
    ap.add_argument("--restart-timeout", type=float, default=120.0)
    ap.add_argument("--catch-up-timeout", type=float, default=900.0,
                    help="seconds a new member may take from member add to promotion (keys)")
    ap.add_argument("--port-offset", type=int, default=0)
    ap.add_argument("--systems", default="epoch,etcd")
    ap.add_argument("--workdir", help="cluster data and logs (default /tmp/epoch-scale.XXXX)")
    ap.add_argument("--keep-data", action="store_true")
    args = ap.parse_args()
    q = args.quick
    args.keys = parse_sizes(args.keys or ("2k" if q else "10k,100k,1m"))
    args.values = parse_sizes(args.values or ("64kib" if q else "256,16kib,256kib,1mib"))
    watch_load = os.path.join(args.build, "bench", "scale", "epoch_watch_load")
    args.watch_load = (watch_load if args.watch_client == "c++" and os.access(watch_load, os.X_OK)
                       else None)
    args.watch_modes = args.watch_modes.split(",")
    if set(args.watch_modes) - {"distinct", "prefix"}:
        ap.error("--watch-modes: distinct and/or prefix")
    args.watchers = parse_sizes(args.watchers or (
        "100" if q else "1,1k,10k,50k" if args.watch_load else "1,1k,10k"))
    args.leases = parse_sizes(args.leases or ("100" if q else "1k,10k,100k"))
    args.history_revisions = parse_sizes(args.history_revisions or ("20k" if q else "1m"))
    args.members = parse_sizes(args.members or ("3" if q else "3,5"))
    args.members_keys = parse_sizes(args.members_keys or ("2k" if q else "10k"))[0]
    args.expire_leases = parse_sizes(args.expire_leases or ("200" if q else "10k"))
    args.duration = args.duration if args.duration is not None else (1.0 if q else 8.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if q else 2.0)
    if q:
        args.settle = min(args.settle, 0.5)
    args.curves = args.curves.split(",")
    args.systems = args.systems.split(",")
    unknown = set(args.curves) - {c.NAME for c in CURVES}
    if unknown:
        ap.error(f"unknown curves: {','.join(sorted(unknown))}")
    lease_load = os.path.join(args.build, "bench", "scale", "epoch_lease_load")
    args.lease_load = (lease_load if args.lease_client == "c++" and os.access(lease_load, os.X_OK)
                       else None)
    return args


class Run:
    """One run of the suite: its clusters, the load generator, results.jsonl, the records."""

    def __init__(self, args, work):
        self.args = args
        self.work = work
        epochd = os.path.join(args.build, "server", "epochd")
        self.bench = Bench(os.path.join(args.build, "bench", "kv", "epoch_bench"), args, work)
        self.clusters = {"epoch": EpochCluster(work, 24379 + args.port_offset, epochd),
                         "etcd": EtcdCluster(work, 34379 + args.port_offset)}
        self.results_path = os.path.join(args.out, "results.jsonl")
        self.results = open(self.results_path, "w")
        self.failed = []
        self.recs = {}  # curve name -> point records
        self.ctx = {}  # curve name -> what its prepare() measured
        self.point_no = 0

    def emit(self, rec):
        self.results.write(json.dumps(rec) + "\n")
        self.results.flush()

    def ordered(self):
        """The systems in this point's order: alternating, so neither always runs first."""
        self.point_no += 1
        s = self.args.systems
        return s if self.point_no % 2 else list(reversed(s))

    def curve(self, mod):
        args = self.args
        ctx = self.ctx[mod.NAME] = (mod.prepare(self.work, args, self.emit)
                                    if hasattr(mod, "prepare") else {})
        recs = self.recs[mod.NAME] = []
        for x in mod.points(args):
            if hasattr(mod, "before_point"):
                mod.before_point(x, self.work, args, self.emit, ctx)
            for s in self.ordered():
                t0 = time.monotonic()
                log(f"-- {mod.NAME} {x}: {s}")
                try:
                    rec = mod.run_point(self.clusters[s], self.bench, x, args)
                except Exception as e:  # a cluster that did not start, a member that died
                    rec = {mod.XKEY: x, "ok": False, "error": repr(e)}
                rec.update(kind="point", curve=mod.NAME, system=s, loadavg=loadavg(),
                           seconds=time.monotonic() - t0)
                log(f"   {json.dumps(rec)}")
                self.emit(rec)
                recs.append(rec)
                if not rec.get("ok"):
                    self.failed.append(f"{mod.NAME} {x} {s}")


def report(run, meta, end, etcd_version):
    """tables.txt's text: the run's heading, each curve's table, the failed points."""
    args, work = run.args, run.work
    text = [f"Epoch vs {etcd_version}, 3 members each on 127.0.0.1, fsync on, data in {work}",
            f"commit {meta['commit']}, {meta['date_utc']}, {os.cpu_count()} cores, "
            f"{args.duration:g} s per cell after {args.warmup:g} s warm-up, 256 clients on 12 "
            f"connections to all members",
            f"load average: start {meta['loadavg_start']}, end {end['loadavg_end']}; "
            f"{end['seconds']:.0f} s in all", ""]
    for mod in CURVES:
        if run.recs.get(mod.NAME):
            text += mod.report(run.recs[mod.NAME], args, run.ctx[mod.NAME])
    if run.failed:
        text.append("FAILED: " + "; ".join(run.failed))
    return "\n".join(text)


def plot_all(run, title):
    plt = pyplot()
    if plt is None:
        return []
    made = []
    for mod in CURVES:
        recs = [r for r in run.recs.get(mod.NAME, []) if mod.plottable(r)]
        if recs:
            made.append(mod.plot(plt, run.args.out, recs, title, run.ctx[mod.NAME]))
    return made


def main():
    # SIGTERM (ctest's timeout, kill) unwinds like Ctrl-C, so every point's `finally` stops its
    # cluster by PID and removes its data.
    signal.signal(signal.SIGTERM, _interrupt)
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    work = args.workdir or tempfile.mkdtemp(prefix="epoch-scale.", dir="/tmp")
    os.makedirs(work, exist_ok=True)
    run = Run(args, work)
    etcd_version = subprocess.run(["etcd", "--version"], capture_output=True,
                                  text=True).stdout.split("\n")[0]
    meta = {"kind": "meta", "commit": git_commit(), "date_utc": time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "etcd": etcd_version, "cores": os.cpu_count(),
        "quick": args.quick, "duration_s": args.duration, "warmup_s": args.warmup,
        "loadavg_start": loadavg(), "workdir": work}
    log(f"scale suite: commit {meta['commit']}, load average {meta['loadavg_start']}, "
        f"work dir {work}")
    run.emit(meta)
    t_start = time.monotonic()
    for mod in CURVES:
        if mod.NAME in args.curves:
            run.curve(mod)
    end = {"kind": "end", "loadavg_end": loadavg(), "seconds": time.monotonic() - t_start,
           "failed": run.failed}
    run.emit(end)
    run.results.close()

    title = (f"{meta['commit'][:12]}, {meta['etcd']}, {os.cpu_count()} cores, load avg "
             f"{meta['loadavg_start'][0]:.1f}→{end['loadavg_end'][0]:.1f}")
    text = report(run, meta, end, etcd_version)
    with open(os.path.join(args.out, "tables.txt"), "w") as f:
        f.write(text + "\n")
    print(text)
    for p in plot_all(run, title):
        print(f"plot: {p}")
    print(f"results: {run.results_path}; logs: {work}")
    if not args.keep_data:
        for c in run.clusters.values():
            c.drop_data()
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main())
