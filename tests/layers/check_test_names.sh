#!/usr/bin/env bash
# ctest runs each Catch2 case by passing its name on the command line, so a name Catch2 reads as
# something else never runs: a leading '-' is taken for an option and a leading '~' for an
# exclusion. Fails, listing the lines, on such a name.
# Usage: check_test_names.sh <repository root>
set -euo pipefail
root=${1:-.}
cd "$root"
hits=$(grep -rnE --include='*.cc' 'TEST_CASE(_METHOD)?\(' tests chaos bench 2>/dev/null |
       grep -E 'TEST_CASE\("[-~]|TEST_CASE_METHOD\([^,]+, *"[-~]' || true)
if [ -n "$hits" ]; then
  echo "$hits"
  echo "test names: $(echo "$hits" | wc -l) Catch2 names that ctest cannot select (leading - or ~)"
  exit 1
fi
echo "test names: every Catch2 name can be selected by ctest"
