#!/usr/bin/env bash
# The main job: build, start a local 3-node Epoch cluster on loopback, and run fenced workers on it,
# C++ and Python side by side (deploy/jobs-demo.sh): jobs completed, stale commits rejected, epoch
# changes, dead-lettered jobs, poison pills and violations (must be 0) after a leader kill and a
# worker paused past its lease.
#
#   bash scripts/demo.sh              # SQLite (the default database)
#   bash scripts/demo.sh --postgres   # a private local PostgreSQL instead
#
# The cluster-only tour (writes, reads, a leader kill) is `deploy/local-cluster.sh demo`.
# EPOCH_DEMO_BUILD_DIR=<dir> builds and runs from an existing CMake build directory instead of the
# release preset.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

bash scripts/deps.sh
if [ -n "${EPOCH_DEMO_BUILD_DIR:-}" ]; then
  bin=$(cd "$EPOCH_DEMO_BUILD_DIR" && pwd)
  cmake --build "$bin" --target epochd epoch_fenced_worker epoch_python_stubs
else
  cmake --preset release >/dev/null
  cmake --build --preset release --target epochd epoch_fenced_worker epoch_python_stubs
  bin="$root/build/release"
fi

export EPOCHD="$bin/server/epochd"
export EPOCH_FENCED_WORKER="$bin/client/examples/epoch_fenced_worker"
export EPOCH_PY_STUBS="$bin/client/python/gen"
exec "$root/deploy/jobs-demo.sh" "$@"
