#!/usr/bin/env bash
# scripts/test-deb.sh - the README's install routes, each on a bare Debian root
# with only the packages the README lists for it.
#
#   sudo bash scripts/test-deb.sh [SUITE]      (default: trixie; bookworm, sid)
#
# A bare root of SUITE is made once with debootstrap (--variant=minbase) and
# kept as $DLOCK_ROOTS/SUITE.bare; each route runs in a fresh copy of it, so a
# package the README forgets fails the route.  The package lists are read
# from README.md's Installation block (NN: the PostgreSQL major that release
# ships):
#   - from source: its packages, `make && make install`; then the server
#     (postgresql-NN, the README's line after `make install`) and a check that the
#     extension works: initdb, dlock preloaded, CREATE EXTENSION dlock, an
#     acquire, a fenced write and a release;
#   - make dist, in the same root: the packages it adds, `make dist` in a
#     git repository of the checkout gives dlock-VERSION.zip;
#   - PGXN, in the same root: the packages it adds, `pgxn install` of that
#     zip (as `pgxn install dlock` does with the zip it downloads), and the
#     check again;
#   - the Debian package: its packages, `pg_buildext updatecontrol &&
#     dpkg-buildpackage -us -uc -b`; then, in another fresh root, `apt
#     install` of the .deb (which pulls in the server): the check, `dlock`
#     on PATH (/usr/bin/dlock, an alternative pointing at the version's
#     bin directory) and its man page installed compressed where man finds
#     it (/usr/share/man/man1/dlock.1.gz), nothing uncompressed.
# apt's progress lines are shown; each step's whole output is in
# $DLOCK_ROOTS/SUITE.deb-*.log.  Prints `N passed, N failed` last; exits
# non-zero on a failure.  Environment: DLOCK_ROOTS (default
# /var/tmp/dlock-roots), DLOCK_MIRROR (default: the first Debian mirror of
# this machine's apt sources), DLOCK_DEB_FRESH=1 (debootstrap anew).
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SUITE=${1:-trixie}
ROOTS=${DLOCK_ROOTS:-/var/tmp/dlock-roots}
BARE=$ROOTS/$SUITE.bare
PASS=0
FAIL=0
START=$SECONDS
ROOTS_MADE=()
ok() { echo "ok - $1"; PASS=$((PASS + 1)); }
notok() { echo "not ok - $1"; FAIL=$((FAIL + 1)); }
finish() {
    cleanup
    echo "==> test-deb.sh $SUITE: $((SECONDS - START)) s"
    echo "$PASS passed, $FAIL failed"
    [ "$FAIL" -eq 0 ] && [ "$PASS" -gt 0 ]
    exit $?
}

MOUNTED=()
umount_all() {
    local i
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do umount -l "${MOUNTED[$i]}" 2>/dev/null || true; done
    MOUNTED=()
}
# cleanup: servers still running in a root, mounts, the fresh roots
cleanup() {
    local r p
    for r in ${ROOTS_MADE[@]+"${ROOTS_MADE[@]}"}; do
        for p in "$r"/tmp/pgdata/postmaster.pid; do
            [ -f "$p" ] && kill -QUIT "$(head -n 1 "$p")" 2>/dev/null
        done
    done
    umount_all
    for r in ${ROOTS_MADE[@]+"${ROOTS_MADE[@]}"}; do rm -rf "$r"; done
    ROOTS_MADE=()
}
trap 'cleanup' EXIT
trap 'notok "interrupted"; finish' INT TERM

mount_in() {
    local r=$1
    mountpoint -q "$r/proc" || { mount -t proc proc "$r/proc" && MOUNTED+=("$r/proc"); }
    mountpoint -q "$r/sys" || { mount -t sysfs sys "$r/sys" && MOUNTED+=("$r/sys"); }
    mountpoint -q "$r/dev" || { mount --bind /dev "$r/dev" && MOUNTED+=("$r/dev"); }
}
in_root() {
    local r=$1
    shift
    chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}
