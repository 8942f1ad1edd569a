"""Process, disk, time and size helpers shared by every curve."""

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
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


def cpu_seconds(pids):
    """user + system CPU seconds the processes used so far (/proc/<pid>/stat 14, 15)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else None


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


