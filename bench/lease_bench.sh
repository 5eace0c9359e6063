#!/usr/bin/env bash
# bench/lease_bench.sh - throughput of dlock leases against the alternatives.
#
#   sudo bash bench/lease_bench.sh                 # about 6-7 minutes with the defaults
#   sudo ROUNDS=5 DURATION=8 bash bench/lease_bench.sh
#   sudo SECTIONS=pairs CLIENTS="1 16" bash bench/lease_bench.sh
#
# Starts its own throwaway PostgreSQL 15 cluster(s) under /tmp (fsync on,
# synchronous_commit on, shared_preload_libraries = 'dlock') and measures with
# pgbench (-M prepared, autocommit: every statement is its own transaction):
#
#  pairs      acquire + release pairs per second (one pgbench "transaction" =
#             two statements = two transactions), each client on its own key:
#               dlock       SELECT dlock_acquire('k'||id, 'c'||id, '30 s');
#                           SELECT dlock_release('k'||id, 'c'||id);
#               hand        one prepared statement: UPDATE ... WHERE key = k AND
#                           expires_at < clock_timestamp() (a first-time key:
#                           INSERT ... ON CONFLICT DO NOTHING), token from a
#                           sequence; CALL hand_release(): UPDATE (HOT, the row
#                           stays) committed with synchronous_commit = off,
#                           as dlock's autocommit release skips its flush
#               advisory    SELECT pg_advisory_lock(id); SELECT pg_advisory_unlock(id);
#               update      UPDATE bench_row SET n = n + 1 WHERE id = id: one
#                           single-row UPDATE per transaction, the rate of
#                           flushed one-row commits (a pair needs one flushed
#                           commit and two round trips, so this is its ceiling)
#               floor       the same UPDATE, then SELECT 1: one flushed commit
#                           and two round trips and nothing else, the least
#                           any two-call pair of that durability can cost
#               wfloor      the same UPDATE, then a second UPDATE of the row
#                           committed without waiting for its flush
#                           (set_config('synchronous_commit', 'off', true)
#                           in its WHERE): the least a pair whose second
#                           call writes, as a release writes the key's row,
#                           can cost
#               redis       Redis with appendonly yes, appendfsync always, on a
#                           Unix socket: an acquire script (SET NX PX, then INCR
#                           of a token counter) and a compare-and-delete release
#                           script, EVALSHA, by bench/redis_pairs.c (REDIS=0
#                           leaves it out; redis-server is installed if missing)
#  contended  failed acquires per second: one key is held for the whole run
#             by a long-lived holder and every client hammers a try-acquire on it:
#               dlock       dlock_acquire('hot', ...) -> NULL
#               hand        the acquire statement above: its UPDATE matches no row
#                           and writes nothing -> NULL
#               advisory    pg_try_advisory_lock(...) -> false
#  preload    issue 4: what preloading the library costs. The dlock pairs
#             script on a second cluster that is restarted before every run,
#             alternately WITH shared_preload_libraries = 'dlock'
#             (dlock_pre) and WITHOUT it (dlock_nopre): one cluster, so both
#             variants see the same tables and the same WAL.
#  shapes     issue 26: acquire+release pairs of the other shapes of lock
#             against leases, each client on its own key:
#               exclusive   the dlock pairs above (a lease: one row, one probe)
#               slots       dlock_acquire(k, c, '30 s', '0', 4) and release:
#                           a counting semaphore of 4 slots (the key's rows
#                           read together)
#               shared      dlock_acquire_shared(k, c, '30 s') and release
#             with the ratios slots/exclusive and shared/exclusive (target
#             >= 0.9x).
#
# Runs are short and INTERLEAVED (round 1: A B C, round 2: A B C, ...) for
# each client count, after an unrecorded 1 s warm-up of each variant (and
# after every restart in the preload section); the table shows the median tps per variant over the
# rounds, the ratios, and whether the targets of issues 2 and 4 are met. It
# never fails on a missed target: it is a benchmark, not a test.
#
# Environment:
#   ROUNDS=3        rounds per (section, client count)
#   DURATION=4      seconds per pgbench run
#   CLIENTS="1 4 16"
#   SECTIONS="pairs contended preload shapes"   (any of them, run in this order)
#   BUILD=1         build and install dlock from this checkout first (0: use
#                   the installed one)
#   KEEP=0          1: keep the work directory (clusters, logs, raw results)
#   REDIS=1         0: no Redis contender in the pairs section
#   RESULTS=FILE    also copy the raw per-run results (TSV) to FILE
#
# Run as root (PostgreSQL itself runs as the postgres user).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
# shellcheck source=common.sh
. "$REPO/bench/common.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-4}
CLIENTS=${CLIENTS:-"1 4 16"}
SECTIONS=${SECTIONS:-"pairs contended preload shapes"}
RESULTS=${RESULTS:-}
REDIS=${REDIS:-1}

