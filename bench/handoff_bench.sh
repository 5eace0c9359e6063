#!/usr/bin/env bash
# bench/handoff_bench.sh - hand-off latency: from the start of the release
# call to the return of the waiter's committed acquire.
#
#   sudo bash bench/handoff_bench.sh            # about two minutes with the defaults
#   sudo HANDOFFS=500 bash bench/handoff_bench.sh
#   sudo TIMER=server bash bench/handoff_bench.sh
#
# TIMER=client (the default) times on the client with bench/handoff_timer.c
# (HANDOFF_C to use another; built here with libpq, not part of dlock):
# modes advisory, dlock and flush, ROUNDS rounds of HANDOFFS each,
# alternated.  The holder releases 20-40 ms after the waiter is seen
# waiting; a hand-off is timed from the start of the release call to the
# return of the waiter's acquire, its commit included.  flush times one
# flushed commit in the same rhythm (a one-row UPDATE after 20-40 ms idle,
# less a SELECT 1 after as long): the one cost a durable hand-off has on
# top of an advisory lock's.  It prints p50 and p99 of each round, and
# dlock's p50 over advisory's and over advisory's plus that flush.
# Targets (issue 25): p50 <= 1.15x (advisory + one flush), p99 <= 2 ms.
#
# TIMER=server is the older measurement on the server clock, which stops the
# waiter's clock before its commit (and its WAL flush), so it leaves out the
# durable step that advisory locks never pay; it also covers a 10 ms poll
# loop of a hand-written lease.  Described below.
#
# Starts its own throwaway PostgreSQL 15 cluster under /tmp (fsync on,
# synchronous_commit on, shared_preload_libraries = 'dlock') and hands one
# lock over from a releasing session to a waiting session HANDOFFS times for
# each of three variants, interleaved round by round (dlock, advisory, poll,
# dlock, advisory, poll, ...):
#
#   dlock     the waiter sleeps in dlock_acquire(key, 'waiter', '60 s', wait => '10 s');
#             the releaser calls dlock_release(key, 'releaser')
#   dlock_noyield  (not run by default) the same with dlock.handoff_yield = off
#             in the releasing session: what that setting is worth
#   advisory  the waiter blocks in pg_advisory_lock(k); the releaser calls
#             pg_advisory_unlock(k) (session locks)
#   poll      what a hand-written lease does without wake-ups: the waiter
#             loops "try the INSERT ... ON CONFLICT ... WHERE expired upsert;
#             COMMIT; pg_sleep(0.01)" in a procedure; the releaser deletes
#             its row (holder-checked DELETE)
#
# The releaser records clock_timestamp() in the same statement, just before
# the release; the waiter records clock_timestamp() in the same statement,
# right after its acquire returns. Both go into table handoff (variant,
# round); p50/p95/p99 of the differences are computed in SQL. The two
# sessions are separate psql processes sequenced by bench/handoff_driver.pl
# (perl, IPC::Run). The releaser waits until the server shows the waiter
# waiting, plus a random 10-30 ms, before it releases.
#
# Targets (issue 4): dlock p50 <= 1 ms, p99 <= 5 ms, and within 2x of the
# advisory-lock hand-off. Printed, never asserted: a benchmark, not a test.
#
# Environment:
#   HANDOFFS=200    hand-offs per variant
#   VARIANTS="dlock advisory poll"
#   BUILD=1         build and install dlock from this checkout first (0: use
#                   the installed one)
#   KEEP=0          1: keep the work directory (cluster, logs)
#
# Run as root (PostgreSQL itself runs as the postgres user).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
# shellcheck source=common.sh
. "$REPO/bench/common.sh"

HANDOFFS=${HANDOFFS:-200}
VARIANTS=${VARIANTS:-"dlock advisory poll"}
TIMER=${TIMER:-client}
ROUNDS=${ROUNDS:-3}
HANDOFF_C=${HANDOFF_C:-$HERE/handoff_timer.c}

bench_require_root bench/handoff_bench.sh
bench_on_exit

REVISION=$(bench_revision "$REPO" "$BUILD")

bench_install

bench_work dlock-handoff
bench_cluster "$WORK/c" "max_connections = 20"

