#!/usr/bin/env bash
# The default test suite: installs missing Debian packages, builds the release preset (assertions
# on), runs every ctest test. Exits non-zero on any failure. Extra arguments go to ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

bash scripts/deps.sh
preset=${EPOCH_TEST_PRESET:-release}
# Let ccache reuse objects compiled from another checkout of the same sources (CI builds a fresh
# clone in a new folder each time): hash paths relative to the checkout, not absolute ones.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
jobs=$(nproc)

start=$(date +%s)
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
echo "build: $(( $(date +%s) - start )) s"

ctest --preset "$preset" -j "$jobs" "$@"
