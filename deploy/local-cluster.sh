#!/usr/bin/env bash
# A local Epoch cluster on loopback: 3 (or EPOCH_NODES=5) epochd processes.
#
#   deploy/local-cluster.sh start    start the cluster in $EPOCH_CLUSTER_DIR (default /tmp/epoch-local)
#   deploy/local-cluster.sh stop     stop it (by the PIDs it recorded)
#   deploy/local-cluster.sh status   etcdctl endpoint status for every member
#   deploy/local-cluster.sh demo     start, show it working (writes, reads, a leader kill), stop
#   deploy/local-cluster.sh leader   print the number of the current leader (1..n; 0 if none)
#   deploy/local-cluster.sh kill N   SIGKILL node N (its recorded PID)
#   deploy/local-cluster.sh start-node N   start node N again (data dir kept), wait until healthy
#   deploy/local-cluster.sh endpoints      print the client endpoints (host:port,...)
#   deploy/local-cluster.sh add-node N     add member nN at runtime (etcdctl member add --learner,
#                                          start it with --initial-cluster-state existing, promote
#                                          it once it caught up)
#   deploy/local-cluster.sh remove-node N  remove member nN (etcdctl member remove); it exits
#   deploy/local-cluster.sh replace-node N SIGKILL nN, wipe its data directory, remove it, and add
#                                          a fresh nN in its place (add-node); prints how long
#                                          the replacement took from member add to promoted voter
#   deploy/local-cluster.sh --tls certs    only make the TLS certificates (below)
#
#   --tls before the command (deploy/local-cluster.sh --tls start): client TLS and peer TLS, both
#   with mutual authentication. A CA, the members' client-port certificate, a client certificate
#   and one peer certificate per member (CN and SAN DNS = its name, n1..nN) are made with the
#   openssl CLI in $EPOCH_CLUSTER_DIR/certs; the members serve https:// with --cert-file,
#   --key-file, --trusted-ca-file and --client-cert-auth, and their peer links with
#   --peer-cert-file, --peer-key-file, --peer-trusted-ca-file and --peer-client-cert-auth (a peer
#   certificate must name its member). The cluster directory remembers TLS, so
#   later commands (status, stop, ...) need no --tls. Connect with
#   etcdctl --cacert=DIR/certs/ca.pem --cert=DIR/certs/client.pem --key=DIR/certs/client.key
#
# The jobs demo (the README's first command) is deploy/jobs-demo.sh; it drives this script.
#
# Ports: client 2379 + 10*i, peer 2380 + 10*i, metrics 2381 + 10*i (i = 0..n-1); override the base
# with EPOCH_BASE_PORT. Logs: $EPOCH_CLUSTER_DIR/nI.log.
set -euo pipefail

tls=0
if [ "${1:-}" = "--tls" ]; then tls=1; shift; fi

root=$(cd "$(dirname "$0")/.." && pwd)
epochd=${EPOCHD:-$root/build/release/server/epochd}
dir=${EPOCH_CLUSTER_DIR:-/tmp/epoch-local}
nodes=${EPOCH_NODES:-3}
base=${EPOCH_BASE_PORT:-2379}
export ETCDCTL_API=3
certs=$dir/certs
[ -f "$dir/tls" ] && tls=1
scheme() { if ((tls)); then echo https; else echo http; fi; }

# etcdctl with the client certificate when the cluster serves TLS.
ctl() {
  if ((tls)); then
    etcdctl --cacert="$certs/ca.pem" --cert="$certs/client.pem" --key="$certs/client.key" "$@"
  else
    etcdctl "$@"
  fi
}

# The CA (EC P-256, valid 1 year), a certificate for the members (127.0.0.1, localhost; server
# and client use: members call each other's client ports) and one for clients (CN root).
make_certs() {
  [ -f "$certs/client.pem" ] && [ -f "$certs/peer-n$nodes.pem" ] && return
  mkdir -p "$certs"
  chmod 700 "$certs"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 365 \
    -keyout "$certs/ca.key" -out "$certs/ca.pem" -subj "/CN=epoch-local-ca" 2>/dev/null
  printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" \
    "extendedKeyUsage=serverAuth,clientAuth" "basicConstraints=CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" >"$certs/leaf.ext"
  local name serial=1
  for name in member client; do
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout "$certs/$name.key" -out "$certs/$name.csr" \
      -subj "/CN=$([ "$name" = client ] && echo root || echo epoch-member)" 2>/dev/null
    openssl x509 -req -in "$certs/$name.csr" -CA "$certs/ca.pem" -CAkey "$certs/ca.key" \
      -set_serial $((serial++)) -days 365 -extfile "$certs/leaf.ext" -out "$certs/$name.pem" \
      2>/dev/null
    rm -f "$certs/$name.csr"
  done
  local i
  for ((i = 1; i <= nodes; i++)); do make_peer_cert "$i"; done
}

