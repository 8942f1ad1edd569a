#!/usr/bin/env bash
# The jobs demo (the README's first command, through scripts/demo.sh): fenced workers on a local
# 3-node Epoch cluster.
#
#   deploy/jobs-demo.sh [--postgres]
#
# 1. starts the local cluster (deploy/local-cluster.sh) and a database: SQLite by default, or with
#    --postgres a private PostgreSQL (initdb in the run dir, unix socket only, as the tests do);
# 2. enqueues multi-stage jobs (a few of them poison: their last stage always fails) with etcdctl;
# 3. runs three epoch_fenced_worker processes and two Python workers (client/python/) with the
#    poison pill on (a worker whose session is lost kills itself; the demo restarts it, as a
#    supervisor would), and one C++ worker without self-fencing;
# 4. SIGKILLs the cluster leader once and restarts it; SIGSTOPs the no-self-fencing worker while
#    it holds a job, until another worker has taken that job over, then SIGCONTs it;
# 5. prints the summary of deploy/jobs_check.py, computed independently from the database, the
#    worker logs and the keys in Epoch. Exit status 1 if violations > 0 or a job is lost.
#
# Every process it starts is stopped by PID on exit. Files stay in the run directory (printed)
# when the demo fails or EPOCH_DEMO_KEEP=1; otherwise it is removed.
# Environment: EPOCHD, EPOCH_FENCED_WORKER (binaries; default build/release), EPOCH_PY_STUBS (the
# generated Python stubs, default build/release/client/python/gen), EPOCH_WORKER_PYTHON
# (default /usr/bin/python3, which has Debian's python3-grpcio), EPOCH_BASE_PORT.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
export EPOCHD=${EPOCHD:-$root/build/release/server/epochd}
worker_bin=${EPOCH_FENCED_WORKER:-$root/build/release/client/examples/epoch_fenced_worker}
py_stubs=${EPOCH_PY_STUBS:-$root/build/release/client/python/gen}
python=${EPOCH_WORKER_PYTHON:-/usr/bin/python3}
use_pg=0
case "${1:-}" in
  --postgres) use_pg=1 ;;
  "") ;;
  *) echo "usage: $0 [--postgres]" >&2; exit 2 ;;
esac
for exe in "$EPOCHD" "$worker_bin" "$python"; do
  [ -x "$exe" ] || { echo "missing $exe: build it first (scripts/demo.sh does)" >&2; exit 1; }
done
[ -f "$py_stubs/epoch/v1/epoch_pb2_grpc.py" ] ||
  { echo "missing Python stubs in $py_stubs: build target epoch_python_stubs" >&2; exit 1; }

run=$(mktemp -d /tmp/epoch-jobs-demo.XXXXXX)
chmod 755 "$run"
export EPOCH_CLUSTER_DIR=$run/cluster
export ETCDCTL_API=3
cluster="$root/deploy/local-cluster.sh"
prefix="epoch-jobs/"
n_jobs=20
n_poison=2
stages="reserve,charge,ship,notify"
n_stages=4
worker_pids=()
pg_pid=""
status=1

cleanup() {
  local pid
  for pid in "${worker_pids[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true  # a supervisor passes it on to its worker
  done
  for pid in "${worker_pids[@]}"; do
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  "$cluster" stop || true
  if [ -n "$pg_pid" ]; then
    kill -INT "$pg_pid" 2>/dev/null || true  # fast shutdown
    for _ in $(seq 100); do kill -0 "$pg_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pg_pid" 2>/dev/null || true
  fi
  if [ "$status" -ne 0 ] || [ "${EPOCH_DEMO_KEEP:-0}" = 1 ]; then
    echo "run directory kept: $run (worker logs w*.log, cluster logs cluster/n*.log)"
  else
    rm -rf "$run"
  fi
}
trap cleanup EXIT

# poll SECONDS DESCRIPTION COMMAND...: runs COMMAND every 0.1 s until it succeeds or the time is up.
poll() {
  local limit=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + limit))
  until "$@"; do
    if ((SECONDS >= deadline)); then
      echo "timed out after ${limit} s waiting for: $what" >&2
      return 1
    fi
    sleep 0.1
  done
}

