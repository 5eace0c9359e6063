#!/usr/bin/env bash
# scripts/test-ha.sh - dlock under Patroni: the leader is killed under load.
#
#   sudo bash scripts/test-ha.sh              # sync, then async; about 3 minutes
#   sudo bash scripts/test-ha.sh sync         # one mode only
#
# Installs what is missing from Debian's packages (patroni, etcd-server,
# python3-etcd, python3-psycopg2, the PostgreSQL server), builds and installs
# dlock from this checkout, and for each mode:
#   - starts etcd on loopback (v2 API, as Patroni 3.0's client needs) and two
#     Patroni nodes (PostgreSQL as the postgres user, dlock preloaded,
#     synchronous_mode on for "sync", off for "async");
#   - runs CLIENTS clients (t/ha/ha_load.py) with a multi-host conninfo
#     (target_session_attrs=read-write) doing acquire, fenced write, renew,
#     release, claim and complete, plus a waiter blocked in dlock_acquire;
#   - kills the leader's Patroni and postmaster with SIGKILL after KILL_AFTER
#     seconds; the replica takes over once the leader key expires (ttl 10 s);
#   - checks on the new leader what ha_load.py describes: in sync mode nothing
#     acknowledged is lost; in async mode losses are counted, tokens still
#     only grow; the waiter gets a connection error and its retry answers;
#     the failover time is printed.
# Prints `N passed, N failed` last; exits non-zero on any failure.
# Environment: CLIENTS (4), SECONDS_RUN (30), KILL_AFTER (10), KEEP=1 keeps
# the work directory.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib.sh
. "$REPO/scripts/lib.sh"

MODES=${*:-sync async}
CLIENTS=${CLIENTS:-4}
SECONDS_RUN=${SECONDS_RUN:-30}
KILL_AFTER=${KILL_AFTER:-10}
KEEP=${KEEP:-0}
PY=/usr/bin/python3
PASS=0
FAIL=0
ok() { echo "ok - $1"; PASS=$((PASS + 1)); }
notok() { echo "not ok - $1"; FAIL=$((FAIL + 1)); }
finish() { echo "$PASS passed, $FAIL failed"; [ "$FAIL" -eq 0 ] && [ "$PASS" -gt 0 ]; exit $?; }

[ "$(id -u)" -eq 0 ] || { dlock_err "run as root (PostgreSQL itself runs as postgres)"; notok "run as root"; finish; }

DLOCK_PACKAGES+=(patroni etcd-server python3-etcd python3-psycopg2)
dlock_ensure_packages || { notok "packages installed"; finish; }
dlock_build_install "$REPO" || { notok "dlock builds and installs"; finish; }

WORK=
stop_all() {
    local p
    [ -n "$WORK" ] || return 0
    # etcd, the Patronis and the clients all name the work directory
    pkill -9 -f -- "$WORK" 2>/dev/null
    # postmasters left by killed Patronis
    for p in "$WORK"/node*/data/postmaster.pid; do
        [ -f "$p" ] && kill -9 "$(head -n 1 "$p")" 2>/dev/null
    done
    sleep 1
    [ "$KEEP" = 1 ] || rm -rf "$WORK"
    WORK=
}
trap stop_all EXIT

