#!/usr/bin/env python3
"""Independent checker of the jobs demo (deploy/jobs-demo.sh).

It shares no code with the worker: it reads what the database holds (job_states, job_effects),
what the workers logged (one `event=... key=value` line per event) and what Epoch holds (an
`etcdctl get --prefix -w json` dump), and prints the summary:

  jobs enqueued / completed / dead-lettered / lost, stage commits per worker (C++ and Python
  workers alike, from the database), stale commits rejected, poison pills, epoch changes,
  violations: two commits of one job stage, or a commit with an older token after a newer one
  (in the database's commit order), or a worker log and the database disagreeing on a commit.

Exit status 1 when violations > 0 or a job is lost (neither completed nor dead-lettered).
"""
import argparse
import base64
import collections
import json
import re
import sqlite3
import subprocess
import sys

LINE = re.compile(r"(\w+)=(\S*)")


def parse_logs(paths):
    events = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.startswith("event="):
                    continue
                fields = dict(LINE.findall(line.split(" detail=", 1)[0]))
                fields["log"] = path
                events.append(fields)
    return events


def db_rows(args, sql):
    if args.postgres:
        out = subprocess.run(["psql", args.postgres, "-At", "-F", "\t", "-c", sql],
                             check=True, capture_output=True, text=True).stdout
        return [line.split("\t") for line in out.splitlines() if line]
    con = sqlite3.connect(f"file:{args.sqlite}?mode=ro", uri=True)
    try:
        return [[str(c) for c in row] for row in con.execute(sql)]
    finally:
        con.close()


def kv_dump(path, prefix):
    with open(path, encoding="utf-8") as f:
        text = f.read().strip()
    kvs = json.loads(text).get("kvs", []) if text else []
    out = {}
    for kv in kvs:
        key = base64.b64decode(kv["key"]).decode()
        value = base64.b64decode(kv.get("value", "")).decode(errors="replace")
        out[key[len(prefix):] if key.startswith(prefix) else key] = value
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", required=True, help="file: '<id> <poison 0|1> <stages>' per line")
    p.add_argument("--kv", required=True, help="etcdctl get <prefix> --prefix -w json output")
    p.add_argument("--prefix", required=True)
    p.add_argument("--sqlite")
    p.add_argument("--postgres")
    p.add_argument("logs", nargs="+")
    args = p.parse_args()

    jobs = {}
    with open(args.jobs, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                job_id, poison, stages = line.split()
                jobs[job_id] = (poison == "1", int(stages))
    kv = kv_dump(args.kv, args.prefix)
    events = parse_logs(args.logs)
    effects = db_rows(args, "SELECT seq, job_id, stage, token, worker FROM job_effects ORDER BY seq")
    states = {r[0]: r for r in db_rows(args, "SELECT id, stage, state, last_fencing_token "
                                             "FROM job_states")}

    violations = []
    # 1. Two commits of one job stage (database).
    per_stage = collections.Counter((e[1], int(e[2])) for e in effects)
    for (job, stage), n in sorted(per_stage.items()):
        if n > 1:
            violations.append(f"job {job} stage {stage} committed {n} times in the database")
    # 2. A commit with an older token after a newer one (database commit order).
    newest = {}
    for seq, job, stage, token, worker in effects:
        token = int(token)
        if token < newest.get(job, 0):
            violations.append(f"job {job} stage {stage}: token {token} by {worker} committed "
                              f"(seq {seq}) after token {newest[job]}")
        newest[job] = max(newest.get(job, 0), token)
    # 3. Worker logs against the database: every logged commit is in the database, once.
    logged = collections.Counter((e["job"], int(e["stage"]), int(e["token"]))
                                 for e in events if e.get("event") == "commit")
    in_db = collections.Counter((e[1], int(e[2]), int(e[3])) for e in effects)
    for key, n in sorted(logged.items()):
        if n > 1:
            violations.append(f"commit {key} logged {n} times")
        if key not in in_db:
            violations.append(f"commit {key} logged but not in the database")
    for key in sorted(in_db):
        if key not in logged:
            violations.append(f"commit {key} in the database but logged by no worker")

    done = {k[len("done/"):] for k in kv if k.startswith("done/")}
    dlq = {k[len("dlq/"):] for k in kv if k.startswith("dlq/")}
    queued = {k[len("jobs/"):] for k in kv if k.startswith("jobs/")}
    completed = []
    for job, (poison, stages) in jobs.items():
        row = states.get(job)
        if job in done and row and row[2] == "done" and int(row[1]) == stages:
            completed.append(job)
        elif job in done:
            violations.append(f"job {job} is marked done in Epoch but its row is {row}")
    lost = sorted(j for j in jobs if j not in completed and j not in dlq)
    epoch_changes = 0
    for key, value in kv.items():
        if key.startswith("epoch/"):
            m = re.match(r"epoch=(\d+) token=(\d+)", value)
            if m:
                epoch_changes += max(0, int(m.group(1)) - 1)
    rejected = sum(1 for e in events if e.get("event") == "rejected")
    unexpected_dlq = sorted(j for j in dlq if j in jobs and not jobs[j][0])

    print("== summary")
    print(f"jobs enqueued:            {len(jobs)} ({sum(1 for p, _ in jobs.values() if p)} poison)")
    print(f"jobs completed:           {len(completed)}")
    print(f"dead-lettered jobs:       {len(dlq)}"
          + (f" (not poison: {', '.join(unexpected_dlq)})" if unexpected_dlq else ""))
    print(f"jobs lost:                {len(lost)}" + (f" ({', '.join(lost)})" if lost else ""))
    print(f"still queued:             {len(queued)}")
    print(f"stage commits:            {len(effects)}")
    by_worker = collections.Counter(e[4] for e in effects)
    print("  by worker:              "
          + (" ".join(f"{w}={n}" for w, n in sorted(by_worker.items())) or "-"))
    print(f"stale commits rejected:   {rejected}")
    print(f"already-applied stages:   "
          f"{sum(1 for e in events if e.get('event') == 'already_applied')}")
    print(f"poison pills (restarts):  "
          f"{sum(1 for e in events if e.get('event') == 'poison_pill')}")
    print(f"epoch changes:            {epoch_changes}")
    print(f"violations:               {len(violations)}")
    for v in violations[:20]:
        print(f"  VIOLATION {v}")
    return 1 if violations or lost else 0


if __name__ == "__main__":
    sys.exit(main())