# The peer certificate of member nI: it names its member, as epochd requires of a peer's
# certificate.
make_peer_cert() {
  local i=$1
  [ -f "$certs/peer-n$i.pem" ] && return
  printf '%s\n' "subjectAltName=DNS:n$i,IP:127.0.0.1" "extendedKeyUsage=serverAuth,clientAuth" \
    "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
    >"$certs/peer.ext"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$certs/peer-n$i.key" -out "$certs/peer-n$i.csr" -subj "/CN=n$i" 2>/dev/null
  openssl x509 -req -in "$certs/peer-n$i.csr" -CA "$certs/ca.pem" -CAkey "$certs/ca.key" \
    -set_serial "$((100 + i))" -days 365 -extfile "$certs/peer.ext" -out "$certs/peer-n$i.pem" \
    2>/dev/null
  rm -f "$certs/peer-n$i.csr"
}


client_port() { echo $((base + 10 * $1)); }
peer_port() { echo $((base + 1 + 10 * $1)); }
metrics_port() { echo $((base + 2 + 10 * $1)); }

# The members, as node indices (0 = n1): 0..nodes-1 until a member is added or removed, then
# what $dir/members records.
members() {
  if [ -f "$dir/members" ]; then cat "$dir/members"; else seq 0 $((nodes - 1)); fi
}
set_members() { printf '%s\n' "$@" | sort -n | uniq >"$dir/members.tmp" && mv "$dir/members.tmp" "$dir/members"; }

endpoints() {
  local out="" i
  for i in $(members); do out+="${out:+,}127.0.0.1:$(client_port "$i")"; done
  echo "$out"
}

# etcd's flags, as an etcd deployment would pass them: members learn each other's client URLs
# from what each advertises (server/README.md "epochd flags").
start_node() {
  local i=$1 peers="" j client peer tls_flags=() join_flags=()
  if ((tls)); then
    make_peer_cert $((i + 1))
    tls_flags=(--cert-file "$certs/member.pem" --key-file "$certs/member.key"
      --trusted-ca-file "$certs/ca.pem" --client-cert-auth
      --peer-cert-file "$certs/peer-n$((i + 1)).pem" --peer-key-file "$certs/peer-n$((i + 1)).key"
      --peer-trusted-ca-file "$certs/ca.pem" --peer-client-cert-auth)
  fi
  for j in $(members); do
    peers+="${peers:+,}n$((j + 1))=http://127.0.0.1:$(peer_port "$j")"
  done
  # A member added at runtime: the cluster etcdctl member add printed (add-node).
  if [ -n "${2:-}" ]; then
    peers=$2
    join_flags=(--initial-cluster-state existing)
  fi
  client="$(scheme)://127.0.0.1:$(client_port "$i")"
  peer="http://127.0.0.1:$(peer_port "$i")"
  "$epochd" --name "n$((i + 1))" --data-dir "$dir/n$((i + 1))" "${tls_flags[@]}" \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --listen-metrics-urls "127.0.0.1:$(metrics_port "$i")" \
    --initial-cluster "$peers" "${join_flags[@]}" \
    >>"$dir/n$((i + 1)).log" 2>&1 &
  echo $! >"$dir/n$((i + 1)).pid"
  disown $! 2>/dev/null || true
}

wait_healthy() {
  local deadline=$((SECONDS + 20))
  until ctl --endpoints="$(endpoints)" endpoint health >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then
      echo "cluster did not become healthy within 20 s; logs in $dir" >&2
      return 1
    fi
    sleep 0.2
  done
}

leader_index() {
  local i
  for i in $(members); do
    # Not curl | grep -q: grep stops reading at the match, and curl's SIGPIPE fails the pipeline.
    if grep -q '^epoch_raft_is_leader 1' <<<"$(curl -sf "http://127.0.0.1:$(metrics_port "$i")/metrics" 2>/dev/null)"; then
      echo "$i"
      return
    fi
  done
  echo -1
}

cmd_start() {
  [ -x "$epochd" ] || { echo "no epochd at $epochd: build first (cmake --build --preset release)" >&2; exit 1; }
  mkdir -p "$dir"
  if ((tls)); then
    make_certs
    touch "$dir/tls"
  fi
  local i
  for i in $(members); do start_node "$i"; done
  wait_healthy
  echo "cluster of $nodes started: endpoints $(endpoints); data and logs in $dir"
  if ((tls)); then
    echo "client TLS: etcdctl --cacert=$certs/ca.pem --cert=$certs/client.pem --key=$certs/client.key"
  fi
}

