#!/usr/bin/env bash
# Epoch vs etcd scale curves, one command:
#
#   bench/scale/run.sh --out DIR            every curve (~40 minutes on 2 cores)
#   bench/scale/run.sh --quick --out DIR    small sizes, 1 s cells: proves the suite runs (~3 min)
#   bench/scale/run.sh --out DIR --curves keys --keys 10k,100k
#
# Builds epochd, epoch_bench and the watchers curve's epoch_watch_load if needed (EPOCH_BUILD_DIR,
# default build/release; BENCH_NO_BUILD=1 uses them as they are), then runs scale.py, which writes DIR/results.jsonl, DIR/tables.txt and
# DIR/<curve>.png. Exits 1 if any request failed on either system. Other flags: scale.py --help.
# Needs: etcd and etcdctl (Debian etcd-server, etcd-client), python3-grpcio; python3-matplotlib
# for the plots.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${EPOCH_BUILD_DIR:-$root/build/release}
python=/usr/bin/python3  # Debian's, which has python3-grpcio and python3-matplotlib

for tool in etcd etcdctl; do
  command -v "$tool" >/dev/null || { echo "run.sh needs $tool (Debian etcd-server, etcd-client)" >&2; exit 2; }
done
"$python" -c 'import grpc' 2>/dev/null || { echo "run.sh needs python3-grpcio" >&2; exit 2; }

if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then
  if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
  fi
  echo "building epochd, epoch_bench and epoch_watch_load in $build" >&2
  cmake --build "$build" --target epochd epoch_bench epoch_watch_load -j2 >&2
fi
[ -x "$build/server/epochd" ] && [ -x "$build/bench/kv/epoch_bench" ] ||
  { echo "$build lacks server/epochd or bench/kv/epoch_bench" >&2; exit 2; }

exec "$python" "$root/bench/scale/scale.py" --build "$build" "$@"
