#!/usr/bin/env bash
# entrypoint_test.sh <source-dir>: deploy/container/epoch-entrypoint.sh's epochd command line
# (EPOCHD_DRY_RUN=1) for StatefulSet ordinals 0-4 of a 5-member cluster and 0-2 of a 3-member
# one, the settings it takes, TLS, and what it refuses. The image and a real cluster from it:
# scripts/container-test.sh.
source "$(dirname "$0")/lib.sh"
ENTRY=$1/deploy/container/epoch-entrypoint.sh

# args <env...>: the entrypoint's epochd command line, space-joined.
args() { env -i PATH="$PATH" EPOCHD_DRY_RUN=1 "$@" sh "$ENTRY" | tr '\n' ' '; }
# value_of <flag> <command line>: the argument after the flag.
value_of() { awk -v f="$1" '{ for (i = 1; i < NF; i++) if ($i == f) print $(i + 1) }' <<<"$2"; }
expect_eq() { [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"; }

dns() { echo "epoch-$1.epoch.default.svc.cluster.local"; }
cluster5="epoch-0=http://$(dns 0):2380,epoch-1=http://$(dns 1):2380,epoch-2=http://$(dns 2):2380"
cluster5="$cluster5,epoch-3=http://$(dns 3):2380,epoch-4=http://$(dns 4):2380"
for n in 0 1 2 3 4; do
  line=$(args EPOCHD_HOSTNAME="epoch-$n" EPOCHD_CLUSTER_SIZE=5)
  expect_eq "ordinal $n --name" "$(value_of --name "$line")" "epoch-$n"
  expect_eq "ordinal $n --initial-cluster" "$(value_of --initial-cluster "$line")" "$cluster5"
  expect_eq "ordinal $n peer URL" "$(value_of --initial-advertise-peer-urls "$line")" \
    "http://$(dns "$n"):2380"
  expect_eq "ordinal $n client URL" "$(value_of --advertise-client-urls "$line")" \
    "http://$(dns "$n"):2379"
  expect_eq "ordinal $n listen" "$(value_of --listen-client-urls "$line")" "http://0.0.0.0:2379"
  expect_eq "ordinal $n metrics" "$(value_of --listen-metrics-urls "$line")" "http://0.0.0.0:2381"
  expect_eq "ordinal $n token" "$(value_of --initial-cluster-token "$line")" "epoch-default"
  expect_eq "ordinal $n data" "$(value_of --data-dir "$line")" "/var/lib/epoch/data"
done
cluster3="epoch-0=http://$(dns 0):2380,epoch-1=http://$(dns 1):2380,epoch-2=http://$(dns 2):2380"
for n in 0 1 2; do
  line=$(args EPOCHD_HOSTNAME="epoch-$n")
  expect_eq "size 3, ordinal $n" "$(value_of --initial-cluster "$line")" "$cluster3"
done

# Another StatefulSet, service, namespace, domain and ports; extra arguments pass through.
line=$(env -i PATH="$PATH" EPOCHD_DRY_RUN=1 EPOCHD_HOSTNAME=meta-store-1 EPOCHD_CLUSTER_SIZE=2 \
  EPOCHD_SERVICE=meta-peers EPOCHD_NAMESPACE=infra EPOCHD_CLUSTER_DOMAIN=corp.local \
  EPOCHD_PEER_PORT=7001 EPOCHD_CLIENT_PORT=7000 sh "$ENTRY" --log-level debug | tr '\n' ' ')
expect_eq "custom --initial-cluster" "$(value_of --initial-cluster "$line")" \
  "meta-store-0=http://meta-store-0.meta-peers.infra.svc.corp.local:7001,meta-store-1=http://meta-store-1.meta-peers.infra.svc.corp.local:7001"
expect_eq "custom client URL" "$(value_of --advertise-client-urls "$line")" \
  "http://meta-store-1.meta-peers.infra.svc.corp.local:7000"
expect_eq "custom token" "$(value_of --initial-cluster-token "$line")" "meta-store-infra"
expect_eq "passed-through argument" "$(value_of --log-level "$line")" "debug"

# TLS from a mounted Secret: https client URLs and etcd's TLS flags.
mkdir "$TEST_TMP/tls"
touch "$TEST_TMP/tls/tls.crt" "$TEST_TMP/tls/tls.key" "$TEST_TMP/tls/ca.crt"
line=$(args EPOCHD_HOSTNAME=epoch-0 EPOCHD_TLS_DIR="$TEST_TMP/tls")
expect_eq "TLS client URL" "$(value_of --advertise-client-urls "$line")" "https://$(dns 0):2379"
expect_eq "TLS listen" "$(value_of --listen-client-urls "$line")" "https://0.0.0.0:2379"
expect_eq "TLS cert" "$(value_of --cert-file "$line")" "$TEST_TMP/tls/tls.crt"
expect_eq "TLS key" "$(value_of --key-file "$line")" "$TEST_TMP/tls/tls.key"
expect_eq "TLS CA" "$(value_of --trusted-ca-file "$line")" "$TEST_TMP/tls/ca.crt"
[[ " $line " == *" --client-cert-auth "* ]] || fail "TLS without --client-cert-auth: $line"

# EPOCHD_RESTORE_SNAPSHOT: a restore command first for an empty data directory, none once it
# holds state.
line=$(args EPOCHD_HOSTNAME=epoch-1 EPOCHD_DATA_DIR="$TEST_TMP/empty" EPOCHD_RESTORE_SNAPSHOT=/s.db)
[[ "$line" == "epochd "*" --restore-snapshot /s.db  epochd "* ]] ||
  fail "no restore before the run for an empty data directory: $line"
[ "$(grep -o -- '--restore-snapshot' <<<"$line" | wc -l)" = 1 ] || fail "two restores: $line"
mkdir -p "$TEST_TMP/full/wal"
line=$(args EPOCHD_HOSTNAME=epoch-1 EPOCHD_DATA_DIR="$TEST_TMP/full" EPOCHD_RESTORE_SNAPSHOT=/s.db)
[[ "$line" != *--restore-snapshot* ]] || fail "a restore over existing state: $line"

# refuses <message part> <env...>: the entrypoint exits 2 naming the problem.
refuses() {
  local want=$1 out code
  shift
  set +e
  out=$(env -i PATH="$PATH" EPOCHD_DRY_RUN=1 "$@" sh "$ENTRY" 2>&1)
  code=$?
  set -e
  [ "$code" = 2 ] || fail "expected exit 2 for $*, got $code: $out"
  [[ "$out" == *"$want"* ]] || fail "expected '$want' for $*, got: $out"
}
refuses "outside the initial cluster of 3 members" EPOCHD_HOSTNAME=epoch-3
refuses "is not <statefulset>-<ordinal>" EPOCHD_HOSTNAME=epoch
refuses "is not <statefulset>-<ordinal>" EPOCHD_HOSTNAME=epoch-x
refuses "is not a number" EPOCHD_HOSTNAME=epoch-0 EPOCHD_CLUSTER_SIZE=three
refuses "cannot read $TEST_TMP/none/tls.crt" EPOCHD_HOSTNAME=epoch-0 EPOCHD_TLS_DIR="$TEST_TMP/none"
echo "PASS: entrypoint command lines for ordinals 0-4, custom settings, TLS, restore, refusals"
