#!/usr/bin/env bash
# A local etcd cluster on loopback for the benchmarks: the etcd side of deploy/local-cluster.sh,
# with the same commands. Used by bench/kv/compare.sh and bench/scale/.
#
#   bench/lib/etcd-cluster.sh start          start every member, wait until healthy (30 s limit)
#   bench/lib/etcd-cluster.sh stop           SIGTERM every member by its recorded PID, wait for exit
#   bench/lib/etcd-cluster.sh start-node N   start member eN again (data dir kept); does not wait
#   bench/lib/etcd-cluster.sh stop-node N    SIGTERM member eN, wait until it exited (5 s limit)
#   bench/lib/etcd-cluster.sh endpoints      print the client endpoints (host:port,...)
#   bench/lib/etcd-cluster.sh add-node N     add member eN (N > ETCD_NODES) at runtime: etcdctl
#                                            member add --learner, start it with
#                                            --initial-cluster-state existing, promote it once
#                                            it caught up (ETCD_PROMOTE_TIMEOUT, 600 s)
#   bench/lib/etcd-cluster.sh remove-node N  remove member eN (etcdctl member remove); it exits
#
# /usr/bin/etcd (Debian etcd-server) at its default settings: fsync on, heartbeat 100 ms,
# election 1000 ms, snapshot every 100,000 entries, request limit 1.5 MiB.
# Member eI (I = 1..n): client port BASE + 10*(I-1), peer port BASE + 1 + 10*(I-1), data dir
# $ETCD_CLUSTER_DIR/eI, log $ETCD_CLUSTER_DIR/eI.log, PID in $ETCD_CLUSTER_DIR/eI.pid.
#
# Environment:
#   ETCD_CLUSTER_DIR   (required) data dirs, logs and PID files
#   ETCD_BASE_PORT     first client port (32379)       ETCD_NODES   members (3)
#   ETCD_SCHEME        http | https for the client URLs (http)
#   ETCD_EXTRA_FLAGS   more etcd flags, split on spaces (TLS files: paths without spaces)
#   ETCD_CTL_FLAGS     etcdctl flags for the health check, split on spaces (client certificates)
set -euo pipefail

dir=${ETCD_CLUSTER_DIR:?ETCD_CLUSTER_DIR is required}
base=${ETCD_BASE_PORT:-32379}
nodes=${ETCD_NODES:-3}
scheme=${ETCD_SCHEME:-http}
read -r -a extra_flags <<<"${ETCD_EXTRA_FLAGS:-}"
read -r -a ctl_flags <<<"${ETCD_CTL_FLAGS:-}"
export ETCDCTL_API=3

client_port() { echo $((base + 10 * ($1 - 1))); }
peer_port() { echo $((base + 1 + 10 * ($1 - 1))); }

endpoints() {
  local out="" i
  for ((i = 1; i <= nodes; i++)); do out+="${out:+,}127.0.0.1:$(client_port "$i")"; done
  echo "$out"
}

# start_node I [CLUSTER]: with CLUSTER (what etcdctl member add printed), eI joins a running
# cluster (add-node).
start_node() {
  local i=$1 peers="" j cp pp state=new
  for ((j = 1; j <= nodes; j++)); do peers+="${peers:+,}e$j=http://127.0.0.1:$(peer_port "$j")"; done
  if [ -n "${2:-}" ]; then peers=$2 state=existing; fi
  cp=$(client_port "$i") pp=$(peer_port "$i")
  mkdir -p "$dir"
  etcd --name "e$i" --data-dir "$dir/e$i" "${extra_flags[@]}" \
    --listen-client-urls "$scheme://127.0.0.1:$cp" --advertise-client-urls "$scheme://127.0.0.1:$cp" \
    --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
    --initial-cluster "$peers" --initial-cluster-token epoch-bench --initial-cluster-state "$state" \
    >>"$dir/e$i.log" 2>&1 &
  echo $! >"$dir/e$i.pid"
  disown $! 2>/dev/null || true
}

# Bounded wait, so the next system does not share the CPU with a dying one.
wait_exit() {
  local pid
  for pid in "$@"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
}

