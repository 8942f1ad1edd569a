#!/usr/bin/env bash
# Epoch vs etcd on this machine, same load generator, one command:
#
#   bench/kv/compare.sh
#
# Builds epochd and epoch_bench if needed, then, one system at a time (so the idle one takes no
# CPU), starts a local 3-node cluster, runs the matrix below against it, and stops it by PID:
#   epoch: deploy/local-cluster.sh (client ports 22379/22389/22399);
#   etcd:  bench/lib/etcd-cluster.sh: /usr/bin/etcd, default settings (fsync on, heartbeat 100 ms,
#          election 1000 ms),
#          client ports 32379/32389/32399, peer ports 32380/32390/32400.
# Logs and results live in $BENCH_DIR (default /tmp/epoch-bench.XXXX, kept for inspection).
# Prints one table with both results and the ratios epoch/etcd.
#
# Environment (all optional):
#   EPOCH_BUILD_DIR   build dir holding server/epochd and bench/kv/epoch_bench (build/release)
#   BENCH_DURATION    measured seconds per cell (8)       BENCH_WARMUP   warm-up seconds (2)
#   BENCH_TARGET      all | leader: where the multi-client cells send (all). The single-client
#                     put always goes to the leader, for both systems, so neither pays a forward
#                     hop the other does not.
#   BENCH_CONNS       gRPC connections for the multi-client cells (12: 4 per member with "all")
#   BENCH_THREADS     client completion-queue threads (2)
#   BENCH_KEYS        key space (1000)                    BENCH_VALUE    value bytes (256)
#   BENCH_SYSTEMS     "epoch etcd" (default), or just one of them
#   BENCH_CELLS       subset of cell names to run (default: all, see `cells` below)
#   BENCH_KEEP_DATA   1 keeps the clusters' data dirs (removed by default; logs are always kept)
#   BENCH_PORT_OFFSET added to every port above (0), so two runs can share the machine
#   BENCH_TLS         1: client TLS with mutual authentication on both systems, the same
#                     certificates (deploy/local-cluster.sh --tls makes them; etcd gets
#                     --cert-file, --key-file, --trusted-ca-file, --client-cert-auth and https://
#                     client URLs; the load generator --cacert, --cert, --key)
#   BENCH_AUTH        1: auth on both systems (etcdctl: user root, a role "bench" with readwrite on
#                     the prefix bench/, a user "bench" holding it, auth enable; simple tokens);
#                     the load generator runs as "bench" (--user), so every call carries a token
#                     and is checked against a prefix permission. Run it next to a run without
#                     to see what the checks cost each system.
#   BENCH_NO_BUILD    1: use $EPOCH_BUILD_DIR/server/epochd and bench/kv/epoch_bench as they are
#                     (A/B runs of saved binaries)
#   BENCH_ROUNDS      rounds of the whole matrix (1). Each round starts both clusters afresh, in
#                     alternating order (epoch first in odd rounds, etcd first in even ones), so a
#                     machine whose speed drifts over minutes moves both systems alike. The table
#                     shows, per cell and system, the round with the median ops/s, and the ratio
#                     column is the median of the per-round ratios (each round's two cells ran
#                     about a minute apart); "ratios by round" lists them all.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${EPOCH_BUILD_DIR:-$root/build/release}
duration=${BENCH_DURATION:-8}
warmup=${BENCH_WARMUP:-2}
target=${BENCH_TARGET:-all}
conns=${BENCH_CONNS:-12}
threads=${BENCH_THREADS:-2}
keys=${BENCH_KEYS:-1000}
value=${BENCH_VALUE:-256}
systems=${BENCH_SYSTEMS:-epoch etcd}
rounds=${BENCH_ROUNDS:-1}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_ROUNDS must be a positive integer, not '$rounds'" >&2; exit 2; }
dir=${BENCH_DIR:-$(mktemp -d /tmp/epoch-bench.XXXX)}
export ETCDCTL_API=3

# name | workload | clients | conns | target | extra flags
# put-1 runs first, on the fresh cluster: run after put-256 it measured how each system recovers
# from the write storm (Epoch's RocksDB compacting what put-256 wrote), not a single client's
# write latency.
cells=(
  "put-1|put|1|1|leader|--no-prefill"
  "get-lin-256|get|256|$conns|$target|"
  "get-ser-256|get-serializable|256|$conns|$target|"
  "put-256|put|256|$conns|$target|--no-prefill"
  "cas-mod-64|txn-cas-mod|64|$conns|$target|"
  "cas-value-64|txn-cas-value|64|$conns|$target|"
)
if [ -n "${BENCH_CELLS:-}" ]; then
  wanted=" $BENCH_CELLS "
  kept=()
  for c in "${cells[@]}"; do [[ "$wanted" == *" ${c%%|*} "* ]] && kept+=("$c"); done
  cells=("${kept[@]}")
