#!/usr/bin/env bash
# bench/claim_queue_bench.sh - claims as a job queue's users use them
# (issue 38): how fast an idle waiting worker gets a row inserted for it,
# how many claim attempts one row costs with many idle workers, what
# group_by/per_group costs in rows per second, and where fair puts small
# groups' rows beside one big group's backlog.
#
#   sudo bash bench/claim_queue_bench.sh                 # about 6 minutes
#   sudo SECTIONS="wake herd" ROUNDS=1 bash bench/claim_queue_bench.sh
#
# Starts its own throwaway cluster under /tmp (fsync on, synchronous_commit
# on, dlock preloaded) and runs the sections of SECTIONS in order:
#
#   wake   insert commit to claimed, on the client's clock
#          (bench/handoff_timer.c): a waiter sleeps in dlock_claim(...,
#          wait => '10 s') on an empty table with dlock_claim_wakeup; the
#          clock starts when an autocommit INSERT of one row is sent and
#          stops when the waiter's claim has come back with it.  Interleaved
#          round by round with dlock's lease hand-off (mode dlock: the clock
#          runs from the release to the waiter's committed acquire), the
#          floor a wake-up of a claim is held to.
#          Mode flush times one flushed commit in the same rhythm: a
#          claim is a second committing write after the insert's, where a
#          hand-off's waiter finds its grant written by the release, so
#          hand-off + one flush is the claim's floor.
#          Targets: claim p50 <= 1.2x hand-off p50; claim p99 <= 5 ms.
#   herd   WAITERS (16) sessions wait in dlock_claim(..., n => 1, wait);
#          one row is inserted; the run counts the waiters woken in the
#          half second after it (dlock_stats().claim_wakeups: each makes
#          one attempt), and all attempts since the first ones (each runs
#          the claim query once, one scan of the table: pg_stat_user_tables,
#          read once every session has ended, less one per waiter; the
#          first waiter's safety wake, every dlock.safety_wake, counts too).
#          Target: at most 2 attempts in all.
#   groups rows claimed and completed per second, pgbench, claims of 100
#          with group_by => 'tenant', per_group => 50 (100 tenants) against
#          the same claims without groups, at CLIENTS workers (4 16),
#          ROUNDS interleaved rounds of DURATION seconds.
#          Target: groups >= 0.8x plain at 4 and 16 workers.
#   fair   a table of 100,000 rows of one group (ids first) and 50 groups
#          of 10: one worker claims 10 at a time with fair => true and
#          completes them; the position in the delivery order of the last
#          small-group row, over all 100,500 deliveries.  Without fair the
#          first small-group row would come after the big group's 100,000.
#          Target: within the first 5% (position <= 5,025).
#
# Environment:
#   SECTIONS="wake herd groups fair"  ROUNDS=3  TRIALS=200 (wake)
#   WAITERS=16 (herd)  CLIENTS="4 16"  DURATION=5  ROWS=300000 (groups)
#   BUILD=1 (0: measure the installed dlock)  KEEP=0
# Printed, never asserted: a benchmark, not a test.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
# shellcheck source=common.sh
. "$REPO/bench/common.sh"

SECTIONS=${SECTIONS:-"wake herd groups fair"}
ROUNDS=${ROUNDS:-3}
TRIALS=${TRIALS:-200}
WAITERS=${WAITERS:-16}
CLIENTS=${CLIENTS:-"4 16"}
DURATION=${DURATION:-5}
ROWS=${ROWS:-300000}

bench_require_root bench/claim_queue_bench.sh
bench_on_exit

REV=$(bench_revision "$REPO" "$BUILD")
bench_install
bench_work dlock-claimqueue
bench_cluster "$WORK/cluster" "max_connections = 60" "shared_buffers = 512MB" \
    "max_wal_size = 4GB" "log_min_messages = warning"

PSQL=(psql -X -q -v ON_ERROR_STOP=1 -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" -U postgres -d postgres)
q() { "${PSQL[@]}" -Atc "$1"; }
conn="host=$DLOCK_PGHOST port=$DLOCK_PORT user=postgres dbname=postgres"
med() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print v[int((NR + 1) / 2)] }'; }

