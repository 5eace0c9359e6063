#!/usr/bin/env bash
# bench/soak.sh - sustained churn on dlock's storage, with a long transaction
# in the middle: does dlock.lease bloat, and does it come back?
#
#   sudo bash bench/soak.sh                     # 10 minutes (DURATION=600)
#   sudo DURATION=180 bash bench/soak.sh        # 3 minutes, long transaction in the middle minute
#
# Starts a throwaway PostgreSQL 15 cluster under /tmp (default settings,
# autovacuum on, shared_preload_libraries = 'dlock') and runs at full speed
# for DURATION seconds:
#   leases  pgbench, CLIENTS clients: acquire / renew / release of a random
#           key among KEYS (autocommit, -M prepared);
#   claims  only if dlock_claim exists (issue 3): pgbench, CLAIM_CLIENTS
#           clients over a table soak_jobs of JOBS rows: claim BATCH rows,
#           complete them (UPDATE ... WHERE dlock_claimed(...)), give them
#           back (dlock_unclaim), so the same rows are claimed again and again.
# From LONGTX_START for LONGTX seconds (default: the middle 3 minutes, or the
# middle third when DURATION < 540) a psql holds a REPEATABLE READ
# transaction open (BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*)
# FROM dlock.lease; SELECT pg_sleep(LONGTX); COMMIT): it holds back the xmin
# horizon, so no dead row version of dlock's tables can be pruned or vacuumed
# meanwhile.
#
# Every REPORT seconds (and when the long transaction starts and ends) it
# prints, for every table in schema dlock: table size, index size
# (pg_relation_size, pg_indexes_size), live and dead tuples, the HOT share of
# the updates since the last line (n_tup_hot_upd / n_tup_upd from
# pg_stat_user_tables), and the throughput since the last line (dlock_stats():
# acquires, releases, renewals, claims per second; commits per second), and
# the age of the oldest backend_xmin, and the load average (the machine may
# be shared: throughput is only comparable at similar load).  At the end: the pgbench totals, and a
# verdict per table: did its size (and its dead tuples) return to the steady
# level (the largest sample before the long transaction started)?
#
# Environment:
#   DURATION=600       seconds of load
#   LONGTX=            seconds the long transaction stays open (default above)
#   LONGTX_START=      when it starts (default: centred)
#   REPORT=60          seconds between report lines
#   CLIENTS=4          lease clients          KEYS=1000    lease keys
#   CLAIM_CLIENTS=2    claim clients          JOBS=10000   rows of soak_jobs
#   BATCH=10           rows per claim
#   BUILD=1            build and install dlock from this checkout first (0: use
#                      the installed one)
#   KEEP=0             1: keep the work directory (cluster, logs, samples.tsv)
#   RESULTS=FILE       also copy the samples (TSV) to FILE
#   SHRINK=1           after the run, VACUUM FULL each dlock table and print
#                      its size before and after (0: skip)
#
# Run as root (PostgreSQL itself runs as the postgres user).  Not part of the
# test suite.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
# shellcheck source=common.sh
. "$REPO/bench/common.sh"

DURATION=${DURATION:-600}
if [ -z "${LONGTX:-}" ]; then
    if [ "$DURATION" -ge 540 ]; then LONGTX=180; else LONGTX=$((DURATION / 3)); fi
fi
LONGTX_START=${LONGTX_START:-$(((DURATION - LONGTX) / 2))}
LONGTX_END=$((LONGTX_START + LONGTX))
REPORT=${REPORT:-60}
CLIENTS=${CLIENTS:-4}
CLAIM_CLIENTS=${CLAIM_CLIENTS:-2}
KEYS=${KEYS:-1000}
JOBS=${JOBS:-10000}
BATCH=${BATCH:-10}
RESULTS=${RESULTS:-}
SHRINK=${SHRINK:-1}

bench_require_root bench/soak.sh
if [ "$LONGTX_END" -gt "$DURATION" ] || [ "$LONGTX" -lt 1 ]; then
    echo "the long transaction ($LONGTX_START..$LONGTX_END s) must fit in DURATION=$DURATION" >&2
    exit 1
