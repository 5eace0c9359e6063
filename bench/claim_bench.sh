#!/usr/bin/env bash
# bench/claim_bench.sh - batch claiming (issue 3): rows claimed AND completed
# per second, dlock against the two ways people write it by hand.
#
#   sudo bash bench/claim_bench.sh                   # about 12-15 minutes with the defaults
#   sudo ROUNDS=2 DURATION=5 bash bench/claim_bench.sh
#
# Starts its own throwaway PostgreSQL 15 cluster under /tmp (fsync on,
# synchronous_commit on, shared_preload_libraries = 'dlock', shared_buffers
# 1GB, max_wal_size 8GB) and measures with pgbench (-M simple, because the
# claimed ids travel from the claim to the completion through a \gset variable).
#
# Three tables of ROWS rows (default 1,000,000) with the same data:
#   jobs_dl / jobs_hw / jobs_it (id bigint PRIMARY KEY, status int, created_at,
#   payload text), each with the usual queue index ON (id) WHERE status = 0.
# One pgbench "transaction" = claim a batch of 100 (one transaction) and
# complete it (a second transaction), the pattern of a real worker:
#
#   dlock     claim:    SELECT ... FROM dlock_claim(NULL::jobs_dl, 'w<client>', 100,
#                                                   '5 min', 'status = 0')
#             complete: UPDATE jobs_dl SET status = 1
#                         FROM dlock_complete('jobs_dl', holder, ids) AS done(id)
#                        WHERE jobs_dl.id = done.id
#                       (fence and give-back in one call; MAIN_VARIANTS can add
#                       dlock_unclaim: the fence dlock_claimed per row, then
#                       dlock_unclaim of the done ids)
#   hand      the hand-written side-table claim: anti-join on side_claim +
#             FOR UPDATE SKIP LOCKED + conditional insert (INSERT ... ON CONFLICT
#             DO UPDATE ... WHERE expired) in one statement; completion (one
#             transaction, job rows first, then claim rows, so that it cannot
#             deadlock with a claimer): UPDATE jobs_hw ... WHERE the claim is
#             ours and live; DELETE FROM side_claim ...
#   intable   the in-table ceiling, no side table, no expiry handling:
#             UPDATE jobs_it SET status = 2, taken_by = ... WHERE id IN
#             (SELECT id ... WHERE status = 0 ORDER BY id LIMIT 100 FOR UPDATE
#             SKIP LOCKED); completion: UPDATE ... SET status = 1 WHERE taken_by = me
#
# Rate = rows with status = 1 after the run / DURATION.  Before every run the
# table is reset (status = 0, claims forgotten), it and both claims tables are
# vacuumed (the next run claims the same ids again), and a CHECKPOINT is taken.  Runs are INTERLEAVED (for each round: for each worker count: dlock,
# hand, intable) and the table shows the median over the rounds.
#
# Extra sections (SECTIONS):
#   main      the table above, at CLIENTS workers (default 1 4 16)
#   stats     claims table ANALYZEd while empty vs. while holding 1,000
#             claims, autovacuum off on it in both (so nothing changes the
#             statistics during the run), and the normal case (autovacuum
#             on), at 4 workers, for dlock (dlock.claim) and hand (side_claim)
#   nounclaim dlock completing with the fence only (the issue's own example,
#             dlock_claimed, no give-back) against dlock_complete: completed
#             rows keep their claim until it
#             expires; at 4 workers, ttl 5 min and ttl 2 s
#   perrow    cost per claimed+completed row at 1 worker: a 1,000-row table vs
#             the ROWS-row table (pgbench latency of 10 batches of 100)
#
# It never fails on a missed target: it is a benchmark, not a test.
#
# Environment:
#   ROWS=1000000    rows per table
#   ROUNDS=3        rounds (interleaved) per section
#   DURATION=8      seconds per pgbench run
#   CLIENTS="1 4 16"
#   SECTIONS="main stats nounclaim perrow"
#   MAIN_VARIANTS="dlock hand intable"   add dlock_unclaim for dlock completing
#                   the 0.1 way (dlock_claimed per row, then dlock_unclaim)
#   BUILD=1         build and install dlock from this checkout first (0: use
#                   the installed one)
#   KEEP=0          1: keep the work directory (cluster, logs, raw results)
#   RESULTS=FILE    also copy the raw per-run results (TSV) to FILE
#
# Run as root (PostgreSQL itself runs as the postgres user).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
# shellcheck source=../scripts/lib.sh
. "$REPO/scripts/lib.sh"
# shellcheck source=common.sh
. "$REPO/bench/common.sh"

