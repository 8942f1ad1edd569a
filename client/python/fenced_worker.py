#!/usr/bin/python3
"""epoch_fenced_worker in Python: takes jobs from `<prefix>jobs/` through epoch.v1.Jobs and runs
each stage as a fenced SQLite transaction, with the flags, database schema and log lines of the
C++ example worker (client/examples/fenced_worker.cc), so both kinds share a queue, a database
and the demo's checker:

  event=commit job=j3 stage=2 name=charge token=41 epoch=1 worker=py1 detail=<idempotency key>

Exits 0 once the queue is empty, 1 when --max-runtime-s passes first, 2 on bad flags. Needs the
generated stubs on PYTHONPATH (CMake target epoch_python_stubs; client/python/README.md)."""
import argparse
import random
import sys
import time

try:
    import grpc
    from epoch_worker.cluster import Cancelled, Cluster
except ImportError as missing:  # no Debian python3-grpcio, or no stubs on PYTHONPATH
    sys.exit(f"fenced_worker.py: {missing}: install python3-grpcio and python3-protobuf and put "
             "<build>/client/python/gen (CMake target epoch_python_stubs) on PYTHONPATH")
from epoch_worker.jobs import Backoff, BadJob, parse_job
from epoch_worker.runner import JobRunner, StageFailed
from epoch_worker.session import LOST, Session
from epoch_worker.store import FencedStore, StoreError


def log(line):
    print(line, flush=True)


def boolean(text):
    if text.lower() in ("true", "1", "yes", "on"):
        return True
    if text.lower() in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got '{text}'")


def bounded(low, high):
    def parse(text):
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in [{low}, {high}]")
        return value
    return parse


def parse_flags(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--endpoints", default="127.0.0.1:2379", help="host:port,... of the cluster")
    p.add_argument("--prefix", default="epoch-jobs/", help="job queue prefix")
    p.add_argument("--worker", default="py1", help="this worker's name in logs and database")
    p.add_argument("--sqlite", default="jobs.db", help="SQLite database file")
    p.add_argument("--ttl-s", type=bounded(1, 60), default=2, help="session lease TTL, seconds")
    p.add_argument("--stage-ms", type=bounded(0, 60_000), default=200,
                   help="simulated work per stage")
    p.add_argument("--max-epoch-changes", type=bounded(1, 1000), default=3,
                   help="dead-letter a job after this many changes of hands")
    p.add_argument("--self-fencing", type=boolean, default=True,
                   help="check the session before each stage and commit; false: rely on the "
                        "database guard alone (and no poison pill)")
    p.add_argument("--poison-pill", type=boolean, default=True,
                   help="SIGKILL this process when its session is lost (70%% of the TTL)")
    p.add_argument("--max-runtime-s", type=bounded(1, 3600), default=120,
                   help="give up after this long")
    p.add_argument("--seed", type=int, default=1, help="seeds the job order and backoff jitter")
    p.add_argument("--init-db", action="store_true", help="create the tables and exit")
    return p.parse_args(argv)


def make_work(flags):
    """The demo's stage work: --stage-ms of waiting that a lost session cuts short; a job with a
    `poison` line fails its last stage every time."""
    def work(job, stage, stage_name, token, session):
        if session is not None and session.wait(flags.stage_ms / 1000.0):
            raise StageFailed("stage work cancelled: session lost")
        if session is None:
            time.sleep(flags.stage_ms / 1000.0)
        if job.poison and stage == len(job.stages):
            raise StageFailed(f"poison job: stage {stage_name} always fails")
        return f"{stage_name} done by {flags.worker} with token {token}".encode()
    return work


def sweep(cluster, flags, runner, session, rng):
    """One pass over the queue. False when no runnable job is queued."""
    prefix = (flags.prefix + "jobs/").encode()
    kvs = list(cluster.range_prefix(prefix, session))
    if not kvs:
        return False
    rng.shuffle(kvs)
    runnable = False
    for kv in kvs:
        if not session.can_take_new_work():
            return True
        job_id = kv.key[len(prefix):].decode(errors="replace")
        try:
            job = parse_job(job_id, kv.value)
        except BadJob as err:
            log(f"event=error job={job_id} worker={flags.worker} detail={err}")
            continue
        runnable = True
        delay = runner.delay_after(runner.run_once(job, session))
        if delay > 0:
            time.sleep(delay)
    return runnable


def run(flags):
    try:
        store = FencedStore(flags.sqlite)
        store.create_tables()
    except StoreError as err:
        log(f"event=init_db worker={flags.worker} detail={err}")
        return 1
    if flags.init_db:
        log(f"event=init_db worker={flags.worker} detail=OK")
        return 0
    cluster = Cluster([e for e in flags.endpoints.split(",") if e])
    runner = JobRunner(cluster, store, make_work(flags), prefix=flags.prefix, worker=flags.worker,
                       max_epoch_changes=flags.max_epoch_changes,
                       self_fencing=flags.self_fencing, log=log, seed=flags.seed)
    rng = random.Random(flags.seed)
    retry = Backoff(0.1, 1.0, flags.seed)
    session = None
    deadline = time.monotonic() + flags.max_runtime_s
    while time.monotonic() < deadline:
        if session is not None and session.state == LOST:
            log(f"event=session_end worker={flags.worker} lease={session.lease_id:x} "
                f"detail={session.reason()}")
            session.close()
            session = None
            time.sleep(runner.delay_after("session_lost"))
        if session is None:
            try:
                session = Session.create(
                    cluster, flags.ttl_s, name=flags.worker, log=log, seed=flags.seed,
                    poison_pill=flags.poison_pill and flags.self_fencing)
            except grpc.RpcError as err:
                log(f"event=error worker={flags.worker} detail=session: {err.code().name}")
                time.sleep(retry.next_delay())
                continue
            log(f"event=session_start worker={flags.worker} lease={session.lease_id:x} lang=python")
        try:
            more, listed = sweep(cluster, flags, runner, session, rng), True
        except grpc.RpcError:
            more, listed = True, False
        except Cancelled:  # the session was lost during the listing
            more, listed = True, False
        if listed and not more:
            log(f"event=idle worker={flags.worker} detail=no runnable job queued")
            session.close()
            return 0
        # Not empty (others hold the rest) or the listing failed: pause a little, jittered.
        time.sleep(retry.next_delay() / (4 if listed else 1))
        if listed:
            retry.reset()
    log(f"event=exit worker={flags.worker} detail=max runtime reached")
    return 1


def main(argv=None):
    try:
        flags = parse_flags(argv)
    except SystemExit as exit_:
        return 0 if exit_.code == 0 else 2
    return run(flags)


if __name__ == "__main__":
    sys.exit(main())
