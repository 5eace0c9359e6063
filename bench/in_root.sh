#!/usr/bin/env bash
# bench/in_root.sh - run a benchmark of bench/ inside the Debian root of one
# suite, the roots scripts/test-matrix.sh tests in (scripts/roots.sh): the
# PostgreSQL of that Debian release, installed from its own packages.
#
#   sudo bash bench/in_root.sh bookworm bench/claim_bench.sh     # PostgreSQL 15
#   sudo bash bench/in_root.sh trixie bench/claim_bench.sh       # PostgreSQL 17
#   sudo bash bench/in_root.sh sid bench/claim_bench.sh          # PostgreSQL 18
#   sudo ROUNDS=1 CLIENTS=4 bash bench/in_root.sh trixie bench/claim_bench.sh
#
# The root is made with debootstrap on first use (several minutes) and kept
# under DLOCK_ROOTS (default /var/tmp/dlock-roots), as the test matrix does;
# the checkout is copied to /root/dlock-bench inside it (not /root/dlock,
# which a test matrix run may be using).  The benchmark's settings
# (ROUNDS, DURATION, CLIENTS, PATTERNS, KEYS, HELD, ROWS, SECTIONS, HANDOFFS,
# KEEP, RESULTS) are passed through; RESULTS names a file inside the root.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROOTS=${DLOCK_ROOTS:-/var/tmp/dlock-roots}

if [ "$(id -u)" -ne 0 ] || [ $# -lt 2 ]; then
    echo "usage (as root): bash bench/in_root.sh bookworm|trixie|sid bench/SCRIPT.sh" >&2
    exit 1
fi
suite=$1
script=$2
shift 2
case $suite in bookworm|trixie|sid) ;; *) echo "unknown suite $suite" >&2; exit 1 ;; esac
[ -f "$REPO/$script" ] || { echo "no $script in $REPO" >&2; exit 1; }

# shellcheck source=scripts/roots.sh
. "$REPO/scripts/roots.sh"

r="$ROOTS/$suite"
make_root "$suite" || { echo "could not make the $suite root" >&2; exit 1; }
mount_in "$r"
copy_checkout "$r" dlock-bench
rev=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$REPO" diff --quiet HEAD -- src Makefile 'dlock--*.sql' 2>/dev/null || rev+="+dirty"
pass=("DLOCK_BENCH_REV=$rev")
for v in ROUNDS DURATION CLIENTS PATTERNS KEYS HELD ROWS SECTIONS HANDOFFS KEEP RESULTS REDIS; do
    [ -n "${!v+x}" ] && pass+=("$v=${!v}")
done
chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    ${pass[@]+"${pass[@]}"} bash -c "cd /root/dlock-bench && bash $script $*"