bench_require_root bench/lease_bench.sh

# shellcheck disable=SC2034  # HOST_<name>, PORT_<name> are read through ${!var}
HOST_main='' PORT_main='' HOST_toggle='' PORT_toggle=''
HOLDER_PID=
REDIS_PID=
stop_helpers() {   # Redis and the holder of the advisory lock
    if [ -n "$REDIS_PID" ]; then
        kill "$REDIS_PID" 2>/dev/null || true
    fi
    if [ -n "$HOLDER_PID" ]; then
        exec 7>&- 2>/dev/null || true     # EOF: the holder's psql exits
        kill "$HOLDER_PID" 2>/dev/null || true
        wait "$HOLDER_PID" 2>/dev/null || true
    fi
}
# our traps stop Redis and the holder, the clusters, and remove the work directory
bench_on_exit stop_helpers

REVISION=$(bench_revision "$REPO" "$BUILD")

[ "$REDIS" = 1 ] && DLOCK_PACKAGES+=(redis-server)
bench_install

bench_work dlock-bench
mkdir "$WORK/sql"

COMMON_CONF=(
    "max_connections = 60"
    "checkpoint_timeout = '30min'"     # no checkpoint (and its full-page writes) in the middle of a run
    "max_wal_size = '4GB'"
    "min_wal_size = '1GB'"             # keep pre-allocated WAL segments for recycling
)

start_cluster() { # NAME PRELOAD_SETTING [CONF_LINE...] -> sets HOST_<NAME>, PORT_<NAME>
    local name=$1 spl=$2
    shift 2
    bench_cluster "$WORK/$name" "${COMMON_CONF[@]}" "shared_preload_libraries = '$spl'" "$@"
    printf -v "HOST_$name" '%s' "$DLOCK_PGHOST"
    printf -v "PORT_$name" '%s' "$DLOCK_PORT"
    psql -X -q -v ON_ERROR_STOP=1 -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" -U postgres -d postgres <<'SQL'
CREATE TABLE bench_lease (key text PRIMARY KEY, holder text, token bigint,
                          expires_at timestamptz NOT NULL) WITH (fillfactor = 70);
CREATE SEQUENCE bench_token;
-- the careful hand-written lease: an acquire that writes nothing when the key
-- is held (UPDATE ... WHERE expired; a first-time key is inserted with
-- ON CONFLICT DO NOTHING, which also writes nothing on a conflict), a fencing
-- token from a sequence, sent as one prepared statement (the pgbench scripts
-- below: a SQL function would be planned anew at every call); and a release
-- that keeps the row (a HOT update) and commits without waiting for its
-- flush, as dlock's autocommit release does (a PL/pgSQL procedure, whose
-- plans are kept: one round trip)
CREATE PROCEDURE hand_release(k text, h text) LANGUAGE plpgsql AS $$
BEGIN
  SET LOCAL synchronous_commit = off;
  UPDATE bench_lease SET holder = NULL, expires_at = '-infinity'
   WHERE key = k AND holder = h AND expires_at > clock_timestamp();
  COMMIT;
END $$;
-- the key held for the whole run by somebody else (contended section)
SELECT dlock_acquire('hot', 'owner', '1 day') IS NOT NULL AS hot_acquired \gset
\if :hot_acquired
\else
  \echo 'could not acquire the hot key'
  \quit 3
\endif
INSERT INTO bench_lease VALUES ('hot', 'owner', nextval('bench_token'), clock_timestamp() + interval '1 day');
-- the single-row UPDATE transaction (pairs section): one row per client
-- (pgbench's client_id counts from 0)
CREATE TABLE bench_row (id int PRIMARY KEY, n bigint NOT NULL) WITH (fillfactor = 50);
INSERT INTO bench_row SELECT g, 0 FROM generate_series(0, 99) g;
-- Pre-write ~256 MB of WAL and checkpoint, so that the runs recycle WAL
-- segments instead of creating (zero-filling) new ones in the middle of a run.
SELECT count(pg_logical_emit_message(false, 'bench', repeat('x', 1000000))) FROM generate_series(1, 256) \gset
SELECT pg_switch_wal() \gset
CHECKPOINT;
SQL
}

bpsql() { # NAME PSQL_ARGS...
    local name=$1; shift
    local h="HOST_$name" p="PORT_$name"
    psql -X -q -A -t -v ON_ERROR_STOP=1 -h "${!h}" -p "${!p}" -U postgres -d postgres "$@"
}