if [ "$TIMER" = client ]; then
    if [ ! -f "$HANDOFF_C" ]; then
        echo "the hand-off timer is not at $HANDOFF_C: set HANDOFF_C, or run with TIMER=server" >&2
        exit 1
    fi
    gcc -O2 -o "$WORK/handoff" "$HANDOFF_C" -I"$("$DLOCK_PG_CONFIG" --includedir)" \
        -L"$("$DLOCK_PG_CONFIG" --libdir)" -lpq
    conn="host=$DLOCK_PGHOST port=$DLOCK_PORT user=postgres dbname=postgres"
    echo "dlock $REVISION; $($DLOCK_PG_CONFIG --version); $(nproc) CPUs; $(bench_machine); client timer ($(basename "$HANDOFF_C"))"
    # each round: advisory, dlock, and one flushed commit in the same rhythm
    # (a one-row UPDATE after 20-40 ms idle, less a SELECT 1 after as long)
    echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    for ((r = 1; r <= ROUNDS; r++)); do
        for m in advisory dlock flush; do
            out=$(dlock_as_postgres "$WORK/handoff" "$conn" "$m" "$HANDOFFS" 300)
            echo "round $r $m: $out"
            echo "$r $m $out" >>"$WORK/client.txt"
        done
    done
    # each mode's p50 and p99: the median of the rounds'; and the ratios
    med() { sed -nE "s/^[0-9]+ $1 .* $2=([0-9.-]+) .*/\1/p" "$WORK/client.txt" | sort -n |
            awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
    a=$(med advisory p50); d=$(med dlock p50); f=$(med flush p50)
    echo "p50, median of $ROUNDS rounds: dlock $d ms, advisory $a ms, one flushed commit $f ms;" \
        "dlock / advisory = $(awk -v d="$d" -v a="$a" 'BEGIN { printf "%.2fx", d / a }');" \
        "dlock / (advisory + one flush) = $(awk -v d="$d" -v a="$a" -v f="$f" 'BEGIN { printf "%.2fx", d / (a + f) }')"
    echo "p99, median of $ROUNDS rounds: dlock $(med dlock p99) ms, advisory $(med advisory p99) ms"
    echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "targets: dlock p50 <= 1.15x (advisory + one flush); dlock p99 <= 2 ms (printed, never asserted)"
    exit 0
fi

dlock_psql -q <<'SQL'
CREATE TABLE handoff (
    variant     text,
    round       int,
    released_at timestamptz,    -- releaser: clock_timestamp() just before the release
    release_returned_at timestamptz, -- releaser: clock_timestamp() right after the release function returned
    acquired_at timestamptz,    -- waiter: clock_timestamp() right after its acquire returned
    got         boolean,        -- did the waiter get the lock?
    PRIMARY KEY (variant, round)
);

-- the hand-written lease of the poll variant
CREATE TABLE poll_lease (key text PRIMARY KEY, holder text NOT NULL, expires_at timestamptz NOT NULL);

CREATE FUNCTION bench_poll_try(k text, h text, OUT got boolean) LANGUAGE sql AS $$
    INSERT INTO poll_lease AS t (key, holder, expires_at)
    VALUES (k, h, clock_timestamp() + interval '60 s')
    ON CONFLICT (key) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
        WHERE t.expires_at < clock_timestamp()
    RETURNING true
$$;

-- try; COMMIT; sleep 10 ms; ... for up to 10 s, as a polling client would
CREATE PROCEDURE bench_poll_acquire(k text, h text, INOUT got boolean,
                                    INOUT t1 timestamptz, INOUT tries int)
LANGUAGE plpgsql AS $$
BEGIN
    tries := 0;
    LOOP
        tries := tries + 1;
        got := coalesce((SELECT p.got FROM bench_poll_try(k, h) p), false);
        IF got THEN
            t1 := clock_timestamp();
            RETURN;
        END IF;
        COMMIT;
        EXIT WHEN tries >= 1000;
        PERFORM pg_sleep(0.01);
    END LOOP;
    t1 := clock_timestamp();
END
$$;

CREATE FUNCTION bench_poll_release(k text, h text, OUT t0 timestamptz, OUT rel boolean,
                                   OUT t0b timestamptz)
LANGUAGE plpgsql AS $$
BEGIN
    t0 := clock_timestamp();
    DELETE FROM poll_lease WHERE key = k AND holder = h;
    rel := FOUND;
    t0b := clock_timestamp();
END
$$;
SQL

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
STATS_BEFORE=$(dlock_psql -Atc "SELECT handoffs FROM dlock_stats()")
log "$HANDOFFS hand-offs per variant, interleaved: $VARIANTS"
START=$(date +%s)
# shellcheck disable=SC2086
perl "$HERE/handoff_driver.pl" "$HANDOFFS" $VARIANTS
ELAPSED=$(( $(date +%s) - START ))
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
STATS_AFTER=$(dlock_psql -Atc "SELECT handoffs FROM dlock_stats()")

echo
echo "dlock hand-off benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(dlock_psql -Atc 'SHOW server_version')"
echo "dlock: $REVISION"
echo "$HANDOFFS hand-offs per variant, interleaved; fsync on, synchronous_commit on, shared_preload_libraries = 'dlock'"
echo "load average before: $LOAD_BEFORE, after: $LOAD_AFTER; ${ELAPSED}s of runs"
echo "dlock_stats().handoffs grew by $(( STATS_AFTER - STATS_BEFORE ))"
echo
echo "hand-off latency in ms (server clock, from just before the release call to the waiter's return);"
echo "p50 call: the release function itself; p50 after: from its return (then commit, wake-up, the"
echo "waiter's own acquire) to the waiter's return"
dlock_psql -P footer=off <<'SQL'
WITH d AS (
    SELECT variant, got, extract(epoch FROM acquired_at - released_at) * 1000 AS ms,
           extract(epoch FROM release_returned_at - released_at) * 1000 AS rel_ms,
           extract(epoch FROM acquired_at - release_returned_at) * 1000 AS after_ms
    FROM handoff
), s AS (
    SELECT variant,
           count(*) FILTER (WHERE got) AS n,
           count(*) FILTER (WHERE got IS NOT TRUE) AS failed,
           percentile_cont(0.50) WITHIN GROUP (ORDER BY ms) FILTER (WHERE got) AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY ms) FILTER (WHERE got) AS p95,
           percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) FILTER (WHERE got) AS p99,
           min(ms) FILTER (WHERE got) AS min, max(ms) FILTER (WHERE got) AS max,
           percentile_cont(0.50) WITHIN GROUP (ORDER BY rel_ms) FILTER (WHERE got) AS rel50,
           percentile_cont(0.50) WITHIN GROUP (ORDER BY after_ms) FILTER (WHERE got) AS after50
    FROM d GROUP BY variant
), a AS (SELECT * FROM s WHERE variant = 'advisory')
SELECT s.variant, s.n, s.failed,
       round(s.min::numeric, 3) AS min, round(s.p50::numeric, 3) AS p50,
       round(s.p95::numeric, 3) AS p95, round(s.p99::numeric, 3) AS p99,
       round(s.max::numeric, 3) AS max,
       round((s.p50 / nullif(a.p50, 0))::numeric, 2) AS "p50/adv",
       round((s.p95 / nullif(a.p95, 0))::numeric, 2) AS "p95/adv",
       round((s.p99 / nullif(a.p99, 0))::numeric, 2) AS "p99/adv",
       round(s.rel50::numeric, 3) AS "p50 call",
       round(s.after50::numeric, 3) AS "p50 after"
