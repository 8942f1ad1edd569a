"""JobRunner: one attempt at one multi-stage job, the phases of the C++ JobRunner
(client/include/epoch/client/job_runner.h) over epoch.v1.Jobs:

  acquire -> resume -> (check -> work -> check -> commit) per stage -> complete

acquire  Jobs.Acquire with the session's lease: the server takes the job's lock, counts the epoch
         change and returns the fencing token in one step (or dead-letters the job past the
         limit, or answers that someone else holds it).
resume   the job's row: the next stage is row.stage + 1; a row with a newer token means fenced.
check    before a stage the session must be healthy; before a commit, not lost.
work     the stage's work, outside any transaction, cancelled when the session is lost.
commit   one transaction: the guard (token, stage) first, then the effect under the stage's
         idempotency key, COMMIT; bound to the session so a loss interrupts the statement in
         flight.
complete Jobs.Release(completed): the job leaves the queue for done/.

Every other exit releases the job (best effort). delay_after() gives the pause before the next
attempt: full-jitter backoff after a fence, a lost session or a failure; none after success.

Threading: one JobRunner per worker thread."""
import contextlib

import grpc

from .cluster import Cancelled
from .jobs import Backoff, idempotency_key
from .store import StoreError

COMPLETED, BUSY, GONE, DEAD_LETTERED = "completed", "busy", "gone", "dead_lettered"
FENCED, SESSION_LOST, STAGE_FAILED, ERROR = "fenced", "session_lost", "stage_failed", "error"


class StageFailed(Exception):
    """The stage's work failed; the job is released and retried later (counts toward dead-letter)."""