mirror() {
    if [ -n "${DLOCK_MIRROR:-}" ]; then echo "$DLOCK_MIRROR"; return; fi
    local m
    m=$(grep -rhoE '(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
        grep -v security | head -n 1 | awk '{print $2}')
    echo "${m:-http://deb.debian.org/debian}"
}
# step LOG TITLE CMD...: runs CMD, its output in LOG, with apt's and dpkg's
# progress lines (and make's errors) on the terminal
step() {
    local log=$1 title=$2 rc
    shift 2
    echo "==> $title"
    "$@" 2>&1 | tee "$log" |
        { grep --line-buffered -E '^([0-9]+ upgraded|Need to get|Fetched|Setting up|E:|W:|dpkg-buildpackage: info|dlock: installed)|error:|\*\*\*' |
            sed -u 's/^/    /'; true; } && rc=0 || rc=$?
    return $rc
}

[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; notok "run as root"; finish; }

# README's package list for ROUTE (the comment line that starts its part of
# the Installation block), NN replaced by the major
readme_packages() {
    awk -v route="# $1" '
        /^## Installation/ { inst = 1 } /^## / && !/Installation/ { inst = 0 }
        inst && index($0, route) == 1 { want = 1; next }
        inst && want && /^apt install / { sub(/^apt install /, ""); print; exit }' "$REPO/README.md" |
        sed "s/NN/$MAJOR/g"
}

# the bare root, made once
if [ "${DLOCK_DEB_FRESH:-0}" = 1 ]; then rm -rf "$BARE"; fi
if [ ! -x "$BARE/bin/bash" ]; then
    command -v debootstrap >/dev/null ||
        DEBIAN_FRONTEND=noninteractive apt-get -q -y install debootstrap >/dev/null ||
        { notok "debootstrap installed"; finish; }
    mkdir -p "$ROOTS"
    rm -rf "$BARE.partial"
    step "$ROOTS/$SUITE.bare.log" "debootstrap --variant=minbase $SUITE into $BARE ($(mirror)); a few minutes" \
        debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$BARE.partial" "$(mirror)" &&
        mv "$BARE.partial" "$BARE" || { notok "debootstrap $SUITE"; finish; }
fi

# fresh_root NAME: a new copy of the bare root, set up for apt, mounted;
# sets R (not in a subshell: it records the mounts and the copy)
fresh_root() {
    local r=$ROOTS/$SUITE.deb-$1
    R=$r
    rm -rf "$r"
    cp -a "$BARE" "$r" || return 1
    ROOTS_MADE+=("$r")
    chmod 755 "$r"
    # no service starts from package scripts, no default cluster, and
    # unstable's Release file may be past Valid-Until
    printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
    chmod 755 "$r/usr/sbin/policy-rc.d"
    mkdir -p "$r/etc/postgresql-common/createcluster.d"
    echo 'create_main_cluster = false' >"$r/etc/postgresql-common/createcluster.d/dlock-test.conf"
    echo 'Acquire::Check-Valid-Until "false";' >"$r/etc/apt/apt.conf.d/99dlock"
    cp /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
    mount_in "$r"
    in_root "$r" apt-get -q update >"$r.apt-update.log" 2>&1 || { tail -n 20 "$r.apt-update.log"; return 1; }
}
apt_in() {      # apt_in ROOT PACKAGES...: apt-get install, as the README's apt install does (without recommends: stricter)
    local r=$1
    shift
    in_root "$r" apt-get -q -y -o Dpkg::Use-Pty=0 --no-install-recommends install "$@"
}
copy_checkout() {   # copy_checkout DIR: tracked and untracked (not ignored) files, as in the work tree
    mkdir -p "$1"
    (cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar --null -T - -cf -) | tar -C "$1" -xf -
}
# check_extension ROOT WHAT: a cluster with dlock preloaded, CREATE
# EXTENSION, acquire, fenced write, release; stopped again
check_extension() {
    local r=$1 what=$2 out
    out=$(in_root "$r" bash -c "
        set -e
        rm -rf /tmp/pgdata
        install -d -o postgres -m 700 /tmp/pgdata
        runuser -u postgres -- /usr/lib/postgresql/$MAJOR/bin/initdb -D /tmp/pgdata >/dev/null
        echo \"shared_preload_libraries = 'dlock'\" >> /tmp/pgdata/postgresql.conf
        runuser -u postgres -- /usr/lib/postgresql/$MAJOR/bin/pg_ctl -D /tmp/pgdata -l /tmp/pgdata.log -o '-k /tmp -p 54329 -c listen_addresses=' -w start >/dev/null
        trap 'runuser -u postgres -- /usr/lib/postgresql/$MAJOR/bin/pg_ctl -D /tmp/pgdata -m fast stop >/dev/null' EXIT
        runuser -u postgres -- psql -X -q -h /tmp -p 54329 -At -v ON_ERROR_STOP=1 -d postgres <<'SQL'
CREATE EXTENSION dlock;
CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, NULL);
SELECT dlock_acquire('k', 'h', '1 min') AS tok \\gset
UPDATE t SET v = 'written' WHERE id = 1 AND dlock_validate('k', 'h', :tok);
SELECT extversion || ' ' || (SELECT v FROM t) || ' ' || dlock_release('k', 'h', :tok)::text
  FROM pg_extension WHERE extname = 'dlock';
SQL
    " 2>&1)
    if grep -qE '^[0-9.]+ written true$' <<<"$out"; then
        ok "$what: CREATE EXTENSION dlock, acquire, fenced write and release work ($(tail -n 1 <<<"$out"))"
    else
        echo "$out"
        notok "$what: the installed extension does not work"
    fi
    # every install and upgrade script of the checkout is installed: the
    # default version's full script (what CREATE EXTENSION dlock runs) and
    # the upgrades from every released version
    local f missing=
    for f in "$REPO"/dlock--*.sql "$REPO"/dlock_proxy--*.sql; do
        f=$(basename "$f")
        [ -f "$r/usr/share/postgresql/$MAJOR/extension/$f" ] || missing+=" $f"
    done
    if [ -z "$missing" ]; then
        ok "$what: every dlock--*.sql and dlock_proxy--*.sql of the checkout is installed"
    else
        notok "$what: not installed:$missing"
    fi
}

