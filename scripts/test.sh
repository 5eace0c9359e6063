#!/usr/bin/env bash
# scripts/test.sh - build dlock and run its whole test suite.
#
#   sudo bash scripts/test.sh        (or as root; CI runs it through .ci/run)
#
# On a fresh Debian 12 it installs what is missing (PostgreSQL 15 server and
# dev packages, libipc-run-perl, make, gcc, pgbouncer, PL/Proxy), copies the repository to
# a postgres-owned directory under /tmp (nothing is written into the repo),
# builds there as postgres (any compiler warning fails the run), runs
# `make install` as root, starts a throwaway cluster and runs
# `make installcheck` as postgres against it, one suite at a time so every
# suite runs even when an earlier one fails:
#   pg_regress  (REGRESS)    make installcheck ISOLATION= TAP_TESTS=
#   isolation   (ISOLATION)  make installcheck REGRESS= TAP_TESTS=
#   TAP         (TAP_TESTS)  make installcheck REGRESS= ISOLATION= PROVE_TESTS=t/FILE.pl,
#                            one TAP file at a time, each with a line when it
#                            starts and ends (and every 30 s while it runs)
# (the TAP tests start their own clusters with PostgreSQL::Test::Cluster).
# Beside them, in the background, scripts/test-clients.sh tests the clients
# (clients/) against a cluster of its own; its output follows theirs.
# Time limits only catch hangs: they are far above what a loaded machine
# needs, and a suite or file that runs out names the variable that raises it.
# Every process the run starts carries a tag in its environment: what a
# suite or TAP file leaves running is found when it ends.  Everything of a
# file the time limit killed is stopped (its postmasters too); a PostgreSQL
# server a finished file left running is stopped and counts as a failure;
# any other process of the run still alive at its end (after up to
# DLOCK_LEFTOVER_GRACE seconds, 60, to end by itself) is stopped and counts
# as a failure.  An interrupt or a termination stops them all too.
# The last line printed is `N passed, N failed` (pg_regress tests, isolation
# tests, TAP assertions; a TAP file that dies counts as a failure, and so do
# compiler warnings); the exit status is 0 only if nothing failed and
# every suite ran at least one test.  A TAP file that skips itself (plan
# skip_all) counts as a failure unless DLOCK_ALLOW_SKIP names it.
#
# Environment (all optional):
#   DLOCK_SRC              source tree to test (default: this repository)
#   DLOCK_PG_BIN           bin directory of the PostgreSQL to build and test
#                          against (scripts/lib.sh)
#   DLOCK_TEST_EXTRA_CONF  extra postgresql.conf lines (newline-separated) for
#                          the installcheck cluster
#   DLOCK_TIMEOUT_REGRESS / DLOCK_TIMEOUT_ISOLATION
#                          time limit of the pg_regress / isolation suite, in
#                          seconds (default: 60 s per test in it, plus 60 s)
#   DLOCK_TIMEOUT_TAP      time limit of each TAP file, in seconds (600)
#   DLOCK_LEFTOVER_GRACE   seconds a process a test left behind has to end by
#                          itself once the suites are done (60)
#   DLOCK_KEEP=1           keep the /tmp work directories even on success
#   DLOCK_ALLOW_SKIP       TAP files (names without .pl, space or comma
#                          separated) allowed to skip themselves; any other
#                          TAP file that skips itself counts as a failure
#   PROVE_FLAGS            more prove flags (prove runs with --timer -v; the
#                          output of each TAP file is in the work directory's
#                          logs/tap/NAME.log, and shown when the file fails)
#   DLOCK_ONLY             run only these tests, e.g. "regress:lease_basic
#                          isolation:wait_fifo tap:015_wake" (scripts/mutate.sh);
#                          a suite with none of them is left out; "clients"
#                          runs every client's tests, "clients:python",
#                          "clients:node", "clients:go" or "clients:java"
#                          one client's, "clients:LANG:NAME" only its tests
#                          whose names match NAME (pytest -k, node
#                          --test-name-pattern, go test -run, JUnit test
#                          methods; scripts/test-clients.sh)
#   DLOCK_SKIP             leave these tests out, e.g. "tap:081_cli_args clients"
#                          (scripts/test-matrix.sh in CI: what does not differ
#                          by PostgreSQL version runs once, on this machine)
#   DLOCK_FAIL_FAST=1      stop at the first failure: a suite that failed
#                          leaves the later suites (and TAP files) out, and
#                          isolation specs run one at a time, in the order
#                          given, up to the first that fails, and a TAP
#                          file stops at its first failed assertion
#                          (t/DlockFailFast.pm)
#                          (scripts/mutate.sh: one failure kills a mutant)
#   DLOCK_IGNORE_WARNINGS=1  compiler warnings do not count as a failure
#                          (scripts/mutate.sh: a mutant may leave a variable unused)
#   DLOCK_BUILD_CACHE      a build cache (scripts/lib.sh, dlock_build_install);
#                          unset: the persistent one of the source tree (a git
#                          work tree), /var/tmp/dlock-build-cache/NAME-KEY,
#                          refreshed after every build without warnings, so a
#                          run after another recompiles only what changed
#                          (about 10 MB each; rm -rf the directory to drop them);
#                          empty: none, every run builds from scratch
#
# A pg_regress or isolation test without its expected output (a new
# sql/NAME.sql or specs/NAME.spec) runs against an empty expected/NAME.out
# and fails; the summary names the file its output went to
# (results/NAME.out, output_iso/results/NAME.out in the kept build
# directory): read every line of it, then copy it to expected/NAME.out.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$REPO/scripts/lib.sh"

