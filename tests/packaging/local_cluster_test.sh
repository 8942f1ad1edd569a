#!/usr/bin/env bash
# deploy/local-cluster.sh's membership commands on a real 3-member cluster: replace-node of the
# leader (killed, wiped, removed, added back fresh and promoted), add-node 4, remove-node 4.
# Every acknowledged key is on every member at the end and `endpoint hashkv` agrees.
#   local_cluster_test.sh <build-dir> <source-dir> [--tls]
source "$(dirname "$0")/lib.sh"
build=$1
src=$2
tls_flag=()
[ "${3:-}" = "--tls" ] && tls_flag=(--tls)

export EPOCH_CLUSTER_DIR=$TEST_TMP/cluster
export EPOCHD=$build/server/epochd
export ETCDCTL_API=3
export EPOCH_PROMOTE_TIMEOUT=90
# A base port with 100 free ports above it (the script uses base + 10 * i + 0..2, i < 9).
for _ in $(seq 1 20); do
  base=$((20000 + RANDOM % 20000))
  python3 - "$base" <<'PY' && break
import socket, sys
b = int(sys.argv[1])
for p in range(b, b + 100):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        sys.exit(1)
    finally:
        s.close()
PY
done
export EPOCH_BASE_PORT=$base
lc() { "$src/deploy/local-cluster.sh" "${tls_flag[@]}" "$@"; }
stop_cluster() { lc stop || true; cleanup; }
trap stop_cluster EXIT

ctl() {
  if [ -f "$EPOCH_CLUSTER_DIR/tls" ]; then
    local c=$EPOCH_CLUSTER_DIR/certs
    etcdctl --cacert="$c/ca.pem" --cert="$c/client.pem" --key="$c/client.key" "$@"
  else
    etcdctl "$@"
  fi
}

lc start >/dev/null
for i in $(seq 1 50); do ctl --endpoints="$(lc endpoints)" put "k/$i" "v$i" >/dev/null; done

leader=$(lc leader)
[ "$leader" -ge 1 ] || fail "no leader"
out=$(lc replace-node "$leader") || fail "replace-node $leader: $out"
grep -q "n$leader added and promoted to voter in " <<<"$out" || fail "replace-node printed: $out"
ctl --endpoints="$(lc endpoints)" put k/after-replace v >/dev/null

out=$(lc add-node 4) || fail "add-node 4: $out"
[ "$(lc endpoints | tr ',' '\n' | wc -l)" = 4 ] || fail "endpoints after add-node: $(lc endpoints)"
members=$(ctl --endpoints="$(lc endpoints)" member list)
grep -q ", started, n4, " <<<"$members" || fail "n4 not started: $members"
lc remove-node 4 >/dev/null || fail "remove-node 4"
[ "$(lc endpoints | tr ',' '\n' | wc -l)" = 3 ] || fail "endpoints after remove-node: $(lc endpoints)"
ctl --endpoints="$(lc endpoints)" put k/after-remove v >/dev/null
lc remove-node 4 2>/dev/null && fail "removing a non-member succeeded"

# Every member has every key (serializable reads of each one), and the stores agree.
for ep in $(lc endpoints | tr ',' ' '); do
  for _ in $(seq 1 50); do
    n=$(ctl --endpoints="$ep" get k/ --prefix --keys-only --consistency=s | grep -c '^k/' || true)
    [ "$n" = 52 ] && break
    sleep 0.1
  done
  [ "$n" = 52 ] || fail "$ep has $n of 52 keys"
done
hashes=$(ctl --endpoints="$(lc endpoints)" endpoint hashkv | awk '{print $2}' | sort -u | wc -l)
[ "$hashes" = 1 ] || fail "endpoint hashkv disagrees: $(ctl --endpoints="$(lc endpoints)" endpoint hashkv)"
echo "PASS"
