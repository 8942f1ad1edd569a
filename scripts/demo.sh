#!/usr/bin/env bash
# The main job: build, start a local 3-node Epoch cluster on loopback, and show it working.
# Until every piece exists, it builds what is there and says what is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

bash scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"

bin="$root/build/release"
if [ -x "$bin/server/epochd" ] && [ -x "$root/deploy/local-cluster.sh" ]; then
  exec "$root/deploy/local-cluster.sh" demo
fi

echo
echo "Epoch is built, but the node (epochd) does not exist yet, so there is no cluster to start."
echo "What is there:"
for lib in common/libepoch_common proto/libepoch_proto raft/libepoch_raft wal/libepoch_wal \
           server/libepoch_server client/libepoch_client; do
  name=${lib##*/}
  if [ -f "$bin/$lib.a" ]; then echo "  built    $name"; else echo "  missing  $name"; fi
done
for exe in server/epochd client/epochctl; do
  if [ -x "$bin/$exe" ]; then echo "  built    ${exe##*/}"; else echo "  missing  ${exe##*/}"; fi
done
echo "Run the tests with: bash scripts/test.sh"