fi

BG_PIDS=()
stop_clients() {
    local p
    for p in ${BG_PIDS[@]+"${BG_PIDS[@]}"}; do
        kill "$p" 2>/dev/null || true
    done
    for p in ${BG_PIDS[@]+"${BG_PIDS[@]}"}; do
        wait "$p" 2>/dev/null || true
    done
}
# the work directory is kept also when the soak failed, for its logs
# shellcheck disable=SC2034  # read by bench__exit (common.sh)
BENCH_KEEP_FAILED=1
bench_on_exit stop_clients

bench_install

bench_work dlock-soak
bench_cluster "$WORK/cluster" \
    "max_connections = 60" \
    "log_autovacuum_min_duration = 0" \
    "checkpoint_timeout = '5min'" \
    "max_wal_size = '2GB'"

q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" -U postgres -d postgres "$@"; }

PGSTATTUPLE=0
if q -c "CREATE EXTENSION IF NOT EXISTS pgstattuple" >/dev/null 2>&1; then PGSTATTUPLE=1; fi

CLAIMS=0
if [ "$(q -c "SELECT count(*) FROM pg_proc WHERE proname = 'dlock_claim'")" != 0 ]; then
    CLAIMS=1
fi

mkdir "$WORK/sql"
cat >"$WORK/sql/lease.sql" <<'EOF'
\set k random(1, :keys)
SELECT dlock_acquire('soak:' || :k, 'c' || :client_id, '30 seconds');
SELECT dlock_renew('soak:' || :k, 'c' || :client_id, '30 seconds');
SELECT dlock_release('soak:' || :k, 'c' || :client_id);
EOF
if [ "$CLAIMS" = 1 ]; then
    q <<SQL
CREATE TABLE soak_jobs (id bigint PRIMARY KEY, payload text NOT NULL, runs bigint NOT NULL DEFAULT 0);
INSERT INTO soak_jobs (id, payload) SELECT g, 'job ' || g FROM generate_series(1, $JOBS) g;
VACUUM ANALYZE soak_jobs;
SQL
    cat >"$WORK/sql/claim.sql" <<'EOF'
SELECT coalesce(array_agg(id), '{}') AS ids FROM dlock_claim(NULL::soak_jobs, 'w' || :client_id, :batch, '30 seconds') \gset
UPDATE soak_jobs SET runs = runs + 1 WHERE id = ANY (:ids::bigint[]) AND dlock_claimed('soak_jobs', id, 'w' || :client_id);
SELECT dlock_unclaim('soak_jobs', 'w' || :client_id);
EOF
fi
chmod -R a+rX "$WORK/sql"