echo "==> dlock $REV; $(q 'SELECT version()' | cut -d' ' -f1-2); $(nproc) CPUs; $(bench_machine)"
echo "==> load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---------------------------------------------------------------- wake
wake() {
    local r m out
    gcc -O2 -o "$WORK/timer" "$HERE/handoff_timer.c" -I"$("$DLOCK_PG_CONFIG" --includedir)" \
        -L"$("$DLOCK_PG_CONFIG" --libdir)" -lpq
    : >"$WORK/wake.txt"
    for ((r = 1; r <= ROUNDS; r++)); do
        for m in dlock claim flush; do
            out=$(dlock_as_postgres "$WORK/timer" "$conn" "$m" "$TRIALS" 300) || true
            echo "    round $r $m: $out"
            echo "$r $m $out" >>"$WORK/wake.txt"
        done
    done
    local d c c99 f
    d=$(sed -nE 's/^[0-9]+ dlock .* p50=([0-9.]+) .*/\1/p' "$WORK/wake.txt" | med)
    c=$(sed -nE 's/^[0-9]+ claim .* p50=([0-9.]+) .*/\1/p' "$WORK/wake.txt" | med)
    c99=$(sed -nE 's/^[0-9]+ claim .* p99=([0-9.]+) .*/\1/p' "$WORK/wake.txt" | med)
    f=$(sed -nE 's/^[0-9]+ flush .* p50=([0-9.-]+) .*/\1/p' "$WORK/wake.txt" | med)
    echo "wake: insert commit to claimed p50 $c ms, p99 $c99 ms; lease hand-off p50 $d ms;" \
        "claim / hand-off = $(awk -v c="$c" -v d="$d" 'BEGIN { if (d > 0) printf "%.2fx", c / d; else print "-" }');" \
        "one flushed commit $f ms; claim / (hand-off + one flush) =" \
        "$(awk -v c="$c" -v d="$d" -v f="$f" 'BEGIN { if (d + f > 0) printf "%.2fx", c / (d + f); else print "-" }')" \
        "(median of $ROUNDS interleaved rounds of $TRIALS; targets: <= 1.2x hand-off, p99 <= 5 ms)"
}

# ---------------------------------------------------------------- herd
herd() {
    local i pids=() after waiting attempts got w0 w1
    q "CREATE TABLE herd_jobs (id bigserial PRIMARY KEY, payload text)"
    q "SELECT dlock_claim_wakeup('herd_jobs')"
    q "SELECT pg_stat_reset()"
    for ((i = 1; i <= WAITERS; i++)); do
        PGAPPNAME=herd q "SELECT count(*) FROM dlock_claim(NULL::herd_jobs, 'w$i', 1, '60 s', wait => '20 s')" \
            >"$WORK/herd.$i" 2>&1 &
        pids+=($!)
    done
    for ((i = 0; i < 200; i++)); do
        waiting=$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'herd' AND wait_event_type = 'Extension'")
        [ "$waiting" -ge "$WAITERS" ] && break
        sleep 0.05
    done
    w0=$(q "SELECT claim_wakeups FROM dlock_stats()")
    q "INSERT INTO herd_jobs (payload) VALUES ('one')"
    # let the wake-up and any chain run out, then end the waiters
    for ((i = 0; i < 100; i++)); do
        got=$(grep -lx 1 "$WORK"/herd.* 2>/dev/null | wc -l)
        [ "$got" -ge 1 ] && break
        sleep 0.05
    done
    sleep 0.5
    w1=$(q "SELECT claim_wakeups FROM dlock_stats()")
    q "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE application_name = 'herd' AND pid <> pg_backend_pid()" >/dev/null
    wait "${pids[@]}" 2>/dev/null || true
    sleep 1.5   # the ended backends' counters reach the statistics
    q "SELECT pg_stat_force_next_flush()" >/dev/null 2>&1 || true
    after=$(q "SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = 'herd_jobs'")
    attempts=$((after - WAITERS))
    echo "herd: $WAITERS idle waiters, one row inserted: $got claimed it; $((w1 - w0)) waiter(s) woken in the" \
        "0.5 s after the insert, each for one attempt (target: at most 2); $attempts attempt(s) in all after" \
        "the first ones (scans of the table, safety wakes of the first waiter included)"
}

