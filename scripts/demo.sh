#!/usr/bin/env bash
# scripts/demo.sh - watch dlock leases and fencing tokens at work.
#
#   sudo bash scripts/demo.sh
#
# Installs what is missing (the first time on a fresh machine: a few minutes
# of apt, whose progress it shows), builds and installs dlock (in a copy
# under /tmp), starts a throwaway PostgreSQL cluster, and runs 4 workers (bash
# loops around psql, about half a minute) that compete for 2 keys with
# 5-second leases. Each worker does:
#
#   token := dlock_acquire(key, worker, '5 s')         -- NULL: someone else holds it
#   UPDATE demo_resource SET last_writer = worker, last_token = token
#    WHERE key = ... AND dlock_validate(key, worker, token)   -- the fenced write
#   dlock_release(key, worker, token)
#
# Then worker w1 freezes (SIGSTOP, like a long GC pause or a VM migration)
# right after it got a token; its lease expires, another worker takes the key
# over with a larger token; w1 wakes up (SIGCONT) and tries its late write with
# the old token: dlock_validate refuses it and 0 rows are updated.
# The lease is long enough for the work and the psql calls around it even
# on a busy machine; should an honest worker still be too slow (its lease ran
# out before its write or its release), the demo says so and how long it
# took, rather than a bare "released: false".
# The exit status is 0 only if the fencing held.
#
# Environment: DLOCK_DEMO_KEEP=1 keeps the /tmp directories afterwards.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$REPO/scripts/lib.sh"