# ---------------------------------------------------------------- scripts
cat >"$WORK/sql/pairs_dlock.sql" <<'EOF'
SELECT dlock_acquire('k' || :client_id, 'c' || :client_id, '30 s');
SELECT dlock_release('k' || :client_id, 'c' || :client_id);
EOF
cp "$WORK/sql/pairs_dlock.sql" "$WORK/sql/preload_dlock_pre.sql"
cp "$WORK/sql/pairs_dlock.sql" "$WORK/sql/preload_dlock_nopre.sql"
cat >"$WORK/sql/pairs_hand.sql" <<'EOF'
WITH u AS (UPDATE bench_lease SET holder = 'c' || :client_id, token = nextval('bench_token'), expires_at = clock_timestamp() + interval '30 s' WHERE key = ('k' || :client_id) AND expires_at < clock_timestamp() RETURNING token), i AS (INSERT INTO bench_lease (key, holder, token, expires_at) SELECT ('k' || :client_id), 'c' || :client_id, nextval('bench_token'), clock_timestamp() + interval '30 s' WHERE NOT EXISTS (SELECT FROM u) AND NOT EXISTS (SELECT FROM bench_lease WHERE key = ('k' || :client_id)) ON CONFLICT (key) DO NOTHING RETURNING token) SELECT token FROM u UNION ALL SELECT token FROM i;
CALL hand_release('k' || :client_id, 'c' || :client_id);
EOF
cat >"$WORK/sql/pairs_advisory.sql" <<'EOF'
SELECT pg_advisory_lock(:client_id);
SELECT pg_advisory_unlock(:client_id);
EOF
cat >"$WORK/sql/pairs_update.sql" <<'EOF'
UPDATE bench_row SET n = n + 1 WHERE id = :client_id;
EOF
cat >"$WORK/sql/pairs_floor.sql" <<'EOF'
UPDATE bench_row SET n = n + 1 WHERE id = :client_id;
SELECT 1;
EOF
cat >"$WORK/sql/pairs_wfloor.sql" <<'EOF'
UPDATE bench_row SET n = n + 1 WHERE id = :client_id;
UPDATE bench_row SET n = n + 1 WHERE id = :client_id AND set_config('synchronous_commit', 'off', true) IS NOT NULL;
EOF
cat >"$WORK/sql/shapes_exclusive.sql" <<'EOF'
SELECT dlock_acquire('x' || :client_id, 'c' || :client_id, '30 s');
SELECT dlock_release('x' || :client_id, 'c' || :client_id);
EOF
cat >"$WORK/sql/shapes_slots.sql" <<'EOF'
SELECT dlock_acquire('s' || :client_id, 'c' || :client_id, '30 s', '0', 4);
SELECT dlock_release('s' || :client_id, 'c' || :client_id);
EOF
cat >"$WORK/sql/shapes_shared.sql" <<'EOF'
SELECT dlock_acquire_shared('r' || :client_id, 'c' || :client_id, '30 s');
SELECT dlock_release('r' || :client_id, 'c' || :client_id);
EOF
cat >"$WORK/sql/contended_dlock.sql" <<'EOF'
SELECT dlock_acquire('hot', 'c' || :client_id, '30 s');
EOF
cat >"$WORK/sql/contended_hand.sql" <<'EOF'
WITH u AS (UPDATE bench_lease SET holder = 'c' || :client_id, token = nextval('bench_token'), expires_at = clock_timestamp() + interval '30 s' WHERE key = 'hot' AND expires_at < clock_timestamp() RETURNING token), i AS (INSERT INTO bench_lease (key, holder, token, expires_at) SELECT 'hot', 'c' || :client_id, nextval('bench_token'), clock_timestamp() + interval '30 s' WHERE NOT EXISTS (SELECT FROM u) AND NOT EXISTS (SELECT FROM bench_lease WHERE key = 'hot') ON CONFLICT (key) DO NOTHING RETURNING token) SELECT token FROM u UNION ALL SELECT token FROM i;
EOF
cat >"$WORK/sql/contended_advisory.sql" <<'EOF'
SELECT pg_try_advisory_lock(1000000);
EOF

# ---------------------------------------------------------------- clusters
start_cluster main dlock
if [[ " $SECTIONS " == *" preload "* ]]; then
    log "starting a second cluster for the preload section"
    # postgresql.conf ends with an include of preload.conf, rewritten by toggle_preload
    start_cluster toggle dlock "include_if_exists = 'preload.conf'"
fi
TOGGLE_MODE=dlock

