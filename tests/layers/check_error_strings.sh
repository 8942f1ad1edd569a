#!/usr/bin/env bash
# etcd's error messages live in one table (common/include/epoch/etcd_errors.h); everything else
# refers to its entries. Fails, listing the lines, when a string literal starting with
# "etcdserver: " appears anywhere else in the code, tests and scripts included.
# Usage: check_error_strings.sh <repository root>
set -euo pipefail
root=${1:-.}
cd "$root"
table=common/include/epoch/etcd_errors.h
hits=$(grep -rn --include='*.h' --include='*.cc' --include='*.py' --include='*.sh' \
         --include='*.proto' --include='CMakeLists.txt' -F '"etcdserver: ' \
         common raft wal server client tests chaos bench deploy scripts proto 2>/dev/null |
       grep -v "^$table:" | grep -v '^tests/layers/check_error_strings.sh:' || true)
if [ -n "$hits" ]; then
  echo "$hits"
  echo "error strings: etcd messages outside $table ($(echo "$hits" | wc -l) lines): use etcd_errors::k..."
  exit 1
fi
echo "error strings: etcd messages only in $table"
