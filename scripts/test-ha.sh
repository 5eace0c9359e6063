#!/usr/bin/env bash
# scripts/test-ha.sh - dlock under Patroni: the leader is killed under load.
#
#   sudo bash scripts/test-ha.sh              # sync, then async; about 2 minutes
#   sudo bash scripts/test-ha.sh sync         # one mode only
#
# Runs from a checkout anywhere (under /root too): like scripts/test.sh it
# copies the checkout to a postgres-owned directory under /tmp, where
# PostgreSQL, Patroni and the load script (t/ha/ha_load.py) run as postgres.
# Installs what is missing from Debian's packages (patroni, etcd-server,
# python3-etcd, python3-psycopg2, the PostgreSQL server), builds and installs
# dlock from that copy (into $DLOCK_PG_BIN's installation if set, which
# is then Patroni's bin_dir), and for each mode:
#   - starts etcd on loopback (v2 API, as Patroni 3.0's client needs) and two
#     Patroni nodes (PostgreSQL as the postgres user, dlock preloaded,
#     synchronous_mode on for "sync", off for "async");
#   - runs CLIENTS clients (t/ha/ha_load.py) with a multi-host conninfo
#     (target_session_attrs=read-write): each acquires, writes (fenced),
#     renews and releases keys of its own, claims and completes rows, and
#     competes with the others for three shared keys (short ttl, short wait,
#     fenced writes, renew, release); plus a waiter blocked in dlock_acquire
#     and two holders that keep a shared key (ttl 30 s) across the failover;
#   - LAG seconds before the kill, cuts the standby off (SIGSTOP of the
#     leader's walsender), so that the standby misses the leader's last
#     moments: asynchronously, the calls acknowledged then are lost;
#     synchronously, none is acknowledged;
#   - kills the leader's Patroni, postmaster and walsender with SIGKILL after
#     KILL_AFTER seconds; the replica takes over once the leader key expires
#     (ttl 10 s);
#   - checks the whole history against what the new leader has (ha_load.py
#     describes the checks): tokens only grow, at most one holder per key,
#     every committed fenced write made with its key's current token, losses
#     only of the last calls before the failover; sync: nothing acknowledged
#     lost (but autocommit releases); async: the loss of a lease makes its
#     holder's fenced write on the new leader fail; the waiter gets a
#     connection error and its retry answers; the failover time is printed;
#   - runs the same checks on doctored copies of the history (ha_load.py
#     doctor): a stale write committed, a token going down, an acknowledged
#     lease lost long before the failover, two holders at once (on the old
#     leader, and across the failover), a live holder refused must each
#     fail them; releases, renewals and writes
#     whose answers were lost (unknown outcomes) must pass.
# Every process it starts (etcd, the Patronis, their PostgreSQL servers, the
# clients) carries a tag in its environment or works in the work directory
# (PostgreSQL in its data directory), and is stopped by pid on every
# way out: the end of a mode, a failure, an interrupt, a termination, or
# the time limit (DLOCK_TIMEOUT_HA seconds for the whole run, default 1200;
# only a hang should reach it).  A process of the run found alive after a
# mode was stopped is a failure.
# Prints `N passed, N failed` last; exits non-zero on any failure.
# Environment: CLIENTS (4), SECONDS_RUN (40), KILL_AFTER (10), LAG (1.5),
# DLOCK_PG_BIN (lib.sh), DLOCK_TIMEOUT_HA (1200), KEEP=1 keeps the work
# directory and the copy of the checkout (its out/ has the
# history and the snapshot: `t/ha/ha_load.py verify DIR/out` checks them
# again), HA_NO_FENCE=1 a control run whose shared-key writes skip
# dlock_validate (it must fail).
set -uo pipefail

LIMIT=${DLOCK_TIMEOUT_HA:-1200}
# the time limit: SIGTERM to this script (its trap stops everything) from
# timeout, which runs the script again under it
if [ -z "${DLOCK_HA_UNDER_TIMEOUT:-}" ] && command -v timeout >/dev/null; then
    DLOCK_HA_UNDER_TIMEOUT=1 exec timeout --foreground -k 60 "$LIMIT" bash "$0" "$@"
