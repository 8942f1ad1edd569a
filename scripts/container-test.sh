#!/usr/bin/env bash
# container-test.sh [build-dir]: builds Epoch's container image and runs a 3-member cluster from
# it on this machine (deploy/container/README.md). Not part of ctest: it downloads Debian
# packages and takes minutes. ctest runs the short variant (the entrypoint and Containerfile
# checks in tests/packaging/).
#
#  1. base image: `debootstrap --variant=minbase bookworm`, cached in $EPOCH_CONTAINER_CACHE
#     (default /var/tmp/epoch-container-cache), trimmed and imported with `podman import`;
#  2. the .deb (cpack) and the image (buildah bud, chroot isolation, vfs storage) — which
#     installs the .deb with apt into that clean root, running its maintainer scripts;
#  3. in the image: epochd --version, the epoch user (uid 2379), /var/lib/epoch mode 0700;
#  4. three containers (podman, runc, host network) named epoch-0..2, each listening on its own
#     loopback address 127.0.0.2..4 and reaching the others by their StatefulSet DNS names
#     (--add-host); the health checks pass; etcdctl writes and reads; one member stopped with
#     SIGTERM exits 0 and the other two still commit writes; with a second one stopped, the
#     health check fails;
#  5. the package's epochd.service under a real systemd (252, as PID 1 of a container made from
#     the image plus Debian's systemd, the default configuration moved to free ports): it becomes
#     active only after READY=1, serves, is restarted after SIGKILL (Restart=on-failure), and on
#     `systemctl stop` sends STOPPING=1 and ends with Result=success — all under its hardening.
# podman schedules health checks with systemd timers, absent here: the test runs them itself
# (`podman healthcheck run`). Images, containers and storage live under the cache directory (a
# podman --root of their own), apart from other podman users. Every container started is removed
# by its name at exit.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRC/build/release}
CACHE=${EPOCH_CONTAINER_CACHE:-/var/tmp/epoch-container-cache}
BASE_PORT=${EPOCH_CONTAINER_BASE_PORT:-32379}
IMAGE=localhost/epoch:test
BASE_IMAGE=localhost/epoch-base:bookworm-trimmed
STORE=(--root "$CACHE/storage" --runroot "$CACHE/run" --storage-driver vfs)
RUN_OPTS=(--runtime runc --network host --ulimit nofile=20000:20000 --ulimit nproc=32768:32768)
DEADLINE_S=90

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
podman_() { podman "${STORE[@]}" "$@"; }

WORK=$(mktemp -d /var/tmp/epoch-container-test.XXXXXX)
CONTAINERS=()
cleanup() {
  local c
  for c in "${CONTAINERS[@]}"; do podman_ rm -f -v -t 5 "$c" >/dev/null 2>&1 || true; done
  podman_ image prune -f >/dev/null 2>&1 || true  # images a rebuild untagged
  rm -rf "$WORK"
}
trap cleanup EXIT

# wait_until <what> <command...>: runs the command until it succeeds, within DEADLINE_S.
wait_until() {
  local what=$1 end=$((SECONDS + DEADLINE_S))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || fail "no $what within ${DEADLINE_S}s"
    sleep 0.5
  done
}

for tool in debootstrap buildah podman runc etcdctl cpack; do
  command -v "$tool" >/dev/null ||
    fail "$tool is missing (apt-get install debootstrap buildah podman runc etcd-client cmake)"
done

t0=$SECONDS
mkdir -p "$CACHE"
if [ ! -e "$CACHE/bookworm-minbase.done" ]; then
  log "debootstrap --variant=minbase bookworm (once; cached in $CACHE)"
  rm -rf "$CACHE/bookworm-minbase"
  debootstrap --variant=minbase bookworm "$CACHE/bookworm-minbase" http://deb.debian.org/debian \
    >"$CACHE/debootstrap.log" 2>&1 || { tail "$CACHE/debootstrap.log"; fail "debootstrap"; }
  touch "$CACHE/bookworm-minbase.done"
fi
if ! podman_ image exists "$BASE_IMAGE"; then
  # Without debootstrap's downloaded .debs, apt's lists, docs, man pages and translations, as
  # Debian's slim images (about 80 MB instead of 200).
  log "importing the base image"
  tar -C "$CACHE/bookworm-minbase" --exclude='./var/cache/apt/archives/*.deb' \
    --exclude='./var/lib/apt/lists/*' --exclude='./usr/share/doc/*' \
    --exclude='./usr/share/man/*' --exclude='./usr/share/locale/*' -c . |
    podman_ import - "$BASE_IMAGE" >/dev/null
