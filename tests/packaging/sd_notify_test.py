#!/usr/bin/env python3
"""sd_notify_test.py <epochd>: epochd's systemd Type=notify messages, on sockets this test owns.

Two members of a three-member cluster, each with NOTIFY_SOCKET set to a unix datagram socket:
- the first alone has no quorum: once it answers /ready (503), it has sent nothing;
- with the second up, both send READY=1, and at that moment /ready answers 200;
- SIGTERM makes the first send STOPPING=1 and exit 0.
Every wait has a deadline; every process started is stopped by its PID.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

DEADLINE_S = 30


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(port, path):
    """The HTTP status of GET path, or None when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def wait_for(what, predicate):
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {DEADLINE_S} s")


def receive(sock, what):
    """The next datagram on sock, within the deadline."""
    sock.settimeout(DEADLINE_S)
    try:
        return sock.recv(4096).decode()
    except socket.timeout:
        raise AssertionError(f"no {what} within {DEADLINE_S} s") from None


def main():
    epochd = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="epoch-sdnotify.")
    names = ["n1", "n2", "n3"]
    peer = {n: free_port() for n in names}
    client = {n: free_port() for n in names}
    metrics = {n: free_port() for n in names}
    cluster = ",".join(f"{n}=127.0.0.1:{peer[n]}" for n in names)
    socks, procs = {}, {}

    def start(name):
        path = os.path.join(tmp, f"{name}.notify")
        socks[name] = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        socks[name].bind(path)
        env = dict(os.environ, NOTIFY_SOCKET=path)
        log = open(os.path.join(tmp, f"{name}.log"), "w")
        procs[name] = subprocess.Popen(
            [epochd, "--name", name, "--data-dir", os.path.join(tmp, name),
             "--listen-client-urls", f"127.0.0.1:{client[name]}",
             "--listen-peer-urls", f"127.0.0.1:{peer[name]}",
             "--listen-metrics-urls", f"127.0.0.1:{metrics[name]}",
             "--initial-cluster", cluster], env=env, stdout=log, stderr=log)

    try:
        start("n1")
        status = wait_for("answer on n1's /ready", lambda: http_status(metrics["n1"], "/ready"))
        assert status == 503, f"n1 alone answers /ready {status}, expected 503"
        socks["n1"].setblocking(False)
        try:
            early = socks["n1"].recv(4096).decode()
            raise AssertionError(f"n1 sent {early!r} before it had a quorum")
        except BlockingIOError:
            pass

        start("n2")
        for name in ["n1", "n2"]:
            message = receive(socks[name], f"READY=1 from {name}")
            assert message == "READY=1", f"{name} sent {message!r}, expected READY=1"
            status = http_status(metrics[name], "/ready")
            assert status == 200, f"{name} sent READY=1 but /ready answers {status}"

        procs["n1"].send_signal(signal.SIGTERM)
        message = receive(socks["n1"], "STOPPING=1 from n1")
        assert message == "STOPPING=1", f"n1 sent {message!r}, expected STOPPING=1"
        code = procs["n1"].wait(timeout=DEADLINE_S)
        assert code == 0, f"n1 exited {code} after SIGTERM"
        print("PASS: no READY=1 without quorum; READY=1 when /ready is 200; STOPPING=1 on SIGTERM")
    except AssertionError as e:
        for name in procs:
            with open(os.path.join(tmp, f"{name}.log")) as f:
                sys.stderr.write(f"--- {name}.log\n{f.read()[-3000:]}")
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(timeout=DEADLINE_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        subprocess.run(["rm", "-rf", tmp], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
