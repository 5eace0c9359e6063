#!/usr/bin/env bash
# scripts/demo.sh - watch dlock leases and fencing tokens at work.
#
#   sudo bash scripts/demo.sh
#
# Installs what is missing (the first time on a fresh machine: a few minutes
# of apt, whose progress it shows; only what a build and a cluster need,
# DLOCK_BUILD_PACKAGES of scripts/lib.sh), builds and installs dlock (in a
# copy under /tmp, from the build cache scripts/test.sh uses too: a second
# run recompiles only what changed), starts a throwaway PostgreSQL cluster,
# and runs 4 workers (bash loops around psql, about half a minute) that
# compete for 2 keys with 5-second leases. Each worker does:
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
# The events are printed in the order they committed: each is logged by the
# transaction of what it reports (the acquire, the fenced write, the
# release), numbered under one row lock (demo_event), and one process (the
# printer) prints them by number, so a line never comes before one it
# follows from.
# The exit status is 0 only if the fencing held.
#
# Environment: DLOCK_DEMO_KEEP=1 keeps the /tmp directories afterwards;
# DLOCK_BUILD_CACHE (scripts/lib.sh; empty: none) as for scripts/test.sh.
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
# only what a build and a cluster need (not the test suite's pgbouncer,
# PL/Proxy, IPC::Run)
DLOCK_PACKAGES=("${DLOCK_BUILD_PACKAGES[@]}")
dlock_ensure_packages
# the persistent build cache scripts/test.sh uses too (scripts/lib.sh)
if [ -z "${DLOCK_BUILD_CACHE+set}" ]; then
    DLOCK_BUILD_CACHE=$(dlock_default_build_cache "$REPO")
    DLOCK_BUILD_CACHE_REFRESH=1
fi
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
    for p in ${WORKER_PIDS[@]+"${WORKER_PIDS[@]}"} ${PRINTER_PID:-}; do
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