ROWS=${ROWS:-1000000}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8}
CLIENTS=${CLIENTS:-"1 4 16"}
SECTIONS=${SECTIONS:-"main stats nounclaim perrow"}
MAIN_VARIANTS=${MAIN_VARIANTS:-"dlock hand intable"}
BUILD=${BUILD:-1}
KEEP=${KEEP:-0}
RESULTS=${RESULTS:-}

if [ "$(id -u)" -ne 0 ]; then
    echo "bench/claim_bench.sh must run as root (PostgreSQL runs as the postgres user)." >&2
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

if [ "$BUILD" = 1 ]; then
    dlock_ensure_packages
    dlock_build_install "$REPO"
    BUILD_DIR=$DLOCK_BUILD_DIR
else
    BUILD_DIR=
fi

WORK=$(mktemp -d /tmp/dlock-claimbench.XXXXXX)
chmod 755 "$WORK"
dlock_cluster_start "$WORK/cluster" auto \
    "shared_buffers = 1GB" "max_connections = 100" "max_wal_size = 8GB" \
    "checkpoint_timeout = 30min" "log_min_messages = warning" \
    "log_min_error_statement = panic"
bench_set_traps bench_cleanup
[ -n "$BUILD_DIR" ] && rm -rf "$BUILD_DIR"

PSQL=(psql -X -q -v ON_ERROR_STOP=1 -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" -U postgres -d postgres)
q() { "${PSQL[@]}" -Atc "$1"; }
RAW=$WORK/raw.tsv
printf 'section\tvariant\tclients\tround\trows\trows_per_s\tfailed\textra\n' >"$RAW"

echo "==> $(q 'SELECT version()' | cut -d' ' -f1-2), $(nproc) CPUs, cluster in $WORK/cluster"
echo "==> loading 3 x $ROWS rows (+ a 1,000-row table)"
"${PSQL[@]}" <<SQL
CREATE EXTENSION dlock;
CREATE TABLE jobs_dl (id bigint PRIMARY KEY, status int NOT NULL DEFAULT 0,
                      created_at timestamptz NOT NULL DEFAULT now(), payload text);
INSERT INTO jobs_dl (id, payload) SELECT g, md5(g::text) FROM generate_series(1, $ROWS) g;
CREATE INDEX jobs_dl_pending ON jobs_dl (id) WHERE status = 0;

CREATE TABLE jobs_hw (LIKE jobs_dl INCLUDING ALL);
INSERT INTO jobs_hw SELECT * FROM jobs_dl;
CREATE TABLE side_claim (job_id bigint PRIMARY KEY, holder text NOT NULL,
                         expires_at timestamptz NOT NULL);

CREATE TABLE jobs_it (LIKE jobs_dl INCLUDING ALL);
ALTER TABLE jobs_it ADD COLUMN taken_by text, ADD COLUMN taken_until timestamptz;
INSERT INTO jobs_it (id, status, created_at, payload) SELECT * FROM jobs_dl;

CREATE TABLE jobs_1k (LIKE jobs_dl INCLUDING ALL);
INSERT INTO jobs_1k SELECT * FROM jobs_dl WHERE id <= 1000;
VACUUM ANALYZE;
SQL

# ---------------------------------------------------------------- scripts
# dlock; TABLE and TTL are substituted per run
dl_script() {   # dl_script TABLE TTL complete|unclaim|fence
    cat <<EOF
SELECT coalesce(string_agg(id::text, ','), 'NULL') AS ids, count(*) AS n
  FROM dlock_claim(NULL::$1, 'w:client_id', 100, '$2', 'status = 0') \gset
\if :n > 0
EOF
    case $3 in
        complete) cat <<EOF
UPDATE $1 SET status = 1
  FROM dlock_complete('$1', 'w:client_id', ARRAY[:ids]::bigint[]) AS done(id)
 WHERE $1.id = done.id;
EOF
            ;;
        unclaim) cat <<EOF
