#!/bin/sh
# epoch-entrypoint: runs epochd as member N of a Kubernetes StatefulSet.
#
# The pod's hostname is <statefulset>-<ordinal> (epoch-0, epoch-1, ...); member i is reached at
# <statefulset>-<i>.<service>.<namespace>.svc.<domain> through the headless service. From that
# this script derives epochd's --name, --initial-cluster (every ordinal below EPOCHD_CLUSTER_SIZE),
# --initial-advertise-peer-urls and --advertise-client-urls, then execs epochd with them and with
# any arguments it was given. Settings (environment; EPOCHD_, not EPOCH_, so that epochd does not
# read them as its own flags):
#   EPOCHD_CLUSTER_SIZE    members of the initial cluster (3)
#   EPOCHD_SERVICE         the headless service's name (epoch)
#   EPOCHD_NAMESPACE       the namespace (the service account's, else "default")
#   EPOCHD_CLUSTER_DOMAIN  cluster.local
#   EPOCHD_HOSTNAME        the pod's hostname (hostname(1))
#   EPOCHD_LISTEN_HOST     the address listeners bind (0.0.0.0)
#   EPOCHD_CLIENT_PORT, EPOCHD_PEER_PORT, EPOCHD_METRICS_PORT   2379, 2380, 2381
#   EPOCHD_DATA_DIR        /var/lib/epoch/data
#   EPOCHD_CLUSTER_TOKEN   <statefulset>-<namespace>
#   EPOCHD_TLS_DIR         if set: client TLS from tls.crt, tls.key, ca.crt there (a Secret of
#                          type kubernetes.io/tls plus ca.crt), https client URLs, client
#                          certificates required
#   EPOCHD_RESTORE_SNAPSHOT  an `etcdctl snapshot save` file: when the data directory is empty
#                          (a new member), first `epochd --restore-snapshot` it with the same
#                          flags, as a member of the new cluster (the membership runbook,
#                          deploy/kubernetes/README.md)
#   EPOCHD_DRY_RUN=1       print epochd's command line, one argument a line, instead of running it
#                          (with a restore, that command line first, then an empty line)
# `epoch-entrypoint healthcheck` checks this member with `epochctl endpoint health` (a
# linearizable read through the log) and exits non-zero when it fails.
set -eu

die() {
  echo "epoch-entrypoint: $*" >&2
  exit 2
}

size=${EPOCHD_CLUSTER_SIZE:-3}
service=${EPOCHD_SERVICE:-epoch}
sa_namespace=/var/run/secrets/kubernetes.io/serviceaccount/namespace
if [ -n "${EPOCHD_NAMESPACE:-}" ]; then
  namespace=$EPOCHD_NAMESPACE
elif [ -r "$sa_namespace" ]; then
  namespace=$(cat "$sa_namespace")
else
  namespace=default
fi
domain=${EPOCHD_CLUSTER_DOMAIN:-cluster.local}
host=${EPOCHD_HOSTNAME:-$(hostname)}
listen=${EPOCHD_LISTEN_HOST:-0.0.0.0}
client_port=${EPOCHD_CLIENT_PORT:-2379}
peer_port=${EPOCHD_PEER_PORT:-2380}
metrics_port=${EPOCHD_METRICS_PORT:-2381}
data_dir=${EPOCHD_DATA_DIR:-/var/lib/epoch/data}
tls_dir=${EPOCHD_TLS_DIR:-}

case $size in '' | *[!0-9]*) die "EPOCHD_CLUSTER_SIZE '$size' is not a number" ;; esac
[ "$size" -ge 1 ] || die "EPOCHD_CLUSTER_SIZE must be at least 1"
ordinal=${host##*-}
statefulset=${host%-*}
case $ordinal in '' | *[!0-9]*) die "hostname '$host' is not <statefulset>-<ordinal>" ;; esac
[ "$statefulset" != "$host" ] && [ -n "$statefulset" ] ||
  die "hostname '$host' is not <statefulset>-<ordinal>"
[ "$ordinal" -lt "$size" ] ||
  die "ordinal $ordinal is outside the initial cluster of $size members: add members with the membership runbook, not by scaling the StatefulSet"
token=${EPOCHD_CLUSTER_TOKEN:-$statefulset-$namespace}

scheme=http
if [ -n "$tls_dir" ]; then
  for f in tls.crt tls.key ca.crt; do
    [ -r "$tls_dir/$f" ] || die "EPOCHD_TLS_DIR: cannot read $tls_dir/$f"
  done
  scheme=https
fi

# member_host <ordinal>: the member's DNS name under the headless service.
member_host() {
  echo "$statefulset-$1.$service.$namespace.svc.$domain"
}

if [ "${1:-}" = healthcheck ]; then
  set -- --endpoints "$scheme://$(member_host "$ordinal"):$client_port" --command-timeout 5s
  if [ -n "$tls_dir" ]; then
    set -- "$@" --cacert "$tls_dir/ca.crt" --cert "$tls_dir/tls.crt" --key "$tls_dir/tls.key"
  fi
  exec epochctl "$@" endpoint health
fi

cluster=""
i=0
while [ "$i" -lt "$size" ]; do
  cluster="$cluster${cluster:+,}$statefulset-$i=http://$(member_host "$i"):$peer_port"
  i=$((i + 1))
done
self=$(member_host "$ordinal")

set -- --name "$host" \
  --data-dir "$data_dir" \
  --listen-client-urls "$scheme://$listen:$client_port" \
  --advertise-client-urls "$scheme://$self:$client_port" \
  --listen-peer-urls "http://$listen:$peer_port" \
  --initial-advertise-peer-urls "http://$self:$peer_port" \
  --listen-metrics-urls "http://$listen:$metrics_port" \
  --initial-cluster "$cluster" \
  --initial-cluster-token "$token" \
  --initial-cluster-state new \
  "$@"
if [ -n "$tls_dir" ]; then
  set -- "$@" --cert-file "$tls_dir/tls.crt" --key-file "$tls_dir/tls.key" \
    --trusted-ca-file "$tls_dir/ca.crt" --client-cert-auth
fi

restore=${EPOCHD_RESTORE_SNAPSHOT:-}
if [ -n "$restore" ] && [ -n "$(ls -A "$data_dir" 2>/dev/null)" ]; then
  restore=""  # this member has its state: a restart, not a new member
fi
if [ "${EPOCHD_DRY_RUN:-}" = 1 ]; then
  [ -z "$restore" ] || printf '%s\n' epochd "$@" --restore-snapshot "$restore" ""
  printf '%s\n' epochd "$@"
  exit 0
fi
if [ -n "$restore" ]; then
  [ -r "$restore" ] || die "EPOCHD_RESTORE_SNAPSHOT: cannot read $restore"
  epochd "$@" --restore-snapshot "$restore"
fi
exec epochd "$@"
