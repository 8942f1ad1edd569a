#!/usr/bin/env python3
"""default_config_test.py <epochd> <source-dir>: the packaged default configuration
(deploy/systemd/epoch.conf.yml) is a working single-member configuration for this epochd.

The file, with its data directory and ports moved to a scratch directory and free loopback
ports, is given to `epochd --config-file` (as the systemd unit does; epochd refuses a key it does
not know), and the member must serve: /health answers 200 and etcdctl writes.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import yaml

DEADLINE_S = 30


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def main():
    epochd, source = sys.argv[1], sys.argv[2]
    with open(os.path.join(source, "deploy/systemd/epoch.conf.yml")) as f:
        text = f.read()
    config = yaml.safe_load(text)
    if not config["data-dir"].startswith("/var/lib/epoch/"):
        print("FAIL: data-dir is outside the unit's StateDirectory /var/lib/epoch", file=sys.stderr)
        return 1

    tmp = tempfile.mkdtemp(prefix="epoch-default-config.")
    ports = {"2379": str(free_port()), "2380": str(free_port()), "2381": str(free_port())}
    text = text.replace(config["data-dir"], os.path.join(tmp, "data"))
    for default, port in ports.items():
        text = text.replace(f"127.0.0.1:{default}", f"127.0.0.1:{port}")
    config_file = os.path.join(tmp, "epoch.conf.yml")
    with open(config_file, "w") as f:
        f.write(text)
    log = open(os.path.join(tmp, "epochd.log"), "w")
    proc = subprocess.Popen([epochd, "--config-file", config_file], stdout=log, stderr=log)
    try:
        end = time.monotonic() + DEADLINE_S
        while health(ports["2381"]) != 200:
            if proc.poll() is not None or time.monotonic() > end:
                raise AssertionError(f"no healthy member within {DEADLINE_S} s (exit {proc.poll()})")
            time.sleep(0.05)
        put = subprocess.run(["etcdctl", "--endpoints", f"127.0.0.1:{ports['2379']}",
                              "--command-timeout", "10s", "put", "default-config", "works"],
                             env=dict(os.environ, ETCDCTL_API="3"), capture_output=True,
                             text=True)
        if put.returncode != 0:
            raise AssertionError(f"etcdctl put: {put.stderr}")
        print(f"PASS: epochd --config-file with the default's {len(config)} keys serves")
        return 0
    except AssertionError as e:
        with open(os.path.join(tmp, "epochd.log")) as f:
            sys.stderr.write(f.read()[-3000:])
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=DEADLINE_S)
        shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(main())
