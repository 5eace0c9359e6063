#!/usr/bin/env bash
# bench/multi_bench.sh - dlock_acquire_all against as many dlock_acquire calls.
#
#   sudo bash bench/multi_bench.sh                  # about 1 minute with the defaults
#   sudo ROUNDS=5 DURATION=5 KEYS="2 8 32" bash bench/multi_bench.sh
#
# Starts a throwaway PostgreSQL cluster under /tmp (fsync on, synchronous
# commit on, shared_preload_libraries = 'dlock') and measures with pgbench
# (-M prepared, CLIENTS clients, each on keys of its own) transactions of
# N keys, each one explicit transaction:
#
#   single   BEGIN; SELECT dlock_acquire(k1, ...), ..., dlock_acquire(kN, ...);
#            SELECT dlock_release(k1, ...), ..., dlock_release(kN, ...); COMMIT;
#   multi    BEGIN; SELECT dlock_acquire_all(ARRAY[k1, ..., kN], ...);
#            the same releases; COMMIT;
#
# (the N single calls go in one statement, as the array does: the same round
# trips).  Runs are short and interleaved (round 1: single multi, round 2:
# ...) for each N; the table shows the median transactions per second and
# the ratio multi / single, and the load average (a shared machine's other
# work shows in the figures).  It never fails on a figure.
#
# Environment:
#   ROUNDS=3  DURATION=4  CLIENTS=1  KEYS="2 8"
#   BUILD=1   build and install dlock from this checkout first (0: use the
#             installed one)
#   KEEP=0    1: keep the work directory
#
# Run as root (PostgreSQL itself runs as the postgres user).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
# shellcheck source=../scripts/lib.sh
. "$REPO/scripts/lib.sh"
# shellcheck source=common.sh
. "$REPO/bench/common.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-4}
CLIENTS=${CLIENTS:-1}
KEYS=${KEYS:-"2 8"}
BUILD=${BUILD:-1}
KEEP=${KEEP:-0}

if [ "$(id -u)" -ne 0 ]; then
    echo "bench/multi_bench.sh must run as root (PostgreSQL runs as the postgres user)." >&2
    exit 1
fi

WORK=
bench_cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    dlock_cleanup
    bench_remove_work "$KEEP"
    exit $rc
}
bench_set_traps bench_cleanup

REVISION=$(bench_revision "$REPO" "$BUILD")
dlock_ensure_packages
if [ "$BUILD" = 1 ]; then
    dlock_build_install "$REPO"
    rm -rf "$DLOCK_BUILD_DIR"
fi

WORK=$(mktemp -d /tmp/dlock-bench.XXXXXX)
chmod 755 "$WORK"
mkdir "$WORK/sql"
dlock_cluster_start "$WORK/c" auto "max_connections = 60" "checkpoint_timeout = '30min'" \
    "max_wal_size = '4GB'"
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'CREATE EXTENSION dlock'

# the pgbench scripts: N keys of client :client_id
write_scripts() { # N
    local n=$1 i acq='' arr='' rel=''
    for i in $(seq 1 "$n"); do
        acq+="${acq:+, }dlock_acquire('k$i:' || :client_id, 'c' || :client_id, '30 s')"
        arr+="${arr:+, }'k$i:' || :client_id"
        rel+="${rel:+, }dlock_release('k$i:' || :client_id, 'c' || :client_id)"
    done
    printf 'BEGIN;\nSELECT %s;\nSELECT %s;\nCOMMIT;\n' "$acq" "$rel" >"$WORK/sql/single$n.sql"
    printf "BEGIN;\nSELECT dlock_acquire_all(ARRAY[%s], 'c' || :client_id, '30 s');\nSELECT %s;\nCOMMIT;\n" \
        "$arr" "$rel" >"$WORK/sql/multi$n.sql"
}

run_one() { # VARIANT N -> tps
    local out
    out=$(pgbench -n -M prepared -T "$DURATION" -c "$CLIENTS" -j "$CLIENTS" \
        -f "$WORK/sql/$1$2.sql" postgres 2>&1) || { echo "$out" >&2; exit 1; }
    sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

log "dlock $REVISION; $(bench_machine)"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
printf '%-6s %12s %12s %8s\n' keys single_tps multi_tps ratio
for n in $KEYS; do
    write_scripts "$n"
    run_one single "$n" >/dev/null     # warm-up, not recorded
    run_one multi "$n" >/dev/null
    : >"$WORK/single$n" ; : >"$WORK/multi$n"
    for _ in $(seq 1 "$ROUNDS"); do
        run_one single "$n" >>"$WORK/single$n"
        run_one multi "$n" >>"$WORK/multi$n"
    done
    s=$(median <"$WORK/single$n")
    m=$(median <"$WORK/multi$n")
    printf '%-6s %12.1f %12.1f %8.2f\n' "$n" "$s" "$m" "$(awk -v a="$m" -v b="$s" 'BEGIN { print a / b }')"
done
echo "load average before: $load_before; after: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"