# one-line samples: t phase rel size idx live dead upd hot used_pct | acq rel ren claims xacts xmin_age
SAMPLE_SQL=$(cat <<'EOF'
WITH s AS (SELECT * FROM dlock_stats()),
     d AS (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
     x AS (SELECT coalesce(max(age(backend_xmin)), 0) AS xmin_age FROM pg_stat_activity)
SELECT c.oid::regclass,
       pg_relation_size(c.oid), pg_indexes_size(c.oid),
       coalesce(t.n_live_tup, 0), coalesce(t.n_dead_tup, 0),
       coalesce(t.n_tup_upd, 0), coalesce(t.n_tup_hot_upd, 0),
       coalesce(t.autovacuum_count, 0) + coalesce(t.vacuum_count, 0),
       s.acquired + s.extended, s.releases, s.renewals, s.claims,
       d.xact_commit, x.xmin_age
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_stat_user_tables t ON t.relid = c.oid
  CROSS JOIN s CROSS JOIN d CROSS JOIN x
 WHERE n.nspname = 'dlock' AND c.relkind = 'r'
 ORDER BY 1
EOF
)
SAMPLES=$WORK/samples.tsv
printf 't\tphase\trel\tsize\tidx\tlive\tdead\tupd\thot\tvacuums\tacq\trel_n\tren\tclaims\txacts\txmin_age\tload1\n' >"$SAMPLES"

PREV_T=
declare -A PREV
sample() { # T PHASE: appends to $SAMPLES and prints the lines
    local t=$1 phase=$2 line rel size idx live dead upd hot vac acq reln ren cl xa xage
    local dt hotpct rates key last="0 0 0 0 0" load1
    load1=$(cut -d' ' -f1 /proc/loadavg)
    while IFS='|' read -r rel size idx live dead upd hot vac acq reln ren cl xa xage; do
        [ -n "$rel" ] || continue
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
            "$t" "$phase" "$rel" "$size" "$idx" "$live" "$dead" "$upd" "$hot" "$vac" \
            "$acq" "$reln" "$ren" "$cl" "$xa" "$xage" "$load1" >>"$SAMPLES"
        key=$rel
        if [ -n "$PREV_T" ] && [ "$t" -gt "$PREV_T" ]; then
            dt=$((t - PREV_T))
            local pu=${PREV[$key.upd]:-0} ph=${PREV[$key.hot]:-0}
            if [ $((upd - pu)) -gt 0 ]; then
                hotpct=$(awk -v a=$((hot - ph)) -v b=$((upd - pu)) 'BEGIN { printf "%.1f%%", 100 * a / b }')
            else
                hotpct='-'
            fi
            rates=$(awk -v dt=$dt -v a=$((acq - ${PREV[acq]})) -v r=$((reln - ${PREV[releases]})) \
                -v n=$((ren - ${PREV[ren]})) -v c=$((cl - ${PREV[cl]})) -v x=$((xa - ${PREV[xa]})) \
                'BEGIN { printf "%8.0f %8.0f %8.0f %8.0f %8.0f", a/dt, r/dt, n/dt, c/dt, x/dt }')
        else
            hotpct='-'
            rates=$(printf '%8s %8s %8s %8s %8s' - - - - -)
        fi
        printf '%5s %-9s %-16s %9s %9s %8s %8s %6s %s %9s %5s\n' \
            "$t" "$phase" "$rel" "$(numfmt --to=iec "$size")" "$(numfmt --to=iec "$idx")" \
            "$live" "$dead" "$hotpct" "$rates" "$xage" "$load1"
        PREV[$key.upd]=$upd
        PREV[$key.hot]=$hot
        last="$acq $reln $ren $cl $xa"
    done < <(q -F '|' -c "$SAMPLE_SQL")
    # (read clears its variables at the end of its input)
    read -r acq reln ren cl xa <<<"$last"
    PREV[acq]=$acq; PREV[releases]=$reln; PREV[ren]=$ren; PREV[cl]=$cl; PREV[xa]=$xa
    PREV_T=$t
}

log "cluster: PGHOST=$PGHOST PGPORT=$PGPORT; work directory $WORK"
log "load: $CLIENTS lease clients over $KEYS keys$([ "$CLAIMS" = 1 ] && echo ", $CLAIM_CLIENTS claim clients over $JOBS jobs (batch $BATCH)" || echo "; no claims (dlock_claim does not exist)")"
log "duration ${DURATION} s; REPEATABLE READ transaction open from ${LONGTX_START} s to ${LONGTX_END} s"

pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$DURATION" -P "$REPORT" \
    -D keys="$KEYS" -f "$WORK/sql/lease.sql" postgres >"$WORK/pgbench_lease.log" 2>&1 &
BG_PIDS+=($!)
PGB_LEASE=$!
PGB_CLAIM=
if [ "$CLAIMS" = 1 ]; then
    pgbench -n -M prepared -c "$CLAIM_CLIENTS" -j "$CLAIM_CLIENTS" -T "$DURATION" -P "$REPORT" \
        -D batch="$BATCH" -f "$WORK/sql/claim.sql" postgres >"$WORK/pgbench_claim.log" 2>&1 &
    BG_PIDS+=($!)
    PGB_CLAIM=$!
fi
START=$SECONDS

echo
printf '%5s %-9s %-16s %9s %9s %8s %8s %6s %8s %8s %8s %8s %8s %9s %5s\n' \
    t phase table size indexes live dead HOT acq/s rel/s renew/s claim/s commit/s xmin_age load
sample 0 steady

LONGTX_PID=
next=$REPORT
phase=steady
while :; do
    now=$((SECONDS - START))
    if [ -z "$LONGTX_PID" ] && [ "$phase" = steady ] && [ "$now" -ge "$LONGTX_START" ]; then
        psql -X -q -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" -U postgres -d postgres >"$WORK/longtx.log" 2>&1 <<SQL &
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM dlock.lease;
SELECT pg_sleep($LONGTX);
COMMIT;
SQL
        LONGTX_PID=$!
        BG_PIDS+=($LONGTX_PID)
        phase="LONG-TX"
        sleep 1
        sample "$now" "tx-start"
    fi
    if [ -n "$LONGTX_PID" ] && [ "$phase" = "LONG-TX" ] && ! kill -0 "$LONGTX_PID" 2>/dev/null; then
        wait "$LONGTX_PID" || log "the long transaction ended with an error (see $WORK/longtx.log)"
        phase=after
        sample "$now" "tx-end"
    fi
    if [ "$now" -ge "$next" ]; then
        [ "$PREV_T" = "$next" ] || sample "$next" "$phase"
        [ "$next" -ge "$DURATION" ] && break
        next=$((next + REPORT))
        [ "$next" -gt "$DURATION" ] && next=$DURATION
    fi
    sleep 1
done

wait "$PGB_LEASE" || log "pgbench (leases) failed: see below"
[ -n "$PGB_CLAIM" ] && { wait "$PGB_CLAIM" || log "pgbench (claims) failed: see below"; }

echo
echo "pgbench (leases, $CLIENTS clients, 3 statements per transaction):"
grep -E '^(number of (transactions actually processed|failed transactions)|tps|latency average)' "$WORK/pgbench_lease.log" | sed 's/^/    /'
grep -iE 'error|abort' "$WORK/pgbench_lease.log" | head -5 | sed 's/^/    /' || true
if [ "$CLAIMS" = 1 ]; then
    echo "pgbench (claims, $CLAIM_CLIENTS clients, batch $BATCH: claim, complete, unclaim):"
    grep -E '^(number of (transactions actually processed|failed transactions)|tps|latency average)' "$WORK/pgbench_claim.log" | sed 's/^/    /'
    grep -iE 'error|abort' "$WORK/pgbench_claim.log" | head -5 | sed 's/^/    /' || true
    echo "    soak_jobs: $(q -c "SELECT count(*) || ' rows, ' || sum(runs) || ' completions, min ' || min(runs) || ' max ' || max(runs) || ' per row' FROM soak_jobs")"
fi
if [ "$PGSTATTUPLE" = 1 ]; then
    echo "pgstattuple at the end (what the files hold):"
    q -F '|' -c "SELECT c.oid::regclass, p.table_len, p.tuple_count, p.dead_tuple_count, round(p.free_percent::numeric, 1)
                   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
                        LATERAL pgstattuple(c.oid) p
                  WHERE n.nspname = 'dlock' AND c.relkind = 'r' ORDER BY 1" |
        while IFS='|' read -r rel len live dead free; do
            printf '    %-16s %9s  %s live, %s dead tuples, %s%% free space\n' "$rel" "$(numfmt --to=iec "$len")" "$live" "$dead" "$free"
        done
fi

# ---- verdict: per table, steady (last sample before the long transaction),
# peak (during it), end (last sample)
echo
echo "verdict (steady = largest sample before the long transaction; end = last sample, $((DURATION - LONGTX_END)) s after it ended):"
awk -F'\t' -v ltx_start="$LONGTX_START" -v ltx_end="$LONGTX_END" '
function h(x) { return x >= 1048576 ? sprintf("%.1fM", x / 1048576) : sprintf("%.0fk", x / 1024) }
NR == 1 { next }
{
    rel = $3; t = $1 + 0; tot = $4 + $5
    rels[rel] = 1
    # steady level: the largest sample before the long transaction (sizes
    # of insert/delete tables like dlock.claim swing with autovacuum cycles)
    if (($2 == "steady" && t > 0) || $2 == "tx-start") {
        if (tot >= st_size[rel] + st_idx[rel]) { st_size[rel] = $4; st_idx[rel] = $5 }
        if ($7 > st_dead[rel]) st_dead[rel] = $7
    }
    if ($2 == "LONG-TX" || $2 == "tx-end" || $2 == "tx-start") {
        if (tot > peak[rel]) { peak[rel] = tot; pk_size[rel] = $4; pk_idx[rel] = $5 }
        if ($7 > pk_dead[rel]) pk_dead[rel] = $7
    }
    if ($2 == "tx-end") { te_tot[rel] = tot }
    end_size[rel] = $4; end_idx[rel] = $5; end_dead[rel] = $7; end_tot[rel] = tot
}
END {
    ok = 1
    for (rel in rels) {
        st = st_size[rel] + st_idx[rel]
        # within 25% (and 64 kB) of the steady size counts as back
        back = (end_tot[rel] <= st * 1.25 + 65536)
        dead_lim = st_dead[rel] * 2; if (dead_lim < 1000) dead_lim = 1000
        dead_back = (end_dead[rel] <= dead_lim)
        grew_after = (end_tot[rel] > te_tot[rel] * 1.10 + 65536)
        printf "  %s: table+indexes steady %s (%s + %s), peak %s (%s + %s), end %s (%s + %s)\n",
            rel, h(st), h(st_size[rel]), h(st_idx[rel]), h(peak[rel]), h(pk_size[rel]), h(pk_idx[rel]),
            h(end_tot[rel]), h(end_size[rel]), h(end_idx[rel])
        printf "  %s: dead tuples steady %d, peak %d, end %d\n", rel, st_dead[rel], pk_dead[rel], end_dead[rel]
        if (back)
            printf "  %s: SIZE RETURNED to its steady level after the long transaction\n", rel
        else {
            ok = 0
            ratio = 0; if (st > 0) ratio = end_tot[rel] / st
            why = "; it stopped growing when the transaction ended (the space is reused, not given back)"
            if (grew_after) why = "; it kept growing after the transaction ended"
            printf "  %s: size did NOT return to its steady level (%.1fx steady at the end)%s\n", rel, ratio, why
        }
        dmsg = "NOT back to the steady level"; if (dead_back) dmsg = "back to the steady level"
        printf "  %s: dead tuples %s\n", rel, dmsg
    }
}' "$SAMPLES"

if [ "$SHRINK" = 1 ]; then
    echo
    echo "remedy: VACUUM FULL of each dlock table after the run (ACCESS EXCLUSIVE lock while it runs):"
    for rel in $(q -c "SELECT c.oid::regclass FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                        WHERE n.nspname = 'dlock' AND c.relkind = 'r' ORDER BY 1"); do
        before=$(q -c "SELECT pg_relation_size('$rel') + pg_indexes_size('$rel')")
        t0=$(date +%s%N)
        q -c "VACUUM FULL $rel"
        ms=$(( ($(date +%s%N) - t0) / 1000000 ))
        after=$(q -c "SELECT pg_relation_size('$rel') + pg_indexes_size('$rel')")
        printf '    %-16s table+indexes %s -> %s in %s ms\n' "$rel" \
            "$(numfmt --to=iec "$before")" "$(numfmt --to=iec "$after")" "$ms"
    done
fi

if [ -n "$RESULTS" ]; then
    cp "$SAMPLES" "$RESULTS"
    echo "samples copied to $RESULTS"
fi
echo "server log (autovacuum runs): $(grep -c 'automatic vacuum of table "postgres.dlock' "$DLOCK_SERVER_LOG" || true) automatic vacuums of dlock tables"