FROM s LEFT JOIN a ON true
ORDER BY array_position(ARRAY['dlock', 'dlock_noyield', 'advisory', 'poll'], s.variant);

\pset tuples_only on
\echo 'Targets (issue 4):'
WITH d AS (
    SELECT variant, extract(epoch FROM acquired_at - released_at) * 1000 AS ms
    FROM handoff WHERE got
), s AS (
    SELECT variant,
           percentile_cont(0.50) WITHIN GROUP (ORDER BY ms) AS p50,
           percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99
    FROM d GROUP BY variant
), x AS (
    SELECT l.p50, l.p99, a.p50 AS a50, a.p99 AS a99
    FROM (SELECT * FROM s WHERE variant = 'dlock') l
    LEFT JOIN (SELECT * FROM s WHERE variant = 'advisory') a ON true
)
SELECT format('  %-42s %s', t, CASE WHEN ok IS NULL THEN 'n/a' WHEN ok THEN 'MET' ELSE 'NOT MET' END)
FROM x, LATERAL (VALUES
    (format('dlock p50 %s ms <= 1 ms', round(p50::numeric, 3)), p50 <= 1),
    (format('dlock p99 %s ms <= 5 ms', round(p99::numeric, 3)), p99 <= 5),
    (format('dlock p50 <= 2x advisory p50 (%sx)', round((p50 / nullif(a50, 0))::numeric, 2)), p50 <= 2 * a50),
    (format('dlock p99 <= 2x advisory p99 (%sx)', round((p99 / nullif(a99, 0))::numeric, 2)), p99 <= 2 * a99)
) v(t, ok);
SQL
