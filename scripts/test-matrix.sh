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

# the roots: made (debootstrap) or reused, mounted, the checkout copied in
# shellcheck source=scripts/roots.sh
. "$REPO/scripts/roots.sh"

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
    for v in DLOCK_ALLOW_SKIP DLOCK_SKIP DLOCK_TIMEOUT_REGRESS DLOCK_TIMEOUT_ISOLATION DLOCK_TIMEOUT_TAP \
            DLOCK_ONLY DLOCK_KEEP PROVE_FLAGS; do
        [ -z "${!v:-}" ] || pass+=("$v=${!v}")
    done
    # DLOCK_MATRIX_SKIP (.ci/run): tests that do not differ by version, run
    # once on the machine itself and left out in the roots (DLOCK_SKIP there)
    [ -z "${DLOCK_MATRIX_SKIP:-}" ] || pass+=("DLOCK_SKIP=${DLOCK_SKIP:+$DLOCK_SKIP }$DLOCK_MATRIX_SKIP")
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
