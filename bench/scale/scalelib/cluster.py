"""The two clusters (Epoch: deploy/local-cluster.sh; etcd: bench/lib/etcd-cluster.sh) behind one
interface: start, stop, a member's restart, its memory, the Raft term, the leader."""

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request

from scalelib.proto import range_request
from scalelib.util import ROOT, wait_gone

MEMBERS_MAX = 9  # the scripts' highest member number, added members included


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

    def set_members(self, n):
        """The member count of the next start (3 unless a curve asks for another)."""
        self.members = n
        self.env[self.nodes_env] = str(n)

    def client_endpoint(self, i):  # i = 1..members
        return f"127.0.0.1:{self.base + 10 * (i - 1)}"

    def endpoints(self):
        return [self.client_endpoint(i) for i in range(1, self.members + 1)]

    def _script(self, *args, check=True, timeout=120, env=None):
        """Runs the cluster script (env: more variables for this run only); its output goes to
        script.log and is returned."""
        os.makedirs(self.dir, exist_ok=True)
        r = subprocess.run([self.script, *args], env=dict(self.env, **(env or {})),
                           stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout)
        with open(os.path.join(self.dir, "script.log"), "a") as out:
            out.write(r.stdout)
        if check:
            r.check_returncode()
        return r.stdout

    def add_member(self, i, timeout_s):
        """Adds member i at runtime (the script's add-node: member add --learner, start it on an
        empty data dir with --initial-cluster-state existing, promote it once it caught up).
        Returns the milliseconds the script measured from the accepted add to the promotion."""
        limit = str(int(timeout_s))
        out = self._script("add-node", str(i), timeout=timeout_s + 60,
                           env={"EPOCH_PROMOTE_TIMEOUT": limit, "ETCD_PROMOTE_TIMEOUT": limit})
        m = re.search(r"promoted to voter in (\d+) ms", out)
        if not m:
            raise RuntimeError(f"add-node {i}: no promotion time in {out[-300:]!r}")
        return int(m.group(1))

    def remove_member(self, i):
        """Removes member i (etcdctl member remove); it exits by itself, else SIGKILL."""
        pid = self.pid(i)
        self._script("remove-node", str(i))
        if not wait_gone(pid, 5):
            os.kill(pid, signal.SIGKILL)
            wait_gone(pid, 5)

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
        for i in range(1, MEMBERS_MAX + 1):  # members added at runtime too
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
        for i in range(1, MEMBERS_MAX + 1):
            try:
                os.remove(self.pid_file(i))
            except FileNotFoundError:
                pass

    def finish(self, keep_data):
        """The end of a point: stop the members, and remove their data unless asked to keep it."""
        self.stop()
        if not keep_data:
            self.drop_data()

    def drop_data(self):
        for i in range(1, MEMBERS_MAX + 1):
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
    nodes_env = "EPOCH_NODES"

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
    nodes_env = "ETCD_NODES"

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

