#!/usr/bin/env bash
# systemd_unit_test.sh <build-dir>: `systemd-analyze verify` on epochd.service as the Debian
# package installs it (the server component installed with prefix /usr into an empty root, plus
# this machine's systemd units for the targets it names). systemd-analyze prints unknown keys
# and bad values as warnings and still exits 0, so any output at all is a failure. Then
# `systemd-analyze security --offline` scores the hardening.
source "$(dirname "$0")/lib.sh"
BUILD=$1
ROOT=$TEST_TMP/root

DESTDIR=$ROOT cmake --install "$BUILD" --prefix /usr --component server >"$TEST_TMP/install.log"
UNIT=/usr/lib/systemd/system/epochd.service
expect_file "$ROOT$UNIT"
expect_file "$ROOT/usr/bin/epochd" 755
expect_file "$ROOT/etc/epoch/epoch.conf.yml"
cp -an /usr/lib/systemd/system/. "$ROOT/usr/lib/systemd/system/"

for key in Type=notify Restart=on-failure NoNewPrivileges=yes ProtectSystem=strict \
  ProtectHome=yes PrivateTmp=yes User=epoch StateDirectoryMode=0700; do
  grep -qx "$key" "$ROOT$UNIT" || fail "epochd.service lacks $key"
done

set +e
output=$(systemd-analyze verify --root="$ROOT" "$UNIT" 2>&1)
code=$?
set -e
if [ "$code" -ne 0 ] || [ -n "$output" ]; then
  fail "systemd-analyze verify exited $code and printed:
$output"
fi
# The hardening, as systemd scores it: exposure at most 1.5 on its 10-point scale (its
# --threshold counts in tenths). The unit scores about 1.2.
set +e
security=$(systemd-analyze security --offline=true --threshold=15 --root="$ROOT" epochd.service 2>&1)
code=$?
set -e
[ "$code" -eq 0 ] || fail "systemd-analyze security: exposure above 1.5:
$security"
echo "PASS: systemd-analyze verify $UNIT: no warnings; $(grep -o 'Overall exposure level.*' <<<"$security")"