stop_node() {
  local f=$dir/e$1.pid pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null || true
  wait_exit "$pid"
  rm -f "$f"
}

cmd_start() {
  command -v etcd >/dev/null || { echo "needs etcd (Debian etcd-server)" >&2; exit 2; }
  local i
  for ((i = 1; i <= nodes; i++)); do start_node "$i"; done
  local deadline=$((SECONDS + 30))
  until etcdctl "${ctl_flags[@]}" --endpoints="$(endpoints)" endpoint health >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then echo "etcd cluster not healthy in 30 s; logs in $dir" >&2; exit 1; fi
    sleep 0.2
  done
  echo "etcd cluster of $nodes started: endpoints $(endpoints); data and logs in $dir"
}

# Every member with a PID file, added ones included.
cmd_stop() {
  local f i
  for f in "$dir"/e*.pid; do
    [ -f "$f" ] || continue
    i=${f##*/e}
    stop_node "${i%.pid}"
  done
}

# The member ID of eI (hex), from member list (by its peer URL: a member that has not started
# yet has no name there).
member_id() {
  etcdctl "${ctl_flags[@]}" --endpoints="$(endpoints)" member list |
    awk -F', ' -v n="e$1" -v url="http://127.0.0.1:$(peer_port "$1")" \
      '$3 == n || $4 == url { print $1; exit }'
}

cmd_add_node() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] && (($1 > nodes && $1 <= 9)) || { echo "node number must be $((nodes + 1))..9" >&2; exit 2; }
  local i=$1 out cluster id deadline t0
  [ ! -e "$dir/e$i" ] || { echo "$dir/e$i exists: remove it first" >&2; exit 2; }
  # etcd refuses a member add ("unhealthy cluster") until every member has been connected for
  # 5 s (--strict-reconfig-check): retry; the time counts from the add it accepted.
  deadline=$((SECONDS + 30))
  until t0=$(date +%s%N) && out=$(etcdctl "${ctl_flags[@]}" --endpoints="$(endpoints)" \
    member add "e$i" --learner --peer-urls="http://127.0.0.1:$(peer_port "$i")" 2>&1); do
    if ((SECONDS > deadline)); then echo "member add e$i: $out" >&2; exit 1; fi
    sleep 0.2
  done
  echo "$out"
  cluster=$(sed -n 's/^ETCD_INITIAL_CLUSTER="\(.*\)"$/\1/p' <<<"$out")
  start_node "$i" "$cluster"
  id=$(member_id "$i")
  # A learner is promoted once it has caught up with the leader's log.
  deadline=$((SECONDS + ${ETCD_PROMOTE_TIMEOUT:-600}))
  until etcdctl "${ctl_flags[@]}" --endpoints="$(endpoints)" member promote "$id" >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then
      echo "e$i was not promoted within ${ETCD_PROMOTE_TIMEOUT:-600} s; log: $dir/e$i.log" >&2
      exit 1
    fi
    sleep 0.2
  done
  echo "e$i added and promoted to voter in $((($(date +%s%N) - t0) / 1000000)) ms"
}

cmd_remove_node() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] || { echo "node number required" >&2; exit 2; }
  local id
  id=$(member_id "$1")
  [ -n "$id" ] || { echo "e$1 is not in member list" >&2; exit 1; }
  etcdctl "${ctl_flags[@]}" --endpoints="$(endpoints)" member remove "$id"
  # The removed member stops by itself once it applied its removal; SIGTERM if it has not.
  stop_node "$1"
}

node_arg() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= nodes)) || { echo "node must be 1..$nodes" >&2; exit 2; }
  echo "$1"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  start-node) start_node "$(node_arg "${2:-}")" ;;
  stop-node) stop_node "$(node_arg "${2:-}")" ;;
  endpoints) endpoints ;;
  add-node) cmd_add_node "${2:-}" ;;
  remove-node) cmd_remove_node "${2:-}" ;;
  *) echo "usage: $0 start|stop|start-node N|stop-node N|add-node N|remove-node N|endpoints" >&2; exit 2 ;;
esac
