#!/usr/bin/env bash
# install_test.sh <build-dir> <source-dir>: `cmake --install` into a fresh prefix, then
#   - the binaries, the default configuration, the systemd unit and the client library's
#     headers and package config are where documented,
#   - the installed epochd answers --version,
#   - an application outside the tree (tests/packaging/consumer) configures with
#     find_package(EpochClient), builds, and puts and reads a key on the installed epochd.
source "$(dirname "$0")/lib.sh"
BUILD=$1
SRC=$2
PREFIX=$TEST_TMP/prefix

cmake --install "$BUILD" --prefix "$PREFIX" >"$TEST_TMP/install.log"
for f in bin/epochd bin/epochctl bin/epoch-wal include/epoch/client/client.h include/epoch/status.h \
  include/epoch/proto/etcdserverpb/rpc.pb.h include/epoch/proto/mvccpb/kv.pb.h; do
  expect_file "$PREFIX/$f"
done
# A prefix other than /usr keeps its configuration in <prefix>/etc; the unit names both.
expect_file "$PREFIX/etc/epoch/epoch.conf.yml"
grep -qx "ExecStart=$PREFIX/bin/epochd --config-file $PREFIX/etc/epoch/epoch.conf.yml" \
  "$PREFIX/lib/systemd/system/epochd.service" || fail "the installed unit does not name $PREFIX"
config=$(find "$PREFIX" -path '*/cmake/EpochClient/EpochClientConfig.cmake')
[ -n "$config" ] || fail "no lib*/cmake/EpochClient/EpochClientConfig.cmake under $PREFIX"
ls "$(dirname "$config")/../../libepoch_client.a" >/dev/null || fail "libepoch_client.a missing"

version=$("$PREFIX/bin/epochd" --version)
[[ "$version" =~ ^epochd\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "epochd --version printed '$version'"
"$PREFIX/bin/epochctl" --help >/dev/null || fail "installed epochctl --help failed"
"$PREFIX/bin/epoch-wal" --help >/dev/null || fail "installed epoch-wal --help failed"

cmake -S "$SRC/tests/packaging/consumer" -B "$TEST_TMP/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$PREFIX" >"$TEST_TMP/consumer-configure.log" ||
  { cat "$TEST_TMP/consumer-configure.log"; fail "the consumer project does not configure"; }
cmake --build "$TEST_TMP/consumer" >"$TEST_TMP/consumer-build.log" 2>&1 ||
  { cat "$TEST_TMP/consumer-build.log"; fail "the consumer project does not build"; }

client_port=$(free_port)
peer_port=$(free_port)
"$PREFIX/bin/epochd" --name solo --data-dir "$TEST_TMP/data" \
  --listen-client-urls "127.0.0.1:$client_port" --listen-peer-urls "127.0.0.1:$peer_port" \
  --initial-cluster "solo=127.0.0.1:$peer_port" >"$TEST_TMP/epochd.log" 2>&1 &
TEST_PIDS+=($!)
# The consumer's call deadline covers the member's start and first election.
"$TEST_TMP/consumer/consumer" "127.0.0.1:$client_port" ||
  { cat "$TEST_TMP/epochd.log"; fail "the consumer could not write and read through epoch::client"; }
echo "PASS: install tree, epochd --version ($version), find_package(EpochClient) consumer"