# restart the toggle cluster with shared_preload_libraries = $1 unless it runs so
toggle_preload() {
    [ "$1" = "$TOGGLE_MODE" ] && return 0
    echo "shared_preload_libraries = '$1'" >"$WORK/toggle/data/preload.conf"
    dlock_as_postgres pg_ctl -D "$WORK/toggle/data" -l "$WORK/toggle/postgres.log" \
        -m fast -w -t 60 restart >/dev/null
    TOGGLE_MODE=$1
    [ "$(bpsql toggle -c 'SHOW shared_preload_libraries')" = "$1" ] ||
        { echo "the toggle cluster did not restart with shared_preload_libraries = '$1'" >&2; exit 1; }
}

# Redis, as durable as it goes: every write is in the append-only file and
# fsynced before the reply (appendfsync always), on a Unix socket like the
# clusters'; run as the postgres user, its files in the work directory.
if [ "$REDIS" = 1 ] && [[ " $SECTIONS " == *" pairs "* ]]; then
    log "starting Redis (appendonly yes, appendfsync always)"
    gcc -O2 -Wall -o "$WORK/redis_pairs" "$REPO/bench/redis_pairs.c" -lpthread
    mkdir "$WORK/redis"
    chown postgres "$WORK/redis"
    REDIS_SOCKET=$WORK/redis/redis.sock
    dlock_as_postgres redis-server --port 0 --unixsocket "$REDIS_SOCKET" --unixsocketperm 700 \
        --appendonly yes --appendfsync always --save '' --dir "$WORK/redis" \
        --daemonize yes --pidfile "$WORK/redis/redis.pid" --logfile "$WORK/redis/redis.log"
    for _ in $(seq 1 100); do
        [ -S "$REDIS_SOCKET" ] && [ -s "$WORK/redis/redis.pid" ] && break
        sleep 0.1
    done
    [ -S "$REDIS_SOCKET" ] || { echo "Redis did not start (see $WORK/redis/redis.log)" >&2; exit 1; }
    REDIS_PID=$(cat "$WORK/redis/redis.pid")
fi

# The long-lived advisory lock holder of the contended section: a psql that
# takes the session lock and then sits IDLE (outside any transaction) reading
# its stdin from a fifo. (A holder sleeping in a statement, pg_sleep, would
# hold back the xmin horizon: no HOT pruning, no vacuum, and every variant
# would slow down as its dead row versions pile up.)
mkfifo "$WORK/holder.fifo"
psql -X -q -h "$HOST_main" -p "$PORT_main" -U postgres -d postgres \
    <"$WORK/holder.fifo" >/dev/null 2>&1 &