class JobRunner:
    def __init__(self, cluster, store, work, *, prefix, worker, max_epoch_changes,
                 self_fencing=True, log=print, seed=None):
        self.cluster = cluster
        self.store = store
        self.work = work  # work(job, stage, stage_name, token, session) -> bytes; StageFailed
        self.prefix = prefix.encode()
        self.worker = worker
        self.max_epoch_changes = max_epoch_changes
        self.self_fencing = self_fencing
        self.log = log
        self.backoff = Backoff(0.1, 2.0, seed)

    def delay_after(self, outcome):
        if outcome in (COMPLETED, GONE, DEAD_LETTERED):
            self.backoff.reset()
            return 0.0
        if outcome == BUSY:
            return 0.0
        return self.backoff.next_delay()

    def run_once(self, job, session):
        a = _Attempt(job, session)
        try:
            return self._acquire(a)
        except (grpc.RpcError, StoreError, Cancelled) as err:
            if session.lost():
                self._emit(a, "session_lost", 0, str(err))
                return self._finish(a, SESSION_LOST)
            self._emit(a, "error", 0, _describe(err))
            return self._finish(a, ERROR)

    # --- phases ---------------------------------------------------------------------------------

    def _acquire(self, a):
        try:
            got = self.cluster.acquire(self.prefix, a.job.id, a.session.lease_id, self.worker,
                                       self.max_epoch_changes, a.session)
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.NOT_FOUND:
                raise
            self._emit(a, "gone", 0)
            return self._finish(a, GONE)
        if got.dead_lettered:
            a.token, a.epoch = got.fencing_token, got.epoch_count
            self._emit(a, "dead_lettered", 0)
            return self._finish(a, DEAD_LETTERED)  # the server released it in the same step
        if not got.acquired:
            self._emit(a, "busy", 0)
            return self._finish(a, BUSY)
        a.token, a.epoch, a.held = got.fencing_token, got.epoch_count, True
        self._emit(a, "acquired", 0)
        return self._resume(a)

    def _resume(self, a):
        self.store.register_job(a.job.id)
        stage, token = self.store.read_job(a.job.id)
        if token > a.token:
            self._emit(a, "rejected", stage + 1, f"row already carries newer token {token}")
            return self._finish(a, FENCED)
        for next_stage in range(stage + 1, len(a.job.stages) + 1):
            ended = self._run_stage(a, next_stage)
            if ended is not None:
                return ended
        if not self._complete(a):
            self._emit(a, "error", 0, f"complete: lost the lock of job {a.job.id} before "
                                      "completing it")
            return self._finish(a, ERROR)
        a.held = False
        self._emit(a, "completed", len(a.job.stages))
        return self._finish(a, COMPLETED)

    def _run_stage(self, a, stage):
        if not self._usable(a, new_work=True):
            self._emit(a, "session_lost", stage, "before the stage")
            return self._finish(a, SESSION_LOST)
        try:
            result = self.work(a.job, stage, a.job.stages[stage - 1], a.token,
                               a.session if self.self_fencing else None)
        except StageFailed as err:
            if self.self_fencing and a.session.lost():
                self._emit(a, "session_lost", stage, "during the work")
                return self._finish(a, SESSION_LOST)
            self._emit(a, "stage_failed", stage, str(err))
            return self._finish(a, STAGE_FAILED)
        if not self._usable(a, new_work=False):
            self._emit(a, "session_lost", stage, "before the commit")
            return self._finish(a, SESSION_LOST)
        return self._commit(a, stage, result)

    def _commit(self, a, stage, result):
        key = idempotency_key(a.job, stage)
        name = a.job.stages[stage - 1]
        state = "done" if stage == len(a.job.stages) else "running"
        bound = (a.session.cancel_on_lost(self.store.interrupt) if self.self_fencing
                 else contextlib.nullcontext())
        try:
            with bound:
                self.store.begin()
                stale = self.store.fenced_update(a.job.id, a.token, stage, name, state, result)
                if stale is not None:
                    self.store.rollback()
                    self._emit(a, "rejected", stage, str(stale))
                    return self._finish(a, FENCED)
                applied = self.store.record_effect(key, a.job.id, stage, a.token, self.worker,
                                                   result)
                self.store.commit()
        except StoreError as err:
            self.store.rollback()
            if err.interrupted and self.self_fencing and a.session.lost():
                self._emit(a, "session_lost", stage, f"during the commit: {err}")
                return self._finish(a, SESSION_LOST)
            self._emit(a, "error", stage, str(err))
            return self._finish(a, ERROR)
        self._emit(a, "commit" if applied else "already_applied", stage, key)
        return None

    def _complete(self, a):
        stop = a.session if self.self_fencing else None
        try:
            released = self.cluster.release(self.prefix, a.job.id, a.token, True, stop).released
            unknown = None
        except grpc.RpcError as err:
            if err.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise
            released, unknown = False, err
        if released:
            return True
        # Not released, or not known: where is the job now?
        job = self.cluster.status(self.prefix, a.job.id, stop)
        if unknown is not None:
            if job.completed and not job.exists and job.fencing_token == a.token:
                return True
            raise unknown
        return not job.exists  # a later holder completed it: done all the same

    def _finish(self, a, outcome):
        if a.held and outcome != COMPLETED:
            try:  # best effort: the lease's expiry frees the lock otherwise
                self.cluster.release(self.prefix, a.job.id, a.token, False, None)
            except grpc.RpcError:
                pass
        return outcome

    def _usable(self, a, new_work):
        if not self.self_fencing:
            return True
        return a.session.can_take_new_work() if new_work else not a.session.lost()

    def _emit(self, a, kind, stage, detail=""):
        name = a.job.stages[stage - 1] if 1 <= stage <= len(a.job.stages) else "-"
        detail = detail.replace("\n", " ") or "-"
        self.log(f"event={kind} job={a.job.id} stage={stage} name={name} token={a.token} "
                 f"epoch={a.epoch} worker={self.worker} detail={detail}")


class _Attempt:
    def __init__(self, job, session):
        self.job = job
        self.session = session
        self.token = 0
        self.epoch = 0
        self.held = False


def _describe(err):
    if isinstance(err, grpc.RpcError):
        return f"{err.code().name}: {err.details()}"
    return str(err)
