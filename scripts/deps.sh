#!/usr/bin/env bash
# Installs exactly the Debian packages Epoch needs, and only when one is missing.
# Idempotent and quiet when everything is present; `apt-get update` runs only before an install.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build g++ ccache pkg-config clang-format curl
  # libraries
  libasio-dev libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  librocksdb-dev libfmt-dev libspdlog-dev catch2 libcli11-dev libsqlite3-dev libpq-dev libssl-dev
  libyaml-cpp-dev
  libtcmalloc-minimal4 libsystemd-dev
  # tools the tests and benchmarks use
  etcd-client etcd-server postgresql python3 python3-yaml
  python3-grpcio python3-protobuf  # the Python worker (client/python/); stubs from protoc
  patroni  # its etcd3 DCS speaks only etcd's HTTP/JSON gateway (tests/integration/gateway/)
  openssl  # the peer mTLS test makes its CA and member certificates with the CLI
  # packaging tests (cpack's dpkg-shlibdeps, systemd-analyze); scripts/container-test.sh
  # needs debootstrap buildah podman runc besides
  dpkg-dev systemd
  # promtool and a Prometheus server (deploy/prometheus/, the metrics tests)
  prometheus
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

echo "deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done" >&2
