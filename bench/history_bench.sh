#!/usr/bin/env bash
# bench/history_bench.sh - the cost of dlock's history (issue 40): pairs
# with history on against pairs with it off, and claims the same.
#
#   sudo bash bench/history_bench.sh            # about a minute with the defaults
#   sudo ROUNDS=5 DURATION=10 CLIENTS=4 bash bench/history_bench.sh
#
# Each round is ONE pgbench run (-M prepared, autocommit) with two scripts
# of equal weight, so that both contenders share the same moments of the
# machine, interleaved transaction by transaction:
#
#   pairs   dlock_acquire + dlock_release of a random key of the client's
#           own 1,000, under a tracked prefix ('hon:', every release
#           writes a row of dlock.history) or an untracked one ('hoff:');
#   claims  dlock_claim of 1 row + dlock_complete of it, on a tracked table
#           (bq_on, every completion writes a row) or an untracked one
#           (bq_off), ROWS rows each.
#
# pgbench draws the script of each transaction at random, so both run as
# many transactions; what differs is their latency. The ratio of a round
# is latency(off) / latency(on), the rate with history on as a fraction of
# the rate with it off; printed: each round's, their median, and the target
# (issue 40: >= 0.8x) as MET or NOT MET. A warm-up round first, not
# recorded. Printed, never asserted.
#
# Starts its own throwaway cluster under /tmp (fsync on, synchronous_commit
# on, shared_preload_libraries = 'dlock').
#
# Environment:
#   ROUNDS=3      pgbench runs per section
#   DURATION=5    seconds per run
#   CLIENTS=2     pgbench clients
#   ROWS=20000    rows of each claim table
#   SECTIONS="pairs claims"
#   BUILD=1       build and install dlock from this checkout first (0: use
#                 the installed one)
#   KEEP=0        1: keep the work directory (cluster, logs)
#
# Run as root (PostgreSQL itself runs as the postgres user).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
# shellcheck source=common.sh
. "$REPO/bench/common.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CLIENTS=${CLIENTS:-2}
ROWS=${ROWS:-20000}
SECTIONS=${SECTIONS:-pairs claims}

bench_require_root bench/history_bench.sh
bench_on_exit

REVISION=$(bench_revision "$REPO" "$BUILD")

bench_install

bench_work dlock-history-bench
bench_cluster "$WORK/c" "max_connections = 40"

dlock_psql -q <<SQL >/dev/null
SELECT dlock_history_track('hon:');
CREATE TABLE bq_on (id int PRIMARY KEY, n int NOT NULL DEFAULT 0);
CREATE TABLE bq_off (id int PRIMARY KEY, n int NOT NULL DEFAULT 0);
INSERT INTO bq_on SELECT generate_series(1, $ROWS);
INSERT INTO bq_off SELECT generate_series(1, $ROWS);
SELECT dlock_history_track_claims('bq_on');
SQL

mkdir -p "$WORK/sql"
for side in on off; do
    cat >"$WORK/sql/pairs_$side.sql" <<SQL
\\set k random(1, 1000)
SELECT dlock_acquire('h$side:' || :client_id || ':' || :k, 'b', '30 s');
SELECT dlock_release('h$side:' || :client_id || ':' || :k, 'b');
SQL
    cat >"$WORK/sql/claims_$side.sql" <<SQL
SELECT id AS cid FROM dlock_claim(NULL::bq_$side, 'c' || :client_id, 1, '30 s') \\gset
SELECT count(*) FROM dlock_complete('bq_$side', 'c' || :client_id, ARRAY[:cid]);
SQL
done
chown -R postgres "$WORK/sql"

# one pgbench run of a section's two scripts: prints "LAT_ON LAT_OFF" (ms)
run_section() { # SECTION SECONDS
    local out
    if ! out=$(dlock_as_postgres pgbench -n -M prepared -T "$2" -c "$CLIENTS" \
            -j "$(( CLIENTS < 2 ? CLIENTS : 2 ))" -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" \
            -U postgres -f "$WORK/sql/${1}_on.sql@1" -f "$WORK/sql/${1}_off.sql@1" \
            postgres 2>&1); then
        echo "$out" >&2
        echo "pgbench failed ($1)" >&2
        exit 1
    fi
    # per script, in the order given: " - latency average = X ms"
    awk '/^SQL script [0-9]+:/ { s++ }
         /^ - latency average = / && s > 0 { lat[s] = $5 }
         END { if (lat[1] == "" || lat[2] == "") exit 1; print lat[1], lat[2] }' <<<"$out" ||
        { echo "$out" >&2; echo "could not parse pgbench output ($1)" >&2; exit 1; }
}

echo "dlock $REVISION; $("$DLOCK_PG_CONFIG" --version); $(bench_machine)"
echo "one pgbench run per round (-M prepared, $CLIENTS clients, ${DURATION}s), history on and off interleaved in it"
for section in $SECTIONS; do
    run_section "$section" 1 >/dev/null     # warm-up, not recorded
    : >"$WORK/$section.txt"
    for ((r = 1; r <= ROUNDS; r++)); do
        read -r on off < <(run_section "$section" "$DURATION")
        ratio=$(awk -v on="$on" -v off="$off" 'BEGIN { printf "%.3f", off / on }')
        echo "$section round $r: latency on $on ms, off $off ms; on/off rate ${ratio}x"
        echo "$ratio" >>"$WORK/$section.txt"
    done
    med=$(sort -n "$WORK/$section.txt" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    met=$(awk -v m="$med" 'BEGIN { print (m >= 0.8) ? "MET" : "NOT MET" }')
    echo "$section: history on / off = ${med}x (median of $ROUNDS rounds); target (issue 40) >= 0.8x: $met"
done
rows=$(dlock_psql -tA -c "SELECT count(*) FROM dlock.history")
echo "rows written to dlock.history: $rows"
