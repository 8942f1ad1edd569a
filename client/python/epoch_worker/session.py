"""Session: a lease kept alive on a LeaseKeepAlive stream, and the worker's conservative view of
it, with the rules of the C++ Session (client/README.md "Session", docs/timing-and-safety.md §8),
all measured on the monotonic clock:

- a renewal is due every TTL/3 from the previous send; a new stream renews at once;
- deadline = send time of the last acknowledged renewal + TTL/(1+rho) (the grant counts as the
  first renewal), never the reply's receive time;
- healthy -> degraded when a renewal is unacknowledged for TTL/3, the stream breaks, or 2/3 of
  the TTL passed since the last acknowledged send; degraded takes no new work;
- -> lost at last acknowledged send + 0.7 * TTL/(1+rho), or at once when the cluster answers
  TTL <= 0. Lost is final. With the poison pill (the default) the process SIGKILLs itself first;
  otherwise every call and statement bound with cancel_on_lost() is cancelled.

Any thread that asks (lost(), can_take_new_work(), wait()) checks the clock itself, so a process
resumed after a pause sees the loss at its first question, before the timer thread runs.

Threading: thread-safe. Two internal threads: the timer (sends renewals, enforces deadlines) and
the reader (opens the stream, reads acknowledgements, reopens with backoff on another member)."""
import collections
import contextlib
import os
import queue
import signal
import threading
import time

import grpc

from etcdserverpb import rpc_pb2

from .jobs import Backoff

HEALTHY, DEGRADED, LOST = "healthy", "degraded", "lost"