start_postgres() {
  local bin pg=$run/pg
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -x "$bin/initdb" ] || { echo "PostgreSQL server binaries not found (scripts/deps.sh installs them)" >&2; exit 1; }
  mkdir -p "$pg"
  local as=()
  # setpriv execs (no intermediate process), so $! below is the postgres PID itself.
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres:postgres "$pg"
    as=(setpriv --reuid postgres --regid postgres --init-groups)
  fi
  "${as[@]}" "$bin/initdb" -D "$pg/data" -U postgres --auth=trust --no-sync -E UTF8 >"$pg/initdb.log" 2>&1 ||
    { cat "$pg/initdb.log" >&2; exit 1; }
  "${as[@]}" "$bin/postgres" -D "$pg/data" -k "$pg" -p 5432 -c listen_addresses= -c fsync=off \
    -c max_connections=40 >"$pg/server.log" 2>&1 &
  pg_pid=$!
  conninfo="host=$pg port=5432 user=postgres dbname=postgres connect_timeout=5"
  poll 30 "PostgreSQL to accept connections" psql "$conninfo" -qAtc "select 1" >/dev/null 2>&1
  echo "PostgreSQL (pid $pg_pid) on unix socket $pg/.s.PGSQL.5432"
}

worker_argv() {  # lang name seed [extra flags...]: the command line of one worker
  local lang=$1 name=$2 seed=$3
  shift 3
  if [ "$lang" = python ]; then
    argv=(env "PYTHONPATH=$py_stubs:$root/client/python" "$python"
      "$root/client/python/fenced_worker.py" --sqlite "$run/jobs.db")
  else
    argv=("$worker_bin" "${db_flags[@]}")
  fi
  argv+=(--endpoints "$endpoints" --prefix "$prefix" --worker "$name" --seed "$seed"
    --ttl-s 2 --stage-ms 250 --max-epoch-changes 4 --max-runtime-s 120 "$@")
}

worker() {  # lang name seed [extra flags...]: one worker process, not restarted
  local argv
  worker_argv "$@"
  "${argv[@]}" >"$run/$2.log" 2>&1 &
  worker_pids+=($!)
  echo "worker $2 ($1) started (pid $!)${4:+ with ${*:4}}"
}

supervised() {  # lang name seed [extra flags...]: restarted when its poison pill killed it
  local argv
  worker_argv "$@"
  (
    child=""
    trap '[ -n "$child" ] && kill -KILL "$child" 2>/dev/null; exit 1' TERM
    while :; do
      "${argv[@]}" >>"$run/$2.log" 2>&1 &
      child=$!
      rc=0
      wait "$child" || rc=$?
      ((rc == 128 + 9)) || exit "$rc"  # anything but SIGKILL ends the supervision
      echo "event=restart worker=$2 detail=killed by its poison pill; restarted" >>"$run/$2.log"
    done
  ) 2>/dev/null &  # the worker writes to its log; this hides bash's "Killed" job notices
  worker_pids+=($!)
  echo "worker $2 ($1) started under a supervisor (pid $!), poison pill on"
}

logged() { grep -q "$2" "$run/$1.log" 2>/dev/null; }

echo "== start the local 3-node cluster"
endpoints=$("$cluster" endpoints)
if etcdctl --endpoints="$endpoints" --dial-timeout=1s endpoint health >/dev/null 2>&1; then
  echo "a cluster already answers on $endpoints: stop it or set EPOCH_BASE_PORT" >&2
  exit 1
fi
"$cluster" start

echo; echo "== the database"
if ((use_pg)); then
  start_postgres
  db_flags=(--postgres "$conninfo")
else
  db_flags=(--sqlite "$run/jobs.db")
  echo "SQLite file $run/jobs.db"
fi
"$worker_bin" "${db_flags[@]}" --worker init --init-db >"$run/init.log" 2>&1 || { cat "$run/init.log" >&2; exit 1; }

echo; echo "== enqueue $n_jobs jobs ($n_poison poison) with stages $stages under ${prefix}jobs/"
: >"$run/jobs.txt"
for ((j = 1; j <= n_jobs; j++)); do
  id=$(printf 'job%02d' "$j")
  poison=0; ((j <= n_poison)) && poison=1
  body="amount=$((j * 10))"; ((poison)) && body+=$'\npoison'
  etcdctl --endpoints="$endpoints" put "${prefix}jobs/$id" "stages=$stages"$'\n'"$body" >/dev/null
  echo "$id $poison $n_stages" >>"$run/jobs.txt"
