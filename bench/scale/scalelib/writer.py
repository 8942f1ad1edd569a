"""A light writer: one client, one put of 256 B at a time at a fixed rate, in a thread of its
own, for the cells that measure what a background task (lease expiry, compaction) costs the
latency of ordinary writes."""

import threading
import time

from scalelib.proto import put_request
from scalelib.util import quantile


class PacedWriter:
    """Puts to `keys` distinct keys under prefix at `rate` per second on one gRPC channel, until
    stop(). Every put is recorded as (send time, latency ms or None when it failed)."""

    def __init__(self, endpoint, prefix, rate, keys=100):
        import grpc

        self.channel = grpc.insecure_channel(endpoint)
        self.put = self.channel.unary_unary("/etcdserverpb.KV/Put")
        self.keys = [prefix + b"%04d" % i for i in range(keys)]
        self.period = 1.0 / rate
        self.samples = []  # (monotonic send time, ms or None)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopped.set()
        self.thread.join(timeout=10)
        self.channel.close()

    def _run(self):
        import grpc

        value = b"w" * 256
        t0 = time.monotonic()
        i = 0
        while not self.stopped.is_set():
            due = t0 + i * self.period
            now = time.monotonic()
            if due > now:
                self.stopped.wait(due - now)
                continue
            ts = time.monotonic()
            try:
                self.put(put_request(self.keys[i % len(self.keys)], value), timeout=5)
                self.samples.append((ts, (time.monotonic() - ts) * 1000))
            except grpc.RpcError:
                self.samples.append((ts, None))
            i += 1

    def summary(self, since=0.0, until=float("inf"), overlap=False):
        """puts, errors, p50/p99/max ms of the puts that ran within [since, until), or with
        overlap of those that ran at any time in it (a put stalled across its start counts)."""
        window = []
        for ts, ms in list(self.samples):
            done = ts + (ms or 0) / 1000
            if (ts < until and done >= since) if overlap else (ts >= since and done < until):
                window.append(ms)
        ok = [ms for ms in window if ms is not None]
        return {"puts": len(window), "errors": len(window) - len(ok),
                "p50_ms": quantile(ok, 0.5), "p99_ms": quantile(ok, 0.99),
                "max_ms": max(ok, default=None)}