# http_ok URL: does the Patroni REST API answer 200 there?
http_ok() {
    [ "$("$PY" -c 'import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=2).status)
except Exception as e:
    print(getattr(e, "code", 0))' "$1")" = 200 ]
}

# wait_for SECONDS CMD...: poll CMD every 0.5 s
wait_for() {
    local n=$(( $1 * 2 )); shift
    while [ "$n" -gt 0 ]; do "$@" && return 0; sleep 0.5; n=$((n - 1)); done
    return 1
}

node_conf() {   # node_conf N PGPORT APIPORT SYNC
    local n=$1 pgport=$2 apiport=$3 sync=$4 d=$WORK/node$1
    mkdir -p "$d"
    cat >"$d/patroni.yml" <<EOF
scope: dlock-ha
name: node$n
log:
  level: WARNING
restapi:
  listen: 127.0.0.1:$apiport
  connect_address: 127.0.0.1:$apiport
etcd:
  host: 127.0.0.1:$ETCD_PORT
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 1073741824
    synchronous_mode: $sync
    postgresql:
      use_pg_rewind: false
      parameters:
        shared_preload_libraries: dlock
        max_connections: 50
        wal_level: replica
        hot_standby: 'on'
        max_wal_senders: 5
        max_replication_slots: 5
  initdb:
  - encoding: UTF8
postgresql:
  listen: 127.0.0.1:$pgport
  connect_address: 127.0.0.1:$pgport
  data_dir: $d/data
  bin_dir: $DLOCK_PG_BIN
  pgpass: $d/pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: $d
  pg_hba:
  - local all all trust
  - local replication all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
EOF
}

run_mode() {   # run_mode sync|async
    local mode=$1 sync=false p1 p2 a1 a2 dsn t0 killed leader lpid ppid i out
    [ "$mode" = sync ] && sync=true
    WORK=$(mktemp -d /tmp/dlock-ha.XXXXXX)
    chown postgres "$WORK"
    ETCD_PORT=$(dlock_free_port); local etcd_peer; etcd_peer=$(dlock_free_port)
    p1=$(dlock_free_port); p2=$(dlock_free_port); a1=$(dlock_free_port); a2=$(dlock_free_port)
    dlock_log "$mode: etcd on $ETCD_PORT, nodes on $p1 and $p2 (work directory $WORK)"
    dlock_as_postgres etcd --name ha --data-dir "$WORK/etcd" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
        --initial-cluster "ha=http://127.0.0.1:$etcd_peer" --enable-v2=true >"$WORK/etcd.log" 2>&1 &
    node_conf 1 "$p1" "$a1" "$sync"
    node_conf 2 "$p2" "$a2" "$sync"
    chown -R postgres "$WORK"
    dlock_as_postgres patroni "$WORK/node1/patroni.yml" >"$WORK/node1/patroni.log" 2>&1 &
    if ! wait_for 60 http_ok "http://127.0.0.1:$a1/leader"; then
        notok "$mode: node 1 leads"; tail -n 20 "$WORK/node1/patroni.log"; stop_all; return
    fi
    dlock_as_postgres patroni "$WORK/node2/patroni.yml" >"$WORK/node2/patroni.log" 2>&1 &
    local standby_url="http://127.0.0.1:$a2/replica"
    [ "$mode" = sync ] && standby_url="http://127.0.0.1:$a2/synchronous"
    if ! wait_for 90 http_ok "$standby_url"; then
        notok "$mode: node 2 replicates"; tail -n 20 "$WORK/node2/patroni.log"; stop_all; return
    fi
    ok "$mode: a Patroni cluster of two nodes with dlock preloaded ($([ "$mode" = sync ] && echo "synchronous standby" || echo "asynchronous replica"))"

    dsn="host=127.0.0.1,127.0.0.1 port=$p1,$p2 dbname=postgres user=postgres target_session_attrs=read-write"
    out=$WORK/out
    mkdir -p "$out" && chown postgres "$out"
    dlock_as_postgres "$PY" "$REPO/t/ha/ha_load.py" setup "$dsn" || { notok "$mode: setup"; stop_all; return; }
    local clients=()
    for ((i = 1; i <= CLIENTS; i++)); do
        dlock_as_postgres "$PY" "$REPO/t/ha/ha_load.py" work "$dsn" "$out" "$i" "$SECONDS_RUN" \
            >"$out/work$i.err" 2>&1 &
        clients+=($!)
    done
    dlock_as_postgres "$PY" "$REPO/t/ha/ha_load.py" wait "$dsn" "$out" "$SECONDS_RUN" >"$out/wait.err" 2>&1 &
    clients+=($!)
    sleep "$KILL_AFTER"

    # the leader: node 1 unless it changed meanwhile
    if http_ok "http://127.0.0.1:$a1/leader"; then leader=1; else leader=2; fi
    lpid=$(head -n 1 "$WORK/node$leader/data/postmaster.pid")
    killed=$(date +%s.%N)
    pkill -9 -f -- "$WORK/node$leader/patroni.yml"
    kill -9 "$lpid"
    dlock_log "$mode: killed node $leader (its Patroni and postmaster $lpid)"
    wait_for 60 http_ok "http://127.0.0.1:$([ $leader = 1 ] && echo "$a2" || echo "$a1")/leader" ||
        { notok "$mode: the other node took over"; tail -n 20 "$WORK"/node*/patroni.log; stop_all; return; }
    ok "$mode: the other node took over ($(awk -v a="$killed" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s after the kill)"
    wait "${clients[@]}"
    for f in "$out"/*.err; do
        if [ -s "$f" ]; then notok "$mode: client $(basename "$f" .err) ran without a crash"; cat "$f"; fi
    done
    local report
    report=$(dlock_as_postgres "$PY" "$REPO/t/ha/ha_load.py" check "$dsn" "$out" "$mode" "$killed")
    echo "$report" | grep -v -E '^[0-9]+ passed' | sed "s/^\(not \)\?ok - /&$mode: /"
    PASS=$((PASS + $(grep -c '^ok - ' <<<"$report")))
    FAIL=$((FAIL + $(grep -c '^not ok - ' <<<"$report")))
    stop_all
}

for m in $MODES; do
    case $m in
        sync | async) run_mode "$m" ;;
        *) notok "unknown mode $m (sync or async)" ;;
    esac
done
finish
