#!/usr/bin/env bash
# entrypoint_restore_test.sh <build-dir> <source-dir>: the membership runbook's restore step
# through the real entrypoint and epochd (deploy/kubernetes/README.md): a snapshot saved with
# etcdctl from one cluster is restored by deploy/container/epoch-entrypoint.sh into a new
# member's empty data directory (EPOCHD_RESTORE_SNAPSHOT) before it serves; the member serves
# the snapshot's keys; on a restart with its data the entrypoint does not restore again.
source "$(dirname "$0")/lib.sh"
BUILD=$1
ENTRY=$2/deploy/container/epoch-entrypoint.sh
export PATH="$BUILD/server:$PATH" ETCDCTL_API=3
command -v etcdctl >/dev/null || fail "etcdctl (Debian etcd-client) is missing"

# stop <pid>: SIGTERM and wait for it to exit.
stop() {
  kill -TERM "$1"
  wait "$1" || fail "process $1 exited $? after SIGTERM"
}

# The old cluster: one member with a key, saved with etcdctl.
old_client=$(free_port)
old_peer=$(free_port)
epochd --name old --data-dir "$TEST_TMP/old" --listen-client-urls "127.0.0.1:$old_client" \
  --listen-peer-urls "127.0.0.1:$old_peer" --initial-cluster "old=127.0.0.1:$old_peer" \
  >"$TEST_TMP/old.log" 2>&1 &
old_pid=$!
TEST_PIDS+=("$old_pid")
etcdctl --endpoints "127.0.0.1:$old_client" --command-timeout 30s put /runbook/key kept >/dev/null ||
  { cat "$TEST_TMP/old.log"; fail "cannot write to the old cluster"; }
etcdctl --endpoints "127.0.0.1:$old_client" snapshot save "$TEST_TMP/snap.db" >/dev/null 2>"$TEST_TMP/save.log" ||
  fail "etcdctl snapshot save"
stop "$old_pid"

# A member of the new cluster (a one-member StatefulSet here; its DNS names are only compared,
# never resolved, with no other member to dial) listening on loopback.
client=$(free_port)
run_member() {
  env EPOCHD_HOSTNAME=epoch-0 EPOCHD_CLUSTER_SIZE=1 EPOCHD_LISTEN_HOST=127.0.0.1 \
    EPOCHD_CLIENT_PORT="$client" EPOCHD_PEER_PORT="$(free_port)" \
    EPOCHD_METRICS_PORT="$(free_port)" EPOCHD_DATA_DIR="$TEST_TMP/new" \
    EPOCHD_RESTORE_SNAPSHOT="$TEST_TMP/snap.db" sh "$ENTRY" >"$TEST_TMP/$1.log" 2>&1 &
  TEST_PIDS+=($!)
  member_pid=$!
}
expect_key() {
  local got
  got=$(etcdctl --endpoints "127.0.0.1:$client" --command-timeout 30s get --print-value-only \
    /runbook/key 2>>"$TEST_TMP/etcdctl.log") || { cat "$TEST_TMP/$1.log"; fail "$1: cannot read from the new member"; }
  [ "$got" = kept ] || { cat "$TEST_TMP/$1.log"; fail "$1: /runbook/key is '$got'"; }
}

run_member first
expect_key first
grep -q "^restored $TEST_TMP/snap.db" "$TEST_TMP/first.log" ||
  { cat "$TEST_TMP/first.log"; fail "the first start did not restore the snapshot"; }
etcdctl --endpoints "127.0.0.1:$client" put /runbook/after written-after >/dev/null
stop "$member_pid"

run_member restart
expect_key restart
! grep -q "^restored" "$TEST_TMP/restart.log" || fail "the restart restored the snapshot again"
[ "$(etcdctl --endpoints "127.0.0.1:$client" get --print-value-only /runbook/after)" = \
  written-after ] || fail "a write made after the restore is gone after the restart"
stop "$member_pid"
echo "PASS: entrypoint restores the snapshot into a new member once; the member serves it"