cmd_stop() {
  local f
  for f in "$dir"/n*.pid; do
    [ -f "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
}

cmd_status() { ctl --endpoints="$(endpoints)" endpoint status -w table; }

cmd_demo() {
  rm -rf "$dir"
  trap cmd_stop EXIT
  mkdir -p "$dir"
  cmd_start
  echo; echo "== members"; ctl --endpoints="$(endpoints)" member list -w table
  echo; echo "== status"; cmd_status
  echo; echo "== writes through every member (followers forward to the leader)"
  local i
  for i in $(members); do
    ctl --endpoints="127.0.0.1:$(client_port "$i")" put "demo/key$i" "written via n$((i + 1))"
  done
  echo; echo "== a linearizable read from each member sees every write"
  for i in $(members); do
    echo "-- n$((i + 1)):"; ctl --endpoints="127.0.0.1:$(client_port "$i")" get demo/ --prefix
  done
  local leader; leader=$(leader_index)
  echo; echo "== SIGKILL the leader n$((leader + 1)); time until a write succeeds again"
  kill -9 "$(cat "$dir/n$((leader + 1)).pid")"
  local other=$(((leader + 1) % nodes)) t0 t1
  t0=$(date +%s%N)
  until ctl --endpoints="127.0.0.1:$(client_port "$other")" --command-timeout=1s put demo/after-failover ok >/dev/null 2>&1; do :; done
  t1=$(date +%s%N)
  echo "write accepted $(((t1 - t0) / 1000000)) ms after the kill (includes etcdctl start-up per try)"
  echo; echo "== restart n$((leader + 1)); it catches up from its WAL and the new leader"
  start_node "$leader"
  wait_healthy
  ctl --endpoints="127.0.0.1:$(client_port "$leader")" get demo/after-failover
  echo; cmd_status
}

node_arg() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] && ((${1} >= 1)) && members | grep -qx -- "$((${1} - 1))" ||
    { echo "n${1:-?} is not a member (members: $(member_names))" >&2; exit 2; }
  echo $(($1 - 1))
}

member_names() {
  local i out=""
  for i in $(members); do out+="${out:+ }n$((i + 1))"; done
  echo "$out"
}

# The member ID of nI (hex), from member list.
member_id() {
  ctl --endpoints="$(endpoints)" member list | awk -F', ' -v n="n$(($1 + 1))" \
    -v url="http://127.0.0.1:$(peer_port "$1")" '$3 == n || $4 == url { print $1; exit }'
}

cmd_add_node() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] && ((${1} >= 1 && ${1} <= 9)) || { echo "node number must be 1..9" >&2; exit 2; }
  local i=$(($1 - 1))
  if members | grep -qx -- "$i"; then echo "n$1 is already a member" >&2; exit 2; fi
  [ ! -e "$dir/n$1" ] || { echo "$dir/n$1 exists: remove it first" >&2; exit 2; }
  local t0 out cluster deadline
  t0=$(date +%s%N)
  out=$(ctl --endpoints="$(endpoints)" member add "n$1" --learner \
    --peer-urls="http://127.0.0.1:$(peer_port "$i")")
  echo "$out"
  cluster=$(sed -n 's/^ETCD_INITIAL_CLUSTER="\(.*\)"$/\1/p' <<<"$out")
  start_node "$i" "$cluster"
  set_members $(members) "$i"
  # A learner is promoted once it has caught up with the leader's log.
  deadline=$((SECONDS + ${EPOCH_PROMOTE_TIMEOUT:-600}))
  until ctl --endpoints="$(endpoints)" member promote "$(member_id "$i")" 2>/dev/null; do
    if ((SECONDS > deadline)); then
      echo "n$1 was not promoted within ${EPOCH_PROMOTE_TIMEOUT:-600} s; log: $dir/n$1.log" >&2
      exit 1
    fi
    sleep 0.2
  done
  local t1; t1=$(date +%s%N)
  wait_healthy
  echo "n$1 added and promoted to voter in $(((t1 - t0) / 1000000)) ms"
}

cmd_remove_node() {
  local i id
  i=$(node_arg "${1:-}")
  id=$(member_id "$i")
  [ -n "$id" ] || { echo "n$1 is not in member list" >&2; exit 1; }
  set_members $(members | grep -vx -- "$i")
  ctl --endpoints="$(endpoints)" member remove "$id"
  # The removed member exits by itself (status 1) once it applied its removal.
  local pid deadline=$((SECONDS + 10))
  pid=$(cat "$dir/n$1.pid" 2>/dev/null || true)
  while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  rm -f "$dir/n$1.pid"
}

cmd_replace_node() {
  local i
  i=$(node_arg "${1:-}")
  kill -9 "$(cat "$dir/n$1.pid")" 2>/dev/null || true
  rm -rf "${dir:?}/n$1" "$dir/n$1.pid"
  cmd_remove_node "$1"
  cmd_add_node "$1"
}

cmd_kill() {
  local i; i=$(node_arg "${1:-}")
  kill -9 "$(cat "$dir/n$((i + 1)).pid")"
}

cmd_start_node() {
  local i; i=$(node_arg "${1:-}")
  start_node "$i"
  wait_healthy
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  demo) cmd_demo ;;
  leader) echo $(($(leader_index) + 1)) ;;
  kill) cmd_kill "${2:-}" ;;
  start-node) cmd_start_node "${2:-}" ;;
  endpoints) endpoints ;;
  add-node) cmd_add_node "${2:-}" ;;
  remove-node) cmd_remove_node "${2:-}" ;;
  replace-node) cmd_replace_node "${2:-}" ;;
  certs) make_certs; echo "$certs" ;;
  *) echo "usage: $0 [--tls] start|stop|status|demo|leader|kill N|start-node N|add-node N|remove-node N|replace-node N|endpoints|certs" >&2; exit 2 ;;
esac