WITH done AS (
    UPDATE $1 SET status = 1
     WHERE id = ANY (ARRAY[:ids]::bigint[]) AND dlock_claimed('$1', id, 'w:client_id')
    RETURNING id)
SELECT dlock_unclaim('$1', 'w:client_id', ARRAY(SELECT id FROM done));
EOF
            ;;
        fence) cat <<EOF
UPDATE $1 SET status = 1
 WHERE id = ANY (ARRAY[:ids]::bigint[]) AND dlock_claimed('$1', id, 'w:client_id');
EOF
            ;;
    esac
    echo '\endif'
}
hw_script() {
    cat <<'EOF'
WITH cand AS (
    SELECT j.* FROM jobs_hw j
     WHERE j.status = 0
       AND NOT EXISTS (SELECT 1 FROM side_claim c
                        WHERE c.job_id = j.id AND c.expires_at > clock_timestamp())
     ORDER BY j.id LIMIT 100
     FOR UPDATE OF j SKIP LOCKED),
ins AS (
    INSERT INTO side_claim AS c (job_id, holder, expires_at)
    SELECT id, 'w:client_id', clock_timestamp() + interval '5 min' FROM cand
    ON CONFLICT (job_id) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
     WHERE c.expires_at <= clock_timestamp()
    RETURNING c.job_id)
SELECT coalesce(string_agg(cand.id::text, ','), 'NULL') AS ids, count(*) AS n
  FROM cand JOIN ins ON ins.job_id = cand.id \gset
\if :n > 0
BEGIN;
UPDATE jobs_hw j SET status = 1
 WHERE j.id = ANY (ARRAY[:ids]::bigint[])
   AND EXISTS (SELECT 1 FROM side_claim c WHERE c.job_id = j.id
                AND c.holder = 'w:client_id' AND c.expires_at > clock_timestamp());
DELETE FROM side_claim WHERE job_id = ANY (ARRAY[:ids]::bigint[]) AND holder = 'w:client_id';
COMMIT;
\endif
EOF
}
it_script() {
    cat <<'EOF'
WITH t AS (
    UPDATE jobs_it SET status = 2, taken_by = 'w:client_id',
                       taken_until = clock_timestamp() + interval '5 min'
     WHERE id IN (SELECT id FROM jobs_it WHERE status = 0 ORDER BY id LIMIT 100
                  FOR UPDATE SKIP LOCKED)
    RETURNING id)
SELECT coalesce(string_agg(id::text, ','), 'NULL') AS ids, count(*) AS n FROM t \gset
\if :n > 0
UPDATE jobs_it SET status = 1
 WHERE id = ANY (ARRAY[:ids]::bigint[]) AND taken_by = 'w:client_id' AND status = 2;
\endif
EOF
}
SCRIPTS=$WORK/scripts
mkdir -p "$SCRIPTS"
dl_script jobs_dl '5 min' complete >"$SCRIPTS/dlock.pgb"
dl_script jobs_dl '5 min' unclaim >"$SCRIPTS/dlock_unclaim.pgb"
dl_script jobs_dl '5 min' fence >"$SCRIPTS/dlock_nounclaim.pgb"
dl_script jobs_dl '2 s' fence >"$SCRIPTS/dlock_nounclaim_2s.pgb"
dl_script jobs_1k '5 min' complete >"$SCRIPTS/dlock_1k.pgb"
hw_script >"$SCRIPTS/hand.pgb"
sed 's/jobs_hw/jobs_1k/g' "$SCRIPTS/hand.pgb" >"$SCRIPTS/hand_1k.pgb"
it_script >"$SCRIPTS/intable.pgb"
chown -R postgres:postgres "$WORK"
chmod -R a+rX "$SCRIPTS"