fi

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib.sh
. "$REPO/scripts/lib.sh"

MODES=${*:-sync async}
CLIENTS=${CLIENTS:-4}
SECONDS_RUN=${SECONDS_RUN:-40}
KILL_AFTER=${KILL_AFTER:-10}
LAG=${LAG:-1.5}
HA_NO_FENCE=${HA_NO_FENCE:-0}
KEEP=${KEEP:-0}
PY=/usr/bin/python3
PASS=0
FAIL=0
START=$SECONDS
ok() { echo "ok - $1"; PASS=$((PASS + 1)); }
notok() { echo "not ok - $1"; FAIL=$((FAIL + 1)); }
finish() {
    echo "==> test-ha.sh: $((SECONDS - START)) s"
    echo "$PASS passed, $FAIL failed"
    [ "$FAIL" -eq 0 ] && [ "$PASS" -gt 0 ]
    exit $?
}

[ "$(id -u)" -eq 0 ] || { dlock_err "run as root (PostgreSQL itself runs as postgres)"; notok "run as root"; finish; }

# Every process started from here on inherits this tag (DLOCK_HA_NODE also
# tells one node's processes from the other's).
HA_TAG=ha-$$-$RANDOM$RANDOM
export DLOCK_HA_TAG=$HA_TAG
WORK=
WSENDER=
DLOCK_BUILD_DIR=

# stop_all: stops every process this run started that is still alive, by
# pid, and removes the mode's work directory (unless KEEP=1).
stop_all() {
    local left
    # a walsender stopped (SIGSTOP) to cut the standby off takes SIGKILL only
    # shellcheck disable=SC2086
    [ -z "$WSENDER" ] || kill -KILL $WSENDER 2>/dev/null
    WSENDER=
    left=$(dlock_tagged_pids "DLOCK_HA_TAG=$HA_TAG" ${WORK:+"$WORK"})
    if [ -n "$left" ]; then
        dlock_log "stopping $(wc -w <<<"$left") process(es) of this run (etcd, Patroni, PostgreSQL, clients)"
        # shellcheck disable=SC2086
        dlock_stop_pids $left 2>/dev/null
    fi
    if [ -n "$WORK" ]; then
        [ "$KEEP" = 1 ] || rm -rf "$WORK"
    fi
    WORK=
}
on_exit() {
    local rc=$?
    trap - EXIT INT TERM
    stop_all
    if [ -n "$DLOCK_BUILD_DIR" ] && [ "$KEEP" != 1 ]; then rm -rf "$DLOCK_BUILD_DIR"; fi
    exit $rc
}
trap on_exit EXIT
trap 'notok "interrupted"; finish' INT
trap 'notok "stopped by SIGTERM or by the time limit of $LIMIT s (DLOCK_TIMEOUT_HA; only a hang should reach it)"; finish' TERM

DLOCK_PACKAGES+=(patroni etcd-server python3-etcd python3-psycopg2)
dlock_ensure_packages || { notok "packages installed"; finish; }
# the copy (postgres-owned, under /tmp) is where everything runs: a
# checkout under /root is not readable by postgres
dlock_build_install "$REPO" || { notok "dlock builds and installs"; finish; }
HA_LOAD=$DLOCK_BUILD_DIR/t/ha/ha_load.py
# and the working directory of everything started from here (Patroni's
# helper processes change into it: a checkout under /root is refused)
cd "$DLOCK_BUILD_DIR" || { notok "cd $DLOCK_BUILD_DIR"; finish; }

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