fi

command -v jq >/dev/null || { echo "compare.sh needs jq" >&2; exit 2; }
command -v etcd >/dev/null || { echo "compare.sh needs etcd (Debian etcd-server)" >&2; exit 2; }

# ---- build what is missing ----
mkdir -p "$dir"
if [ "${BENCH_NO_BUILD:-0}" = 1 ]; then
  [ -x "$build/server/epochd" ] && [ -x "$build/bench/kv/epoch_bench" ] ||
    { echo "BENCH_NO_BUILD=1 but $build lacks server/epochd or bench/kv/epoch_bench" >&2; exit 2; }
elif [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$dir/build.log" 2>&1 ||
    { tail -30 "$dir/build.log" >&2; exit 2; }
fi
if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then
  echo "building epochd and epoch_bench in $build (log: $dir/build.log)" >&2
  cmake --build "$build" --target epochd epoch_bench -j2 >>"$dir/build.log" 2>&1 ||
    { tail -30 "$dir/build.log" >&2; echo "build failed" >&2; exit 2; }
fi
epochd=$build/server/epochd
bench=$build/bench/kv/epoch_bench

# ---- clusters ----
off=${BENCH_PORT_OFFSET:-0}
ep=$((22379 + off)) cp0=$((32379 + off))
epoch_env=(EPOCHD="$epochd" EPOCH_CLUSTER_DIR="$dir/epoch" EPOCH_BASE_PORT=$ep EPOCH_NODES=3)
tls=${BENCH_TLS:-0}
cluster_tls=() client_tls=() etcd_tls=() scheme=http
if [ "$tls" = 1 ]; then
  mkdir -p "$dir/epoch"
  certs=$(env "${epoch_env[@]}" "$root/deploy/local-cluster.sh" --tls certs)
  touch "$dir/epoch/tls"  # local-cluster.sh starts this cluster with TLS
  cluster_tls=(--tls)
  client_tls=(--cacert "$certs/ca.pem" --cert "$certs/client.pem" --key "$certs/client.key")
  etcd_tls=(--cert-file "$certs/member.pem" --key-file "$certs/member.key"
    --trusted-ca-file "$certs/ca.pem" --client-cert-auth)
  scheme=https
fi
auth=${BENCH_AUTH:-0}
etcdctl_auth=() bench_auth=()
etcdctl() { command etcdctl "${client_tls[@]}" "${etcdctl_auth[@]}" "$@"; }
# Auth on the cluster at $1 (BENCH_AUTH=1): etcd's sequence, through etcdctl, on both systems.
enable_auth() {
  etcdctl_auth=()
  bench_auth=()
  [ "$auth" = 1 ] || return 0
  local e=(--endpoints="$1")
  etcdctl "${e[@]}" user add root:rootpw >/dev/null
  etcdctl "${e[@]}" role add bench >/dev/null
  etcdctl "${e[@]}" role grant-permission bench --prefix=true readwrite bench/ >/dev/null
  etcdctl "${e[@]}" user add bench:benchpw >/dev/null
  etcdctl "${e[@]}" user grant-role bench bench >/dev/null
  etcdctl "${e[@]}" auth enable >/dev/null
  etcdctl_auth=(--user root:rootpw)
  bench_auth=(--user bench:benchpw)
}
epoch_endpoints=127.0.0.1:$ep,127.0.0.1:$((ep + 10)),127.0.0.1:$((ep + 20))
etcd_endpoints=127.0.0.1:$cp0,127.0.0.1:$((cp0 + 10)),127.0.0.1:$((cp0 + 20))

start_epoch() { env "${epoch_env[@]}" "$root/deploy/local-cluster.sh" "${cluster_tls[@]}" start; }
wait_exit() {  # pid...: bounded wait, so the next system does not share the CPU with a dying one
  local pid
  for pid in "$@"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
}

stop_epoch() {
  local pids
  pids=$(cat "$dir"/epoch/n*.pid 2>/dev/null || true)
  env "${epoch_env[@]}" "$root/deploy/local-cluster.sh" stop || true
  # shellcheck disable=SC2086
  wait_exit $pids
}

# etcd through bench/lib/etcd-cluster.sh (the etcd twin of deploy/local-cluster.sh).
etcd_env=(ETCD_CLUSTER_DIR="$dir/etcd" ETCD_BASE_PORT=$cp0 ETCD_SCHEME=$scheme
  ETCD_EXTRA_FLAGS="${etcd_tls[*]}" ETCD_CTL_FLAGS="${client_tls[*]}")
start_etcd() { env "${etcd_env[@]}" "$root/bench/lib/etcd-cluster.sh" start; }
stop_etcd() { env "${etcd_env[@]}" "$root/bench/lib/etcd-cluster.sh" stop || true; }

# Data dirs hold up to a GB after a run: removed once their cluster is stopped, logs kept.
drop_data() {
  [ "${BENCH_KEEP_DATA:-0}" = 1 ] && return 0
  local d
  for d in "$dir"/epoch/n[0-9]* "$dir"/etcd/e[0-9]*; do [ -d "$d" ] && rm -rf "$d"; done
  return 0
}
cleanup() { stop_epoch; stop_etcd; drop_data; }
trap cleanup EXIT

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# ---- the matrix ----
results=$dir/results.jsonl
: >"$results"

# Highest Raft term any member reports (etcdctl endpoint status works against both systems): a
# change during a cell means an election happened under load.
raft_term() {
  etcdctl --endpoints="$1" --command-timeout=3s endpoint status -w json 2>/dev/null |
    jq '[.[].Status.raftTerm] | max // 0' 2>/dev/null || echo 0
}

run_matrix() {  # system endpoints pid-files-glob round
  local system=$1 endpoints=$2 round=$4 c name workload clients cn tgt extra out pids term_before term_after
  pids=$(cat $3 | paste -sd, -)
  for c in "${cells[@]}"; do
    IFS='|' read -r name workload clients cn tgt extra <<<"$c"
    echo "-- round $round: $system $name: $workload, $clients clients, $cn conns, target $tgt" >&2
    term_before=$(raft_term "$endpoints")
    # shellcheck disable=SC2086
    out=$("$bench" --endpoints "$endpoints" --workload "$workload" --clients "$clients" \
      --conns "$cn" --threads "$threads" --target "$tgt" --duration "$duration" --warmup "$warmup" \
      --keys "$keys" --value-size "$value" --key-prefix "bench/$name/" --label "$system/$name" \
      --server-pids "$pids" --json "${client_tls[@]}" "${bench_auth[@]}" $extra 2>>"$dir/$system-bench.log") || true
    term_after=$(raft_term "$endpoints")
    if [ -n "$out" ]; then
      echo "$out" | jq -c --arg s "$system" --arg c "$name" --argjson t0 "$term_before" \
        --argjson t1 "$term_after" --argjson r "$round" \
        '. + {system: $s, cell: $c, round: $r, term_changes: ($t1 - $t0)}' >>"$results"
      echo "$out" | jq -r '"   \(.ops_per_sec|floor) ops/s  p50 \(.p50_ms) ms  p99 \(.p99_ms) ms  errors \(.errors)"' >&2
    else
      echo "   FAILED (see $dir/$system-bench.log)" >&2
    fi
  done
}

for s in $systems; do
  case $s in epoch | etcd) ;; *) echo "unknown system $s" >&2; exit 2 ;; esac
