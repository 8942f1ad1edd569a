"""Unit tests of the Python worker's pure parts, its SQLite guard and its session rules (a fake
cluster and a fake clock: no sleeps, no server). Run by ctest as python_worker_units."""
import os
import signal
import subprocess
import sys
import threading
import unittest

from epoch_worker.jobs import Backoff, BadJob, idempotency_key, parse_job
from epoch_worker.session import DEGRADED, HEALTHY, LOST, Session
from epoch_worker.store import FencedStore, StoreError


class JobsTest(unittest.TestCase):
    def test_parse(self):
        job = parse_job("a", b"stages=x,y\nbody\npoison")
        self.assertEqual(job.stages, ("x", "y"))
        self.assertTrue(job.poison)
        self.assertFalse(parse_job("b", b"stages=x\nbody").poison)
        for bad in (b"no stages line", b"stages=x,,y", b"stages=" + b",".join([b"s"] * 65)):
            with self.assertRaises(BadJob):
                parse_job("c", bad)

    def test_idempotency_key_is_the_cpp_one(self):
        # The same vectors are pinned in tests/unit/client/job_runner_test.cc.
        job = parse_job("j1", b"stages=a,b\npayload")
        self.assertEqual(idempotency_key(job, 1), "b4547f1247bf4e9c")
        self.assertEqual(idempotency_key(job, 2), "b454821247bf53b5")

    def test_backoff_full_jitter(self):
        backoff = Backoff(0.1, 1.0, seed=7)
        delays = []
        for attempt in range(8):
            ceiling = min(1.0, 0.1 * 2 ** attempt)
            self.assertAlmostEqual(backoff.ceiling(), ceiling)
            delay = backoff.next_delay()
            self.assertGreaterEqual(delay, 0.0)
            self.assertLess(delay, ceiling)
            delays.append(delay)
        # Full jitter: some delay falls below half its ceiling (equal jitter never does).
        self.assertTrue(any(d < min(1.0, 0.1 * 2 ** i) / 2 for i, d in enumerate(delays)))
        backoff.reset()
        self.assertAlmostEqual(backoff.ceiling(), 0.1)
        self.assertEqual(Backoff(0.1, 1.0, seed=7).next_delay(), delays[0])


class StoreTest(unittest.TestCase):
    def setUp(self):
        self.store = FencedStore(":memory:")
        self.store.create_tables()
        self.store.register_job("j")

    def commit(self, token, stage):
        self.store.begin()
        stale = self.store.fenced_update("j", token, stage, f"s{stage}", "running", b"r")
        if stale is not None:
            self.store.rollback()
            return stale
        self.store.commit()
        return None

    def test_guard_orders_token_then_stage(self):
        self.assertIsNone(self.commit(5, 1))
        self.assertIsNone(self.commit(5, 2))   # the same holder moves forward
        stale = self.commit(5, 2)              # a replayed stage
        self.assertEqual((stale.current_token, stale.current_stage), (5, 2))
        self.assertIn("stage not after", str(stale))
        self.assertIsNone(self.commit(9, 1))   # a newer holder resumes
        stale = self.commit(5, 3)              # the older holder, fenced out for good
        self.assertIn("a newer holder committed", str(stale))
        self.assertEqual(self.store.read_job("j"), (1, 9))

    def test_guard_refuses_autocommit_and_unknown_jobs(self):
        with self.assertRaises(StoreError):
            self.store.fenced_update("j", 1, 1, "s", "running", b"")
        self.store.begin()
        with self.assertRaises(StoreError):
            self.store.fenced_update("nobody", 1, 1, "s", "running", b"")
        self.store.rollback()

    def test_effect_recorded_once_per_key(self):
        self.store.begin()
        self.assertTrue(self.store.record_effect("k", "j", 1, 5, "w", b""))
        self.assertFalse(self.store.record_effect("k", "j", 1, 6, "w", b""))
        self.store.commit()

    def test_interrupt_cancels_a_statement_in_flight(self):
        # A statement that would count for minutes; interrupt() from another thread once it runs.
        started = threading.Event()
        self.store._db.set_progress_handler(lambda: started.set() and 0, 1000)
        interrupter = threading.Thread(target=lambda: started.wait(30) and self.store.interrupt())
        interrupter.start()
        self.store.begin()
        with self.assertRaises(StoreError) as caught:
            self.store._run("count", "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 "
                                     "FROM c WHERE n < 2000000000) SELECT count(*) FROM c").fetchone()
        interrupter.join()
        self.assertTrue(caught.exception.interrupted)
        self.store.rollback()
        self.store._db.set_progress_handler(None, 0)
        self.assertIsNone(self.commit(1, 1))  # the connection is usable afterwards


class FakeReply:
    def __init__(self, ttl):
        self.TTL = ttl


class FakeStream:
    """Answers each keep-alive request with `ttl`, or never when ttl is None."""

    def __init__(self, requests, ttl):
        self._requests = requests
        self._ttl = ttl

    def __iter__(self):
        for _ in self._requests:
            if self._ttl is not None:
                yield FakeReply(self._ttl)

    def cancel(self):
        pass


class FakeCluster:
    def __init__(self, ttl):
        self.ttl = ttl

    def keepalive_stream(self, index, requests):
        return FakeStream(requests, self.ttl)


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class SessionTest(unittest.TestCase):
    def session(self, reply_ttl, clock):
        s = Session(FakeCluster(reply_ttl), 0x42, 3, clock(), poison_pill=False, clock=clock)
        self.addCleanup(s.close)
        return s

    def test_unanswered_renewals_degrade_then_lose_at_70_percent(self):
        clock = FakeClock()
        s = self.session(None, clock)
        cancelled = []
        with s.cancel_on_lost(lambda: cancelled.append(True)):
            self.assertEqual(s.state, HEALTHY)
            clock.now = 100.0 + 2.0          # 2/3 of the TTL since the grant
            self.assertEqual(s.state, DEGRADED)
            self.assertFalse(s.can_take_new_work())
            clock.now = 100.0 + 0.7 * 3 / 1.01 - 0.001
            self.assertFalse(s.lost())
            clock.now = 100.0 + 0.7 * 3 / 1.01
            self.assertTrue(s.lost())
        self.assertEqual(cancelled, [True])
        clock.now += 1000                    # lost is final
        self.assertEqual(s.state, LOST)

    def test_cluster_answering_ttl_zero_loses_at_once(self):
        clock = FakeClock()
        s = self.session(0, clock)
        self.assertTrue(s.wait(30))          # the stream renews at once; the reply says expired
        self.assertIn("TTL <= 0", s.reason())

    def test_poison_pill_kills_the_process_first(self):
        child = (
            "import sys\n"
            "sys.path.insert(0, %r)\n"
            "from test_units import FakeClock, FakeCluster\n"
            "from epoch_worker.session import Session\n"
            "clock = FakeClock()\n"
            "s = Session(FakeCluster(None), 0x42, 3, clock(), name='t', clock=clock,\n"
            "            log=lambda line: print(line, flush=True))\n"
            "clock.now += 3\n"
            "s.lost()\n"
            "print('still alive', flush=True)\n" % os.path.dirname(os.path.abspath(__file__)))
        done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                              timeout=60)
        self.assertEqual(done.returncode, -signal.SIGKILL, done.stderr)
        self.assertIn("event=poison_pill worker=t lease=42", done.stdout)
        self.assertNotIn("still alive", done.stdout)


if __name__ == "__main__":
    unittest.main()
