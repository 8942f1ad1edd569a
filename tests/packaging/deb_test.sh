#!/usr/bin/env bash
# deb_test.sh <build-dir>: builds the Debian package with CPack and checks it without installing
# it on this machine: the control fields, the maintainer scripts and conffiles, and — extracted
# with `dpkg-deb -x` into an empty root — every file with its mode; then runs `epochd --version`
# from that root. (Installing it with apt into a clean debootstrap'd root, which runs the
# maintainer scripts, is part of scripts/container-test.sh: the image is built that way.)
source "$(dirname "$0")/lib.sh"
BUILD=$1

cpack --config "$BUILD/CPackConfig.cmake" -B "$TEST_TMP/out" >"$TEST_TMP/cpack.log" 2>&1 ||
  { cat "$TEST_TMP/cpack.log"; fail "cpack failed"; }
debs=("$TEST_TMP"/out/epoch_*_*.deb)
[ "${#debs[@]}" -eq 1 ] && [ -f "${debs[0]}" ] || fail "expected one epoch_*.deb, got: ${debs[*]}"
deb=${debs[0]}

field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = epoch ] || fail "Package is '$(field Package)'"
depends=$(field Depends)
for dep in passwd 'libgrpc++' libprotobuf libsystemd0 libc6; do
  [[ "$depends" == *"$dep"* ]] || fail "Depends lacks $dep: $depends"
done

dpkg-deb -e "$deb" "$TEST_TMP/control"
for script in postinst prerm postrm; do
  expect_file "$TEST_TMP/control/$script" 755
  sh -n "$TEST_TMP/control/$script" || fail "$script is not valid sh"
done
grep -qx '/etc/epoch/epoch.conf.yml' "$TEST_TMP/control/conffiles" ||
  fail "/etc/epoch/epoch.conf.yml is not a conffile"
grep -q 'useradd --system' "$TEST_TMP/control/postinst" || fail "postinst creates no system user"
grep -q 'install -d -m 0700 -o epoch -g epoch /var/lib/epoch' "$TEST_TMP/control/postinst" ||
  fail "postinst does not create /var/lib/epoch with mode 0700"

ROOT=$TEST_TMP/root
dpkg-deb -x "$deb" "$ROOT"
expect_file "$ROOT/usr/bin/epochd" 755
expect_file "$ROOT/usr/bin/epochctl" 755
expect_file "$ROOT/usr/bin/epoch-wal" 755
expect_file "$ROOT/etc/epoch/epoch.conf.yml" 644
expect_file "$ROOT/usr/lib/systemd/system/epochd.service" 644
grep -q '^ExecStart=/usr/bin/epochd --config-file /etc/epoch/epoch.conf.yml$' \
  "$ROOT/usr/lib/systemd/system/epochd.service" || fail "the packaged unit runs something else"
# Only what is listed above, nothing from the devel component or the build tree.
unexpected=$(cd "$ROOT" && find . -type f | sort | grep -v -x -e ./usr/bin/epochd \
  -e ./usr/bin/epochctl -e ./usr/bin/epoch-wal -e ./etc/epoch/epoch.conf.yml \
  -e ./usr/lib/systemd/system/epochd.service || true)
[ -z "$unexpected" ] || fail "unexpected files in the package: $unexpected"

version=$("$ROOT/usr/bin/epochd" --version)
[[ "$version" =~ ^epochd\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "epochd --version printed '$version'"
"$ROOT/usr/bin/epochctl" --help >/dev/null || fail "packaged epochctl --help failed"
echo "PASS: $(basename "$deb"): control, maintainer scripts, contents and modes; $version"
