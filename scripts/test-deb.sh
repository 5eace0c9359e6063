#!/usr/bin/env bash
# scripts/test-deb.sh - build the Debian package and install it on a fresh root.
#
#   sudo bash scripts/test-deb.sh [SUITE]      (default: trixie; bookworm, sid)
#
# In the cached root of SUITE (scripts/test-matrix.sh makes it), builds
# postgresql-NN-dlock from debian/ with pg_buildext (dpkg-buildpackage -b),
# for the PostgreSQL that release ships.  Then, in a fresh copy of a bare
# debootstrap root of the same release, installs that .deb with apt (which
# pulls in the server), starts a cluster as postgres with dlock preloaded,
# and runs CREATE EXTENSION dlock and an acquire, a fenced write and a
# release.  Prints `N passed, N failed` last; exits non-zero on a failure.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SUITE=${1:-trixie}
ROOTS=${DLOCK_ROOTS:-/var/tmp/dlock-roots}
R=$ROOTS/$SUITE
FRESH=$ROOTS/$SUITE.deb-fresh
PASS=0
FAIL=0
ok() { echo "ok - $1"; PASS=$((PASS + 1)); }
notok() { echo "not ok - $1"; FAIL=$((FAIL + 1)); }
finish() { umount_all; echo "$PASS passed, $FAIL failed"; [ "$FAIL" -eq 0 ] && [ "$PASS" -gt 0 ]; exit $?; }

MOUNTED=()
umount_all() {
    local i
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do umount -l "${MOUNTED[$i]}" 2>/dev/null || true; done
    MOUNTED=()
}
mount_in() {
    local r=$1
    mountpoint -q "$r/proc" || { mount -t proc proc "$r/proc" && MOUNTED+=("$r/proc"); }
    mountpoint -q "$r/sys" || { mount -t sysfs sys "$r/sys" && MOUNTED+=("$r/sys"); }
    mountpoint -q "$r/dev" || { mount --bind /dev "$r/dev" && MOUNTED+=("$r/dev"); }
}
in_root() { local r=$1; shift; chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }

[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; notok "run as root"; finish; }

# the build root: the matrix's cached root
[ -x "$R/bin/bash" ] || { notok "no root $R (run scripts/test-matrix.sh $SUITE first)"; finish; }
mount_in "$R"
cp /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
if in_root "$R" apt-get -q -y -o Dpkg::Use-Pty=0 --no-install-recommends install \
        build-essential debhelper dpkg-dev fakeroot postgresql-server-dev-all >"$ROOTS/$SUITE.deb-deps.log" 2>&1; then
    ok "build dependencies installed in $SUITE"
else
    tail -n 20 "$ROOTS/$SUITE.deb-deps.log"; notok "build dependencies"; finish
fi

rm -rf "$R/root/deb"
mkdir -p "$R/root/deb/dlock"
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | tar -C "$R/root/deb/dlock" -xf -
if in_root "$R" bash -c 'cd /root/deb/dlock && pg_buildext updatecontrol && dpkg-buildpackage -us -uc -b' \
        >"$ROOTS/$SUITE.deb-build.log" 2>&1; then
    ok "dpkg-buildpackage built $(cd "$R/root/deb" && ls postgresql-*-dlock_*.deb | tr '\n' ' ')"
else
    tail -n 30 "$ROOTS/$SUITE.deb-build.log"; notok "dpkg-buildpackage"; finish
fi
DEB=$(cd "$R/root/deb" && ls postgresql-*-dlock_*.deb | grep -v dbgsym | head -n 1)
MAJOR=$(sed -nE 's/^postgresql-([0-9]+)-dlock_.*/\1/p' <<<"$DEB")

# a fresh root: a bare debootstrap of the same release, copied anew
umount_all
rm -rf "$FRESH"
if [ ! -d "$ROOTS/$SUITE.bare" ]; then
    debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$ROOTS/$SUITE.bare.partial" \
        http://deb.debian.org/debian >"$ROOTS/$SUITE.bare.log" 2>&1 &&
        mv "$ROOTS/$SUITE.bare.partial" "$ROOTS/$SUITE.bare"
fi
cp -a "$ROOTS/$SUITE.bare" "$FRESH" || { notok "fresh root"; finish; }
chmod 755 "$FRESH"
printf '#!/bin/sh\nexit 101\n' >"$FRESH/usr/sbin/policy-rc.d"; chmod 755 "$FRESH/usr/sbin/policy-rc.d"
echo 'Acquire::Check-Valid-Until "false";' >"$FRESH/etc/apt/apt.conf.d/99dlock"
cp /etc/resolv.conf "$FRESH/etc/resolv.conf" 2>/dev/null || true
mount_in "$FRESH"
cp "$R/root/deb/$DEB" "$FRESH/tmp/"
if in_root "$FRESH" bash -c "apt-get -q update && apt-get -q -y --no-install-recommends install /tmp/$DEB" \
        >"$ROOTS/$SUITE.deb-install.log" 2>&1; then
    ok "apt installed $DEB (and PostgreSQL $MAJOR) on a fresh $SUITE root"
else
    tail -n 20 "$ROOTS/$SUITE.deb-install.log"; notok "install $DEB"; finish
fi
out=$(in_root "$FRESH" bash -c "
    set -e
    install -d -o postgres -m 700 /tmp/pgdata
    runuser -u postgres -- /usr/lib/postgresql/$MAJOR/bin/initdb -D /tmp/pgdata >/dev/null
    echo \"shared_preload_libraries = 'dlock'\" >> /tmp/pgdata/postgresql.conf
    runuser -u postgres -- /usr/lib/postgresql/$MAJOR/bin/pg_ctl -D /tmp/pgdata -o '-k /tmp -p 54329 -c listen_addresses=' -w start >/dev/null
    runuser -u postgres -- psql -X -q -h /tmp -p 54329 -At -v ON_ERROR_STOP=1 -d postgres <<'SQL'
CREATE EXTENSION dlock;
CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, NULL);
SELECT dlock_acquire('k', 'h', '1 min') AS tok \\gset
UPDATE t SET v = 'written' WHERE id = 1 AND dlock_validate('k', 'h', :tok);
SELECT extversion || ' ' || (SELECT v FROM t) || ' ' || dlock_release('k', 'h', :tok)::text
  FROM pg_extension WHERE extname = 'dlock';
SQL
    runuser -u postgres -- /usr/lib/postgresql/$MAJOR/bin/pg_ctl -D /tmp/pgdata -m fast stop >/dev/null
" 2>&1)
if grep -qE '^[0-9.]+ written true$' <<<"$out"; then
    ok "CREATE EXTENSION dlock, acquire, fenced write and release work from the package ($out)"
else
    echo "$out"; notok "the installed package does not work"
fi
umount_all
rm -rf "$FRESH"
finish