done
for round in $(seq "$rounds"); do
  order=$systems
  # Even rounds run the systems in reverse order, so neither always runs first.
  if ((round % 2 == 0)); then order=$(echo "$systems" | tr ' ' '\n' | tac | paste -sd' ' -); fi
  for s in $order; do
    case $s in
      epoch) etcdctl_auth=(); start_epoch; enable_auth "$epoch_endpoints"; run_matrix epoch "$epoch_endpoints" "$dir/epoch/n*.pid" "$round"; stop_epoch; drop_data ;;
      etcd) etcdctl_auth=(); start_etcd; enable_auth "$etcd_endpoints"; run_matrix etcd "$etcd_endpoints" "$dir/etcd/e*.pid" "$round"; stop_etcd; drop_data ;;
    esac
  done
done

# ---- the table ----
# jq definitions both tables use: the median round's record of a cell, per-round ratios, median.
jq_common='
  def cell($c; $s): (map(select(.cell == $c and .system == $s)) | sort_by(.ops_per_sec)
                     | if length == 0 then null else .[(length - 1) / 2 | floor] end);
  def median: sort | if length == 0 then null else .[(length - 1) / 2 | floor] end;
  def ratios($c): (map(select(.cell == $c)) | group_by(.round)
                   | map((map(select(.system == "epoch"))[0]) as $e | (map(select(.system == "etcd"))[0]) as $d
                         | if ($e != null and $d != null and $d.ops_per_sec > 0)
                           then ($e.ops_per_sec / $d.ops_per_sec * 100 | round / 100) else empty end));
'
echo
echo "Epoch vs etcd $(etcd --version | head -1 | awk '{print $3}'), 3 nodes each on 127.0.0.1, $(nproc) cores," \
  "${duration}s per cell after ${warmup}s warm-up, $keys keys, ${value}B values, client threads $threads."