# free_port: a TCP port on 127.0.0.1 that nothing listens on, between
# 10000 and the start of the ephemeral range (dlock_free_port's 20000-39999
# overlaps it)
free_port() {
    local lo p n
    read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
    [ "$lo" -gt 11000 ] || lo=32768
    for n in $(seq 1 200); do
        p=$((10000 + (RANDOM * 32768 + RANDOM) % (lo - 10000)))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
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
    local mode=$1 sync=false p1 p2 a1 a2 dsn killed leader lport lpid wsender lag_start i s out nodepids
    [ "$mode" = sync ] && sync=true
    WORK=$(mktemp -d /tmp/dlock-ha.XXXXXX)
    chown postgres "$WORK"
    local etcd_peer ports
    # six free ports, all different (nothing listens on them yet, so one
    # could be handed out twice), below the ephemeral range: etcd, Patroni
    # and the clients open connections whose local ports come from there
    ports=" "
    while [ "$(wc -w <<<"$ports")" -lt 6 ]; do
        i=$(free_port) || { notok "$mode: free ports"; stop_all; return; }
        case $ports in *" $i "*) ;; *) ports+="$i " ;; esac
    done
    read -r ETCD_PORT etcd_peer p1 p2 a1 a2 <<<"$ports"
    dlock_log "$mode: etcd on $ETCD_PORT, nodes on $p1 and $p2 (work directory $WORK)"
    dlock_as_postgres etcd --name ha --data-dir "$WORK/etcd" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
        --initial-cluster "ha=http://127.0.0.1:$etcd_peer" --enable-v2=true >"$WORK/etcd.log" 2>&1 &
    node_conf 1 "$p1" "$a1" "$sync"
    node_conf 2 "$p2" "$a2" "$sync"
    chown -R postgres "$WORK"
    dlock_as_postgres env DLOCK_HA_NODE="$WORK/node1" patroni "$WORK/node1/patroni.yml" >"$WORK/node1/patroni.log" 2>&1 &
    if ! wait_for 60 http_ok "http://127.0.0.1:$a1/leader"; then
        notok "$mode: node 1 leads"; tail -n 20 "$WORK/node1/patroni.log"; stop_all; return
    fi
    dlock_as_postgres env DLOCK_HA_NODE="$WORK/node2" patroni "$WORK/node2/patroni.yml" >"$WORK/node2/patroni.log" 2>&1 &
    local standby_url="http://127.0.0.1:$a2/replica"
    [ "$mode" = sync ] && standby_url="http://127.0.0.1:$a2/synchronous"
    if ! wait_for 90 http_ok "$standby_url"; then
        notok "$mode: node 2 replicates"; tail -n 20 "$WORK/node2/patroni.log"; stop_all; return
    fi
    ok "$mode: a Patroni cluster of two nodes with dlock preloaded ($([ "$mode" = sync ] && echo "synchronous standby" || echo "asynchronous replica"))"

    dsn="host=127.0.0.1,127.0.0.1 port=$p1,$p2 dbname=postgres user=postgres target_session_attrs=read-write"
    out=$WORK/out
    mkdir -p "$out" && chown postgres "$out"
    dlock_as_postgres "$PY" "$HA_LOAD" setup "$dsn" || { notok "$mode: setup"; stop_all; return; }
    local clients=() load=(env HA_NO_FENCE="$HA_NO_FENCE" "$PY" "$HA_LOAD")
    for ((i = 1; i <= CLIENTS; i++)); do
        dlock_as_postgres "${load[@]}" work "$dsn" "$out" "$i" "$SECONDS_RUN" \
            >"$out/work$i.err" 2>&1 &
        clients+=($!)
    done
    dlock_as_postgres "${load[@]}" wait "$dsn" "$out" "$SECONDS_RUN" >"$out/wait.err" 2>&1 &
    clients+=($!)
    for s in prelag lag; do
        dlock_as_postgres "${load[@]}" straddle "$dsn" "$out" "$s" "$SECONDS_RUN" \
            >"$out/straddle-$s.err" 2>&1 &
        clients+=($!)
    done
    sleep "$(awk -v k="$KILL_AFTER" -v l="$LAG" 'BEGIN { print k - l - 3 }')"

    # the leader: node 1 unless it changed meanwhile
    if http_ok "http://127.0.0.1:$a1/leader"; then leader=1; else leader=2; fi
    lport=$([ $leader = 1 ] && echo "$p1" || echo "$p2")
    touch "$out/prelag"         # a holder takes ha:s1 before the cut
    sleep 3
    # cut the standby off: stop the leader's walsender
    wsender=$(dlock_as_postgres psql -X -At -h 127.0.0.1 -p "$lport" -U postgres -d postgres \
        -c "SELECT string_agg(pid::text, ' ') FROM pg_stat_replication")
    if [ -z "$wsender" ]; then
        notok "$mode: the leader's walsender found"; stop_all; return
    fi
    WSENDER=$wsender
    # shellcheck disable=SC2086
    kill -STOP $wsender
    lag_start=$(date +%s.%N)
    touch "$out/lag"            # a holder takes ha:s0 after the cut
    sleep "$LAG"
    lpid=$(head -n 1 "$WORK/node$leader/data/postmaster.pid")
    # the leader's Patroni (it carries its DLOCK_HA_NODE), its postmaster and
    # backends (they work in its data directory), at once, as a crash of
    # its machine would
    nodepids=$(dlock_tagged_pids "DLOCK_HA_NODE=$WORK/node$leader" "$WORK/node$leader")
    killed=$(date +%s.%N)
    # shellcheck disable=SC2086
    kill -KILL $nodepids "$lpid" $wsender 2>/dev/null
    WSENDER=
    dlock_log "$mode: stopped node $leader's walsender ($wsender) ${LAG} s before killing it (its Patroni, postmaster $lpid and backends: $(wc -w <<<"$nodepids") processes)"
    wait_for 60 http_ok "http://127.0.0.1:$([ $leader = 1 ] && echo "$a2" || echo "$a1")/leader" ||
        { notok "$mode: the other node took over"; tail -n 20 "$WORK"/node*/patroni.log; stop_all; return; }
    ok "$mode: the other node took over ($(awk -v a="$killed" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s after the kill)"
    dlock_log "$mode: waiting for the clients to end their ${SECONDS_RUN} s"
    wait "${clients[@]}"
    for f in "$out"/*.err; do
        if [ -s "$f" ]; then notok "$mode: client $(basename "$f" .err) ran without a crash"; cat "$f"; fi
    done
    local report part what
    # the checks, then the same checks on doctored copies of this history:
    # they must fail where a promise is broken, and pass where only answers
    # were lost
    report=
    for what in check doctor; do
        if [ $what = check ]; then
            part=$(dlock_as_postgres "$PY" "$HA_LOAD" check "$dsn" "$out" "$mode" \
                "$killed" "$lag_start" "$lport" 2>&1)
        else
            part=$(dlock_as_postgres "$PY" "$HA_LOAD" doctor "$out" 2>&1)
        fi
        # a crash before the end is a failure, whatever was printed
        grep -q -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$part" ||
            part+=$'\n'"not ok - ha_load.py $what ran to its end"
        report+=$part$'\n'
    done
    echo "$report" | grep -v -E '^([0-9]+ passed|$)' | sed "s/^\(not \)\?ok - /&$mode: /"
    PASS=$((PASS + $(grep -c '^ok - ' <<<"$report")))
    FAIL=$((FAIL + $(grep -c '^not ok - ' <<<"$report")))
    stop_all
    # nothing of this mode may be left: the next one starts from scratch
    local left
    left=$(dlock_tagged_pids "DLOCK_HA_TAG=$HA_TAG")
    for i in $left; do
        notok "$mode: process $i ($(tr '\0' ' ' 2>/dev/null <"/proc/$i/cmdline" | cut -c1-100)) still alive after the mode was stopped"
        kill -KILL "$i" 2>/dev/null
    done
}

for m in $MODES; do
    case $m in
        sync | async) run_mode "$m" ;;
        *) notok "unknown mode $m (sync or async)" ;;
    esac
done
finish
