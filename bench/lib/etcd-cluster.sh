#!/usr/bin/env bash
# A local etcd cluster on loopback for the benchmarks: the etcd side of deploy/local-cluster.sh,
# with the same commands. Used by bench/kv/compare.sh and bench/scale/.
#
#   bench/lib/etcd-cluster.sh start          start every member, wait until healthy (30 s limit)
#   bench/lib/etcd-cluster.sh stop           SIGTERM every member by its recorded PID, wait for exit
#   bench/lib/etcd-cluster.sh start-node N   start member eN again (data dir kept); does not wait
#   bench/lib/etcd-cluster.sh stop-node N    SIGTERM member eN, wait until it exited (5 s limit)
#   bench/lib/etcd-cluster.sh endpoints      print the client endpoints (host:port,...)
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

start_node() {
  local i=$1 peers="" j cp pp
  for ((j = 1; j <= nodes; j++)); do peers+="${peers:+,}e$j=http://127.0.0.1:$(peer_port "$j")"; done
  cp=$(client_port "$i") pp=$(peer_port "$i")
  mkdir -p "$dir"
  etcd --name "e$i" --data-dir "$dir/e$i" "${extra_flags[@]}" \
    --listen-client-urls "$scheme://127.0.0.1:$cp" --advertise-client-urls "$scheme://127.0.0.1:$cp" \
    --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
    --initial-cluster "$peers" --initial-cluster-token epoch-bench --initial-cluster-state new \
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

cmd_stop() {
  local i
  for ((i = 1; i <= nodes; i++)); do stop_node "$i"; done
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
  *) echo "usage: $0 start|stop|start-node N|stop-node N|endpoints" >&2; exit 2 ;;
esac