HOLDER_PID=$!
exec 7>"$WORK/holder.fifo"
echo "SELECT pg_advisory_lock(1000000);" >&7
for _ in $(seq 1 100); do
    n=$(bpsql main -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 1000000 AND granted")
    [ "$n" = 1 ] && break
    sleep 0.1
done
[ "$n" = 1 ] || { echo "the advisory lock holder did not start" >&2; exit 1; }

# ---------------------------------------------------------------- runs
RAW=$WORK/raw.tsv
printf 'section\tvariant\tclients\tround\ttps\txacts\twal_syncs_per_xact\tcheck\tcpu_us_per_xact\n' >"$RAW"

stats_of() { # cluster -> "acquired contended"
    bpsql "$1" -F ' ' -c "SELECT acquired, contended FROM dlock_stats()"
}

# CPU used by the cluster's backends, measured on the postmaster: when a
# backend exits, the postmaster reaps it and the kernel adds the backend's
# user+system time to the postmaster's cutime+cstime (/proc/PID/stat fields
# 16 and 17). Much less sensitive to other load on the machine than tps.
TICKS=$(getconf CLK_TCK)
postmaster_pid() { head -n 1 "$WORK/$1/data/postmaster.pid"; }
children_cpu_ticks() { # CLUSTER -> ticks
    local st
    st=$(cat "/proc/$(postmaster_pid "$1")/stat")
    st=${st##*) }
    awk '{print $14 + $15}' <<<"$st"
}
settle_children() { # CLUSTER MAX -> waits (up to 5 s) until the postmaster has
    local pm n i             # at most MAX children and no more change; prints the count
    pm=$(postmaster_pid "$1")
    for i in $(seq 1 50); do
        n=$(pgrep -c -P "$pm" || true)
        [ "$n" -le "$2" ] && [ "$i" -gt 2 ] && break
        sleep 0.1
    done
    echo "$n"
}

run_one() { # SECTION VARIANT CLIENTS ROUND
    local section=$1 variant=$2 clients=$3 round=$4
    local cluster=main jobs out tps xacts failed syncs check="" before after nkids cpu0 cpu1 cpu_us updates0 updates1
    if [ "$section" = preload ]; then
        cluster=toggle
        if [ "$variant" = dlock_pre ]; then toggle_preload dlock; else toggle_preload ''; fi
        # after a restart: connections, caches, plans (not recorded)
        [ "$round" = 0 ] || DURATION=1 run_one "$section" "$variant" "$clients" 0
    fi
    if [ "$variant" = redis ]; then
        run_redis "$section" "$clients" "$round"
        return 0
    fi
    local h="HOST_$cluster" p="PORT_$cluster"
    jobs=$(( clients < 2 ? clients : 2 ))
    if [ "$cluster" = main ] && [ "$variant" = dlock ]; then before=$(stats_of main); fi
    if [ "$section" = shapes ]; then before=$(stats_of main); fi
    if [ "$variant" = update ]; then updates0=$(bpsql main -c "SELECT sum(n) FROM bench_row"); fi
    # WAL fsyncs: pg_stat_wal.wal_sync up to PostgreSQL 17, pg_stat_io's
    # WAL rows from 18 on
    if [ "$(bpsql "$cluster" -c "SHOW server_version_num")" -ge 180000 ]; then
        bpsql "$cluster" -c "SELECT pg_stat_reset_shared('io')" >/dev/null
        WAL_SYNCS="(SELECT sum(fsyncs) FROM pg_stat_io WHERE object = 'wal')"
    else
        bpsql "$cluster" -c "SELECT pg_stat_reset_shared('wal')" >/dev/null
        WAL_SYNCS="(SELECT wal_sync FROM pg_stat_wal)"
    fi
    nkids=$(settle_children "$cluster" 99999)
    cpu0=$(children_cpu_ticks "$cluster")
    if ! out=$(pgbench -n -M prepared -T "$DURATION" -c "$clients" -j "$jobs" \
            -h "${!h}" -p "${!p}" -U postgres -f "$WORK/sql/${section}_${variant}.sql" postgres 2>&1); then
        echo "$out" >&2
        echo "pgbench failed ($section $variant $clients clients)" >&2
        exit 1
    fi
    tps=$(awk '/^tps = /{print $3; exit}' <<<"$out")
    xacts=$(awk '/^number of transactions actually processed:/{print $6; exit}' <<<"$out")
    failed=$(awk '/^number of failed transactions:/{print $5; exit}' <<<"$out")
    [ -n "$tps" ] || { echo "$out" >&2; echo "could not parse pgbench output" >&2; exit 1; }
    [ "${failed:-0}" = 0 ] || check="pgbench-failed=$failed"
    settle_children "$cluster" "$nkids" >/dev/null
    cpu1=$(children_cpu_ticks "$cluster")
    cpu_us=$(( (cpu1 - cpu0) * 1000000 / TICKS / (xacts > 0 ? xacts : 1) ))
    # backends flush their WAL statistics when they exit: give them a moment
    sleep 0.3
    syncs=$(bpsql "$cluster" -c "SELECT round($WAL_SYNCS::numeric / greatest($xacts, 1), 3)")
    if [ -n "${before:-}" ]; then
        after=$(stats_of main)
        local a0 c0 a1 c1
        read -r a0 c0 <<<"$before"; read -r a1 c1 <<<"$after"
        if [ "$section" = pairs ] || [ "$section" = shapes ]; then
            # every acquire of a pair must succeed
            [ $((c1 - c0)) = 0 ] && [ $((a1 - a0)) -ge "$xacts" ] || check+=" acquired=$((a1 - a0)) contended=$((c1 - c0)) xacts=$xacts"
        else
            # nobody may get the hot key
            [ $((a1 - a0)) = 0 ] && [ $((c1 - c0)) -ge "$xacts" ] || check+=" acquired=$((a1 - a0)) contended=$((c1 - c0)) xacts=$xacts"
        fi
    fi
    if [ "$variant" = update ]; then   # every transaction updated its row
        updates1=$(bpsql main -c "SELECT sum(n) FROM bench_row")
        [ $((updates1 - updates0)) = "$xacts" ] || check+=" updated=$((updates1 - updates0)) xacts=$xacts"
    fi
    [ -n "$check" ] || check=ok
    [ "$round" = 0 ] && return 0     # warm-up run: not recorded
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$section" "$variant" "$clients" "$round" \
        "$tps" "$xacts" "$syncs" "$check" "$cpu_us" >>"$RAW"
    printf '    %-9s %-12s %2s clients  round %s: %10.1f tps  (%s WAL syncs/xact, %s us backend CPU/xact) %s\n' \
        "$section" "$variant" "$clients" "$round" "$tps" "$syncs" "$cpu_us" \
        "$([ "$check" = ok ] || echo "CHECK: $check")" >&2
}

run_redis() { # SECTION CLIENTS ROUND: the Redis pairs (no backend CPU or WAL figures)
    local section=$1 clients=$2 round=$3 out tps xacts
    if ! out=$(dlock_as_postgres "$WORK/redis_pairs" "$REDIS_SOCKET" "$clients" "$DURATION" 2>&1); then
        echo "$out" >&2
        echo "redis_pairs failed ($clients clients)" >&2
        exit 1
    fi
    tps=$(awk '/^tps = /{print $3; exit}' <<<"$out")
    xacts=$(awk '/^number of transactions actually processed:/{print $6; exit}' <<<"$out")
    [ "$round" = 0 ] && return 0
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$section" redis "$clients" "$round" \
        "$tps" "$xacts" - ok - >>"$RAW"
    printf '    %-9s %-12s %2s clients  round %s: %10.1f tps\n' "$section" redis "$clients" "$round" "$tps" >&2
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date +%s)
for section in $SECTIONS; do
    case $section in pairs|contended|preload|shapes) ;;
        *) echo "unknown section $section (pairs, contended, preload, shapes)" >&2; exit 1 ;;
    esac
