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
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIB = 1 << 20


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def wait_gone(pid, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)


def tree_bytes(path):
    """Bytes allocated on disk under path (du's figure: blocks, not apparent sizes)."""
    total = 0
    for d, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(d, name)).st_blocks * 512
            except FileNotFoundError:
                pass  # a WAL segment or SST removed while we walk
    return total


def process_start_boottime(pid):
    """When pid started, in seconds of CLOCK_BOOTTIME (/proc/<pid>/stat field 22, 10 ms ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")


# ---- etcd v3 gRPC without generated stubs: a RangeRequest is one bytes field (key = 1) ----

def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def range_request(key):
    return b"\x0a" + _varint(len(key)) + key  # serializable (7) unset: linearizable


def _field(num, payload):
    """A length-delimited protobuf field."""
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def pb_fields(buf):
    """(field number, value) of a protobuf message: ints for varints, bytes for the rest."""
    i, n = 0, len(buf)
    while i < n:
        tag, i = _read_varint(buf, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = _read_varint(buf, i)
        elif wt == 2:
            ln, i = _read_varint(buf, i)
            v, i = buf[i:i + ln], i + ln
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        yield num, v


def _read_varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def put_request(key, value):
    return _field(1, key) + _field(2, value)


def header_revision(resp):
    """ResponseHeader.revision (3) of a reply whose header is field 1."""
    for num, v in pb_fields(resp):
        if num == 1:
            return dict(pb_fields(v)).get(3, 0)
    return 0


def watch_create_request(key):
    return _field(1, _field(1, key))  # WatchRequest.create_request{key}


def watch_response(buf):
    """(created, canceled, [(key, mod_revision)]) of a WatchResponse."""
    created = canceled = False
    events = []
    for num, v in pb_fields(buf):
        if num == 3:
            created = bool(v)
        elif num == 4:
            canceled = bool(v)
        elif num == 11:  # mvccpb.Event{type 1, kv 2}
            for en, ev in pb_fields(v):
                if en == 2:
                    kv = dict(pb_fields(ev))
                    events.append((kv.get(1, b""), kv.get(3, 0)))
    return created, canceled, events


def wait_serving_linearizable(endpoint, timeout_s):
    """CLOCK_BOOTTIME when endpoint first answers a linearizable Range, or None after timeout_s.

    A new channel per attempt with short reconnect backoff: gRPC's default backoff (1 s, growing)
    would otherwise be measured instead of the member.
    """
    import grpc

    opts = [("grpc.initial_reconnect_backoff_ms", 10), ("grpc.min_reconnect_backoff_ms", 10),
            ("grpc.max_reconnect_backoff_ms", 50)]
    end = time.monotonic() + timeout_s
    req = range_request(b"scale/probe")
    while time.monotonic() < end:
        ch = grpc.insecure_channel(endpoint, options=opts)
        try:
            call = ch.unary_unary("/etcdserverpb.KV/Range")
            call(req, timeout=1.0)
            return time.clock_gettime(time.CLOCK_BOOTTIME)
        except grpc.RpcError:
            time.sleep(0.01)
        finally:
            ch.close()
    return None


# ---- the two clusters, behind one interface ----

class Cluster:
    """A local 3-member cluster started by a script with start/stop/start-node commands."""

    name = ""
    members = 3

    def __init__(self, workdir, base_port, env):
        self.workdir = workdir
        self.dir = os.path.join(workdir, self.name)
        self.base = base_port
        self.env = dict(os.environ, **env)

    def use_dir(self, tag):
        """Every point gets its own cluster directory, so each point's logs are kept."""
        self.dir = os.path.join(self.workdir, tag, self.name)
        self.env[self.dir_env] = self.dir

    def client_endpoint(self, i):  # i = 1..members
        return f"127.0.0.1:{self.base + 10 * (i - 1)}"

    def endpoints(self):
        return [self.client_endpoint(i) for i in range(1, self.members + 1)]

    def _script(self, *args, check=True):
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, "script.log"), "a") as out:
            return subprocess.run([self.script, *args], env=self.env, stdout=out,
                                  stderr=subprocess.STDOUT, check=check, timeout=120)

    def pid(self, i):
        with open(self.pid_file(i)) as f:
            return int(f.read().strip())

    def pids(self):
        return [self.pid(i) for i in range(1, self.members + 1)]

    def start(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self._script("start")

    def stop(self):
        pids = []
        for i in range(1, self.members + 1):
            try:
                pids.append(self.pid(i))
            except FileNotFoundError:
                pass
        for p in pids:
            try:
                os.kill(p, signal.SIGTERM)
            except ProcessLookupError:
                pass
        # Nothing is measured here and the data is dropped next: a short grace, then SIGKILL
        # (etcd members that lost their peers take seconds to give up on a leader transfer).
        for p in pids:
            if not wait_gone(p, 1):
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                wait_gone(p, 5)
        for i in range(1, self.members + 1):
            try:
                os.remove(self.pid_file(i))
            except FileNotFoundError:
                pass

    def drop_data(self):
        for i in range(1, self.members + 1):
            shutil.rmtree(self.data_dir(i), ignore_errors=True)

    def stop_member(self, i):
        p = self.pid(i)
        os.kill(p, signal.SIGTERM)
        if not wait_gone(p, 15):
            os.kill(p, signal.SIGKILL)
            wait_gone(p, 5)
        os.remove(self.pid_file(i))

    def start_member(self, i):
        """Starts member i on its data dir; returns the script's process (it may still run)."""
        out = open(os.path.join(self.dir, "script.log"), "a")
        return subprocess.Popen([self.script, "start-node", str(i)], env=self.env, stdout=out,
                                stderr=subprocess.STDOUT)

    def rss_bytes(self, i):
        """process_resident_memory_bytes from the member's /metrics; /proc as a fallback."""
        try:
            with urllib.request.urlopen(self.metrics_url(i), timeout=5) as r:
                m = re.search(rb"^process_resident_memory_bytes ([0-9.e+]+)$", r.read(), re.M)
                if m:
                    return int(float(m.group(1)))
        except OSError:
            pass
        with open(f"/proc/{self.pid(i)}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) * 1024

    def status(self):
        """etcdctl endpoint status of every member (works against both systems)."""
        r = subprocess.run(["etcdctl", "--endpoints=" + ",".join(self.endpoints()),
                            "--command-timeout=5s", "endpoint", "status", "-w", "json"],
                           capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, ETCDCTL_API="3"))
        try:
            return json.loads(r.stdout)
        except ValueError:
            return []

    def term(self):
        return max([s["Status"]["header"].get("raft_term", 0) for s in self.status()] or [0])

    def a_follower(self):
        """The highest-numbered member that is not the leader."""
        st = self.status()
        for i in range(self.members, 0, -1):
            for s in st:
                if s["Endpoint"].endswith(self.client_endpoint(i)):
                    if s["Status"]["header"]["member_id"] != s["Status"]["leader"]:
                        return i
        return self.members


class EpochCluster(Cluster):
    name = "epoch"
    dir_env = "EPOCH_CLUSTER_DIR"

    def __init__(self, workdir, base_port, epochd):
        super().__init__(workdir, base_port, {
            "EPOCHD": epochd, "EPOCH_CLUSTER_DIR": os.path.join(workdir, "epoch"),
            "EPOCH_BASE_PORT": str(base_port), "EPOCH_NODES": "3"})
        self.script = os.path.join(ROOT, "deploy", "local-cluster.sh")

    def pid_file(self, i):
        return os.path.join(self.dir, f"n{i}.pid")

    def data_dir(self, i):
        return os.path.join(self.dir, f"n{i}")

    def metrics_url(self, i):
        return f"http://127.0.0.1:{self.base + 2 + 10 * (i - 1)}/metrics"


class EtcdCluster(Cluster):
    name = "etcd"
    dir_env = "ETCD_CLUSTER_DIR"

    def __init__(self, workdir, base_port):
        super().__init__(workdir, base_port, {
            "ETCD_CLUSTER_DIR": os.path.join(workdir, "etcd"), "ETCD_BASE_PORT": str(base_port),
            "ETCD_NODES": "3"})
        self.script = os.path.join(ROOT, "bench", "lib", "etcd-cluster.sh")

    def pid_file(self, i):
        return os.path.join(self.dir, f"e{i}.pid")

    def data_dir(self, i):
        return os.path.join(self.dir, f"e{i}")

    def metrics_url(self, i):
        return f"http://{self.client_endpoint(i)}/metrics"


# ---- the load generator ----

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


# ---- the curves ----

def keys_point(cluster, bench, n, args):
    """Fresh cluster with n keys of 256 B: memory, disk, restart, get-lin and put at 256 clients."""
    rec = {"keys": n}
    phases = rec["phase_s"] = {}
    t = time.monotonic()

    def phase(name):
        nonlocal t
        now = time.monotonic()
        phases[name] = round(now - t, 2)
        t = now

    cluster.use_dir(f"keys-{n}")
    try:
        cluster.start()
        phase("start")
        term0 = cluster.term()
        # Load: put every key once, 256 in flight (epoch_bench's prefill), then a 0.1 s put run
        # whose figures are not used.
        load = bench.run(cluster, f"load-{n}", "put", 256, n, 256, prefill=True, duration=0.1,
                         warmup=0)
        rec["load_keys_per_s"] = (load.get("prefill_keys", 0) / load["prefill_s"]
                                  if load.get("prefill_s") else None)
        rec["load_ok"] = load.get("prefill_keys") == n and load.get("prefill_errors") == 0
        phase("load")
        time.sleep(args.settle)
        rec["rss_bytes"] = [cluster.rss_bytes(i) for i in range(1, cluster.members + 1)]
        rec["disk_bytes"] = [tree_bytes(cluster.data_dir(i))
                             for i in range(1, cluster.members + 1)]
        phase("memory_disk")
        # Restart one follower: SIGTERM, start it again on its data, time from the process's
        # start to its first answered linearizable read.
        m = cluster.a_follower()
        cluster.stop_member(m)
        proc = cluster.start_member(m)
        served = wait_serving_linearizable(cluster.client_endpoint(m), args.restart_timeout)
        started = process_start_boottime(cluster.pid(m)) if pid_alive(cluster.pid(m)) else None
        proc.wait(timeout=120)
        phase("restart")
        rec["restart_member"] = m
        rec["restart_ms"] = ((served - started) * 1000
                             if served is not None and started is not None else None)
        rec["get_lin"] = summary(bench.run(cluster, f"get-lin-{n}", "get", 256, n, 256,
                                           prefill=False))
        phase("get_lin")
        rec["put"] = summary(bench.run(cluster, f"put-{n}", "put", 256, n, 256, prefill=False))
        phase("put")
        rec["term_changes"] = cluster.term() - term0
        rec["ok"] = (rec["load_ok"] and rec["restart_ms"] is not None
                     and all(rec[c].get("rc") == 0 and rec[c].get("errors") == 0
                             for c in ("get_lin", "put")))
    finally:
        cluster.stop()
        if not args.keep_data:
            cluster.drop_data()
        phase("stop")
    return rec


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else None


def watchers_point(cluster, n, args):
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
        import random
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


def cpu_seconds(pids):
    """user + system CPU seconds the processes used so far (/proc/<pid>/stat 14, 15)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


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
        cluster.stop()
        if not args.keep_data:
            cluster.drop_data()
    return rec


def leases_point(cluster, n, args):
    """Fresh cluster, n leases of TTL 10 s granted, then kept alive as clientv3 does (every lease
    renewed each TTL/3) on LeaseKeepAlive streams of 2000 leases spread over the members: the
    renewals answered per second and the members' CPU per renewal, in a window of --duration
    (at least two renewal periods) after one period of warm-up."""
    import queue
    import threading

    import grpc

    ttl_s, per_stream = 10, 2000
    period = ttl_s / 3
    rec = {"leases": n, "ttl_s": ttl_s}
    cluster.use_dir(f"leases-{n}")
    channels = [grpc.insecure_channel(e) for e in cluster.endpoints()]
    stop = threading.Event()
    streams, threads = [], []
    lock = threading.Lock()
    answered = [0]
    expired = [0]  # keep-alive answers with TTL <= 0: the lease was gone
    stream_errors = []
    try:
        cluster.start()
        term0 = cluster.term()
        # Grant: up to 256 in flight, round-robin over the members.
        grants = [ch.unary_unary("/etcdserverpb.Lease/LeaseGrant") for ch in channels]
        ids, pending, grant_errors = [], [], 0
        req = _varint(1 << 3) + _varint(ttl_s)  # LeaseGrantRequest{TTL}
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
        rec["grant_per_s"] = n / (time.monotonic() - t0)
        rec["grant_errors"] = grant_errors

        def keepalive_stream(ch, my_ids):
            q = queue.Queue(maxsize=4 * per_stream)

            def requests():
                while True:
                    r = q.get()
                    if r is None:
                        return
                    yield r

            call = ch.stream_stream("/etcdserverpb.Lease/LeaseKeepAlive")(requests())

            def writer():
                msgs = [_varint(1 << 3) + _varint(i) for i in my_ids]
                gap = period / len(msgs)
                start = time.monotonic()
                k = 0
                while not stop.is_set():
                    due = start + k * gap
                    now = time.monotonic()
                    if due > now:
                        stop.wait(due - now)
                    q.put(msgs[k % len(msgs)])
                    k += 1
                q.put(None)

            def reader():
                try:
                    for resp in call:
                        ttl = dict(pb_fields(resp)).get(3, 0)
                        with lock:
                            answered[0] += 1
                            expired[0] += ttl <= 0 or ttl >= 1 << 63
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.CANCELLED:
                        stream_errors.append(str(e.code()))

            return call, [threading.Thread(target=writer, daemon=True),
                          threading.Thread(target=reader, daemon=True)]

        for s_i, first in enumerate(range(0, len(ids), per_stream)):
            call, ts = keepalive_stream(channels[s_i % len(channels)], ids[first:first + per_stream])
            streams.append(call)
            threads += ts
        for t in threads:
            t.start()
        time.sleep(1.0 if args.quick else period)  # warm-up: one full renewal round
        window = args.duration if args.quick else max(args.duration, 2 * period)
        pids = cluster.pids()
        with lock:
            a0 = answered[0]
        c0, w0 = cpu_seconds(pids), time.monotonic()
        time.sleep(window)
        with lock:
            a1 = answered[0]
        c1, w1 = cpu_seconds(pids), time.monotonic()
        rec["renewals_per_s"] = (a1 - a0) / (w1 - w0)
        rec["renewals_needed_per_s"] = len(ids) / period
        rec["server_cpu_cores"] = (c1 - c0) / (w1 - w0)
        rec["server_cpu_us_per_renewal"] = ((c1 - c0) * 1e6 / (a1 - a0)) if a1 > a0 else None
        rec["rss_bytes"] = [cluster.rss_bytes(i) for i in range(1, cluster.members + 1)]
        rec["expired_answers"] = expired[0]
        rec["stream_errors"] = stream_errors
        rec["term_changes"] = cluster.term() - term0
        # Kept up: at least 90 % of the renewals due were answered, none found its lease gone.
        rec["ok"] = (grant_errors == 0 and not stream_errors and expired[0] == 0
                     and rec["renewals_per_s"] >= 0.9 * rec["renewals_needed_per_s"])
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)
        for call in streams:
            call.cancel()
        for ch in channels:
            ch.close()
        cluster.stop()
        if not args.keep_data:
            cluster.drop_data()
    return rec


def values_clients(v):
    """Clients for value size v: 256 up to 16 KiB, then as many as keep 4 MiB in flight (>= 8)."""
    return 256 if v <= 16384 else max(8, (4 * MIB) // v)


def values_point(cluster, bench, v, args):
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
        cluster.stop()
        if not args.keep_data:
            cluster.drop_data()
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


# ---- tables and plots ----

def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b not in (None, 0) else "-"


def mean(xs):
    return sum(xs) / len(xs) if xs else None


def fmt(x, d=0):
    return "-" if x is None else f"{x:.{d}f}"


def table(rows):
    widths = [max(len(str(r[c])) for r in rows) for c in range(len(rows[0]))]
    return "\n".join("  ".join(str(v).rjust(w) for v, w in zip(r, widths)) for r in rows)


def keys_table(recs):
    rows = [["keys", "rss MiB/member e", "etcd", "ratio", "disk MiB/member e", "etcd", "ratio",
             "load keys/s e", "etcd", "get-lin ops/s e", "etcd", "ratio", "get-lin p99 ms e",
             "etcd", "put ops/s e", "etcd", "ratio", "put p99 ms e", "etcd", "restart ms e",
             "etcd", "ratio", "elections e/etcd", "ok e/etcd"]]
    for n in sorted({r["keys"] for r in recs}):
        e = next((r for r in recs if r["keys"] == n and r["system"] == "epoch"), {})
        d = next((r for r in recs if r["keys"] == n and r["system"] == "etcd"), {})

        def g(r, *path):
            for p in path:
                r = r.get(p) if isinstance(r, dict) else None
            return r

        rss_e, rss_d = (mean(g(x, "rss_bytes") or []) for x in (e, d))
        disk_e, disk_d = (mean(g(x, "disk_bytes") or []) for x in (e, d))
        rows.append([
            n, fmt(rss_e and rss_e / MIB), fmt(rss_d and rss_d / MIB), ratio(rss_e, rss_d),
            fmt(disk_e and disk_e / MIB), fmt(disk_d and disk_d / MIB), ratio(disk_e, disk_d),
            fmt(g(e, "load_keys_per_s")), fmt(g(d, "load_keys_per_s")),
            fmt(g(e, "get_lin", "ops_per_sec")), fmt(g(d, "get_lin", "ops_per_sec")),
            ratio(g(e, "get_lin", "ops_per_sec"), g(d, "get_lin", "ops_per_sec")),
            fmt(g(e, "get_lin", "p99_ms"), 1), fmt(g(d, "get_lin", "p99_ms"), 1),
            fmt(g(e, "put", "ops_per_sec")), fmt(g(d, "put", "ops_per_sec")),
            ratio(g(e, "put", "ops_per_sec"), g(d, "put", "ops_per_sec")),
            fmt(g(e, "put", "p99_ms"), 1), fmt(g(d, "put", "p99_ms"), 1),
            fmt(g(e, "restart_ms")), fmt(g(d, "restart_ms")),
            ratio(g(e, "restart_ms"), g(d, "restart_ms")),
            f"{g(e, 'term_changes')}/{g(d, 'term_changes')}",
            f"{g(e, 'ok')}/{g(d, 'ok')}"])
    return table(rows)


def values_table(recs, floors):
    rows = [["value B", "clients", "put MB/s e", "etcd", "ratio", "ops/s e", "etcd",
             "p50 ms e", "etcd", "p99 ms e", "etcd", "p99 ratio", "disk fdatasync MB/s",
             "fdatasync p99 ms", "elections e/etcd", "ok e/etcd"]]
    for v in sorted({r["value_bytes"] for r in recs}):
        e = next((r for r in recs if r["value_bytes"] == v and r["system"] == "epoch"), {})
        d = next((r for r in recs if r["value_bytes"] == v and r["system"] == "etcd"), {})
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


def watchers_table(recs):
    rows = [["watchers", "created e/etcd", "bytes/watcher e", "etcd", "ratio",
             "delivery p50 ms e", "etcd", "delivery p99 ms e", "etcd", "p99 ratio",
             "put p50 ms e", "etcd", "puts/s e/etcd", "elections e/etcd", "ok e/etcd"]]
    for n in sorted({r["watchers"] for r in recs}):
        e = next((r for r in recs if r["watchers"] == n and r["system"] == "epoch"), {})
        d = next((r for r in recs if r["watchers"] == n and r["system"] == "etcd"), {})
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


def leases_table(recs):
    rows = [["leases", "renewals/s needed", "answered/s e", "etcd", "server cpu cores e",
             "etcd", "ratio", "cpu us/renewal e", "etcd", "rss MiB/member e", "etcd",
             "grant/s e", "etcd", "elections e/etcd", "ok e/etcd"]]
    for n in sorted({r["leases"] for r in recs}):
        e = next((r for r in recs if r["leases"] == n and r["system"] == "epoch"), {})
        d = next((r for r in recs if r["leases"] == n and r["system"] == "etcd"), {})
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


def plot(out, keys_recs, values_recs, floors, bulk, title, watchers_recs=(), leases_recs=()):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("no matplotlib (Debian python3-matplotlib): no plots")
        return []
    made = []
    style = {"epoch": dict(marker="o", color="tab:blue"), "etcd": dict(marker="s", color="tab:red")}

    def series(recs, xkey, f):
        for s in ("epoch", "etcd"):
            pts = sorted((r[xkey], f(r)) for r in recs if r["system"] == s and f(r) is not None)
            if pts:
                yield s, [p[0] for p in pts], [p[1] for p in pts]

    if keys_recs:
        panels = [
            ("resident memory per member (MiB)", lambda r: mean(r["rss_bytes"]) / MIB),
            ("disk per member (MiB)", lambda r: mean(r["disk_bytes"]) / MIB),
            ("get-lin ops/s, 256 clients", lambda r: r["get_lin"].get("ops_per_sec")),
            ("put ops/s, 256 clients", lambda r: r["put"].get("ops_per_sec")),
            ("p99 ms (solid get-lin, dashed put)", None),
            ("restart of one member (ms)", lambda r: r.get("restart_ms")),
        ]
        fig, axes = plt.subplots(2, 3, figsize=(15, 8))
        for ax, (t, f) in zip(axes.flat, panels):
            if f is None:
                for s, x, y in series(keys_recs, "keys", lambda r: r["get_lin"].get("p99_ms")):
                    ax.plot(x, y, label=f"{s} get-lin", **style[s])
                for s, x, y in series(keys_recs, "keys", lambda r: r["put"].get("p99_ms")):
                    ax.plot(x, y, linestyle="--", label=f"{s} put", **style[s])
            else:
                for s, x, y in series(keys_recs, "keys", f):
                    ax.plot(x, y, label=s, **style[s])
            ax.set_xscale("log")
            ax.set_xlabel("keys (256 B values)")
            ax.set_title(t)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            ax.legend()
        fig.suptitle(f"Keys curve: Epoch vs etcd, 3 members each — {title}")
        fig.tight_layout()
        path = os.path.join(out, "keys.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        made.append(path)
    if values_recs:
        fig, axes = plt.subplots(1, 2, figsize=(12, 5))
        ax = axes[0]
        for s, x, y in series(values_recs, "value_bytes", lambda r: r.get("mb_per_s")):
            ax.plot(x, y, label=f"{s} put", **style[s])
        if floors:
            ax.plot([f["block_bytes"] for f in floors], [f["mb_per_s"] for f in floors],
                    color="gray", linestyle=":", marker="^", label="disk: write+fdatasync per value")
        if bulk:
            ax.axhline(bulk["mb_per_s"], color="gray", linestyle="--",
                       label=f"disk: sequential, one fdatasync ({bulk['mb_per_s']:.0f} MB/s)")
        ax.set_yscale("log")
        ax.set_title("put throughput (MiB/s)")
        ax = axes[1]
        for s, x, y in series(values_recs, "value_bytes", lambda r: r["put"].get("p99_ms")):
            ax.plot(x, y, label=f"{s} put p99", **style[s])
        ax.set_yscale("log")
        ax.set_title("put p99 (ms)")
        for ax in axes:
            ax.set_xscale("log", base=2)
            ax.set_xlabel("value bytes")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"Values curve: Epoch vs etcd — {title}")
        fig.tight_layout()
        path = os.path.join(out, "values.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        made.append(path)
    if watchers_recs:
        fig, axes = plt.subplots(1, 2, figsize=(12, 5))
        ax = axes[0]
        for q, ls in (("p50", "--"), ("p99", "-")):
            for s, x, y in series(watchers_recs, "watchers",
                                  lambda r, q=q: r.get("delivery_from_ack_ms", {}).get(q)):
                ax.plot(x, y, linestyle=ls, label=f"{s} {q}", **style[s])
        ax.set_title("event delivery after the put's acknowledgement (ms)")
        ax = axes[1]
        for s, x, y in series(watchers_recs, "watchers", lambda r: r.get("bytes_per_watcher")):
            ax.plot(x, y, label=s, **style[s])
        ax.set_title("resident memory per watcher, all members (bytes)")
        for ax in axes:
            ax.set_xscale("log")
            ax.set_xlabel("watchers (distinct keys)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"Watchers curve: Epoch vs etcd — {title}")
        fig.tight_layout()
        path = os.path.join(out, "watchers.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        made.append(path)
    if leases_recs:
        fig, axes = plt.subplots(1, 2, figsize=(12, 5))
        for ax, (t, f) in zip(axes, [
                ("server CPU, all members (cores)", lambda r: r.get("server_cpu_cores")),
                ("keep-alive renewals answered per second", lambda r: r.get("renewals_per_s"))]):
            for s, x, y in series(leases_recs, "leases", f):
                ax.plot(x, y, label=s, **style[s])
            ax.set_title(t)
            ax.set_xscale("log")
            ax.set_xlabel("leases kept alive (TTL 10 s, renewed every TTL/3)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"Leases curve: Epoch vs etcd — {title}")
        fig.tight_layout()
        path = os.path.join(out, "leases.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        made.append(path)
    return made


def git_commit():
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return r.stdout.strip() + ("-dirty" if dirty else "")


def parse_sizes(s):
    out = []
    for x in s.split(","):
        x = x.strip().lower()
        mult = 1
        for suf, m in (("k", 1000), ("m", 1000 * 1000), ("kib", 1024), ("mib", MIB)):
            if x.endswith(suf):
                mult = m
                x = x[: -len(suf)]
        out.append(int(float(x) * mult))
    return out


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main():
    # SIGTERM (ctest's timeout, kill) unwinds like Ctrl-C, so every point's `finally` stops its
    # cluster by PID and removes its data.
    signal.signal(signal.SIGTERM, _interrupt)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", required=True, help="results directory (results.jsonl, tables, PNGs)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--quick", action="store_true", help="small sizes, short cells: proves it runs")
    ap.add_argument("--curves", default="keys,values,watchers,leases")
    ap.add_argument("--keys", help="key counts (default 10k,100k,1m; quick 2k)")
    ap.add_argument("--values", help="value sizes (default 256,16kib,256kib,1mib; quick 64kib)")
    ap.add_argument("--watchers", help="watcher counts (default 1,1k,10k; quick 100)")
    ap.add_argument("--watch-put-rate", type=float, default=100.0,
                    help="puts per second during the watchers curve (one client, one at a time)")
    ap.add_argument("--leases", help="lease counts (default 1k,10k,100k; quick 100)")
    ap.add_argument("--lease-client", choices=["c++", "python"], default="c++",
                    help="keep-alive client: bench/scale's epoch_lease_load (when built) or Python")
    ap.add_argument("--duration", type=float, help="measured seconds per cell (8; quick 1)")
    ap.add_argument("--warmup", type=float, help="warm-up seconds per cell (2; quick 0.5)")
    ap.add_argument("--settle", type=float, default=2.0,
                    help="seconds between loading and sampling memory and disk")
    ap.add_argument("--restart-timeout", type=float, default=120.0)
    ap.add_argument("--port-offset", type=int, default=0)
    ap.add_argument("--systems", default="epoch,etcd")
    ap.add_argument("--workdir", help="cluster data and logs (default /tmp/epoch-scale.XXXX)")
    ap.add_argument("--keep-data", action="store_true")
    args = ap.parse_args()
    q = args.quick
    args.keys = parse_sizes(args.keys or ("2k" if q else "10k,100k,1m"))
    args.values = parse_sizes(args.values or ("64kib" if q else "256,16kib,256kib,1mib"))
    args.watchers = parse_sizes(args.watchers or ("100" if q else "1,1k,10k"))
    args.leases = parse_sizes(args.leases or ("100" if q else "1k,10k,100k"))
    args.duration = args.duration if args.duration is not None else (1.0 if q else 8.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if q else 2.0)
    if q:
        args.settle = min(args.settle, 0.5)
    curves = args.curves.split(",")
    systems = args.systems.split(",")

    os.makedirs(args.out, exist_ok=True)
    work = args.workdir or tempfile.mkdtemp(prefix="epoch-scale.", dir="/tmp")
    os.makedirs(work, exist_ok=True)
    epochd = os.path.join(args.build, "server", "epochd")
    lease_load = os.path.join(args.build, "bench", "scale", "epoch_lease_load")
    args.lease_load = (lease_load if args.lease_client == "c++" and os.access(lease_load, os.X_OK)
                       else None)
    bench = Bench(os.path.join(args.build, "bench", "kv", "epoch_bench"), args, work)
    clusters = {"epoch": EpochCluster(work, 24379 + args.port_offset, epochd),
                "etcd": EtcdCluster(work, 34379 + args.port_offset)}
    etcd_version = subprocess.run(["etcd", "--version"], capture_output=True,
                                  text=True).stdout.split("\n")[0]
    meta = {"kind": "meta", "commit": git_commit(), "date_utc": time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "etcd": etcd_version, "cores": os.cpu_count(),
        "quick": q, "duration_s": args.duration, "warmup_s": args.warmup,
        "loadavg_start": loadavg(), "workdir": work}
    log(f"scale suite: commit {meta['commit']}, load average {meta['loadavg_start']}, "
        f"work dir {work}")
    results_path = os.path.join(args.out, "results.jsonl")
    results = open(results_path, "w")

    def emit(rec):
        results.write(json.dumps(rec) + "\n")
        results.flush()

    emit(meta)
    failed = []
    keys_recs, values_recs, floors, bulk = [], [], [], None
    t_start = time.monotonic()
    point_no = 0

    def ordered():
        nonlocal point_no
        point_no += 1
        return systems if point_no % 2 else list(reversed(systems))

    if "keys" in curves:
        for n in args.keys:
            for s in ordered():
                t0 = time.monotonic()
                log(f"-- keys {n}: {s}")
                try:
                    rec = keys_point(clusters[s], bench, n, args)
                except Exception as e:  # a cluster that did not start, a member that died
                    rec = {"keys": n, "ok": False, "error": repr(e)}
                rec.update(kind="point", curve="keys", system=s, loadavg=loadavg(),
                           seconds=time.monotonic() - t0)
                log(f"   {json.dumps(rec)}")
                emit(rec)
                keys_recs.append(rec)
                if not rec.get("ok"):
                    failed.append(f"keys {n} {s}")
    if "values" in curves:
        bulk = disk_bulk(work, (32 if q else 256) * MIB)
        emit(dict(kind="disk", test="bulk", **bulk))
        for v in args.values:
            f = disk_floor(work, v, 1.0 if q else 3.0, (64 if q else 512) * MIB)
            emit(dict(kind="disk", test="fdatasync-per-write", **f))
            floors.append(f)
            for s in ordered():
                t0 = time.monotonic()
                log(f"-- values {v}: {s}")
                try:
                    rec = values_point(clusters[s], bench, v, args)
                except Exception as e:
                    rec = {"value_bytes": v, "ok": False, "error": repr(e)}
                rec.update(kind="point", curve="values", system=s, loadavg=loadavg(),
                           seconds=time.monotonic() - t0)
                log(f"   {json.dumps(rec)}")
                emit(rec)
                values_recs.append(rec)
                if not rec.get("ok"):
                    failed.append(f"values {v} {s}")
    watchers_recs = []
    if "watchers" in curves:
        for n in args.watchers:
            for s in ordered():
                t0 = time.monotonic()
                log(f"-- watchers {n}: {s}")
                try:
                    rec = watchers_point(clusters[s], n, args)
                except Exception as e:
                    rec = {"watchers": n, "ok": False, "error": repr(e)}
                rec.update(kind="point", curve="watchers", system=s, loadavg=loadavg(),
                           seconds=time.monotonic() - t0)
                log(f"   {json.dumps(rec)}")
                emit(rec)
                watchers_recs.append(rec)
                if not rec.get("ok"):
                    failed.append(f"watchers {n} {s}")
    leases_recs = []
    if "leases" in curves:
        for n in args.leases:
            for s in ordered():
                t0 = time.monotonic()
                log(f"-- leases {n}: {s}")
                try:
                    point = leases_point_cpp if args.lease_load else leases_point
                    rec = point(clusters[s], n, args)
                except Exception as e:
                    rec = {"leases": n, "ok": False, "error": repr(e)}
                rec.update(kind="point", curve="leases", system=s, loadavg=loadavg(),
                           seconds=time.monotonic() - t0)
                log(f"   {json.dumps(rec)}")
                emit(rec)
                leases_recs.append(rec)
                if not rec.get("ok"):
                    failed.append(f"leases {n} {s}")
    end = {"kind": "end", "loadavg_end": loadavg(), "seconds": time.monotonic() - t_start,
           "failed": failed}
    emit(end)
    results.close()

    title = (f"{meta['commit'][:12]}, {meta['etcd']}, {os.cpu_count()} cores, load avg "
             f"{meta['loadavg_start'][0]:.1f}→{end['loadavg_end'][0]:.1f}")
    text = [f"Epoch vs {etcd_version}, 3 members each on 127.0.0.1, fsync on, data in {work}",
            f"commit {meta['commit']}, {meta['date_utc']}, {os.cpu_count()} cores, "
            f"{args.duration:g} s per cell after {args.warmup:g} s warm-up, 256 clients on 12 "
            f"connections to all members",
            f"load average: start {meta['loadavg_start']}, end {end['loadavg_end']}; "
            f"{end['seconds']:.0f} s in all", ""]
    if keys_recs:
        text += ["KEYS (256 B values; fresh cluster per point; memory and disk after loading; "
                 "ratio = epoch/etcd)", keys_table(keys_recs), ""]
    if values_recs:
        text += ["VALUES (puts over 1000 keys; fresh cluster per point; disk columns: this "
                 "machine's write+fdatasync of one value at a time)", values_table(values_recs,
                                                                                   floors)]
        if bulk:
            text.append(f"disk sequential write, 1 MiB blocks and one fdatasync: "
                        f"{bulk['mb_per_s']:.0f} MB/s")
        text.append("")
    if watchers_recs:
        text += [f"WATCHERS (one watcher per distinct key, 1000 per stream; "
                 f"{args.watch_put_rate:g} puts/s from one client for {args.duration:g} s; "
                 "delivery = event received - put acknowledged, negative when the event "
                 "arrives first; memory = growth of all members' RSS / watchers)",
                 watchers_table(watchers_recs), ""]
    if leases_recs:
        text += ["LEASES (TTL 10 s, each renewed every TTL/3 on keep-alive streams of 2000 "
                 "leases; server cpu = all members' user+sys in the window / its length)",
                 leases_table(leases_recs), ""]
    if failed:
        text.append("FAILED: " + "; ".join(failed))
    report = "\n".join(text)
    with open(os.path.join(args.out, "tables.txt"), "w") as f:
        f.write(report + "\n")
    print(report)
    for p in plot(args.out, [r for r in keys_recs if r.get("ok") is not None and "rss_bytes" in r],
                  [r for r in values_recs if "put" in r], floors, bulk, title,
                  [r for r in watchers_recs if "delivery_from_ack_ms" in r],
                  [r for r in leases_recs if "renewals_per_s" in r]):
        print(f"plot: {p}")
    print(f"results: {results_path}; logs: {work}")
    if not args.keep_data:
        for c in clusters.values():
            c.drop_data()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