KEYS=(invoices reports)
WORKERS=(w1 w2 w3 w4)
TTL='5 s'
TTL_S=5
WORK_SECONDS=0.7      # how long a worker "works" between getting a token and writing
VICTIM=w1

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/demo.sh must run as root (it installs packages and dlock itself;" >&2
    echo "PostgreSQL runs as the postgres user)." >&2
    exit 1
fi

if [ -t 1 ]; then
    say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
else
    say() { printf '\n%s\n' "$*"; }
fi

say "[1/4] Installing missing packages, building and installing dlock"
dlock_ensure_packages
dlock_build_install "$REPO"
if [ "$DLOCK_BUILD_WARNINGS" -gt 0 ]; then
    echo "(the build printed compiler warnings; going on with the demo)"
fi

say "[2/4] Starting a throwaway PostgreSQL cluster"
WORK=$(mktemp -d /tmp/dlock-demo.XXXXXX)
chmod 755 "$WORK"
cleanup_demo() {
    local rc=$?
    local p
    for p in ${WORKER_PIDS[@]+"${WORKER_PIDS[@]}"}; do
        kill -CONT "$p" 2>/dev/null || true
        kill "$p" 2>/dev/null || true
    done
    dlock_cleanup
    # and whatever else it started that is still alive (a psql of a worker)
    p=$(dlock_tagged_pids "DLOCK_DEMO_TAG=$DLOCK_DEMO_TAG" "$WORK")
    # shellcheck disable=SC2086
    [ -z "$p" ] || dlock_stop_pids $p 2>/dev/null
    if [ "${DLOCK_DEMO_KEEP:-0}" = 1 ] || [ $rc -ne 0 ]; then
        echo "(kept: $WORK and $DLOCK_BUILD_DIR)"
    else
        rm -rf "$WORK" "$DLOCK_BUILD_DIR"
    fi
    return $rc
}
WORKER_PIDS=()
# every process started from here on carries this tag (cleanup_demo)
export DLOCK_DEMO_TAG=demo-$$-$RANDOM
dlock_cluster_start "$WORK/cluster" auto
trap cleanup_demo EXIT
echo "cluster on port $DLOCK_PORT, socket in $DLOCK_PGHOST, log $DLOCK_SERVER_LOG"

dlock_psql -qc 'CREATE DATABASE dlock_demo'
export DLOCK_DB=dlock_demo
dlock_psql -q <<'SQL'
CREATE EXTENSION dlock;
CREATE TABLE demo_resource (
    key         text PRIMARY KEY,
    last_writer text,
    last_token  bigint,
    writes      int NOT NULL DEFAULT 0
);
INSERT INTO demo_resource (key) VALUES ('invoices'), ('reports');
SQL
echo "CREATE EXTENSION dlock; table demo_resource has one row per key: ${KEYS[*]}"

# q SQL: one psql call, unaligned, no header.
q() {
    psql -X -Atq -v ON_ERROR_STOP=1 -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" -U postgres -d dlock_demo -c "$1"
}

T0=${EPOCHREALTIME/,/.}
EVENTS=$WORK/events
: >"$EVENTS"
now() { awk -v a="${EPOCHREALTIME/,/.}" -v b="$T0" 'BEGIN { printf "%.2f", a - b }'; }
event() {   # event WORKER WHAT KEY TOKEN [MESSAGE]: log for the summary, print MESSAGE
    local t
    t=$(now)
    printf '%s %s %s %s %s\n' "$t" "$1" "$2" "$3" "$4" >>"$EVENTS"
    if [ -n "${5:-}" ]; then printf '%6ss  %-3s %s\n' "$t" "$1" "$5"; fi
}

worker() {
    local me=$1 key tok n ok cur
    trap - EXIT INT TERM
    while [ ! -e "$WORK/stop" ]; do
        key=${KEYS[RANDOM % ${#KEYS[@]}]}
        if ! tok=$(q "SELECT dlock_acquire('$key', '$me', '$TTL')"); then
            echo "$me: dlock_acquire failed" >&2; touch "$WORK/failed"; return 1
        fi
        if [ -z "$tok" ]; then
            event "$me" busy "$key" - ""
            sleep 0.2
            continue
        fi
        t_got=${EPOCHREALTIME/,/.}
        event "$me" got "$key" "$tok" "got '$key'  token $tok"
        if [ "$me" = "$VICTIM" ] && [ -e "$WORK/freeze-next" ]; then
            rm -f "$WORK/freeze-next"
            echo "$key $tok" >"$WORK/frozen"
            event "$me" frozen "$key" "$tok" "*** freezes now (SIGSTOP), holding '$key' with token $tok, before its write ***"
            kill -STOP "$BASHPID"
            event "$me" woke "$key" "$tok" "*** wakes up (SIGCONT) and goes on with its write, token $tok ***"
        fi
        sleep "$WORK_SECONDS"
        if ! n=$(q "WITH w AS (UPDATE demo_resource SET last_writer = '$me', last_token = $tok, writes = writes + 1
                               WHERE key = '$key' AND dlock_validate('$key', '$me', $tok) RETURNING 1)
                    SELECT count(*) FROM w"); then
            echo "$me: fenced write failed" >&2; touch "$WORK/failed"; return 1
        fi
        ok=$(q "SELECT CASE WHEN dlock_release('$key', '$me', $tok) THEN 'true' ELSE 'false' END") ||
            { touch "$WORK/failed"; return 1; }
        took=$(awk -v a="${EPOCHREALTIME/,/.}" -v b="$t_got" 'BEGIN { printf "%.1f", a - b }')
        if [ "$ok" = false ] && [ "$me" != "$VICTIM" ]; then
            # not frozen, only slow: say why the release found no lease
            ok="false (its $TTL lease ran out: ${took} s from its acquire to its release on this machine)"
        fi
        if [ "$n" = 1 ]; then
            event "$me" wrote "$key" "$tok" "wrote '$key' with token $tok: accepted (1 row); released: $ok"
        elif [ "$me" != "$VICTIM" ] || [ "$key $tok" != "$(cat "$WORK/frozen" 2>/dev/null)" ]; then
            # an honest worker too slow for its lease (a loaded machine)
            event "$me" late "$key" "$tok" "wrote '$key' with token $tok: refused, its $TTL lease had run out (${took} s from its acquire to its release on this busy machine); released: $ok"
        else
            cur=$(q "SELECT coalesce(last_token::text, '-') || ' ' || coalesce(last_writer, '-') FROM demo_resource WHERE key = '$key'")
            event "$me" refused "$key" "$tok" "wrote '$key' with token $tok: REFUSED (0 rows; last accepted write: token ${cur% *} by ${cur#* }); released: $ok"
            echo "$key $tok $cur $ok" >"$WORK/refused.$me"
        fi
        sleep "0.$((RANDOM % 3 + 1))"
    done
}

say "[3/4] 4 workers (${WORKERS[*]}) compete for 2 keys (${KEYS[*]}), lease ttl $TTL"
cat <<'EOF'
Each worker loops: token := dlock_acquire(key, me, '5 s')  (NULL at once if the key is busy),
"works" 0.7 s, then does the fenced write
    UPDATE demo_resource SET last_writer = me, last_token = token
     WHERE key = ... AND dlock_validate(key, me, token)
and dlock_release(key, me, token). Busy answers are counted, not printed.
A token counts microseconds since 1970: the next one is the last plus one,
moved up to the server's clock whenever it falls behind it. Hence the large
values, and a takeover always gets a larger token than the holder it replaces.

EOF
for w in "${WORKERS[@]}"; do
    worker "$w" &
    WORKER_PIDS+=($!)
done
VICTIM_PID=${WORKER_PIDS[0]}

fail() { echo "DEMO FAILED: $*" >&2; touch "$WORK/stop"; exit 1; }
wait_for() {   # wait_for SECONDS CMD...: poll CMD every 0.1 s
    local deadline=$((SECONDS + $1)); shift
    until "$@"; do
        [ -e "$WORK/failed" ] && fail "a worker hit an error (see above)"
        [ $SECONDS -ge $deadline ] && return 1
        sleep 0.1
    done
}
is_stopped() { [ "$(awk '{print $3}' "/proc/$VICTIM_PID/stat" 2>/dev/null)" = T ]; }

sleep 4
[ -e "$WORK/failed" ] && fail "a worker hit an error (see above)"
echo
echo "          --- asking $VICTIM to freeze right after its next dlock_acquire succeeds ---"
touch "$WORK/freeze-next"
wait_for 15 is_stopped || fail "$VICTIM did not get a lease to freeze with"
read -r FKEY FTOK <"$WORK/frozen"

# Wait until another worker got FKEY with a larger token and wrote with it.
taken_over() {
    local r
    r=$(q "SELECT last_writer || ' ' || last_token FROM demo_resource
           WHERE key = '$FKEY' AND last_token > $FTOK")
    [ -n "$r" ] && echo "$r" >"$WORK/takeover"
}
wait_for 20 taken_over || fail "nobody took '$FKEY' over after $VICTIM's lease expired"
read -r NHOLDER NTOK <"$WORK/takeover"
echo "          --- $VICTIM's lease on '$FKEY' expired; $NHOLDER took it over (token $NTOK) and wrote; waking $VICTIM up ---"
kill -CONT "$VICTIM_PID"
wait_for 15 test -e "$WORK/refused.$VICTIM" ||
    { grep -q " $VICTIM wrote $FKEY $FTOK" "$EVENTS" && fail "the late write of $VICTIM with token $FTOK was ACCEPTED: fencing is broken"; fail "$VICTIM did not try its late write"; }
sleep 1.5
touch "$WORK/stop"
for p in "${WORKER_PIDS[@]}"; do wait "$p" || true; done
WORKER_PIDS=()
[ -e "$WORK/failed" ] && fail "a worker hit an error (see above)"

say "[4/4] Summary"
read -r _ _ LTOK LWRITER LREL <"$WORK/refused.$VICTIM"
echo "Final state of demo_resource and of dlock_locks (unexpired leases):"
dlock_psql -c 'SELECT key, last_writer, last_token, writes FROM demo_resource ORDER BY key'
dlock_psql -c 'SELECT key, holder, token, expires_at FROM dlock_locks ORDER BY key'

echo "Per worker (from the workers' own log):"
awk '{ w[$2]; c[$2 " " $3]++ }
     END { for (x in w) printf "  %s: %d lease(s) granted, %d fenced write(s) accepted, %d refused (frozen), %d too late (slow machine), %d busy answer(s)\n",
                                x, c[x " got"], c[x " wrote"], c[x " refused"], c[x " late"], c[x " busy"] }' "$EVENTS" | sort

echo "Accepted writes per key:"
MONO=yes
for k in "${KEYS[@]}"; do
    awk -v k="$k" '$3 == "wrote" && $4 == k { n++; if (!first) first = $5; last = $5 }
                   END { printf "  %-9s %d writes, tokens from %s to %s\n", k ":", n, first, last }' "$EVENTS"
    if ! awk -v k="$k" '$3 == "wrote" && $4 == k { if (seen && $5 + 0 <= last) bad = 1; last = $5 + 0; seen = 1 }
                        END { exit bad }' "$EVENTS"; then
        MONO=NO
    fi
done

cat <<EOF

What happened to $VICTIM:
  $VICTIM got '$FKEY' with token $FTOK and froze before its write (like a long GC pause).
  Its lease ran out after $TTL; $NHOLDER then got '$FKEY' with token $NTOK (larger) and wrote.
  (Tokens count microseconds since 1970, kept at or above the server's clock: their
  difference, $((NTOK - FTOK)), is roughly the microseconds between the two grants.)
  $VICTIM woke up and sent its write with the old token $FTOK:
    late write refused: token $FTOK < current $LTOK (0 rows updated), because
    dlock_validate('$FKEY', '$VICTIM', $FTOK) is false once the lease is gone;
    dlock_release('$FKEY', '$VICTIM', $FTOK) returned ${LREL} (the lease was no longer $VICTIM's).
  Without the fenced write, $VICTIM would have overwritten $LWRITER's newer data.
For each key, every accepted write had a larger token than the one before: $MONO
EOF
[ "$MONO" = yes ] || fail "accepted writes did not have increasing tokens"
[ "$FTOK" -lt "$LTOK" ] || fail "the refused token $FTOK is not smaller than the current $LTOK"
echo
echo "Demo finished: fencing held. (took $((SECONDS)) s)"