done
for section in pairs contended preload shapes; do
    [[ " $SECTIONS " == *" $section "* ]] || continue
    case $section in
        pairs) variants="dlock hand advisory update floor wfloor"
               [ "$REDIS" = 1 ] && variants+=" redis" ;;
        contended) variants="dlock hand advisory" ;;
        preload) variants="dlock_pre dlock_nopre" ;;
        shapes) variants="exclusive slots shared" ;;
    esac
    for clients in $CLIENTS; do
        log "$section, $clients client(s): $ROUNDS interleaved rounds of: $variants"
        if [ "$section" != preload ]; then   # (preload warms up after each restart)
            for v in $variants; do   # warm-up: connections, caches, plans (not recorded)
                DURATION=1 run_one "$section" "$v" "$clients" 0
            done
        fi
        for round in $(seq 1 "$ROUNDS"); do
            for v in $variants; do
                run_one "$section" "$v" "$clients" "$round"
            done
        done
    done
done
ELAPSED=$(( $(date +%s) - START ))
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# Sanity of the contended section: the long-lived holders still hold the key.
hot=$(bpsql main -c "SELECT (SELECT holder FROM dlock_locks WHERE key = 'hot') || '/' || (SELECT holder FROM bench_lease WHERE key = 'hot')")
[ "$hot" = "owner/owner" ] || echo "WARNING: the hot key changed hands during the run ($hot)" >&2

[ -n "$RESULTS" ] && cp "$RAW" "$RESULTS"

