"""The SQLite side of fencing: the job_states guard and the job_effects log, the same schema and
statements as the C++ adapters (client/include/epoch/client/sqlite_fencing.h, job_effects.cc),
so C++ and Python workers can share one database file.

Every stage commit is one transaction: BEGIN IMMEDIATE; the guarded UPDATE first (compare-and-set
on (last_fencing_token, stage)); then the stage's effect under its idempotency key; COMMIT. Zero
rows updated means a newer holder (or this holder's own later stage) is in the row: roll back.

Threading: one thread uses a FencedStore; interrupt() may be called from any thread (it is what
the session calls when the lease is lost, to cancel a statement in flight)."""
import dataclasses
import sqlite3

CREATE_JOB_STATES = (
    "CREATE TABLE IF NOT EXISTS job_states ("
    " id TEXT PRIMARY KEY NOT NULL,"
    " stage INTEGER NOT NULL DEFAULT 0,"
    " stage_name TEXT NOT NULL DEFAULT '',"
    " last_fencing_token INTEGER NOT NULL DEFAULT 0,"
    " state TEXT NOT NULL DEFAULT 'pending',"
    " result BLOB,"
    " updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))")
CREATE_JOB_EFFECTS = (
    "CREATE TABLE IF NOT EXISTS job_effects ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " idempotency_key TEXT NOT NULL, job_id TEXT NOT NULL, stage INTEGER NOT NULL,"
    " token INTEGER NOT NULL, worker TEXT NOT NULL, result BLOB);"
    "CREATE INDEX IF NOT EXISTS job_effects_key ON job_effects(idempotency_key);")
# ?1 token, ?2 stage, ?3 stage_name, ?4 state, ?5 result, ?6 job id.
GUARD = (
    "UPDATE job_states SET last_fencing_token = ?1, stage = ?2, stage_name = ?3, state = ?4,"
    " result = ?5, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
    " WHERE id = ?6"
    " AND (last_fencing_token < ?1 OR (last_fencing_token = ?1 AND stage < ?2))")


class StoreError(Exception):
    """The database failed (not a stale token). `busy`: locked, try again later;
    `interrupted`: a statement was cancelled by interrupt()."""

    def __init__(self, what, err):
        super().__init__(f"sqlite {what}: {err}")
        self.interrupted = isinstance(err, sqlite3.OperationalError) and "interrupted" in str(err)
        self.busy = isinstance(err, sqlite3.OperationalError) and "locked" in str(err)


@dataclasses.dataclass(frozen=True)
class Stale:
    """The guard refused the write: the row holds (token, stage) >= the attempted one."""
    job_id: str
    attempted_token: int
    attempted_stage: int
    current_token: int
    current_stage: int

    def __str__(self):
        why = ("a newer holder committed" if self.current_token > self.attempted_token
               else "stage not after the committed one")
        return (f"stale fencing token for job '{self.job_id}': attempted (token "
                f"{self.attempted_token}, stage {self.attempted_stage}), row holds (token "
                f"{self.current_token}, stage {self.current_stage}): {why}")


class FencedStore:
    def __init__(self, path, busy_timeout_s=10.0):
        # isolation_level=None: no implicit transactions; BEGIN IMMEDIATE is explicit.
        self._db = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
        # WAL: readers (the demo's checker) never block the workers' writers.
        self._db.execute("PRAGMA journal_mode=WAL")

    def close(self):
        self._db.close()

    def interrupt(self):
        """Cancels the statement in flight (sqlite3_interrupt); it fails as `interrupted`."""
        self._db.interrupt()

    def _run(self, what, sql, params=()):
        try:
            return self._db.execute(sql, params)
        except sqlite3.Error as err:
            raise StoreError(what, err) from err

    def create_tables(self):
        self._run("create job_states", CREATE_JOB_STATES)
        try:
            self._db.executescript(CREATE_JOB_EFFECTS)
        except sqlite3.Error as err:
            raise StoreError("create job_effects", err) from err

    def register_job(self, job_id):
        self._run("register job",
                  "INSERT INTO job_states (id) VALUES (?1) ON CONFLICT (id) DO NOTHING", (job_id,))

    def read_job(self, job_id):
        """(stage, last_fencing_token) of the job's row, or None when it is not registered."""
        row = self._run("read job", "SELECT stage, last_fencing_token FROM job_states WHERE id = ?1",
                        (job_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    def begin(self):
        self._run("begin", "BEGIN IMMEDIATE")

    def commit(self):
        self._run("commit", "COMMIT")

    def rollback(self):
        if self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # an interrupted statement may have rolled the transaction back already

    def fenced_update(self, job_id, token, stage, stage_name, state, result):
        """The guard, first statement of the open transaction. None: applied; Stale: refused."""
        if not self._db.in_transaction:
            raise StoreError("guarded update", "must run inside the caller's transaction")
        cur = self._run("guarded update", GUARD, (token, stage, stage_name, state, result, job_id))
        if cur.rowcount == 1:
            return None
        row = self.read_job(job_id)
        if row is None:
            raise StoreError("guarded update", f"job '{job_id}' is not registered in job_states")
        return Stale(job_id, token, stage, row[1], row[0])

    def record_effect(self, key, job_id, stage, token, worker, result):
        """The stage's business write under its idempotency key. False: already recorded."""
        if not self._db.in_transaction:
            raise StoreError("record effect", "must run inside a transaction")
        found = self._run("find effect",
                          "SELECT 1 FROM job_effects WHERE idempotency_key = ?1 LIMIT 1", (key,))
        if found.fetchone() is not None:
            return False
        self._run("insert effect",
                  "INSERT INTO job_effects (idempotency_key, job_id, stage, token, worker, result)"
                  " VALUES (?1, ?2, ?3, ?4, ?5, ?6)", (key, job_id, stage, token, worker, result))
        return True
