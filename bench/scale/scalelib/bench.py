"""The load generator: bench/kv's epoch_bench, one run per cell, its JSON report."""

import json
import os
import re
import subprocess


class Bench:
    def __init__(self, binary, args, logdir):
        self.binary = binary
        self.args = args
        self.logdir = logdir

    def run(self, cluster, label, workload, clients, keys, value, *, prefill, duration=None,
            warmup=None, conns=12):
        """One epoch_bench run; returns its JSON report plus 'rc' and, with prefill, 'prefill_s'."""
        duration = self.args.duration if duration is None else duration
        warmup = self.args.warmup if warmup is None else warmup
        cmd = [self.binary, "--endpoints", ",".join(cluster.endpoints()), "--workload", workload,
               "--clients", str(clients), "--conns", str(min(conns, clients)), "--threads", "2",
               "--target", "all", "--duration", str(duration), "--warmup", str(warmup),
               "--keys", str(keys), "--value-size", str(value), "--key-prefix", "scale/k/",
               "--label", f"{cluster.name}/{label}",
               "--server-pids", ",".join(map(str, cluster.pids())), "--json"]
        if not prefill:
            cmd.append("--no-prefill")
        errpath = os.path.join(cluster.dir, "bench.log")
        with open(errpath, "a") as err:
            err.write(f"\n$ {' '.join(cmd)}\n")
            err.flush()
            timeout = duration + warmup + 120 + (keys / 500 if prefill else 0)
            try:
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   timeout=timeout)
            except subprocess.TimeoutExpired:
                err.write(f"timed out after {timeout:.0f} s\n")
                return {"rc": -1, "errors": -1}
            err.write(r.stderr)
        out = {"rc": r.returncode}
        lines = r.stdout.strip().splitlines()
        if lines:
            try:
                out.update(json.loads(lines[-1]))
            except ValueError:
                pass
        out.setdefault("errors", -1)
        m = re.search(r"prefill: (\d+) keys in ([0-9.]+) s, errors (\d+)", r.stderr)
        if m:
            out["prefill_keys"], out["prefill_s"] = int(m.group(1)), float(m.group(2))
            out["prefill_errors"] = int(m.group(3))
        return out


def summary(r):
    """The fields of a bench report that go into results.jsonl."""
    keep = ("rc", "ops_per_sec", "p50_ms", "p99_ms", "p999_ms", "errors", "clients",
            "server_cpu_us_per_op", "value_bytes")
    return {k: r[k] for k in keep if k in r}