fi
t_base=$SECONDS

log "building the .deb"
cpack --config "$BUILD/CPackConfig.cmake" -B "$WORK/deb" >"$WORK/cpack.log" 2>&1 ||
  { cat "$WORK/cpack.log"; fail "cpack"; }
mkdir "$WORK/context"
cp "$WORK"/deb/epoch_*.deb "$SRC/deploy/container/epoch-entrypoint.sh" "$WORK/context/"
log "building the image (buildah bud; apt installs the .deb into the clean root)"
buildah "${STORE[@]}" bud --isolation chroot --format docker --layers=false \
  --build-arg BASE="$BASE_IMAGE" -f "$SRC/deploy/container/Containerfile" -t "$IMAGE" \
  "$WORK/context" >"$WORK/bud.log" 2>&1 || { tail -30 "$WORK/bud.log"; fail "buildah bud"; }
t_image=$SECONDS
size=$(podman_ image inspect --format '{{.Size}}' "$IMAGE")
log "image $IMAGE: $((size / 1000000)) MB"

# One container for every check in the image (with vfs storage each container copies the image).
facts=$(podman_ run --rm "${RUN_OPTS[@]}" --no-healthcheck --entrypoint sh "$IMAGE" -c \
  'epochd --version; id -u; stat -c "%a %U:%G" /var/lib/epoch;
   stat -c "%U:%G %a" /etc/epoch/epoch.conf.yml; getent passwd epoch | cut -d: -f1')
expected="epochd [0-9.]+
2379
700 epoch:epoch
root:epoch 640
epoch"
[[ "$facts" =~ ^$expected$ ]] ||
  fail "in the image, expected (version, uid, /var/lib/epoch, the config, the user):
$expected
got:
$facts"
version=$(head -1 <<<"$facts")
log "in the image: $version, uid 2379, /var/lib/epoch 0700 epoch:epoch"

client_port=$BASE_PORT
peer_port=$((BASE_PORT + 1))
metrics_port=$((BASE_PORT + 2))
hosts=()
for i in 0 1 2; do hosts+=(--add-host "epoch-$i.epoch.default.svc.cluster.local:127.0.0.$((i + 2))"); done
endpoints=127.0.0.2:$client_port,127.0.0.3:$client_port,127.0.0.4:$client_port
for i in 0 1 2; do
  name=epoch-test-$i
  podman_ rm -f "$name" >/dev/null 2>&1 || true
  mkdir -p "$WORK/data-$i"
  CONTAINERS+=("$name")
  podman_ run -d --name "$name" "${RUN_OPTS[@]}" --health-interval disable --hostname "epoch-$i" "${hosts[@]}" \
    -e EPOCHD_LISTEN_HOST="127.0.0.$((i + 2))" -e EPOCHD_CLIENT_PORT="$client_port" \
    -e EPOCHD_PEER_PORT="$peer_port" -e EPOCHD_METRICS_PORT="$metrics_port" \
    -v "$WORK/data-$i:/var/lib/epoch:U" "$IMAGE" >/dev/null 2>>"$WORK/podman.log" ||
    { cat "$WORK/podman.log"; fail "podman run $name"; }
done
t_started=$SECONDS
for i in 0 1 2; do
  wait_until "healthy epoch-test-$i" podman_ healthcheck run "epoch-test-$i"
done
t_healthy=$SECONDS
log "3 members healthy $((t_healthy - t_started))s after start"

export ETCDCTL_API=3
etcdctl --endpoints "$endpoints" put /container/test from-the-image >/dev/null
[ "$(etcdctl --endpoints "$endpoints" get --print-value-only /container/test)" = from-the-image ] ||
  fail "etcdctl did not read back its write"
members=$(etcdctl --endpoints "$endpoints" member list)
for i in 0 1 2; do
  grep -q "epoch-$i, http://epoch-$i.epoch.default.svc.cluster.local:$peer_port, http://epoch-$i.epoch.default.svc.cluster.local:$client_port" <<<"$members" ||
    fail "member list lacks epoch-$i with its DNS URLs: $members"
done
log "etcdctl put/get through the cluster; member list shows the StatefulSet DNS names"

podman_ stop -t 30 epoch-test-2 >/dev/null 2>>"$WORK/podman.log"
code=$(podman_ inspect --format '{{.State.ExitCode}}' epoch-test-2)
[ "$code" = 0 ] || fail "epoch-test-2 exited $code on SIGTERM (137 means it had to be killed)"
etcdctl --endpoints "127.0.0.2:$client_port,127.0.0.3:$client_port" --command-timeout 10s \
  put /container/after-stop still-writable >/dev/null || fail "two members do not commit writes"
log "SIGTERM: epoch-test-2 exited 0; the other two still commit"
podman_ stop -t 30 epoch-test-1 >/dev/null 2>>"$WORK/podman.log"
if podman_ healthcheck run epoch-test-0 >/dev/null 2>&1; then
  fail "the health check passes on a member without quorum"
fi
log "with two of three members stopped, the health check fails"
for c in "${CONTAINERS[@]}"; do podman_ rm -f -v -t 5 "$c" >/dev/null 2>&1 || true; done
CONTAINERS=()
t_cluster=$SECONDS

mkdir "$WORK/systemd"
sd_port=$((BASE_PORT + 10))
sed -e "s/:2379/:$sd_port/g; s/:2380/:$((sd_port + 1))/g; s/:2381/:$((sd_port + 2))/g" \
  "$SRC/deploy/systemd/epoch.conf.yml" >"$WORK/systemd/epoch.conf.yml"
cat >"$WORK/systemd/Containerfile" <<CONTAINERFILE
FROM $IMAGE
USER root
RUN apt-get update && apt-get install -y --no-install-recommends systemd && \\
    rm -rf /var/lib/apt/lists/*
COPY epoch.conf.yml /etc/epoch/epoch.conf.yml
RUN chown root:epoch /etc/epoch/epoch.conf.yml && chmod 0640 /etc/epoch/epoch.conf.yml && \\
    systemctl enable epochd
ENTRYPOINT ["/lib/systemd/systemd"]
CONTAINERFILE
log "the unit under systemd: building the image (the epoch image + Debian's systemd)"
buildah "${STORE[@]}" bud --isolation chroot --layers=false -t localhost/epoch-systemd:test \
  "$WORK/systemd" >"$WORK/bud-systemd.log" 2>&1 ||
  { tail -30 "$WORK/bud-systemd.log"; fail "buildah bud (systemd)"; }
CONTAINERS+=(epoch-test-systemd)
podman_ rm -f epoch-test-systemd >/dev/null 2>&1 || true
podman_ run -d --name epoch-test-systemd --systemd=always "${RUN_OPTS[@]}" \
  localhost/epoch-systemd:test >/dev/null 2>>"$WORK/podman.log" ||
  { cat "$WORK/podman.log"; fail "podman run (systemd)"; }
in_systemd() { podman_ exec epoch-test-systemd "$@"; }
unit_is() { [ "$(in_systemd systemctl show -p "$1" --value epochd)" = "$2" ]; }
wait_until "epochd.service active (READY=1)" unit_is ActiveState active
in_systemd journalctl -u epochd --no-pager | grep -q "told systemd READY=1" ||
  fail "epochd.service is active without READY=1"
etcdctl --endpoints "127.0.0.1:$sd_port" put /systemd/key served >/dev/null ||
  fail "epochd under systemd does not serve"
in_systemd systemctl kill -s KILL epochd
wait_until "a restart after SIGKILL (Restart=on-failure)" unit_is NRestarts 1
wait_until "epochd.service active again" unit_is ActiveState active
[ "$(etcdctl --endpoints "127.0.0.1:$sd_port" --command-timeout 10s get --print-value-only \
  /systemd/key)" = served ] || fail "the key written before SIGKILL is gone"
in_systemd systemctl stop epochd
unit_is ActiveState inactive && unit_is Result success ||
  fail "systemctl stop: $(in_systemd systemctl show -p ActiveState -p Result epochd)"
in_systemd journalctl -u epochd --no-pager | grep -q "told systemd STOPPING=1" ||
  fail "no STOPPING=1 on systemctl stop"
[ "$(in_systemd stat -c '%a %U' /var/lib/epoch/default)" = "700 epoch" ] ||
  fail "the data directory is not 0700 epoch"
log "under systemd: active after READY=1, serves, restarted after SIGKILL, clean stop"
t_end=$SECONDS

cat <<REPORT
PASS: container test
  base image (debootstrap, cached)  $((t_base - t0)) s
  .deb + image build                $((t_image - t_base)) s  (image $((size / 1000000)) MB)
  3 members start -> healthy        $((t_healthy - t_started)) s
  3-member cluster part             $((t_cluster - t_image)) s
  the unit under systemd            $((t_end - t_cluster)) s
  whole run                         $((t_end - t0)) s
REPORT
