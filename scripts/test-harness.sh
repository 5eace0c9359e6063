#!/usr/bin/env bash
# scripts/test-harness.sh - scripts/test.sh's own promises about time limits
# and the processes it starts, checked on a copy of this checkout with four
# TAP files added that misbehave on purpose:
#
#   t/990_hang.pl          starts a server and never ends: its time limit
#                          (DLOCK_TIMEOUT_TAP) stops it and its server, and the
#                          failure names DLOCK_TIMEOUT_TAP
#   t/991_server_left.pl   passes, but leaves its server running: stopped,
#                          and a failure
#   t/992_orphan.pl        passes, but leaves a process that does not end:
#                          still alive at the end of the run, so a failure
#   t/993_short_orphan.pl  passes, and leaves a process that ends within
#                          DLOCK_LEFTOVER_GRACE: no failure
#
# Then a run stopped with SIGTERM in the middle of t/990_hang.pl must end at
# once and leave nothing.  After each run, no process it started may be alive
# (they carry this script's tag in their environment).  Then a run of a
# pg_regress test that has no expected output yet (sql/zz_harness_new.sql):
# it runs against an empty one, fails, and the summary names the file its
# output went to; that run, after one source file changed, recompiles that
# file only (the runs share a build cache, DLOCK_BUILD_CACHE).  Last,
# scripts/test-mutate.sh checks scripts/mutate.sh the same way (its
# assertions are counted here).
#
#   sudo bash scripts/test-harness.sh        (several minutes)
#
# Prints `N passed, N failed` last; exits non-zero on a failure.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$REPO/scripts/lib.sh"

PASS=0
FAIL=0
START=$SECONDS
ok() { echo "ok - $1"; PASS=$((PASS + 1)); }
notok() { echo "not ok - $1"; FAIL=$((FAIL + 1)); }
check() { if eval "$2"; then ok "$1"; else notok "$1"; fi; }

[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; echo "0 passed, 1 failed"; exit 1; }