class Session:
    def __init__(self, cluster, lease_id, ttl_s, granted_at, *, rho=0.01, lost_fraction=0.7,
                 poison_pill=True, name="", log=None, clock=time.monotonic, seed=None):
        self.cluster = cluster
        self.lease_id = lease_id
        self.ttl_s = ttl_s
        self._validity_s = ttl_s / (1.0 + rho)
        self._lost_fraction = lost_fraction
        self._poison_pill = poison_pill
        self._name = name
        self._log = log or (lambda line: None)
        self._clock = clock
        self._mu = threading.Condition()
        self._state = HEALTHY
        self._reason = ""
        self._last_acked_send = granted_at  # the grant request is the first renewal
        self._pending = collections.deque()  # send times of unacknowledged renewals, in order
        self._next_send = granted_at + ttl_s / 3.0
        self._requests = None  # the open stream's request queue
        self._call = None
        self._closed = False
        self._callbacks = {}
        self._lost_event = threading.Event()
        self._reconnect = Backoff(0.05, 1.0, seed)
        self._threads = [threading.Thread(target=self._timer, name="session-timer", daemon=True),
                         threading.Thread(target=self._reader, name="session-reader", daemon=True)]
        for t in self._threads:
            t.start()

    @classmethod
    def create(cls, cluster, ttl_s, **kwargs):
        sent = time.monotonic()
        granted = cluster.lease_grant(ttl_s)
        if granted.TTL <= 0:
            raise RuntimeError(f"lease grant answered TTL {granted.TTL}")
        return cls(cluster, granted.ID, ttl_s, sent, **kwargs)

    # --- what the worker asks ---------------------------------------------------------------

    @property
    def state(self):
        with self._mu:
            self._check(self._clock())
            return self._state

    def lost(self):
        return self.state == LOST

    def can_take_new_work(self):
        return self.state == HEALTHY

    def reason(self):
        with self._mu:
            return self._reason

    def wait(self, seconds):
        """Waits `seconds` unless the session is lost first; True when it is lost."""
        self._lost_event.wait(seconds)
        return self.lost()

    @contextlib.contextmanager
    def cancel_on_lost(self, cancel):
        """While inside, a loss calls `cancel` (e.g. a gRPC future's cancel, a database
        connection's interrupt); at once if the session is lost already."""
        key = object()
        with self._mu:
            if self._state == LOST:
                cancel()
            else:
                self._callbacks[key] = cancel
        try:
            yield
        finally:
            with self._mu:
                self._callbacks.pop(key, None)

    def close(self):
        """Stops renewing and revokes the lease (its lock keys go with it)."""
        with self._mu:
            was_lost = self._state == LOST
            self._closed = True
            self._end_stream()
            if not was_lost:
                self._enter_lost("closed")
            self._mu.notify_all()
        for t in self._threads:
            t.join(timeout=5)
        if not was_lost:
            try:
                self.cluster.lease_revoke(self.lease_id)
            except grpc.RpcError:
                pass  # the lease expires by itself

    # --- the rules (called with _mu held) -------------------------------------------------------

    def _lost_at(self):
        return self._last_acked_send + self._lost_fraction * self._validity_s

    def _check(self, now):
        if self._state == LOST:
            return
        if now >= self._lost_at():
            self._enter_lost(f"no acknowledged renewal for {self._lost_fraction:.0%} of the TTL")
        elif self._state == HEALTHY and self._overdue(now):
            self._state = DEGRADED

    def _overdue(self, now):
        renew = self.ttl_s / 3.0
        return ((self._pending and now - self._pending[0] >= renew)
                or now - self._last_acked_send >= 2 * renew)

    def _enter_lost(self, reason):
        if self._poison_pill and not self._closed:
            # Poison pill: die before anything else of this process can run.
            self._log(f"event=poison_pill worker={self._name} lease={self.lease_id:x} "
                      f"detail={reason}")
            os.kill(os.getpid(), signal.SIGKILL)
        self._state = LOST
        self._reason = reason
        self._lost_event.set()
        for cancel in list(self._callbacks.values()):
            try:
                cancel()
            except Exception:  # noqa: BLE001 - a failing canceller must not stop the others
                pass
        self._end_stream()
        self._mu.notify_all()

    def _end_stream(self):
        if self._requests is not None:
            self._requests.put(None)
            self._requests = None
        if self._call is not None:
            self._call.cancel()
            self._call = None

    # --- threads ----------------------------------------------------------------------------------

    def _timer(self):
        with self._mu:
            while not self._closed and self._state != LOST:
                now = self._clock()
                self._check(now)
                if self._state == LOST:
                    break
                if self._requests is not None and now >= self._next_send:
                    self._requests.put(rpc_pb2.LeaseKeepAliveRequest(ID=self.lease_id))
                    self._pending.append(now)
                    self._next_send = now + self.ttl_s / 3.0
                wake = min(self._next_send, self._lost_at(),
                           self._last_acked_send + 2 * self.ttl_s / 3.0)
                if self._pending:
                    wake = min(wake, self._pending[0] + self.ttl_s / 3.0)
                self._mu.wait(timeout=max(0.001, wake - now))

    def _reader(self):
        index = 0
        while True:
            with self._mu:
                if self._closed or self._state == LOST:
                    return
                requests = queue.Queue()
                call = self.cluster.keepalive_stream(index, _drain(requests))
                self._requests, self._call = requests, call
                self._pending.clear()
                self._next_send = self._clock()  # a new stream renews at once
                self._mu.notify_all()
            try:
                for reply in call:
                    self._on_reply(reply)
                why = "keep-alive stream ended"
            except grpc.RpcError as err:
                why = f"keep-alive stream broke: {err.code().name}"
            with self._mu:
                if self._call is call:
                    self._end_stream()
                if self._closed or self._state == LOST:
                    return
                self._state = DEGRADED
                self._reason = why
                delay = self._reconnect.next_delay()
                self._mu.wait(timeout=delay)
            index += 1

    def _on_reply(self, reply):
        with self._mu:
            if self._state == LOST:
                return  # a late acknowledgement never revives the session
            sent = self._pending.popleft() if self._pending else None
            if reply.TTL <= 0:
                self._enter_lost("the cluster answered TTL <= 0: lease expired")
                return
            if sent is not None:
                self._last_acked_send = max(self._last_acked_send, sent)
            now = self._clock()
            self._check(now)
            if self._state == DEGRADED and self._requests is not None and not self._overdue(now):
                self._state = HEALTHY
                self._reconnect.reset()
            self._mu.notify_all()


def _drain(requests):
    while True:
        item = requests.get()
        if item is None:
            return
        yield item