SRC=${DLOCK_SRC:-$REPO}
T_TAP=${DLOCK_TIMEOUT_TAP:-600}
START=$SECONDS

# Every process this run starts (the build, the test cluster, the suites,
# the TAP files' servers and commands, even a postmaster detached by pg_ctl)
# inherits this tag: on every exit path the ones still alive are stopped,
# and at the end any found alive fails the run.
RUN_TAG=test-$$-$RANDOM$RANDOM
export DLOCK_RUN_TAG=$RUN_TAG
STEP_PID=
WORK=

# stop_leftovers: stops every process this run started that is still alive
# (tagged, or working in its build or work directory); prints them.
stop_leftovers() {
    local left
    left=$(dlock_tagged_pids "DLOCK_RUN_TAG=$RUN_TAG" ${DLOCK_BUILD_DIR:+"$DLOCK_BUILD_DIR"} ${WORK:+"$WORK"})
    if [ -n "$left" ]; then
        echo "==> stopping $(wc -w <<<"$left") process(es) this run started:"
        # shellcheck disable=SC2086
        dlock_stop_pids $left
    fi
}
on_exit() {
    local rc=$?
    trap - EXIT INT TERM
    [ -z "$STEP_PID" ] || kill -TERM "$STEP_PID" 2>/dev/null
    [ -z "${CLIENTS_PID:-}" ] || kill -TERM "$CLIENTS_PID" 2>/dev/null
    [ -z "${ISOLATION_PID:-}" ] || kill -TERM "$ISOLATION_PID" 2>/dev/null
    dlock_cleanup
    stop_leftovers
    exit $rc
}
trap on_exit EXIT
trap 'echo "==> interrupted"; exit 130' INT
trap 'echo "==> terminated"; exit 143' TERM
DLOCK_TRAP_SET=1    # lib.sh: on_exit stops the clusters

PASSED=0
FAILED=0
NOTES=()          # one line per failure cause, printed in the summary

summary_and_exit() {
    local rc=0
    echo
    echo "==================== dlock test summary ($((SECONDS - START)) s) ===================="
    local n
    for n in ${NOTES[@]+"${NOTES[@]}"}; do echo "  $n"; done
    if [ "$FAILED" -gt 0 ]; then
        rc=1
    elif [ "$PASSED" -eq 0 ]; then
        echo "  FAIL: no test ran"
        rc=1
    else
        echo "  all tests passed"
    fi
    if [ $rc -ne 0 ] && [ -n "${WORK:-}" ]; then
        echo "  work directories kept for inspection: ${DLOCK_BUILD_DIR:-} $WORK"
    fi
    echo "$PASSED passed, $FAILED failed"
    exit $rc
}