TAG=harness-$$-$RANDOM$RANDOM
export DLOCK_HARNESS_TAG=$TAG
W=$(mktemp -d /tmp/dlock-harness.XXXXXX)
chmod 755 "$W"
RUN_PID=
on_exit() {
    local rc=$? left
    trap - EXIT INT TERM
    [ -z "$RUN_PID" ] || kill -TERM "$RUN_PID" 2>/dev/null
    left=$(dlock_tagged_pids "DLOCK_HARNESS_TAG=$TAG")
    # shellcheck disable=SC2086
    [ -z "$left" ] || dlock_stop_pids $left 2>/dev/null
    # the build and work directories the runs kept (they failed on purpose)
    for d in $(grep -ohE '/tmp/dlock-(build|test)\.[A-Za-z0-9]+' "$W"/*.log 2>/dev/null | sort -u); do
        rm -rf "$d"
    done
    rm -rf "$W"
    exit $rc
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# the copy, with the misbehaving files
mkdir -p "$W/src"
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | tar -C "$W/src" -xf -
head='use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;'
cat >"$W/src/t/990_hang.pl" <<EOF
$head
my \$node = PostgreSQL::Test::Cluster->new('hang');
\$node->init;
\$node->start;
ok(1, 'a server started');
sleep 100000;
done_testing();
EOF
cat >"$W/src/t/991_server_left.pl" <<EOF
$head
use POSIX ();
my \$node = PostgreSQL::Test::Cluster->new('left');
\$node->init;
\$node->start;
ok(1, 'a server started');
done_testing();
# leave without the END blocks that would stop the server
POSIX::_exit(0);
EOF
cat >"$W/src/t/992_orphan.pl" <<EOF
$head
system('setsid sleep 987 >/dev/null 2>&1 &');
ok(1, 'left a process that does not end');
done_testing();
EOF
# a new pg_regress test without expected/zz_harness_new.out (the last run)
echo "SELECT 'harness' || 42 AS new_test_output;" >"$W/src/sql/zz_harness_new.sql"
# every run builds from the first one's build
export DLOCK_BUILD_CACHE=$W/build-cache
cat >"$W/src/t/993_short_orphan.pl" <<EOF
$head
system('setsid sleep 4 >/dev/null 2>&1 &');
ok(1, 'left a process that ends by itself');
done_testing();
EOF

# --- one run with all four ---
echo "==> scripts/test.sh with t/990_hang, t/991_server_left, t/992_orphan, t/993_short_orphan"
DLOCK_SRC=$W/src DLOCK_TIMEOUT_TAP=30 DLOCK_LEFTOVER_GRACE=20 \
    DLOCK_ONLY="tap:990_hang tap:991_server_left tap:992_orphan tap:993_short_orphan" \
    bash "$REPO/scripts/test.sh" >"$W/run1.log" 2>&1
rc=$?
L=$W/run1.log
grep -E '^==> \[tap|^  (FAIL|NOTE)|^[0-9]+ passed' "$L" | sed 's/^/    /'
check "the run fails (exit $rc)" '[ "$rc" -ne 0 ]'
check "the hanging file is stopped by its time limit, which is named" \
    "grep -q 'FAIL: \[tap\] t/990_hang.pl timed out after 30 s .*raise DLOCK_TIMEOUT_TAP' '$L'"
check "its server is stopped with it" \
    "grep -q 'tap 1/4\] t/990_hang.pl: TIMED OUT .*its [0-9]* process(es) stopped' '$L'"
check "a server left running by a file that passed is stopped and a failure" \
    "grep -q 'FAIL: \[tap\] t/991_server_left.pl left [0-9]* PostgreSQL process(es) running' '$L'"
check "a process that does not end is a failure at the end of the run" \
    "grep -q 'FAIL: 1 process(es) started by this run were still alive at its end' '$L' &&
     grep -q 'pid [0-9]* ([a-z]*): sleep 987' '$L'"
check "a process that ends by itself within the grace is none" \
    "grep -q 'tap 4/4\] t/993_short_orphan.pl: ok' '$L' && ! grep -q 'FAIL.*993' '$L'"
check "exactly those three failures, and the assertions of the files counted" \
    "[ \"\$(grep -c '^  FAIL' '$L')\" -eq 3 ] && grep -qE '^4 passed, 3 failed$' '$L'"
left=$(dlock_tagged_pids "DLOCK_HARNESS_TAG=$TAG")
check "no process of the run is left (${left:-none})" '[ -z "$left" ]'

# --- a run stopped with SIGTERM in the middle of a file ---
echo "==> scripts/test.sh with t/990_hang, stopped with SIGTERM while the file runs"
DLOCK_SRC=$W/src DLOCK_TIMEOUT_TAP=600 DLOCK_ONLY="tap:990_hang" \
    bash "$REPO/scripts/test.sh" >"$W/run2.log" 2>&1 &
RUN_PID=$!
# wait for the file's server (a postmaster of t_990_hang), at most 10 minutes
up=
for _ in $(seq 1 600); do
    for p in $(dlock_tagged_pids "DLOCK_HARNESS_TAG=$TAG"); do
        grep -q 't_990_hang' "/proc/$p/cmdline" 2>/dev/null && up=$p
    done
    [ -n "$up" ] && break
    kill -0 "$RUN_PID" 2>/dev/null || break
    sleep 1
done
check "the hanging file's server started (pid ${up:-none})" '[ -n "$up" ]'
kill -TERM "$RUN_PID"
ended=
for _ in $(seq 1 60); do
    kill -0 "$RUN_PID" 2>/dev/null || { ended=1; break; }
    sleep 1
done
wait "$RUN_PID" 2>/dev/null
rc=$?
RUN_PID=
grep -E '^==> (terminated|stopping)|^  FAIL|^[0-9]+ passed' "$W/run2.log" | sed 's/^/    /'
check "SIGTERM ends the run within a minute (exit $rc)" '[ -n "$ended" ] && [ "$rc" -ne 0 ]'
sleep 1
left=$(dlock_tagged_pids "DLOCK_HARNESS_TAG=$TAG")
check "no process of the stopped run is left (${left:-none})" '[ -z "$left" ]'

# --- a new pg_regress test without its expected output, after a change ---
echo "==> scripts/test.sh with regress:zz_harness_new (no expected output), src/views/views_sql.c changed"
echo '/* changed by scripts/test-harness.sh */' >>"$W/src/src/views/views_sql.c"
DLOCK_SRC=$W/src DLOCK_ONLY="regress:zz_harness_new" \
    bash "$REPO/scripts/test.sh" >"$W/run3.log" 2>&1
rc=$?
L=$W/run3.log
grep -E '^==> (build|built)|^  (FAIL|NOTE|NEW)|^[0-9]+ passed' "$L" | sed 's/^/    /'
blog=$(sed -nE 's/.*compiler output in ([^)]*)\).*/\1/p' "$L" | head -n 1)
compiled=$(grep -cE -- '-c -o src/([a-z_]+/)*[a-z_]+\.o ' "$blog" 2>/dev/null)
check "the build started from the cache and compiled the changed file only ($compiled object(s))" \
    "grep -q 'build cache .*: 1 file(s) differ from its build: src/views/views_sql.c' '$L' && [ '$compiled' = 1 ]"
new_out=$(sed -nE 's/^  NEW: \[regress\] zz_harness_new has no expected\/zz_harness_new\.out; its output is ([^:]+): .*/\1/p' "$L")
check "the run fails, as a test without expected output must (exit $rc)" \
    "[ '$rc' -ne 0 ] && grep -qE '^0 passed, 1 failed$' '$L'"
check "the summary names the file its output went to (${new_out:-none}), which holds it" \
    "[ -n '$new_out' ] && grep -q 'harness42' '$new_out'"
left=$(dlock_tagged_pids "DLOCK_HARNESS_TAG=$TAG")
check "no process of the run is left (${left:-none})" '[ -z "$left" ]'

# --- scripts/mutate.sh's own promises: scripts/test-mutate.sh ---
echo "==> scripts/test-mutate.sh (scripts/mutate.sh: function keys, --check, budget, credits, clients, --all-tests, /tmp)"
bash "$REPO/scripts/test-mutate.sh" </dev/null >"$W/test-mutate.log" 2>&1
rc=$?
sed 's/^/    /' "$W/test-mutate.log"
last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$W/test-mutate.log" | tail -n 1)
mp=$(sed -nE 's/^([0-9]+) passed.*/\1/p' <<<"$last")
mf=$(sed -nE 's/^[0-9]+ passed, ([0-9]+) failed$/\1/p' <<<"$last")
[ "$rc" -ne 0 ] && [ "${mf:-0}" -eq 0 ] && mf=1
PASS=$((PASS + ${mp:-0}))
FAIL=$((FAIL + ${mf:-0}))

echo "==> test-harness.sh: $((SECONDS - START)) s"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ] && [ "$PASS" -gt 0 ]