# --- from source, then make dist and PGXN, in one root ---
fresh_root src || { notok "a fresh $SUITE root"; finish; }
MAJOR=$(in_root "$R" apt-cache depends postgresql | sed -nE 's/^ *Depends: postgresql-([0-9]+)$/\1/p' | head -n 1)
[ -n "$MAJOR" ] || { notok "the PostgreSQL major of $SUITE"; finish; }
echo "==> $SUITE ships PostgreSQL $MAJOR"
PKG_SRC=$(readme_packages "from source")
PKG_DIST=$(readme_packages "make dist")
PKG_PGXN=$(readme_packages "PGXN")
PKG_DEB=$(readme_packages "Debian package")
for v in PKG_SRC PKG_DIST PKG_PGXN PKG_DEB; do
    [ -n "${!v}" ] || { notok "README.md's Installation block lists the packages of each route ($v)"; finish; }
done
copy_checkout "$R/root/dlock"
# shellcheck disable=SC2086
if step "$R.log" "from source: apt install $PKG_SRC" apt_in "$R" $PKG_SRC; then
    ok "from source: apt install $PKG_SRC"
    if step "$R.make.log" "from source: make && make install" in_root "$R" bash -c 'cd /root/dlock && make && make install'; then
        ok "from source: make && make install with only those packages"
        step "$R.server.log" "the server: apt install postgresql-$MAJOR" apt_in "$R" "postgresql-$MAJOR" ||
            notok "apt install postgresql-$MAJOR"
        check_extension "$R" "from source"
    else
        tail -n 30 "$R.make.log"
        notok "from source: make && make install with only those packages"
    fi
    # shellcheck disable=SC2086
    if step "$R.dist.log" "make dist: apt install $PKG_DIST" apt_in "$R" $PKG_DIST &&
        in_root "$R" bash -c 'cd /root/dlock && make clean >/dev/null && git init -q && git add -A &&
            git -c user.name=dlock -c user.email=dlock@localhost commit -qm dist && make dist' >>"$R.dist.log" 2>&1 &&
        ZIP=$(cd "$R/root/dlock" && ls dlock-*.zip) && [ -n "$ZIP" ]; then
        ok "make dist with the source route's packages and $PKG_DIST: $ZIP"
        # shellcheck disable=SC2086
        if step "$R.pgxn.log" "PGXN: apt install $PKG_PGXN; pgxn install ./$ZIP" apt_in "$R" $PKG_PGXN &&
            in_root "$R" bash -c "cd /root && rm -f /usr/lib/postgresql/$MAJOR/lib/dlock.so && pgxn install ./dlock/$ZIP" \
                >>"$R.pgxn.log" 2>&1 &&
            [ -f "$R/usr/lib/postgresql/$MAJOR/lib/dlock.so" ]; then
            ok "PGXN: pgxn install of the zip with the source route's packages and $PKG_PGXN"
            check_extension "$R" "PGXN"
        else
            tail -n 30 "$R.pgxn.log"
            notok "PGXN: pgxn install of the zip"
        fi
    else
        tail -n 30 "$R.dist.log"
        notok "make dist with the source route's packages and $PKG_DIST"
    fi
