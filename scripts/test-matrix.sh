#!/usr/bin/env bash
# scripts/test-matrix.sh - run the whole test suite on PostgreSQL 15, 17 and 18,
# each as the Debian release that ships it, in a root of its own.
#
#   sudo bash scripts/test-matrix.sh              (all three)
#   sudo bash scripts/test-matrix.sh trixie       (some of: bookworm trixie sid)
#
#   Debian 12 (bookworm)  PostgreSQL 15
#   Debian 13 (trixie)    PostgreSQL 17
#   Debian unstable (sid) PostgreSQL 18
#
# Each root is made once with debootstrap (from the mirror in this machine's
# apt sources) and kept under $DLOCK_ROOTS (default /var/tmp/dlock-roots) for
# the next run; /proc, /sys and /dev are mounted inside while it runs. The
# checkout (tracked and untracked, not ignored files, as in the work tree) is
# copied into the root, and scripts/test.sh runs there as root: it installs
# what that release is missing and tests the PostgreSQL it ships.  Nothing is
# written into the checkout.
#
# Prints each release's result and, last, `N passed, N failed` over all of
# them; exits non-zero if any release failed or ran nothing.
#
# Environment: DLOCK_ROOTS (root cache), DLOCK_MATRIX_FRESH=1 (make the roots
# anew), DLOCK_MIRROR (default: the first deb.debian.org-style URI in this
# machine's apt sources); DLOCK_TIMEOUT_REGRESS, DLOCK_TIMEOUT_ISOLATION,
# DLOCK_TIMEOUT_TAP (each suite's or TAP file's time limit), DLOCK_ALLOW_SKIP,
# DLOCK_ONLY, DLOCK_KEEP and PROVE_FLAGS are passed on to scripts/test.sh in
# each root (see there).
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROOTS=${DLOCK_ROOTS:-/var/tmp/dlock-roots}
START=$SECONDS

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test-matrix.sh must run as root (debootstrap, chroot)." >&2
    echo "0 passed, 1 failed"
    exit 1
fi

SUITES=("$@")
[ ${#SUITES[@]} -gt 0 ] || SUITES=(bookworm trixie sid)

mirror() {
    if [ -n "${DLOCK_MIRROR:-}" ]; then echo "$DLOCK_MIRROR"; return; fi
    local m
    m=$(grep -rhoE '(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
        grep -v security | head -n 1 | awk '{print $2}')
    echo "${m:-http://deb.debian.org/debian}"
}

MOUNTED=()
umount_all() {
    local i
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
        umount -l "${MOUNTED[$i]}" 2>/dev/null || true
    done
    MOUNTED=()
}
trap umount_all EXIT

mount_in() {    # mount_in ROOT: /proc, /sys, /dev, /dev/pts inside ROOT
    local r=$1
    mountpoint -q "$r/proc" || { mount -t proc proc "$r/proc" && MOUNTED+=("$r/proc"); }
    mountpoint -q "$r/sys" || { mount -t sysfs sys "$r/sys" && MOUNTED+=("$r/sys"); }
    mountpoint -q "$r/dev" || { mount --bind /dev "$r/dev" && MOUNTED+=("$r/dev"); }
    mkdir -p "$r/dev/pts"
    mountpoint -q "$r/dev/pts" || { mount --bind /dev/pts "$r/dev/pts" && MOUNTED+=("$r/dev/pts"); }
}

make_root() {   # make_root SUITE: the cached root, made if missing
    local suite=$1 r="$ROOTS/$1"
    if [ "${DLOCK_MATRIX_FRESH:-0}" = 1 ]; then
        rm -rf "$r"
    fi
    if [ ! -x "$r/bin/bash" ]; then
        command -v debootstrap >/dev/null ||
            DEBIAN_FRONTEND=noninteractive apt-get -q -y install debootstrap >/dev/null ||
            return 1
        echo "==> [$suite] debootstrap into $r ($(mirror)); a few minutes, its phases below"
        rm -rf "$r.partial"
        mkdir -p "$ROOTS"
        # its phases, not one line per package (those are in the log)
        debootstrap --variant=minbase --include=ca-certificates "$suite" "$r.partial" "$(mirror)" 2>&1 |
            tee "$ROOTS/$suite.debootstrap.log" |
            { grep --line-buffered -vE '^I: (Retrieving|Validating|Extracting|Unpacking|Configuring) [a-z0-9]' |
                sed -u 's/^/    /'; true; } || {
            tail -n 20 "$ROOTS/$suite.debootstrap.log"; return 1; }
        mv "$r.partial" "$r"
    fi
    chmod 755 "$r"
    # the root's own settings: no service starts from package scripts, no
    # default cluster, and unstable's Release file may be past Valid-Until
    printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
    chmod 755 "$r/usr/sbin/policy-rc.d"
    mkdir -p "$r/etc/postgresql-common/createcluster.d"
    echo 'create_main_cluster = false' >"$r/etc/postgresql-common/createcluster.d/dlock-matrix.conf"
    echo 'Acquire::Check-Valid-Until "false";' >"$r/etc/apt/apt.conf.d/99dlock-matrix"
    cp /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
    return 0
}

copy_checkout() {   # copy_checkout ROOT
    local dst="$1/root/dlock"
    rm -rf "$dst"
    mkdir -p "$dst"
    (cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar --null -T - -cf -) | tar -C "$dst" -xf -
}

TOTAL_P=0
TOTAL_F=0
SUMMARY=()
for suite in "${SUITES[@]}"; do
    r="$ROOTS/$suite"
    echo
    echo "==================== $suite ===================="
    if ! make_root "$suite"; then
        SUMMARY+=("$suite: FAIL (no root)")
        TOTAL_F=$((TOTAL_F + 1))
        continue
    fi
    mount_in "$r"
    copy_checkout "$r"
    log="$ROOTS/$suite.test.log"
    # the settings of scripts/test.sh given to this script reach it in the root
    pass=()
    for v in DLOCK_ALLOW_SKIP DLOCK_TIMEOUT_REGRESS DLOCK_TIMEOUT_ISOLATION DLOCK_TIMEOUT_TAP \
            DLOCK_ONLY DLOCK_KEEP PROVE_FLAGS; do
        [ -z "${!v:-}" ] || pass+=("$v=${!v}")
    done
    t0=$SECONDS
    chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 ${pass[@]+"${pass[@]}"} \
        bash -c 'cd /root/dlock && bash scripts/test.sh' 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    umount_all
    last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    p=$(sed -nE 's/^([0-9]+) passed.*/\1/p' <<<"$last")
    f=$(sed -nE 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/p' <<<"$last")
    p=${p:-0}
    f=${f:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    pg=$(grep -m1 -oE 'PostgreSQL [0-9]+\.[0-9]+' "$log" || echo 'PostgreSQL ?')
    SUMMARY+=("$suite ($pg): $p passed, $f failed, $((SECONDS - t0)) s (log $log)")
    TOTAL_P=$((TOTAL_P + p))
    TOTAL_F=$((TOTAL_F + f))
done

echo
echo "==================== dlock test matrix ($((SECONDS - START)) s) ===================="
for s in "${SUMMARY[@]}"; do echo "  $s"; done
echo "$TOTAL_P passed, $TOTAL_F failed"
[ "$TOTAL_F" -eq 0 ] && [ "$TOTAL_P" -gt 0 ]
