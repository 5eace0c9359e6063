#!/usr/bin/env bash
# bench/guard_bench.sh - what a guard (dlock_guard, issue 40) costs a fenced
# write: a single-row UPDATE fenced in its own WHERE clause,
#
#   UPDATE t SET n = n + 1
#    WHERE id = :id AND dlock_validate('gb/' || :id, 'bench', <its token>)
#
# on a table with a guard (key 'gb/' || id: the trigger evaluates the key
# over the row and finds the fence) against the same UPDATE on the same
# table without one (the fence written by hand, nothing checking that it
# is there), measured in the same run.
#
#   sudo bash bench/guard_bench.sh                  # about 2 minutes
#   sudo ROUNDS=1 DURATION=3 CLIENTS=1 bash bench/guard_bench.sh
#
# Starts its own throwaway cluster under /tmp (fsync on, synchronous_commit
# on, dlock preloaded) and measures with pgbench (-M prepared, autocommit:
# one statement, one transaction).  Each pgbench client updates its own row
# (id = client_id + 1) under its own lease, held for the whole run (the
# tokens are in a table, read by the statement's subquery in both
# variants).  Two tables with the same rows, so the guarded and the plain
# variant never share a row.  Runs are interleaved: every round runs both
# variants at each client count back to back; the ratio is the median of
# the per-round ratios guarded/plain (target: at least 0.8).  Each pair runs
# with synchronous_commit on (the commit's WAL flush dominates, as in
# production) and off (the CPU of the statement dominates: what the guard's
# trigger costs shows most there).  It never
# fails on a missed target: it is a benchmark, not a test.
#
# Environment:
#   ROUNDS=3  DURATION=5  CLIENTS="1 4"  SYNC="on off"  BUILD=1 (0: the installed dlock)
#   KEEP=0  RESULTS=FILE (raw TSV)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
# shellcheck source=common.sh
. "$REPO/bench/common.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CLIENTS=${CLIENTS:-"1 4"}
SYNC=${SYNC:-"on off"}
RESULTS=${RESULTS:-}

bench_require_root bench/guard_bench.sh
bench_on_exit

REV=$(bench_revision "$REPO" "$BUILD")
bench_install

bench_work dlock-guardbench
bench_cluster "$WORK/cluster" "log_min_messages = warning" \
    "log_min_error_statement = panic"

PSQL=(psql -X -q -v ON_ERROR_STOP=1 -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" -U postgres -d postgres)
q() { "${PSQL[@]}" -Atc "$1"; }
RAW=$WORK/raw.tsv
printf 'variant\tclients\tround\tsynchronous_commit\ttps\n' >"$RAW"

MAXC=0
for c in $CLIENTS; do [ "$c" -gt "$MAXC" ] && MAXC=$c; done

echo "==> dlock $REV; $(q 'SELECT version()' | cut -d' ' -f1-2); $(bench_machine)"
"${PSQL[@]}" <<SQL
CREATE TABLE g_guarded (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
CREATE TABLE g_plain (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
INSERT INTO g_guarded SELECT g FROM generate_series(1, $MAXC) g;
INSERT INTO g_plain SELECT g FROM generate_series(1, $MAXC) g;
SELECT dlock_guard('g_guarded', \$\$'gb/' || id\$\$);
CREATE TABLE g_tok (id int PRIMARY KEY, token bigint NOT NULL);
INSERT INTO g_tok SELECT g, dlock_acquire('gb/' || g, 'bench', '1 day')
  FROM generate_series(1, $MAXC) g;
VACUUM ANALYZE;
SQL

# the guard is on: a write without its fence is refused
if q "UPDATE g_guarded SET n = n WHERE id = 1" 2>/dev/null; then
    echo "g_guarded accepted a write without a fence: the guard is not on" >&2
    exit 1
fi

for v in guarded plain; do
    cat >"$WORK/$v.sql" <<SQL
\\set id :client_id + 1
UPDATE g_$v SET n = n + 1
 WHERE id = :id AND dlock_validate('gb/' || :id, 'bench', (SELECT token FROM g_tok WHERE id = :id));
SQL
done

# run VARIANT CLIENTS ROUND SYNC: records the tps
run() {
    local out tps
    if ! out=$(PGOPTIONS="-c synchronous_commit=$4" pgbench -n -M prepared -T "$DURATION" -c "$2" -j "$2" \
            -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" -U postgres -f "$WORK/$1.sql" postgres 2>&1); then
        echo "$out" >&2
        echo "pgbench failed ($1, $2 clients)" >&2
        exit 1
    fi
    tps=$(awk '/^tps = /{print $3; exit}' <<<"$out")
    [ -n "$tps" ] || { echo "$out" >&2; echo "could not parse pgbench output" >&2; exit 1; }
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$tps" >>"$RAW"
    printf '    synchronous_commit=%-3s %-8s %2s clients  round %s: %10.1f tps\n' "$4" "$1" "$2" "$3" "$tps" >&2
}

# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

echo "==> warm-up"
for c in $CLIENTS; do
    DURATION=1 run guarded "$c" 0 on
    DURATION=1 run plain "$c" 0 on
done
echo "==> $ROUNDS rounds of $DURATION s, interleaved"
for r in $(seq 1 "$ROUNDS"); do
    for sync in $SYNC; do
        for c in $CLIENTS; do
            run guarded "$c" "$r" "$sync"
            run plain "$c" "$r" "$sync"
        done
    done
done

echo
printf '%-20s %-8s %12s %12s %10s\n' synchronous_commit clients guarded_tps plain_tps ratio
for sync in $SYNC; do
    for c in $CLIENTS; do
        sel() { awk -F'\t' -v v="$1" -v c="$c" -v s="$sync" '$1 == v && $2 == c && $4 == s && $3 > 0 { print $3, $5 }' "$RAW" | sort -n; }
        g=$(sel guarded | awk '{ print $2 }' | median)
        p=$(sel plain | awk '{ print $2 }' | median)
        x=$(join <(sel guarded) <(sel plain) | awk '{ printf "%.4f\n", $2 / $3 }' | median)
        printf '%-20s %-8s %12.1f %12.1f %9.2fx\n' "$sync" "$c" "$g" "$p" "$x"
    done
done
echo "(medians over $ROUNDS rounds; ratio = median of the per-round guarded/plain; target >= 0.80x)"
if [ -n "$RESULTS" ]; then cp "$RAW" "$RESULTS"; fi