# ---------------------------------------------------------------- groups
groups() {
    local r n p rows rate
    for p in plain group; do
        q "CREATE TABLE g_$p (id bigint PRIMARY KEY, tenant int NOT NULL, status int NOT NULL DEFAULT 0)
             WITH (autovacuum_enabled = off)"
        q "INSERT INTO g_$p SELECT g, g % 100, 0 FROM generate_series(1, $ROWS) g"
        q "CREATE INDEX ON g_$p (id) WHERE status = 0"
    done
    q "VACUUM ANALYZE"
    cat >"$WORK/plain.pgb" <<'EOF'
SELECT coalesce(string_agg(id::text, ','), 'NULL') AS ids
  FROM dlock_claim(NULL::g_plain, 'w:client_id', 100, '30 s', 'status = 0') \gset
UPDATE g_plain j SET status = 1 FROM dlock_complete('g_plain', 'w:client_id', ARRAY[:ids]::bigint[]) AS d(id) WHERE j.id = d.id;
EOF
    cat >"$WORK/group.pgb" <<'EOF'
SELECT coalesce(string_agg(id::text, ','), 'NULL') AS ids
  FROM dlock_claim(NULL::g_group, 'w:client_id', 100, '30 s', 'status = 0',
                   group_by => 'tenant', per_group => 50) \gset
UPDATE g_group j SET status = 1 FROM dlock_complete('g_group', 'w:client_id', ARRAY[:ids]::bigint[]) AS d(id) WHERE j.id = d.id;
EOF
    : >"$WORK/groups.txt"
    for ((r = 1; r <= ROUNDS; r++)); do
        for n in $CLIENTS; do
            for p in plain group; do
                (cd "$WORK" && dlock_as_postgres pgbench -n -M simple -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" \
                    -U postgres -c "$n" -j 2 -T "$DURATION" -f "$WORK/$p.pgb" postgres >"$WORK/pgb.out" 2>&1) || true
                grep -m2 -iE 'error|abort' "$WORK/pgb.out" >&2 || true
                rows=$(q "SELECT count(*) FROM g_$p WHERE status = 1")
                rate=$((rows / DURATION))
                echo "    round $r $p $n workers: $rate rows/s"
                echo "$r $n $p $rate" >>"$WORK/groups.txt"
                q "UPDATE g_$p SET status = 0 WHERE status <> 0"
                q "DELETE FROM dlock.claim WHERE relid = 'g_$p'::regclass"
                q "VACUUM g_$p, dlock.claim"
            done
        done
    done
    for n in $CLIENTS; do
        # the median of the per-round ratios (runs of a round are neighbours in time)
        awk -v n="$n" '$2 == n { v[$1, $3] = $4; r[$1] = 1 }
            END { for (i in r) if (v[i, "plain"] > 0) q[++m] = v[i, "group"] / v[i, "plain"]
                  for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (q[j] < q[i]) { t = q[i]; q[i] = q[j]; q[j] = t }
                  printf "groups: %s workers: group_by/per_group over plain claims = %.2fx (median of %d rounds; target >= 0.8x)\n",
                         n, (m % 2) ? q[(m + 1) / 2] : (q[m / 2] + q[m / 2 + 1]) / 2, m }' "$WORK/groups.txt"
    done
}

# ---------------------------------------------------------------- fair
fair() {
    q "CREATE TABLE f_jobs (id bigint PRIMARY KEY, grp int NOT NULL, status int NOT NULL DEFAULT 0)"
    q "INSERT INTO f_jobs SELECT g, 0, 0 FROM generate_series(1, 100000) g"
    q "INSERT INTO f_jobs SELECT 100000 + g, 1 + (g - 1) / 10, 0 FROM generate_series(1, 500) g"
    q "CREATE INDEX ON f_jobs (id) WHERE status = 0"
    q "VACUUM ANALYZE f_jobs"
    local t0 t1
    t0=$(date +%s.%N)
    # claim and complete 10 at a time until every small-group row is
    # delivered (or 5% of all deliveries have passed), noting positions
    "${PSQL[@]}" -At <<'SQL' >"$WORK/fair.txt"
CREATE TEMP TABLE delivered (pos bigserial, id bigint, grp int);
DO $$
DECLARE
    got int;
BEGIN
    LOOP
        WITH c AS (SELECT id, grp FROM dlock_claim(NULL::f_jobs, 'fair', 10, '60 s', 'status = 0',
                                                   group_by => 'grp', fair => true)),
             d AS (INSERT INTO delivered (id, grp) SELECT id, grp FROM c RETURNING 1)
        SELECT count(*) INTO got FROM d;
        UPDATE f_jobs j SET status = 1 FROM delivered d WHERE d.id = j.id AND j.status = 0;
        EXIT WHEN got = 0
               OR (SELECT count(*) FROM delivered WHERE grp > 0) = 500
               OR (SELECT count(*) FROM delivered) > 5025;
        COMMIT;
    END LOOP;
END $$;
SELECT coalesce(max(pos) FILTER (WHERE grp > 0), 0), count(*) FILTER (WHERE grp > 0), count(*) FROM delivered;
SQL
    t1=$(date +%s.%N)
    local last small total
    read -r last small total < <(tr '|' ' ' <"$WORK/fair.txt" | tail -n 1)
    echo "fair: $small of 500 small-group rows delivered in the first $total deliveries; the last at position $last" \
        "of 100,500 = $(awk -v p="$last" 'BEGIN { printf "%.2f%%", 100 * p / 100500 }') (target <= 5%);" \
        "$(awk -v a="$t0" -v b="$t1" -v n="$total" 'BEGIN { printf "%.1f ms per claim of 10", 1000 * (b - a) / (n / 10) }')"
}

for s in $SECTIONS; do
    echo "==> $s"
    "$s"
done
echo "==> load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