done

echo; echo "== run the workers (TTL 2 s, 250 ms per stage, dead-letter after 4 epoch changes)"
supervised cpp w1 11
supervised cpp w2 22
supervised cpp w3 33
logs=("$run"/w1.log "$run"/w2.log "$run"/w3.log "$run"/w4.log)
if ((use_pg)); then
  echo "(the Python workers speak SQLite only: not run with --postgres)"
else
  supervised python py1 55
  supervised python py2 66
  logs+=("$run"/py1.log "$run"/py2.log)
fi
worker cpp w4 44 --self-fencing false
pause_pid=${worker_pids[-1]}

echo; echo "== SIGKILL the leader once, then restart it"
poll 20 "a first stage commit" bash -c "cat '$run'/w*.log '$run'/py*.log | grep -q event=commit"
leader=0
find_leader() { leader=$("$cluster" leader) && ((leader > 0)); }
poll 20 "a leader" find_leader
"$cluster" kill "$leader"
t0=$(date +%s%N)
echo "killed leader n$leader"
commits_before=$(cat "$run"/w*.log "$run"/py*.log | grep -c "event=commit" || true)
poll 30 "a stage commit after the leader kill" \
  bash -c "(( \$(cat '$run'/w*.log '$run'/py*.log | grep -c 'event=commit') > $commits_before ))"
echo "workers committed again $((($(date +%s%N) - t0) / 1000000)) ms after the kill"
"$cluster" start-node "$leader"
echo "n$leader restarted and healthy"

echo; echo "== SIGSTOP w4 (no self-fencing) while it holds a job, past its 2 s TTL"
held=""
# The job w4 works on with a stage still to run: its last event is the acquisition or the commit
# of a stage before the last (after the last stage it only releases the job, and a pause there
# leaves no stale commit to reject).
find_held() {
  held=$(grep -E "event=(acquired|commit|completed|rejected|session_lost|stage_failed|error) " \
    "$run/w4.log" | tail -1 |
    sed -n -e 's/^event=acquired job=\([^ ]*\).*/\1/p' \
      -e "s/^event=commit job=\([^ ]*\) stage=\([1-$((n_stages - 1))]\) .*/\1/p")
  [ -n "$held" ]
}
for ((attempt = 1; attempt <= 5; attempt++)); do
  poll 30 "w4 in the middle of a job" find_held
  kill -STOP "$pause_pid"
  find_held && break  # it may have moved on between the check and the stop
  kill -CONT "$pause_pid"
done
echo "w4 stopped while holding $held"
taken_over() {
  grep -qs "event=\(commit\|already_applied\|completed\) job=$held .*epoch=[2-9]" \
    "$run"/w[123].log "$run"/py*.log
}
poll 30 "another worker to take $held over and commit" taken_over || true
echo "another worker took $held over: $(grep -hs "event=acquired job=$held .*epoch=[2-9]" \
  "$run"/w[123].log "$run"/py*.log | head -1)"
kill -CONT "$pause_pid"
echo "w4 continued"

echo; echo "== wait for the workers to drain the queue"
for pid in "${worker_pids[@]}"; do
  deadline=$((SECONDS + 90))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
done
for pid in "${worker_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
worker_pids=()
grep -h "event=\(rejected\|poison_pill\)" "$run"/w*.log "$run"/py*.log | sed 's/^/  /' || true

echo
etcdctl --endpoints="$endpoints" get "$prefix" --prefix -w json >"$run/kv.json"
check_db=(--sqlite "$run/jobs.db")
((use_pg)) && check_db=(--postgres "$conninfo")
if python3 "$root/deploy/jobs_check.py" --jobs "$run/jobs.txt" --kv "$run/kv.json" \
  --prefix "$prefix" "${check_db[@]}" "${logs[@]}"; then
  status=0
  echo "OK: no violations, no job lost"
else
  echo "FAILED: see the violations above" >&2
fi
exit "$status"