fail_early() {
    NOTES+=("FAIL: $1")
    FAILED=$((FAILED + 1))
    summary_and_exit
}

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test.sh must run as root (it installs packages and runs make install;" >&2
    echo "PostgreSQL itself runs as the postgres user)." >&2
    fail_early "not run as root"
fi

echo "==> dlock test suite: source $SRC"
# t/120_monitoring_exporter.pl runs Debian's exporter and promtool: installed
# unless that test is left out
if [[ " ${DLOCK_SKIP:-} " != *" tap:120_monitoring_exporter "* ]] &&
        { [ -z "${DLOCK_ONLY:-}" ] || [[ " $DLOCK_ONLY " == *" tap:120_monitoring_exporter "* ]]; }; then
    DLOCK_PACKAGES+=(prometheus-postgres-exporter prometheus)
fi
dlock_ensure_packages || fail_early "installing packages"
echo "==> $("$DLOCK_PG_CONFIG" --version), $(gcc --version | head -n1)"

# a persistent build cache per source tree (scripts/lib.sh): a run after
# another one of the same tree recompiles only the files that changed
if [ -z "${DLOCK_BUILD_CACHE+set}" ]; then
    DLOCK_BUILD_CACHE=$(dlock_default_build_cache "$SRC")
    DLOCK_BUILD_CACHE_REFRESH=1
fi
dlock_build_install "$SRC" || fail_early "build or make install (see above)"
BUILD=$DLOCK_BUILD_DIR
if [ "$DLOCK_BUILD_WARNINGS" -gt 0 ] && [ "${DLOCK_IGNORE_WARNINGS:-0}" = 1 ]; then
    echo "==> build OK; $DLOCK_BUILD_WARNINGS compiler warning line(s) ignored (DLOCK_IGNORE_WARNINGS=1)"
elif [ "$DLOCK_BUILD_WARNINGS" -gt 0 ]; then
    NOTES+=("FAIL: the build printed $DLOCK_BUILD_WARNINGS compiler warning line(s) (shown above; counted as 1 failure)")
    FAILED=$((FAILED + 1))
else
    echo "==> build OK, no compiler warnings"
fi

WORK=$(mktemp -d /tmp/dlock-test.XXXXXX)
chmod 755 "$WORK"
mkdir -p "$WORK/logs"

# Which suites does the Makefile define?
cat >"$WORK/print.mk" <<'EOF'
dlock-print-%:
	@echo '$($*)'
EOF
chmod 644 "$WORK/print.mk"
make_var() {
    (cd "$BUILD" && dlock_as_postgres make --no-print-directory -s -f Makefile -f "$WORK/print.mk" \
        PG_CONFIG="$DLOCK_PG_CONFIG" "dlock-print-$1" 2>/dev/null) | tail -n 1
}
V_REGRESS=$(make_var REGRESS)
V_ISOLATION=$(make_var ISOLATION)
V_TAP=$(make_var TAP_TESTS)
# only_tests KIND: the names of DLOCK_ONLY's KIND:NAME entries
only_tests() {
    local t out=
    for t in $DLOCK_ONLY; do
        [ "${t%%:*}" = "$1" ] && out+="${t#*:} "
    done
    echo "${out% }"
}
ONLY=${DLOCK_ONLY:+1}
if [ -n "$ONLY" ]; then
    echo "==> DLOCK_ONLY = $DLOCK_ONLY"
    V_REGRESS=$(only_tests regress)
    V_ISOLATION=$(only_tests isolation)
    ONLY_TAP=$(only_tests tap)
    [ -n "$ONLY_TAP" ] || V_TAP=
fi
# skipped NAMES KIND: NAMES without DLOCK_SKIP's KIND:NAME entries
skipped() {
    local t out= kind=$2
    for t in $1; do
        [[ " ${DLOCK_SKIP:-} " == *" $kind:$t "* ]] || out+="$t "
    done
    echo "${out% }"
}
if [ -n "${DLOCK_SKIP:-}" ]; then
    echo "==> DLOCK_SKIP = $DLOCK_SKIP"
    V_REGRESS=$(skipped "$V_REGRESS" regress)
    V_ISOLATION=$(skipped "$V_ISOLATION" isolation)
    if [ -z "$ONLY" ]; then
        ONLY_TAP=$(skipped "$(cd "$BUILD" && ls t/*.pl | sed 's#^t/##; s#\.pl$##' | tr '\n' ' ')" tap)
    else
        ONLY_TAP=$(skipped "$ONLY_TAP" tap)
    fi
    [ -n "$ONLY_TAP" ] || V_TAP=
    ONLY_TAP_SET=1
fi
echo "==> REGRESS = ${V_REGRESS:-<none>}"
echo "==> ISOLATION = ${V_ISOLATION:-<none>}"
echo "==> TAP_TESTS = ${V_TAP:-<none>}  (t/: $(cd "$BUILD" && ls t/*.pl 2>/dev/null | tr '\n' ' '))"

extra_conf=()
if [ -n "${DLOCK_TEST_EXTRA_CONF:-}" ]; then
    while IFS= read -r l; do [ -n "$l" ] && extra_conf+=("$l"); done <<<"$DLOCK_TEST_EXTRA_CONF"
fi
dlock_cluster_start "$WORK/cluster" auto ${extra_conf[@]+"${extra_conf[@]}"} ||
    fail_early "starting the test cluster"
echo "==> test cluster: PGHOST=$PGHOST PGPORT=$PGPORT (log $DLOCK_SERVER_LOG)"

# ---- the client libraries (issue 27) --------------------------------------
# scripts/test-clients.sh tests clients/python, clients/node, clients/go and
# clients/java against a cluster of its own (its tests stop and restart the server), with
# the dlock just installed; its `N passed, N failed` is added to the totals.
# Left out when DLOCK_ONLY names no "clients" entry.  It runs in the
# background beside pg_regress, isolation and TAP (they wait on servers far
# more than they compute: together they take minutes less), its output in
# $WORK/logs/clients.log, shown when the other suites are done.
# In a root of scripts/test-matrix.sh (its apt setting marks it) only the
# Python client runs: npm there has neither the host's CA bundle nor its
# proxy settings to reach the registry.
CLIENTS_PID=
if { [ -z "$ONLY" ] || [[ " $DLOCK_ONLY " == *" clients"* ]]; } &&
        [[ " ${DLOCK_SKIP:-} " != *" clients "* ]]; then
    # DLOCK_ONLY's clients:LANG[:NAME] entries narrow the run to one
    # client's tests (whose names match NAME): what a client mutant needs
    CLIENTS_ONLY=
    if [ -n "$ONLY" ] && [[ " $DLOCK_ONLY " != *" clients "* ]]; then
        for e in $DLOCK_ONLY; do
            [[ $e == clients:* ]] && CLIENTS_ONLY+="${CLIENTS_ONLY:+ }${e#clients:}"
        done
    fi
    if [ -f /etc/apt/apt.conf.d/99dlock-matrix ]; then
        CLIENTS_ONLY=python
        NOTES+=("NOTE: [clients] in a root of scripts/test-matrix.sh: the Python client only (no npm registry there)")
    fi
    echo "==> [clients] scripts/test-clients.sh (the Python, Node, Go and Java clients) starts beside the other suites"
    CLIENTS_START=$SECONDS
    DLOCK_SRC="$SRC" DLOCK_CLIENTS_NO_BUILD=1 DLOCK_CLIENTS_ONLY="$CLIENTS_ONLY" \
        bash "$REPO/scripts/test-clients.sh" </dev/null >"$WORK/logs/clients.log" 2>&1 &
    CLIENTS_PID=$!
fi

# run_step NAME LIMIT LOG SHOW CMD...: runs CMD (in $BUILD, as postgres, with
# the step's tag DLOCK_STEP_TAG=$RUN_TAG/NAME in its environment) under a time
# limit of LIMIT seconds, its output in LOG, and also on the terminal if SHOW
# is 1.  CMD runs in the background while this shell waits, so that a signal
# to test.sh is handled at once (bash runs traps only between commands).
# Prints a line every 30 s while CMD is silent (SHOW=1) or runs (SHOW=0:
# with the number of TAP assertions so far).  Afterwards, the processes the
# step started that are still alive: when the limit killed it, all of them
# are stopped (the postmasters of a TAP file, its commands); else a
# PostgreSQL server left running is stopped and reported in STEP_LEFT (a
# failure), and any other process is listed and left to end by itself (the
# check at the end of the run fails if it has not).  Sets STEP_RC (124: the
# limit ran out) and STEP_LEFT.
run_step() {
    local name=$1 limit=$2 log=$3 show=$4 pid start=$SECONDS last=$SECONDS size=0 nsize n
    shift 4
    : >"$log"
    chown postgres "$log"
    (
        cd "$BUILD" && exec timeout -k 20 "$limit" runuser -u postgres -- \
            env HOME=/var/lib/postgresql PATH="$PATH" PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER=postgres \
            DLOCK_RUN_TAG="$RUN_TAG" DLOCK_STEP_TAG="$RUN_TAG/$name" "$@" </dev/null
    ) >>"$log" 2>&1 &
    pid=$!
    STEP_PID=$pid
    local tailpid=
    if [ "$show" = 1 ]; then
        tail -n +1 -f --pid="$pid" "$log" &
        tailpid=$!
    fi
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        nsize=$(stat -c %s "$log" 2>/dev/null || echo 0)
        [ "$nsize" != "$size" ] && [ "$show" = 1 ] && last=$SECONDS
        size=$nsize
        if [ $((SECONDS - last)) -ge 30 ] && kill -0 "$pid" 2>/dev/null; then
            last=$SECONDS
            if [ "$show" = 1 ]; then
                echo "    ... [$name] still running, $((SECONDS - start)) s of its ${limit} s limit"
            else
                # prove's own output is buffered; the file's log is not
                n=$(grep -cE '^(\[[^]]*\]\([^)]*\) )?(not )?ok [0-9]+' "$BUILD/tmp_check/log/regress_log_${name#tap/}" 2>/dev/null)
                echo "    ... [$name] still running, $((SECONDS - start)) s of its ${limit} s limit, ${n:-0} assertion(s) so far"
            fi
        fi
    done
    wait "$pid"
    STEP_RC=$?
    STEP_PID=
    [ -z "$tailpid" ] || wait "$tailpid" 2>/dev/null
    STEP_SECONDS=$((SECONDS - start))
    if [ "$STEP_RC" -eq 124 ] || [ "$STEP_RC" -eq 137 ]; then
        STEP_RC=124
    fi
    # what the step left running (they all carry its tag: even the
    # postmasters of a TAP file, which pg_ctl detached)
    local p servers=() others=()
    # (a backend retitles itself over its environment: it is found by its
    # working directory, a data directory under $BUILD/tmp_check)
    # (only a TAP file starts servers under tmp_check; the isolation specs,
    # which may run beside the TAP files, must not take theirs for their own)
    local dirs=()
    [[ $name != tap/* ]] || dirs=("$BUILD/tmp_check")
    for p in $(dlock_tagged_pids "DLOCK_STEP_TAG=$RUN_TAG/$name" ${dirs[@]+"${dirs[@]}"}); do
        if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = postgres ]; then servers+=("$p"); else others+=("$p"); fi
    done
    STEP_LEFT=${servers[*]}
    if [ "$STEP_RC" -eq 124 ]; then
        STEP_LEFT="${servers[*]} ${others[*]}"
        STEP_LEFT=$(echo $STEP_LEFT)
    fi
    if [ -n "$STEP_LEFT" ]; then
        echo "==> [$name] stopping $(wc -w <<<"$STEP_LEFT") process(es) it left running:"
        # shellcheck disable=SC2086
        dlock_stop_pids $STEP_LEFT
    fi
    if [ "$STEP_RC" -ne 124 ] && [ ${#others[@]} -gt 0 ]; then
        echo "==> [$name] NOTE: $(wc -w <<<"${others[*]}") process(es) it started still run; the run fails if any is still alive at its end:"
        dlock_list_pids "${others[@]}"
    fi
}

# run_suite NAME LIMIT_VAR LIMIT MAKE_OVERRIDES... : make installcheck for
# pg_regress or isolation tests, output on the terminal and in
# $WORK/logs/NAME.log; sets SUITE_RC.
run_suite() {
    local name=$1 var=$2 t=$3
    shift 3
    echo
    echo "==> [$name] make installcheck $* (time limit ${t} s: $var)"
    run_step "$name" "$t" "$WORK/logs/$name.log" 1 \
        make --no-print-directory installcheck PG_CONFIG="$DLOCK_PG_CONFIG" "$@"
    SUITE_RC=$STEP_RC
    if [ "$SUITE_RC" -eq 124 ]; then
        NOTES+=("FAIL: [$name] timed out after ${t} s (only a hang should: raise $var, in seconds, if the machine is that slow)")
    fi
    if [ -n "$STEP_LEFT" ] && [ "$STEP_RC" -ne 124 ]; then
        NOTES+=("FAIL: [$name] left $(wc -w <<<"$STEP_LEFT") PostgreSQL process(es) running (stopped; listed above)")
        FAILED=$((FAILED + 1))
    fi
    echo "==> [$name] finished in ${STEP_SECONDS} s"
}

# count_pg_regress NAME: counts the passed and failed tests of a pg_regress
# or pg_isolation_regress run: `test x ... ok` / `... FAILED` lines
# (PostgreSQL 15), or `ok N - x` / `not ok N - x` lines (16 and later).
REGRESS_OK='^((test| ) +[^ ]+ +\.\.\. ok( |$)|ok +[0-9]+ +[-+] )'
REGRESS_FAILED='^((test| ) +[^ ]+ +\.\.\. (FAILED|failed)|not ok +[0-9]+ +[-+] )'
count_pg_regress() {
    local name=$1 log="$WORK/logs/$1.log" p f
    p=$(grep -cE "$REGRESS_OK" "$log" || true)
    f=$(grep -cE "$REGRESS_FAILED" "$log" || true)
    if [ "$SUITE_RC" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        NOTES+=("FAIL: [$name] aborted (exit $SUITE_RC) without a test result; see its output above")
    elif [ "$f" -gt 0 ]; then
        NOTES+=("FAIL: [$name] $f test(s) failed: $(grep -E "$REGRESS_FAILED" "$log" |
            sed -E 's/^(test| ) +([^ ]+) .*/\2/; s/^not ok +[0-9]+ +[-+] +([^ ]+).*/\1/' | tr '\n' ' ')")
    fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
        f=1
        NOTES+=("FAIL: [$name] ran no test")
    fi
    echo "==> [$name] $p passed, $f failed"
    PASSED=$((PASSED + p))
    FAILED=$((FAILED + f))
}

# count_tap_file FILE: counts the TAP assertions of one file's prove run
# (log $WORK/logs/tap/NAME.log, STEP_RC): prove's closing lines, or when the
# time limit stopped it, the assertions it printed so far plus the timeout.
count_tap_file() {
    local tf=$1 name log total p f fa row skip
    name=$(basename "$tf" .pl)
    log="$WORK/logs/tap/$name.log"
    total=$(sed -nE 's/^Files=[0-9]+, Tests=([0-9]+),.*/\1/p' "$log" | tail -n 1)
    skip=$(sed -nE 's/^1\.\.0 # (SKIP|skip) *(.*)$/\2/p' "$log" | head -n 1)
    if [ "$STEP_RC" -eq 124 ]; then
        # prove's output was buffered when it was killed: count the file's
        # own log ("[time](elapsed) ok N - ...")
        local rlog="$BUILD/tmp_check/log/regress_log_$name"
        [ -f "$rlog" ] || rlog=$log
        p=$(grep -cE '^(\[[^]]*\]\([^)]*\) )?ok [0-9]+' "$rlog" || true)
        f=$(( $(grep -cE '^(\[[^]]*\]\([^)]*\) )?not ok [0-9]+' "$rlog" || true) + 1 ))
        NOTES+=("FAIL: [tap] $tf timed out after $T_TAP s (only a hang should: raise DLOCK_TIMEOUT_TAP, seconds per TAP file, if the machine is that slow)")
        TAP_RESULT="TIMED OUT after $T_TAP s ($p assertion(s) passed before)"
    elif [ -z "$total" ]; then
        p=0
        f=1
        NOTES+=("FAIL: [tap] $tf: prove did not run to its summary (exit $STEP_RC)")
        TAP_RESULT="FAILED: prove did not run to its summary (exit $STEP_RC)"
    else
        # "t/x.pl (Wstat: 256 ... Tests: 7 Failed: 2)" in the Test Summary
        # Report; a file listed there with Failed: 0 died or had a bad plan
        row=$(sed -nE 's/^(t\/[^ ]+) \(Wstat: .*Tests: [0-9]+ Failed: ([0-9]+)\)$/\2/p' "$log" | head -n 1)
        fa=${row:-0}
        f=$fa
        [ -n "$row" ] && [ "$row" -eq 0 ] && f=1
        p=$((total - fa))
        if [ "$STEP_RC" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
        if [ "$f" -gt 0 ]; then
            NOTES+=("FAIL: [tap] $tf: $f failure(s)$([ "$fa" -eq 0 ] && echo " (it died or its plan was wrong, exit $STEP_RC)")")
            TAP_RESULT="FAILED: $fa of $total assertion(s) failed (exit $STEP_RC)"
        elif [ -n "$skip" ]; then
            # a file that skips itself tested nothing: a failure unless
            # DLOCK_ALLOW_SKIP names it (e.g. "040_pgbouncer")
            case " ${DLOCK_ALLOW_SKIP//,/ } " in
                *" $name "*) TAP_RESULT="skipped itself ($skip), allowed by DLOCK_ALLOW_SKIP" ;;
                *)
                    f=1
                    NOTES+=("FAIL: [tap] $tf skipped itself: $skip (set DLOCK_ALLOW_SKIP=$name if that is wanted)")
                    TAP_RESULT="SKIPPED itself ($skip): counted as a failure"
                    ;;
            esac
        elif [ "$total" -eq 0 ]; then
            f=1
            NOTES+=("FAIL: [tap] $tf ran no test")
            TAP_RESULT="FAILED: ran no test"
        else
            TAP_RESULT="ok, $total assertion(s)"
        fi
    fi
    TAP_P=$((TAP_P + p))
    TAP_F=$((TAP_F + f))
}

# run_tap FILES...: runs each TAP file on its own (make installcheck
# PROVE_TESTS=FILE), under a time limit of its own (DLOCK_TIMEOUT_TAP),
# with a line when it starts and when it ends (and every 30 s between);
# its prove -v output and its tmp_check/log go to $WORK/logs/tap/.
run_tap() {
    local tf name i=0 n=$# start=$SECONDS
    TAP_P=0
    TAP_F=0
    mkdir -p "$WORK/logs/tap"
    chown postgres "$WORK/logs/tap"
    echo
    echo "==> [tap] $n file(s), one at a time, each with a time limit of $T_TAP s (DLOCK_TIMEOUT_TAP)"
    for tf in "$@"; do
        i=$((i + 1))
        name=$(basename "$tf" .pl)
        if [ "${DLOCK_FAIL_FAST:-0}" = 1 ] && [ "$TAP_F" -gt 0 ]; then
            echo "==> [tap $i/$n] $tf left out: a test failed already (DLOCK_FAIL_FAST=1)"
            continue
        fi
        if [ ! -f "$BUILD/$tf" ]; then
            echo "==> [tap $i/$n] FAIL: $tf does not exist"
            NOTES+=("FAIL: [tap] $tf does not exist")
            TAP_F=$((TAP_F + 1))
            continue
        fi
        echo "==> [tap $i/$n] $tf ..."
        # DLOCK_FAIL_FAST=1: the file itself stops at its first failed
        # assertion (t/DlockFailFast.pm), not after every wait that follows
        local perl5opt=${PERL5OPT:-}
        [ "${DLOCK_FAIL_FAST:-0}" = 1 ] && perl5opt+=" -I$BUILD/t -MDlockFailFast"
        run_step "tap/$name" "$T_TAP" "$WORK/logs/tap/$name.log" 0 \
            env PERL5OPT="$perl5opt" \
            make --no-print-directory installcheck PG_CONFIG="$DLOCK_PG_CONFIG" REGRESS= ISOLATION= \
            PROVE_TESTS="$tf" PROVE_FLAGS="--timer -v ${PROVE_FLAGS:-}"
        count_tap_file "$tf"
        if [ -n "$STEP_LEFT" ] && [ "$STEP_RC" -eq 124 ]; then
            TAP_RESULT+="; its $(wc -w <<<"$STEP_LEFT") process(es) stopped"
        elif [ -n "$STEP_LEFT" ]; then
            NOTES+=("FAIL: [tap] $tf left $(wc -w <<<"$STEP_LEFT") PostgreSQL process(es) running (stopped; listed above)")
            TAP_F=$((TAP_F + 1))
            TAP_RESULT+="; left a PostgreSQL server running"
        fi
        echo "==> [tap $i/$n] $tf: $TAP_RESULT, ${STEP_SECONDS} s"
        # make installcheck starts with rm -rf tmp_check: keep this file's
        # logs (and, when it failed, its data directories) aside
        if [ -d "$BUILD/tmp_check" ]; then
            if [ "$STEP_RC" -ne 0 ] || [ -n "$STEP_LEFT" ] || [[ $TAP_RESULT != ok* && $TAP_RESULT != skipped* ]]; then
                grep -E -A6 '^not ok [0-9]+' "$WORK/logs/tap/$name.log" | head -n 60
                [ "$STEP_RC" -ne 124 ] || tail -n 15 "$WORK/logs/tap/$name.log"
                for f in "$BUILD"/tmp_check/log/regress_log_*; do show_file "$f" 80; done
                for f in "$BUILD"/tmp_check/log/*.log; do show_file "$f" 25; done
                mv "$BUILD/tmp_check" "$WORK/logs/tap/$name.tmp_check"
            else
                mv "$BUILD/tmp_check/log" "$WORK/logs/tap/$name.log.d" 2>/dev/null
            fi
        fi
    done
    echo "==> [tap] $TAP_P passed, $TAP_F failed, in $((SECONDS - start)) s"
    PASSED=$((PASSED + TAP_P))
    FAILED=$((FAILED + TAP_F))
}

# present_tests KIND NAMES...: prints the names whose files exist; each missing
# one is reported and counted as a failure (pg_regress would stop at the first
# missing file and run nothing after it).
present_tests() {
    local kind=$1 t have_in have_out
    shift
    for t in "$@"; do
        if [ "$kind" = regress ]; then
            [ -f "$BUILD/sql/$t.sql" ] || [ -f "$BUILD/input/$t.source" ] && have_in=1 || have_in=0
        else
            [ -f "$BUILD/specs/$t.spec" ] && have_in=1 || have_in=0
        fi
        if [ -f "$BUILD/expected/$t.out" ] || [ -f "$BUILD/output/$t.source" ] ||
                compgen -G "$BUILD/expected/${t}_[0-9].out" >/dev/null; then
            have_out=1
        else
            have_out=0
        fi
        if [ $have_in = 1 ] && [ $have_out = 1 ]; then
            printf '%s ' "$t"
        elif [ $have_in = 1 ]; then
            # a new test: run it against an empty expected output, so that
            # its output is there to read (named in the summary)
            : >"$BUILD/expected/$t.out"
            chown postgres "$BUILD/expected/$t.out"
            echo "==> [$kind] NOTE: $t has no expected/$t.out: it runs against an empty one and fails; its output is kept" >&2
            NEW_TESTS+=("$kind:$t")
            printf '%s ' "$t"
        else
            local what=
            [ $have_in = 1 ] || what="$( [ "$kind" = regress ] && echo "sql/$t.sql" || echo "specs/$t.spec")"
            [ $have_out = 1 ] || what="${what:+$what and }expected/$t.out"
            echo "==> [$kind] FAIL: $t is listed in the Makefile, but it lacks $what" >&2
            NOTES+=("FAIL: [$kind] $t: $what missing")
            FAILED=$((FAILED + 1))
        fi
    done
}

show_file() {   # show_file FILE LINES: tail of FILE with a header
    [ -s "$1" ] || return 0
    echo "----- $1 (last $2 lines) -----"
    tail -n "$2" "$1"
}

# present_tests updates NOTES/FAILED/NEW_TESTS, so it must not run in a subshell.
NEW_TESTS=()
present_tests regress $V_REGRESS >"$WORK/regress.list"
R_LIST=$(cat "$WORK/regress.list")
present_tests isolation $V_ISOLATION >"$WORK/isolation.list"
I_LIST=$(cat "$WORK/isolation.list")

if [ -n "$ONLY" ] && [ -z "$V_REGRESS" ]; then
    :
elif [ -n "$V_REGRESS" ] && [ -n "$R_LIST" ]; then
    T_REGRESS=${DLOCK_TIMEOUT_REGRESS:-$((60 * $(wc -w <<<"$R_LIST") + 60))}
    run_suite regress DLOCK_TIMEOUT_REGRESS "$T_REGRESS" ISOLATION= TAP_TESTS= REGRESS="${R_LIST% }"
    count_pg_regress regress
    if [ "$SUITE_RC" -ne 0 ]; then
        show_file "$BUILD/regression.diffs" 300
    fi
else
    echo "==> [regress] FAIL: no pg_regress test to run (REGRESS: '${V_REGRESS}')"
    NOTES+=("FAIL: [regress] no test to run")
    FAILED=$((FAILED + 1))
fi

# fail_fast KIND: true (and says so) when DLOCK_FAIL_FAST=1 and a test failed
fail_fast() {
    [ "${DLOCK_FAIL_FAST:-0}" = 1 ] && [ "$FAILED" -gt 0 ] || return 1
    echo "==> [$1] left out: a test failed already (DLOCK_FAIL_FAST=1)"
    NOTES+=("NOTE: [$1] left out after a failure (DLOCK_FAIL_FAST=1)")
}

# isolation_suite: the isolation specs (sets PASSED, FAILED, NOTES).
isolation_suite() {
    T_ISOLATION=${DLOCK_TIMEOUT_ISOLATION:-$((60 * $(wc -w <<<"$I_LIST") + 60))}
    if [ "${DLOCK_FAIL_FAST:-0}" = 1 ]; then
        # one spec at a time, in the order given, up to the first failure
        for spec in $I_LIST; do
            run_suite isolation DLOCK_TIMEOUT_ISOLATION "$T_ISOLATION" REGRESS= TAP_TESTS= ISOLATION="$spec"
            count_pg_regress isolation
            if [ "$SUITE_RC" -ne 0 ]; then
                show_file "$BUILD/output_iso/regression.diffs" 300
                [ "$spec" = "$(awk '{print $NF}' <<<"$I_LIST")" ] ||
                    echo "==> [isolation] the specs after $spec left out (DLOCK_FAIL_FAST=1)"
                break
            fi
        done
    else
        run_suite isolation DLOCK_TIMEOUT_ISOLATION "$T_ISOLATION" REGRESS= TAP_TESTS= ISOLATION="${I_LIST% }"
        count_pg_regress isolation
        if [ "$SUITE_RC" -ne 0 ]; then
            show_file "$BUILD/output_iso/regression.diffs" 300
        fi
    fi
}

# The specs spend most of their time asleep (waiting for leases to run out),
# so they run in the background beside the TAP files (which start clusters
# of their own) when both run and one failure need not stop the rest; their
# output follows the TAP files', and their counts and notes are added then.
ISOLATION_PID=
if [ -n "$ONLY" ] && [ -z "$V_ISOLATION" ]; then
    :
elif fail_fast isolation; then
    :
elif [ -n "$V_ISOLATION" ] && [ -n "$I_LIST" ]; then
    if [ "${DLOCK_FAIL_FAST:-0}" != 1 ] && [ -n "$V_TAP" ]; then
        echo
        echo "==> [isolation] starts beside the TAP files (output in $WORK/logs/isolation.out, shown after theirs)"
        (
            p0=$PASSED f0=$FAILED n0=${#NOTES[@]}
            isolation_suite
            echo "$((PASSED - p0)) $((FAILED - f0))" >"$WORK/logs/isolation.counts"
            for n in "${NOTES[@]:n0}"; do echo "$n"; done >"$WORK/logs/isolation.notes"
        ) </dev/null >"$WORK/logs/isolation.out" 2>&1 &
        ISOLATION_PID=$!
    else
        isolation_suite
    fi
else
    echo "==> [isolation] FAIL: no isolation test to run (ISOLATION: '${V_ISOLATION}')"
    NOTES+=("FAIL: [isolation] no test to run")
    FAILED=$((FAILED + 1))
fi

if [ -n "$ONLY" ] && [ -z "$V_TAP" ]; then
    :
elif fail_fast tap; then
    :
elif [ -n "$V_TAP" ] && ! compgen -G "$BUILD/t/*.pl" >/dev/null; then
    echo "==> [tap] FAIL: TAP_TESTS is set in the Makefile but there is no t/*.pl"
    NOTES+=("FAIL: [tap] TAP_TESTS is set but t/ has no *.pl file")
    FAILED=$((FAILED + 1))
elif [ -n "$V_TAP" ]; then
    if [ -n "$ONLY" ] || [ -n "${ONLY_TAP_SET:-}" ]; then
        # shellcheck disable=SC2086
        run_tap $(printf 't/%s.pl ' $ONLY_TAP)
    else
        run_tap $(cd "$BUILD" && ls t/*.pl)
    fi
else
    echo "==> [tap] FAIL: no TAP tests (TAP_TESTS is empty)"
    NOTES+=("FAIL: [tap] no test to run")
    FAILED=$((FAILED + 1))
fi

# where the output of each test without an expected file went
for nt in ${NEW_TESTS[@]+"${NEW_TESTS[@]}"}; do
    t=${nt#*:}
    if [ "${nt%%:*}" = regress ]; then out=$BUILD/results/$t.out; else out=$BUILD/output_iso/results/$t.out; fi
    if [ -f "$out" ]; then
        NOTES+=("NEW: [${nt%%:*}] $t has no expected/$t.out; its output is $out: read every line, then copy it to expected/$t.out")
    else
        NOTES+=("NEW: [${nt%%:*}] $t has no expected/$t.out, and it wrote no output (see its suite above)")
    fi
done

if [ "$FAILED" -gt 0 ]; then
    show_file "$DLOCK_SERVER_LOG" 40
fi
if grep -qE 'terminated by signal|was terminated by exception' "$DLOCK_SERVER_LOG" 2>/dev/null; then
    NOTES+=("NOTE: a backend of the test cluster crashed: $(grep -m1 -E 'terminated by signal|was terminated by exception' "$DLOCK_SERVER_LOG")")
fi

# the isolation specs run beside the TAP files: their output and counts
if [ -n "$ISOLATION_PID" ]; then
    wait "$ISOLATION_PID"
    ISOLATION_PID=
    echo
    echo "==> [isolation] output (run beside the TAP files):"
    cat "$WORK/logs/isolation.out"
    if read -r ip if_ <"$WORK/logs/isolation.counts" 2>/dev/null; then
        PASSED=$((PASSED + ip))
        FAILED=$((FAILED + if_))
        while IFS= read -r n; do [ -n "$n" ] && NOTES+=("$n"); done <"$WORK/logs/isolation.notes"
    else
        NOTES+=("FAIL: [isolation] its background run ended without counts; see its output above")
        FAILED=$((FAILED + 1))
    fi
fi

dlock_cluster_stop "$WORK/cluster"

# ---- the client libraries: their result --------------------------------
# (started beside the other suites: clients_start, above)
if [ -n "${CLIENTS_PID:-}" ]; then
    wait "$CLIENTS_PID"
    CLIENTS_RC=$?
    CLIENTS_PID=
    echo
    echo "==> [clients] scripts/test-clients.sh's output ($WORK/logs/clients.log):"
    cat "$WORK/logs/clients.log"
    CLIENTS_LINE=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$WORK/logs/clients.log" | tail -n 1)
    CLIENTS_P=$(sed -nE 's/^([0-9]+) passed.*/\1/p' <<<"$CLIENTS_LINE")
    CLIENTS_F=$(sed -nE 's/^[0-9]+ passed, ([0-9]+) failed$/\1/p' <<<"$CLIENTS_LINE")
    CLIENTS_P=${CLIENTS_P:-0}
    CLIENTS_F=${CLIENTS_F:-0}
    if [ "$CLIENTS_RC" -ne 0 ] && [ "$CLIENTS_F" -eq 0 ]; then CLIENTS_F=1; fi
    if [ "$CLIENTS_F" -gt 0 ]; then
        NOTES+=("FAIL: [clients] $CLIENTS_F failure(s) (exit $CLIENTS_RC); see scripts/test-clients.sh's output above")
    fi
    echo "==> [clients] $CLIENTS_P passed, $CLIENTS_F failed, in $((SECONDS - CLIENTS_START)) s (beside the other suites)"
    PASSED=$((PASSED + CLIENTS_P))
    FAILED=$((FAILED + CLIENTS_F))
fi

# Nothing this run started may be alive now: a process a test left behind
# gets DLOCK_LEFTOVER_GRACE seconds (60) to end by itself (a command's
# `sleep 30` orphaned by its shell ends; one that would pile up does not).
sleep 1
LEFT=$(dlock_tagged_pids "DLOCK_RUN_TAG=$RUN_TAG" "$BUILD" "$WORK")
if [ -n "$LEFT" ]; then
    echo "==> waiting up to ${DLOCK_LEFTOVER_GRACE:-60} s for $(wc -w <<<"$LEFT") process(es) of this run to end:"
    # shellcheck disable=SC2086
    dlock_list_pids $LEFT
    grace_end=$((SECONDS + ${DLOCK_LEFTOVER_GRACE:-60}))
    while [ -n "$LEFT" ] && [ $SECONDS -lt $grace_end ]; do
        sleep 1
        LEFT=$(dlock_tagged_pids "DLOCK_RUN_TAG=$RUN_TAG" "$BUILD" "$WORK")
    done
fi
if [ -n "$LEFT" ]; then
    echo "==> FAIL: $(wc -w <<<"$LEFT") process(es) started by this run are still alive:"
    # shellcheck disable=SC2086
    dlock_stop_pids $LEFT
    NOTES+=("FAIL: $(wc -w <<<"$LEFT") process(es) started by this run were still alive at its end (stopped; listed above)")
    FAILED=$((FAILED + 1))
else
    echo "==> no process started by this run is left"
fi

if [ "$FAILED" -eq 0 ] && [ "$PASSED" -gt 0 ] && [ "${DLOCK_KEEP:-0}" != 1 ]; then
    rm -rf "$WORK" "$BUILD"
    WORK=
fi
summary_and_exit