# ---------------------------------------------------------------- report
echo
echo "dlock lease benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(psql -X -A -t -h "$HOST_main" -p "$PORT_main" -U postgres -d postgres -c 'SHOW server_version')"
echo "dlock: $REVISION"
echo "pgbench -M prepared, ${DURATION}s per run, $ROUNDS interleaved rounds, median tps shown;"
echo "fsync on, synchronous_commit on; load average before: $LOAD_BEFORE, after: $LOAD_AFTER; ${ELAPSED}s of runs"
perl -e '
    use strict;
    my (%tps, %sync, %cpu, %bad);
    open my $f, "<", $ARGV[0] or die;
    <$f>;
    while (<$f>) {
        chomp; my ($s, $v, $c, $r, $t, $x, $w, $chk, $u) = split /\t/;
        push @{$tps{$s}{$v}{$c}}, $t;
        push @{$sync{$s}{$v}{$c}}, $w if $w ne "-";
        push @{$cpu{$s}{$v}{$c}}, $u if $u ne "-";
        $bad{"$s $v $c"} = $chk if $chk ne "ok";
    }
    sub med { my @a = sort { $a <=> $b } @_; return undef unless @a;
              my $n = @a; return $n % 2 ? $a[$n/2] : ($a[$n/2-1] + $a[$n/2]) / 2 }
    sub fmt { defined $_[0] ? sprintf("%.0f", $_[0]) : "-" }
    sub rat { defined $_[0] && defined $_[1] && $_[1] > 0 ? sprintf("%.2fx", $_[0] / $_[1]) : "-" }
    sub m_of { my ($h, $s, $v, $c) = @_; $h->{$s}{$v}{$c} ? med(@{$h->{$s}{$v}{$c}}) : undef }
    # median over the rounds of the per-round ratio X/Y: runs of the same
    # round are neighbours in time, so this follows a machine whose speed
    # drifts better than the ratio of the medians does
    sub paired { my ($s, $x, $y, $c) = @_; my ($a, $b) = ($tps{$s}{$x}{$c}, $tps{$s}{$y}{$c});
                 return undef unless $a && $b;
                 my @r = map { $b->[$_] > 0 ? $a->[$_] / $b->[$_] : () } 0 .. ($#$a < $#$b ? $#$a : $#$b);
                 return med(@r) }
    sub prat { defined $_[0] ? sprintf("%.2fx", $_[0]) : "-" }
    my @clients = split " ", $ARGV[1];
    my %vars = (pairs => [qw(dlock hand advisory update floor wfloor redis)], contended => [qw(dlock hand advisory)],
                preload => [qw(dlock_pre dlock_nopre)], shapes => [qw(exclusive slots shared)]);
    my @verdicts;
    for my $s (grep { $tps{$_} } qw(pairs contended)) {
        my $title = $s eq "pairs" ? "acquire+release pairs per second (each client its own key)"
                                  : "failed acquires per second on a key held by someone else";
        print "\n$title\n";
        printf "%-8s %10s %10s %10s %12s %9s %12s   %s\n", "clients", "dlock", "hand", "advisory",
            "dlock/hand", "(paired)", "dlock/adv", "backend CPU us/xact: dlock hand advisory";
        for my $c (@clients) {
            my ($d, $h, $a) = map { m_of(\%tps, $s, $_, $c) } qw(dlock hand advisory);
            my ($cd, $ch, $ca) = map { m_of(\%cpu, $s, $_, $c) } qw(dlock hand advisory);
            next unless defined $d || defined $h || defined $a;
            my $pr = paired($s, "dlock", "hand", $c);
            printf "%-8s %10s %10s %10s %12s %9s %12s   %6s %6s %6s  (%s)\n", $c, fmt($d), fmt($h), fmt($a),
                rat($d, $h), prat($pr), rat($d, $a), fmt($cd), fmt($ch), fmt($ca), rat($cd, $ch);
            if (defined $d && defined $h) {
                my $goal = $s eq "pairs" ? 1.0 : 3.0;
                push @verdicts, sprintf("%-9s %2s clients: dlock/hand = %5.2fx (paired %5.2fx), target >= %.1fx: %s",
                    $s, $c, $d / $h, $pr, $goal,
                    $d / $h >= $goal && $pr >= $goal ? "MET" : $d / $h >= $goal || $pr >= $goal ? "MET by one of the two" : "NOT MET");
            }
        }
        print "WAL syncs per pgbench transaction (median): ";
        print join("; ", map { my $c = $_; "$c cl: " . join(" ", map { $sync{$s}{$_}{$c} ? "$_ " . med(@{$sync{$s}{$_}{$c}}) : () }
                     @{$vars{$s}}) } @clients), "\n";
        next unless $s eq "pairs" && $tps{pairs}{update};
        # issue 12: pairs against the rate of flushed single-row commits
        # (the durable ceiling: a pair needs one flushed commit and two
        # round trips) and against Redis with appendfsync always
        # "floor" (the UPDATE, then SELECT 1) is what any two-call pair with
        # one flushed commit costs at least: floor/update bounds dlock/update
        # "wfloor" (the UPDATE, then an UPDATE committed without its flush)
        # is the floor of a pair whose second call writes, as a release does
        print "\ndlock pairs against single-row UPDATE transactions, the two-call floors and Redis (appendfsync always)\n";
        printf "%-8s %8s %8s %8s %8s %8s %13s %9s %12s %12s %12s %9s   %s\n", "clients", "dlock", "update", "floor", "wfloor", "redis",
            "dlock/update", "(paired)", "floor/update", "dlock/floor", "dlock/wfloor", "dlock/redis",
            "backend CPU us/xact: dlock floor wfloor";
        for my $c (@clients) {
            my ($d, $u, $f, $w, $r) = map { m_of(\%tps, "pairs", $_, $c) } qw(dlock update floor wfloor redis);
            next unless defined $d && defined $u;
            my ($pu, $pr) = (paired("pairs", "dlock", "update", $c), paired("pairs", "dlock", "redis", $c));
            printf "%-8s %8s %8s %8s %8s %8s %13s %9s %12s %12s %12s %9s   %6s %6s %6s\n", $c, fmt($d), fmt($u), fmt($f), fmt($w), fmt($r),
                rat($d, $u), prat($pu), prat(paired("pairs", "floor", "update", $c)),
                prat(paired("pairs", "dlock", "floor", $c)), prat(paired("pairs", "dlock", "wfloor", $c)), prat($pr),
                map { fmt(m_of(\%cpu, "pairs", $_, $c)) } qw(dlock floor wfloor);
            # issue 25: the target is measured against the floor, not the
            # one-call UPDATE (one round trip, where any pair makes two)
            my $pf = paired("pairs", "dlock", "floor", $c);
            push @verdicts, sprintf("pairs     %2s clients: dlock/floor  = %5.2fx (paired %5.2fx), target >= 0.85x: %s",
                $c, $d / $f, $pf, $d / $f >= 0.85 && $pf >= 0.85 ? "MET" : "NOT MET") if defined $f && defined $pf;
            my $pw = paired("pairs", "dlock", "wfloor", $c);
            push @verdicts, sprintf("pairs     %2s clients: dlock/wfloor = %5.2fx (paired %5.2fx), the floor of a pair whose release writes (no target)",
                $c, $d / $w, $pw) if defined $w && defined $pw;
            push @verdicts, sprintf("pairs     %2s clients: dlock/redis  = %5.2fx (paired %5.2fx), target >= 1.00x: %s",
                $c, $d / $r, $pr, $d / $r >= 1 && $pr >= 1 ? "MET" : "NOT MET") if defined $r;
        }
    }
    if ($tps{preload}) {
        print "\ndlock pairs per second with and without shared_preload_libraries (one cluster, restarted)\n";
        printf "%-8s %10s %12s %10s %9s   %s\n", "clients", "preload", "no preload", "pre/nopre",
            "(paired)", "backend CPU us/xact: preload, no preload";
        for my $c (@clients) {
            my ($p, $n) = map { m_of(\%tps, "preload", $_, $c) } qw(dlock_pre dlock_nopre);
            my ($cp, $cn) = map { m_of(\%cpu, "preload", $_, $c) } qw(dlock_pre dlock_nopre);
            next unless defined $p && defined $n;
            my $pr = paired("preload", "dlock_pre", "dlock_nopre", $c);
            printf "%-8s %10s %12s %10s %9s   %6s %6s\n", $c, fmt($p), fmt($n), rat($p, $n), prat($pr), fmt($cp), fmt($cn);
            my ($chg, $pchg) = (($p / $n - 1) * 100, ($pr - 1) * 100);
            push @verdicts, sprintf("preload   %2s clients: with preload %+.1f%% (paired %+.1f%%) vs without, target >= -5%%: %s",
                $c, $chg, $pchg,
                $chg >= -5 && $pchg >= -5 ? "MET" : $chg >= -5 || $pchg >= -5 ? "MET by one of the two" : "NOT MET");
        }
    }
    if ($tps{shapes}) {
        # issue 26: a semaphore of 4 slots and shared leases against leases
        print "\nacquire+release pairs per second: semaphore (slots 4) and shared leases against leases\n";
        printf "%-8s %10s %10s %10s %14s %9s %15s %9s\n", "clients", "exclusive", "slots 4", "shared",
            "slots/excl", "(paired)", "shared/excl", "(paired)";
        for my $c (@clients) {
            my ($e, $sl, $sh) = map { m_of(\%tps, "shapes", $_, $c) } qw(exclusive slots shared);
            next unless defined $e;
            my ($ps, $ph) = (paired("shapes", "slots", "exclusive", $c), paired("shapes", "shared", "exclusive", $c));
            printf "%-8s %10s %10s %10s %14s %9s %15s %9s\n", $c, fmt($e), fmt($sl), fmt($sh),
                rat($sl, $e), prat($ps), rat($sh, $e), prat($ph);
            for my $v (["slots", $sl, $ps], ["shared", $sh, $ph]) {
                next unless defined $v->[1];
                push @verdicts, sprintf("shapes    %2s clients: %s/exclusive = %5.2fx (paired %5.2fx), target >= 0.90x: %s",
                    $c, $v->[0], $v->[1] / $e, $v->[2],
                    $v->[1] / $e >= 0.9 && $v->[2] >= 0.9 ? "MET" : $v->[1] / $e >= 0.9 || $v->[2] >= 0.9 ? "MET by one of the two" : "NOT MET");
            }
        }
    }
    print "\nTargets (issues 2, 4, 12, 25 and 26):\n";
    print "  $_\n" for @verdicts;
    if (%bad) { print "\nSanity-check warnings:\n"; print "  $_: $bad{$_}\n" for sort keys %bad; }
    print "\nRaw per-run tps (rounds in order):\n";
    for my $s (grep { $tps{$_} } qw(pairs contended preload shapes)) {
        for my $c (@clients) {
            for my $v (@{$vars{$s}}) {
                next unless $tps{$s}{$v}{$c};
                printf "  %-9s %2s cl %-12s %s\n", $s, $c, $v, join(" ", map { sprintf "%.0f", $_ } @{$tps{$s}{$v}{$c}});
            }
        }
    }
' "$RAW" "$CLIENTS"