table_of() {
    case $1 in
        dlock*_1k|dlock_1k) echo jobs_1k ;;
        dlock*) echo jobs_dl ;;
        hand_1k) echo jobs_1k ;;
        hand*) echo jobs_hw ;;
        intable*) echo jobs_it ;;
    esac
}

# reset TABLE: every row pending again, no claim left, vacuumed, checkpoint
reset_table() {
    local t=$1
    case $t in
        jobs_it) q "UPDATE jobs_it SET status = 0, taken_by = NULL, taken_until = NULL WHERE status <> 0" ;;
        *) q "UPDATE $t SET status = 0 WHERE status <> 0" ;;
    esac
    # in chunks: dlock_reset_claims takes a lock per key, and tens of
    # thousands of them in one transaction exhaust the lock table
    q "DO \$\$ DECLARE k text[]; BEGIN
         LOOP
           SELECT array_agg(key) INTO k FROM (SELECT key FROM dlock.claim
                                               WHERE relid = '$t'::regclass LIMIT 1000) s;
           EXIT WHEN k IS NULL;
           PERFORM dlock_reset_claims('$t', k);
           COMMIT;
         END LOOP; END \$\$"
    q "DELETE FROM side_claim"
    # the next run claims the same ids again: vacuum the claims tables too,
    # or it would wade through the dead claim rows of the earlier runs
    q "VACUUM $t, side_claim, dlock.claim"
    q "CHECKPOINT"
}