-- The demo's own log of what happened, in commit order: each event is
-- written by the transaction of what it reports (the acquire, the fenced
-- write, the release), which first takes the one row of demo_clock, so
-- events get their numbers in the order they commit; one printer shows
-- them in that order.
CREATE TABLE demo_clock (n bigint NOT NULL);
INSERT INTO demo_clock VALUES (0);
CREATE TABLE demo_log (
    seq      bigint PRIMARY KEY,
    at       timestamptz NOT NULL,
    who      text NOT NULL,
    what     text NOT NULL,
    key      text,
    token    bigint,
    msg      text NOT NULL,
    cur_token  bigint,      -- a refused write: the last accepted one
    cur_writer text
);
-- demo_event(who, what, key, token): logs the event and returns what:
--   got, frozen, woke, note (msg: the note), wrote / refused (a fenced write
--   of 1 / 0 rows; a refused one of a worker that did not freeze: late),
--   released / unreleased (dlock_release's true / false)
CREATE FUNCTION demo_event(p_who text, p_what text, p_key text DEFAULT NULL,
                           p_token bigint DEFAULT NULL, p_note text DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    froze boolean;
    took text;
    cur demo_resource;
    m text;
BEGIN
    UPDATE demo_clock SET n = demo_clock.n + 1 RETURNING demo_clock.n INTO n;
    froze := EXISTS (SELECT 1 FROM demo_log WHERE who = p_who AND what = 'frozen' AND token = p_token);
    SELECT to_char(extract(epoch FROM clock_timestamp() - at), 'FM990.0') INTO took
      FROM demo_log WHERE who = p_who AND what = 'got' AND token = p_token;
    IF p_what = 'refused' AND NOT froze THEN
        p_what := 'late';
    ELSIF p_what = 'refused' THEN
        SELECT * INTO cur FROM demo_resource WHERE key = p_key;
    END IF;
    m := CASE p_what
        WHEN 'note' THEN p_note
        WHEN 'got' THEN format('got %L  token %s', p_key, p_token)
        WHEN 'frozen' THEN format('*** freezes now (SIGSTOP), holding %L with token %s, before its write ***', p_key, p_token)
        WHEN 'woke' THEN format('*** wakes up (SIGCONT) and goes on with its write, token %s ***', p_token)
        WHEN 'wrote' THEN format('wrote %L with token %s: accepted (1 row)', p_key, p_token)
        WHEN 'refused' THEN format('wrote %L with token %s: REFUSED (0 rows; last accepted write: token %s by %s)',
                                   p_key, p_token, cur.last_token, cur.last_writer)
        WHEN 'late' THEN format('wrote %L with token %s: refused, its lease had run out (%s s after its acquire, on this busy machine)',
                                p_key, p_token, took)
        WHEN 'released' THEN format('released %L', p_key)
        WHEN 'unreleased' THEN CASE WHEN froze
            THEN format('released %L: false (the lease was no longer %s''s)', p_key, p_who)
            ELSE format('released %L: false (its lease had run out: %s s from its acquire to its release on this machine)', p_key, took) END
        END;
    INSERT INTO demo_log VALUES (n, clock_timestamp(), p_who, p_what, p_key, p_token, m,
                                 cur.last_token, cur.last_writer);
    RETURN p_what;
END
$$;
SQL
echo "CREATE EXTENSION dlock; table demo_resource has one row per key: ${KEYS[*]}"

# q SQL: one psql call, unaligned, no header.
q() {
    psql -X -Atq -v ON_ERROR_STOP=1 -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" -U postgres -d dlock_demo -c "$1"
}

EVENTS=$WORK/busy
: >"$EVENTS"
# ev WHO WHAT [KEY TOKEN]: an event of no SQL of its own (freezing, waking)
ev() { q "SELECT demo_event('$1', '$2', '${3:-}', ${4:-NULL})" >/dev/null; }
# note TEXT: a line of the demo itself, in its place among the events
note() { q "SELECT demo_event('', 'note', p_note => \$n\$$1\$n\$)" >/dev/null; }

worker() {
    local me=$1 key tok what
    trap - EXIT INT TERM
    while [ ! -e "$WORK/stop" ]; do
        key=${KEYS[RANDOM % ${#KEYS[@]}]}
        # the acquire, logged in its own transaction when it got the key
        if ! tok=$(q "SELECT CASE WHEN t IS NULL THEN NULL WHEN demo_event('$me', 'got', '$key', t) IS NOT NULL THEN t END
                        FROM (SELECT dlock_acquire('$key', '$me', '$TTL') AS t OFFSET 0) a"); then
            echo "$me: dlock_acquire failed" >&2; touch "$WORK/failed"; return 1
        fi
        if [ -z "$tok" ]; then
            echo "$me busy" >>"$EVENTS"
            sleep 0.2
            continue
        fi
        if [ "$me" = "$VICTIM" ] && [ -e "$WORK/freeze-next" ]; then
            rm -f "$WORK/freeze-next"
            echo "$key $tok" >"$WORK/frozen"
            ev "$me" frozen "$key" "$tok" || { touch "$WORK/failed"; return 1; }
            kill -STOP "$BASHPID"
            ev "$me" woke "$key" "$tok" || { touch "$WORK/failed"; return 1; }
        fi
        sleep "$WORK_SECONDS"
        # the fenced write, logged in its transaction (accepted or refused)
        if ! what=$(q "WITH w AS (UPDATE demo_resource SET last_writer = '$me', last_token = $tok, writes = writes + 1
                                   WHERE key = '$key' AND dlock_validate('$key', '$me', $tok) RETURNING 1)
                       SELECT demo_event('$me', CASE count(*) WHEN 1 THEN 'wrote' ELSE 'refused' END, '$key', $tok)
                         FROM w"); then
            echo "$me: fenced write failed" >&2; touch "$WORK/failed"; return 1
        fi
        q "SELECT demo_event('$me', CASE WHEN dlock_release('$key', '$me', $tok) THEN 'released' ELSE 'unreleased' END,
                             '$key', $tok)" >/dev/null ||
            { touch "$WORK/failed"; return 1; }
        sleep "0.$((RANDOM % 3 + 1))"
    done
}

# printer: the one process that prints the events, in the order of their
# numbers (their commits), as they commit; ends once WORK/printed-all is
# asked for and everything is printed
printer() {
    local last=0 seq t who msg
    trap - EXIT INT TERM
    while :; do
        local done_asked=
        [ -e "$WORK/print-all" ] && done_asked=1
        while IFS=$'\t' read -r seq t who msg; do
            [ -n "$seq" ] || continue
            last=$seq
            if [ "$who" = - ]; then
                printf '%6ss       --- %s ---\n' "$t" "$msg"
            else
                printf '%6ss  %-3s %s\n' "$t" "$who" "$msg"
            fi
        done < <(psql -X -Atq -F $'\t' -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" -U postgres -d dlock_demo -c \
            "SELECT seq, to_char(extract(epoch FROM at - (SELECT min(at) FROM demo_log)), 'FM9990.00'),
                    coalesce(nullif(who, ''), '-'), msg
               FROM demo_log WHERE seq > $last ORDER BY seq")
        [ -z "$done_asked" ] || return 0
        sleep 0.2
    done
}

say "[3/4] 4 workers (${WORKERS[*]}) compete for 2 keys (${KEYS[*]}), lease ttl $TTL"
cat <<'EOF'
Each worker loops: token := dlock_acquire(key, me, '5 s')  (NULL at once if the key is busy),
"works" 0.7 s, then does the fenced write
    UPDATE demo_resource SET last_writer = me, last_token = token
     WHERE key = ... AND dlock_validate(key, me, token)
and dlock_release(key, me, token). Busy answers are counted, not printed;
the rest is printed in the order it committed (seconds since the first).
A token counts microseconds since 1970: the next one is the last plus one,
moved up to the server's clock whenever it falls behind it. Hence the large
values, and a takeover always gets a larger token than the holder it replaces.

EOF
PRINTER_PID=
printer &
PRINTER_PID=$!
for w in "${WORKERS[@]}"; do
    worker "$w" &
    WORKER_PIDS+=($!)
done
VICTIM_PID=${WORKER_PIDS[0]}

# stop_printer: lets the printer print what is logged, then waits for it
stop_printer() {
    [ -n "$PRINTER_PID" ] || return 0
    touch "$WORK/print-all"
    wait "$PRINTER_PID" || true
    PRINTER_PID=
}
fail() { touch "$WORK/stop"; stop_printer; echo "DEMO FAILED: $*" >&2; exit 1; }
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
note "asking $VICTIM to freeze right after its next dlock_acquire succeeds"
touch "$WORK/freeze-next"
wait_for 15 is_stopped || fail "$VICTIM did not get a lease to freeze with"
read -r FKEY FTOK <"$WORK/frozen"

# Wait until another worker got FKEY with a larger token and wrote with it
# (its write's event committed: the note below comes after it).
taken_over() {
    local r
    r=$(q "SELECT who || ' ' || token FROM demo_log
            WHERE what = 'wrote' AND key = '$FKEY' AND token > $FTOK ORDER BY seq LIMIT 1")
    [ -n "$r" ] && echo "$r" >"$WORK/takeover"
}
wait_for 20 taken_over || fail "nobody took '$FKEY' over after $VICTIM's lease expired"
read -r NHOLDER NTOK <"$WORK/takeover"
note "$VICTIM's lease on '$FKEY' expired; $NHOLDER took it over (token $NTOK) and wrote; waking $VICTIM up"
kill -CONT "$VICTIM_PID"
late_write() {
    q "SELECT what FROM demo_log WHERE who = '$VICTIM' AND token = $FTOK AND what IN ('wrote', 'refused')" >"$WORK/late"
    [ -s "$WORK/late" ]
}
wait_for 15 late_write || fail "$VICTIM did not try its late write"
[ "$(cat "$WORK/late")" = refused ] ||
    fail "the late write of $VICTIM with token $FTOK was ACCEPTED: fencing is broken"
sleep 1.5
touch "$WORK/stop"
for p in "${WORKER_PIDS[@]}"; do wait "$p" || true; done
WORKER_PIDS=()
stop_printer
[ -e "$WORK/failed" ] && fail "a worker hit an error (see above)"

say "[4/4] Summary"
read -r LTOK LWRITER LREL < <(q "SELECT r.cur_token, r.cur_writer, (u.what = 'released')
                                   FROM demo_log r JOIN demo_log u USING (who, key, token)
                                  WHERE r.who = '$VICTIM' AND r.token = $FTOK AND r.what = 'refused'
                                    AND u.what IN ('released', 'unreleased')" | tr '|' ' ')
[ "$LREL" = t ] && LREL=true || LREL=false
echo "Final state of demo_resource and of dlock_locks (unexpired leases):"
dlock_psql -c 'SELECT key, last_writer, last_token, writes FROM demo_resource ORDER BY key'
dlock_psql -c 'SELECT key, holder, token, expires_at FROM dlock_locks ORDER BY key'

echo "Per worker (from the demo's log):"
for w in "${WORKERS[@]}"; do
    q "SELECT format('  %s: %s lease(s) granted, %s fenced write(s) accepted, %s refused (frozen), %s too late (slow machine), %s busy answer(s)',
                     '$w', count(*) FILTER (WHERE what = 'got'), count(*) FILTER (WHERE what = 'wrote'),
                     count(*) FILTER (WHERE what = 'refused'), count(*) FILTER (WHERE what = 'late'),
                     $(grep -c "^$w busy" "$EVENTS"))
         FROM demo_log WHERE who = '$w'"
done

echo "Accepted writes per key (in commit order):"
q "SELECT format('  %-9s %s writes, tokens from %s to %s', key || ':', count(*),
                 (array_agg(token ORDER BY seq))[1], (array_agg(token ORDER BY seq DESC))[1])
     FROM demo_log WHERE what = 'wrote' GROUP BY key ORDER BY key"
MONO=$(q "SELECT CASE WHEN bool_and(prev IS NULL OR token > prev) THEN 'yes' ELSE 'NO' END
            FROM (SELECT token, lag(token) OVER (PARTITION BY key ORDER BY seq) AS prev
                    FROM demo_log WHERE what = 'wrote') w")

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