echo "Multi-client cells send to: $target endpoints ($conns connections); put-1 sends to the leader."
if [ "$tls" = 1 ]; then echo "Client TLS with client certificates on both systems (EC P-256, the same files)."; fi
if [ "$auth" = 1 ]; then echo "Auth on both systems: every call carries a simple token of a user with readwrite on the prefix bench/."; fi
jq -rs "$jq_common"'
  def r($a; $b): if ($a != null and $b != null and $b > 0) then ($a / $b * 100 | round / 100 | tostring) else "-" end;
  def n($x): if $x == null then "-" else ($x | tostring) end;
  def ms($x): if $x == null then "-" else ($x * 100 | round / 100 | tostring) end;
  def ops($x): if $x == null then "-" else ($x.ops_per_sec | floor | tostring) end;
  def cpu($x): if ($x == null or $x.server_cpu_us_per_op < 0) then "-" else ($x.server_cpu_us_per_op | round | tostring) end;
  . as $all |
  (["cell", "epoch ops/s", "etcd ops/s", "ratio", "ratios by round", "epoch p50/p99/p99.9 ms", "etcd p50/p99/p99.9 ms",
    "p50 ratio", "p99 ratio", "server cpu us/op e/etcd", "elections e/etcd", "errors e/etcd"] | @tsv),
  ($all | map(.cell) | reduce .[] as $c ([]; if index([$c]) then . else . + [$c] end) | .[]) as $c |
  ($all | cell($c; "epoch")) as $e | ($all | cell($c; "etcd")) as $d |
  ($all | ratios($c)) as $rs |
  [$c, ops($e), ops($d), (if ($rs | length) > 0 then ($rs | median | tostring) else "-" end),
   (if ($rs | length) > 0 then ($rs | map(tostring) | join(" ")) else "-" end),
   "\(ms($e.p50_ms)) / \(ms($e.p99_ms)) / \(ms($e.p999_ms))",
   "\(ms($d.p50_ms)) / \(ms($d.p99_ms)) / \(ms($d.p999_ms))",
   r($e.p50_ms; $d.p50_ms), r($e.p99_ms; $d.p99_ms),
   "\(cpu($e)) / \(cpu($d))", "\(n($e.term_changes)) / \(n($d.term_changes))",
   "\(n($e.errors)) / \(n($d.errors))"]
  | @tsv' "$results" | column -t -s $'\t'
echo "(ratio = epoch/etcd: above 1 is better for throughput, below 1 is better for latency; server cpu = CPU of all 3 members in the window per op;"
echo " elections = Raft term changes during the cell)"
echo
echo "Issue 5 targets:"
jq -rs "$jq_common"'
  def ok($b): if $b then "met" else "MISSED" end;
  def x($a; $b): ($a / $b * 100 | round / 100);
  def ms($v): ($v * 100 | round / 100);
  . as $all |
  cell("get-lin-256"; "epoch") as $ge | cell("get-lin-256"; "etcd") as $gd |
  cell("put-256"; "epoch") as $pe | cell("put-256"; "etcd") as $pd |
  cell("put-1"; "epoch") as $oe | cell("put-1"; "etcd") as $od |
  ($all | ratios("get-lin-256") | median) as $gr | ($all | ratios("put-256") | median) as $pr |
  (if $gr != null then
     "  linearizable get at 256 clients >= 2x etcd and >= 18000/s: \($ge.ops_per_sec | floor)/s, \($gr)x (median of rounds) -> \(ok($gr >= 2 and $ge.ops_per_sec >= 18000))"
   else "  linearizable get: not measured" end),
  (if $pr != null then
     "  put at 256 clients >= 1.5x etcd: \($pr)x (median of rounds) -> \(ok($pr >= 1.5))"
   else "  put at 256 clients: not measured" end),
  (if $oe and $od then
     "  single-client put p50 below etcd: \($oe.p50_ms * 1000 | round / 1000) vs \($od.p50_ms * 1000 | round / 1000) ms -> \(ok($oe.p50_ms < $od.p50_ms))"
   else "  single-client put: not measured" end),
  ($all | map(.cell) | reduce .[] as $c ([]; if index([$c]) then . else . + [$c] end) | .[]) as $c |
  ($all | cell($c; "epoch")) as $e | ($all | cell($c; "etcd")) as $d |
  if $e and $d then
    "  p99 not worse than etcd, \($c): \(ms($e.p99_ms)) vs \(ms($d.p99_ms)) ms -> \(ok($e.p99_ms <= $d.p99_ms))"
  else "  p99 \($c): not measured on both" end
' "$results"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews every number)"
echo "raw results: $results; client logs: $dir/*-bench.log; cluster logs: $dir/epoch, $dir/etcd"