# run SECTION VARIANT SCRIPT CLIENTS ROUND [pgbench options...]: one timed run
LAST_RATE=0
run() {
    local section=$1 variant=$2 script=$3 c=$4 round=$5
    shift 5
    local t j out rows failed rate extra
    t=$(table_of "$script")
    j=$(( c < 4 ? c : 4 ))
    out=$(cd "$WORK" && dlock_as_postgres pgbench -n -M simple -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" \
            -U postgres -c "$c" -j "$j" -T "$DURATION" -f "$SCRIPTS/$script.pgb" "$@" postgres 2>&1) || true
    failed=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' <<<"$out")
    if grep -q 'aborted' <<<"$out"; then
        failed="${failed:-0}+aborted"
        grep -m3 -E 'error|aborted' <<<"$out" >&2 || true
    fi
    rows=$(q "SELECT count(*) FROM $t WHERE status = 1")
    rate=$(( rows / DURATION ))
    extra=
    if [ "$script" != "${script#dlock}" ]; then
        extra="claim_rows=$(q "SELECT count(*) FROM dlock.claim")"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$section" "$variant" "$c" "$round" "$rows" \
        "$rate" "${failed:-?}" "$extra" >>"$RAW"
    printf '    %-9s %-22s %2s workers  round %s: %8s rows/s  failed tx: %s %s\n' \
        "$section" "$variant" "$c" "$round" "$rate" "${failed:-?}" "$extra"
    LAST_RATE=$rate
    reset_table "$t"
}

median() {   # median of the rows_per_s of SECTION VARIANT CLIENTS
    awk -F'\t' -v s="$1" -v v="$2" -v c="$3" '$1 == s && $2 == v && $3 == c { print $6 }' "$RAW" |
        sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print a[(NR + 1) / 2]; else print int((a[NR / 2] + a[NR / 2 + 1]) / 2) }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

SUMMARY=$WORK/summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

# ---------------------------------------------------------------- main
if [[ " $SECTIONS " == *" main "* ]]; then
    echo "==> main: rows claimed+completed per second, batch 100, $ROWS rows, ${DURATION}s runs, $ROUNDS rounds"
    for r in $(seq 1 "$ROUNDS"); do
        for c in $CLIENTS; do
            for v in $MAIN_VARIANTS; do
                run main "$v" "$v" "$c" "$r"
            done
        done
    done
    say ""
    say "Claims, batch 100, table of $ROWS rows: rows claimed+completed per second (median of $ROUNDS runs of ${DURATION}s)"
    say "$(printf '%8s %10s %10s %10s %11s %14s' workers dlock hand in-table dlock/hand dlock/in-table)"
    for c in $CLIENTS; do
        d=$(median main dlock "$c"); h=$(median main hand "$c"); i=$(median main intable "$c")
        say "$(printf '%8s %10s %10s %10s %11s %14s' "$c" "$d" "$h" "$i" "$(ratio "$d" "$h")" "$(ratio "$d" "$i")")"
    done
    if [[ " $CLIENTS " == *" 4 "* ]] && [[ " $CLIENTS " == *" 16 "* ]]; then
        say "scaling 4 -> 16 workers: dlock $(ratio "$(median main dlock 16)" "$(median main dlock 4)")x," \
            "hand $(ratio "$(median main hand 16)" "$(median main hand 4)")x," \
            "in-table $(ratio "$(median main intable 16)" "$(median main intable 4)")x"
    fi
    if [[ " $MAIN_VARIANTS " == *" dlock_unclaim "* ]]; then
        for c in $CLIENTS; do
            u=$(median main dlock_unclaim "$c")
            say "  dlock completing with dlock_claimed + dlock_unclaim (0.1's way), $c workers: $u rows/s, $(ratio "$u" "$(median main hand "$c")")x hand"
        done
    fi
    say "targets: dlock/hand >= 1.0 and dlock/in-table >= 0.5 at every worker count"
    say "failed transactions (all runs): $(awk -F'\t' '$1 == "main" { print $2 ": " $7 }' "$RAW" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
fi

# ---------------------------------------------------------------- stats
# Both variants run with autovacuum off on the claims table, so that nothing
# changes its statistics during the run; they differ only in what ANALYZE saw:
#   analysed-full   1,000 live claims (then given back)
#   analysed-empty  pages but no live row: the planner then believes the
#                   table holds no rows however large it grows
fill_claims() {   # fill_claims dlock|hand
    if [ "$1" = dlock ]; then
        q "SELECT count(*) FROM dlock_claim(NULL::jobs_1k, 'fill', 1000, '1 hour')" >/dev/null
    else
        q "INSERT INTO side_claim SELECT -g, 'fill', now() + interval '1 hour' FROM generate_series(1, 1000) g"
    fi
}
empty_claims() {
    if [ "$1" = dlock ]; then
        q "SELECT dlock_unclaim('jobs_1k', 'fill')" >/dev/null
    else
        q "DELETE FROM side_claim WHERE holder = 'fill'"
    fi
}
if [[ " $SECTIONS " == *" stats "* ]]; then
    echo "==> stats: claims table ANALYZEd while empty vs while holding 1,000 claims (autovacuum off on it), 4 workers"
    for r in $(seq 1 "$ROUNDS"); do
        for v in dlock hand; do
            if [ "$v" = dlock ]; then ct=dlock.claim; else ct=side_claim; fi
            q "VACUUM ANALYZE $ct"
            run stats "$v autovacuum-on" "$v" 4 "$r"
            q "VACUUM $ct"
            q "ALTER TABLE $ct SET (autovacuum_enabled = false)"
            fill_claims "$v"; q "ANALYZE $ct"; empty_claims "$v"
            echo "      $ct analysed full: $(q "SELECT 'relpages=' || relpages || ' reltuples=' || reltuples FROM pg_class WHERE oid = '$ct'::regclass")"
            run stats "$v analysed-full" "$v" 4 "$r"
            q "VACUUM $ct"
            fill_claims "$v"; empty_claims "$v"; q "ANALYZE $ct"
            echo "      $ct analysed empty: $(q "SELECT 'relpages=' || relpages || ' reltuples=' || reltuples FROM pg_class WHERE oid = '$ct'::regclass")"
            run stats "$v analysed-empty" "$v" 4 "$r"
            q "ALTER TABLE $ct RESET (autovacuum_enabled)"
            q "VACUUM ANALYZE $ct"
        done
    done
    say ""
    say "Claims table statistics and vacuum (4 workers, rows/s, median of $ROUNDS):"
    say "$(printf '  %-6s %14s %28s %22s %12s %12s' '' 'autovacuum on' 'off, analysed w/ 1k claims' 'off, analysed empty' 'empty/full' 'off/on')"
    for v in dlock hand; do
        o=$(median stats "$v autovacuum-on" 4)
        n=$(median stats "$v analysed-full" 4); e=$(median stats "$v analysed-empty" 4)
        say "$(printf '  %-6s %14s %28s %22s %12s %12s' "$v" "$o" "$n" "$e" "$(ratio "$e" "$n")" "$(ratio "$n" "$o")")"
    done
fi

# ---------------------------------------------------------------- nounclaim
if [[ " $SECTIONS " == *" nounclaim "* ]]; then
    echo "==> nounclaim: dlock completing with the fence only (no dlock_unclaim), 4 workers"
    for r in $(seq 1 "$ROUNDS"); do
        run nounclaim "dlock_complete" dlock 4 "$r"
        run nounclaim "no unclaim, ttl 5min" dlock_nounclaim 4 "$r"
        run nounclaim "no unclaim, ttl 2s" dlock_nounclaim_2s 4 "$r"
    done
    say ""
    say "dlock completing with the fence only, claims left to expire (4 workers, rows/s, median of $ROUNDS):"
    w=$(median nounclaim "dlock_complete" 4)
    for v in "no unclaim, ttl 5min" "no unclaim, ttl 2s"; do
        x=$(median nounclaim "$v" 4)
        say "$(printf '  %-22s %8s   vs dlock_complete %8s   ratio %s' "$v" "$x" "$w" "$(ratio "$x" "$w")")"
    done
fi

# ---------------------------------------------------------------- perrow
if [[ " $SECTIONS " == *" perrow "* ]]; then
    echo "==> perrow: latency of one claim+complete of 100 rows, 1 worker, 1,000 vs $ROWS rows"
    PR=$WORK/perrow.tsv
    : >"$PR"
    for r in $(seq 1 $(( ROUNDS * 3 ))); do
        for s in dlock_1k dlock hand_1k hand; do
            t=$(table_of "$s")
            out=$(cd "$WORK" && dlock_as_postgres pgbench -n -M simple -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" \
                    -U postgres -c 1 -t 10 -f "$SCRIPTS/$s.pgb" postgres 2>&1) || true
            lat=$(sed -nE 's/^latency average = ([0-9.]+) ms/\1/p' <<<"$out")
            printf '%s\t%s\n' "$s" "${lat:-0}" >>"$PR"
            reset_table "$t"
        done
    done
    med() { awk -F'\t' -v s="$1" '$1 == s { print $2 }' "$PR" | sort -n |
              awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
    say ""
    say "Per claimed+completed row, 1 worker (median latency of a batch of 100 / 100, over $(( ROUNDS * 3 )) runs of 10 batches):"
    for v in dlock hand; do
        a=$(med "${v}_1k"); b=$(med "$v")
        say "$(printf '  %-6s 1,000 rows: %6.1f us/row   %s rows: %6.1f us/row   ratio %s' \
            "$v" "$(awk -v x="$a" 'BEGIN { print x * 10 }')" "$ROWS" \
            "$(awk -v x="$b" 'BEGIN { print x * 10 }')" "$(ratio "$b" "$a")")"
    done
fi

say ""
say "dlock.claim after all runs: $(q "SELECT count(*) || ' rows, ' || pg_size_pretty(pg_total_relation_size('dlock.claim'))")"
if [ -n "$RESULTS" ]; then
    cp "$RAW" "$RESULTS"
    echo "raw results copied to $RESULTS"
fi
echo
echo "==================== summary ===================="
cat "$SUMMARY"