else
    tail -n 20 "$R.log"
    notok "from source: apt install $PKG_SRC"
fi
cleanup

# --- the Debian package: built in a root with the README's packages ---
fresh_root debbuild || { notok "a fresh $SUITE root"; finish; }
copy_checkout "$R/root/deb/dlock"
# shellcheck disable=SC2086
step "$R.log" "Debian package: apt install $PKG_DEB" apt_in "$R" $PKG_DEB ||
    { tail -n 20 "$R.log"; notok "Debian package: apt install $PKG_DEB"; finish; }
ok "Debian package: apt install $PKG_DEB"
if step "$R.build.log" "Debian package: pg_buildext updatecontrol && dpkg-buildpackage -us -uc -b" \
        in_root "$R" bash -c 'cd /root/deb/dlock && pg_buildext updatecontrol && dpkg-buildpackage -us -uc -b'; then
    ok "dpkg-buildpackage built $(cd "$R/root/deb" && ls postgresql-*-dlock_*.deb | tr '\n' ' ')"
else
    tail -n 30 "$R.build.log"
    notok "dpkg-buildpackage with only the README's packages"
    finish
fi
DEB=$(cd "$R/root/deb" && ls postgresql-*-dlock_*.deb | grep -v dbgsym | head -n 1)
cp "$R/root/deb/$DEB" "$ROOTS/$SUITE.$DEB"
cleanup

# --- the package installed on a fresh root ---
fresh_root debinstall || { notok "a fresh $SUITE root"; finish; }
mv "$ROOTS/$SUITE.$DEB" "$R/tmp/$DEB"
if step "$R.log" "apt install ./$DEB" apt_in "$R" "/tmp/$DEB"; then
    ok "apt installed $DEB (and PostgreSQL $MAJOR) on a fresh $SUITE root"
else
    tail -n 20 "$R.log"; notok "install $DEB"; finish
fi
check_extension "$R" "the Debian package"
# dlock on PATH, and its man page compressed where man looks
path=$(in_root "$R" bash -c 'command -v dlock')
target=$(in_root "$R" readlink -f /usr/bin/dlock)
if [ "$path" = /usr/bin/dlock ] && [ "$target" = "/usr/lib/postgresql/$MAJOR/bin/dlock" ] &&
        in_root "$R" dlock --help >/dev/null 2>&1; then
    ok "dlock is on PATH: /usr/bin/dlock -> $target, and runs"
else
    notok "dlock on PATH (command -v: '$path', /usr/bin/dlock -> '$target')"
fi
man=$(in_root "$R" readlink -f /usr/share/man/man1/dlock.1.gz)
if [ "$man" = "/usr/share/postgresql/$MAJOR/man/man1/dlock.1.gz" ] &&
        in_root "$R" bash -c "gzip -cd /usr/share/man/man1/dlock.1.gz | grep -q '^\.TH'" &&
        ! in_root "$R" dpkg -L "postgresql-$MAJOR-dlock" | grep -qE '/man1/dlock\.1$'; then
    ok "the man page is installed compressed: /usr/share/man/man1/dlock.1.gz -> $man, no uncompressed copy"
else
    in_root "$R" dpkg -L "postgresql-$MAJOR-dlock" | grep -E 'man|bin/'
    notok "the man page compressed where man finds it (/usr/share/man/man1/dlock.1.gz -> '$man')"
fi
# removing the package withdraws the alternative
if in_root "$R" apt-get -q -y remove "postgresql-$MAJOR-dlock" >"$R.remove.log" 2>&1 &&
        [ ! -e "$R/usr/bin/dlock" ] && [ ! -L "$R/usr/bin/dlock" ]; then
    ok "removing the package removes /usr/bin/dlock"
else
    tail -n 10 "$R.remove.log"
    notok "removing the package removes /usr/bin/dlock"
fi
finish
