# Helpers shared by the packaging tests (sourced). Every process a test starts is recorded and
# stopped by its PID on exit.
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# A scratch directory removed on exit, and the PIDs to stop then.
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/epoch-packaging.XXXXXX")
TEST_PIDS=()
cleanup() {
  local pid
  for pid in "${TEST_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${TEST_PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$TEST_TMP"
}
trap cleanup EXIT

# free_port: a TCP port on 127.0.0.1 that nothing listens on right now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# expect_file <path> [mode]: the file exists (and has that octal mode).
expect_file() {
  [ -e "$1" ] || fail "missing $1"
  if [ $# -ge 2 ]; then
    local mode
    mode=$(stat -c '%a' "$1")
    [ "$mode" = "$2" ] || fail "$1 has mode $mode, expected $2"
  fi
}
