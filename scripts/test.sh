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
#   TAP         (TAP_TESTS)  make installcheck REGRESS= ISOLATION=
# (the TAP tests start their own clusters with PostgreSQL::Test::Cluster).
# The last line printed is `N passed, N failed` (pg_regress tests, isolation
# tests, TAP assertions; a TAP file that dies counts as a failure, and so do
# compiler warnings); the exit status is 0 only if nothing failed and
# every suite ran at least one test.  A TAP file that skips itself (plan
# skip_all) counts as a failure unless DLOCK_ALLOW_SKIP names it.
#
# Environment (all optional):
#   DLOCK_SRC              source tree to test (default: this repository)
#   DLOCK_TEST_EXTRA_CONF  extra postgresql.conf lines (newline-separated) for
#                          the installcheck cluster
#   DLOCK_TIMEOUT_REGRESS / DLOCK_TIMEOUT_ISOLATION / DLOCK_TIMEOUT_TAP
#                          per-suite time limits in seconds (90/120/240)
#   DLOCK_KEEP=1           keep the /tmp work directories even on success
#   DLOCK_ALLOW_SKIP       TAP files (names without .pl, space or comma
#                          separated) allowed to skip themselves; any other
#                          TAP file that skips itself counts as a failure
#   PROVE_FLAGS            passed to prove (e.g. --verbose, -j2)
#   DLOCK_ONLY             run only these tests, e.g. "regress:lease_basic
#                          isolation:wait_fifo tap:015_wake" (scripts/mutate.sh);
#                          a suite with none of them is left out
#   DLOCK_IGNORE_WARNINGS=1  compiler warnings do not count as a failure
#                          (scripts/mutate.sh: a mutant may leave a variable unused)
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$REPO/scripts/lib.sh"

SRC=${DLOCK_SRC:-$REPO}
T_REGRESS=${DLOCK_TIMEOUT_REGRESS:-90}
T_ISOLATION=${DLOCK_TIMEOUT_ISOLATION:-120}
T_TAP=${DLOCK_TIMEOUT_TAP:-240}
START=$SECONDS

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
dlock_ensure_packages || fail_early "installing packages"
echo "==> $("$DLOCK_PG_CONFIG" --version), $(gcc --version | head -n1)"

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

# run_suite NAME TIMEOUT MAKE_OVERRIDES... : runs make installcheck as postgres,
# output to the terminal and to $WORK/logs/NAME.log; sets SUITE_RC.
run_suite() {
    local name=$1 t=$2
    shift 2
    echo
    echo "==> [$name] make installcheck $* (time limit ${t} s)"
    (cd "$BUILD" && timeout -k 20 "$t" runuser -u postgres -- \
        env HOME=/var/lib/postgresql PATH="$PATH" PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER=postgres \
        ${PROVE_FLAGS:+PROVE_FLAGS="$PROVE_FLAGS"} \
        make --no-print-directory installcheck PG_CONFIG="$DLOCK_PG_CONFIG" "$@" </dev/null) \
        2>&1 | tee "$WORK/logs/$name.log"
    SUITE_RC=${PIPESTATUS[0]}
    if [ "$SUITE_RC" -eq 124 ] || [ "$SUITE_RC" -eq 137 ]; then
        NOTES+=("FAIL: [$name] timed out after ${t} s")
    fi
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

# count_tap: counts TAP assertions from prove's closing lines.
count_tap() {
    local log="$WORK/logs/tap.log" total p f files_failed
    total=$(sed -nE 's/^Files=[0-9]+, Tests=([0-9]+),.*/\1/p' "$log" | tail -n 1)
    if [ -z "$total" ]; then
        p=0
        f=1
        NOTES+=("FAIL: [tap] prove did not run to its summary (exit $SUITE_RC); see its output above")
    else
        # Test Summary Report lines: "t/x.pl (Wstat: 256 ... Tests: 7 Failed: 2)";
        # a file listed there with Failed: 0 died or had a bad plan: 1 failure.
        local rows fa
        rows=$(sed -nE 's/^(t\/[^ ]+) \(Wstat: .*Tests: [0-9]+ Failed: ([0-9]+)\)$/\1 \2/p' "$log")
        fa=$(awk '{ s += $2 } END { print s + 0 }' <<<"$rows")
        f=$(awk 'NF { s += ($2 > 0 ? $2 : 1) } END { print s + 0 }' <<<"$rows")
        files_failed=$(awk 'NF { n++ } END { print n + 0 }' <<<"$rows")
        p=$((total - fa))
        if [ "$SUITE_RC" -ne 0 ] && [ "$f" -eq 0 ]; then
            f=1
            NOTES+=("FAIL: [tap] exit $SUITE_RC; see its output above")
        elif [ "$f" -gt 0 ]; then
            NOTES+=("FAIL: [tap] $f failure(s) in $files_failed file(s): $(sed -nE 's/^(t\/[^ ]+) \(Wstat: .*/\1/p' "$log" | tr '\n' ' ')")
        fi
        # A file that skips itself (plan skip_all) tested nothing: that is a
        # failure unless DLOCK_ALLOW_SKIP names it (e.g. "040_pgbouncer").
        local sk name
        while read -r sk; do
            [ -n "$sk" ] || continue
            name=$(basename "$sk" .pl)
            case " ${DLOCK_ALLOW_SKIP//,/ } " in
                *" $name "*) echo "==> [tap] $sk skipped itself (allowed by DLOCK_ALLOW_SKIP)" ;;
                *)
                    f=$((f + 1))
                    NOTES+=("FAIL: [tap] $sk skipped itself (set DLOCK_ALLOW_SKIP=$name if that is wanted)")
                    ;;
            esac
        done < <(sed -nE 's/^(t\/[^ ]+\.pl) \.+ skipped:.*/\1/p' "$log")
        if [ "$total" -eq 0 ]; then
            f=$((f + 1))
            NOTES+=("FAIL: [tap] ran no test")
        fi
    fi
    echo "==> [tap] $p passed, $f failed"
    PASSED=$((PASSED + p))
    FAILED=$((FAILED + f))
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

# present_tests updates NOTES/FAILED, so it must not run in a subshell.
present_tests regress $V_REGRESS >"$WORK/regress.list"
R_LIST=$(cat "$WORK/regress.list")
present_tests isolation $V_ISOLATION >"$WORK/isolation.list"
I_LIST=$(cat "$WORK/isolation.list")

if [ -n "$ONLY" ] && [ -z "$V_REGRESS" ]; then
    :
elif [ -n "$V_REGRESS" ] && [ -n "$R_LIST" ]; then
    run_suite regress "$T_REGRESS" ISOLATION= TAP_TESTS= REGRESS="${R_LIST% }"
    count_pg_regress regress
    if [ "$SUITE_RC" -ne 0 ]; then
        show_file "$BUILD/regression.diffs" 300
    fi
else
    echo "==> [regress] FAIL: no pg_regress test to run (REGRESS: '${V_REGRESS}')"
    NOTES+=("FAIL: [regress] no test to run")
    FAILED=$((FAILED + 1))
fi

if [ -n "$ONLY" ] && [ -z "$V_ISOLATION" ]; then
    :
elif [ -n "$V_ISOLATION" ] && [ -n "$I_LIST" ]; then
    run_suite isolation "$T_ISOLATION" REGRESS= TAP_TESTS= ISOLATION="${I_LIST% }"
    count_pg_regress isolation
    if [ "$SUITE_RC" -ne 0 ]; then
        show_file "$BUILD/output_iso/regression.diffs" 300
    fi
else
    echo "==> [isolation] FAIL: no isolation test to run (ISOLATION: '${V_ISOLATION}')"
    NOTES+=("FAIL: [isolation] no test to run")
    FAILED=$((FAILED + 1))
fi

if [ -n "$ONLY" ] && [ -z "$V_TAP" ]; then
    :
elif [ -n "$V_TAP" ] && ! compgen -G "$BUILD/t/*.pl" >/dev/null; then
    echo "==> [tap] FAIL: TAP_TESTS is set in the Makefile but there is no t/*.pl"
    NOTES+=("FAIL: [tap] TAP_TESTS is set but t/ has no *.pl file")
    FAILED=$((FAILED + 1))
elif [ -n "$V_TAP" ]; then
    if [ -n "$ONLY" ]; then
        run_suite tap "$T_TAP" REGRESS= ISOLATION= PROVE_TESTS="$(printf 't/%s.pl ' $ONLY_TAP)"
    else
        run_suite tap "$T_TAP" REGRESS= ISOLATION=
    fi
    count_tap
    if [ "$SUITE_RC" -ne 0 ]; then
        for f in "$BUILD"/tmp_check/log/regress_log_*; do show_file "$f" 80; done
        for f in "$BUILD"/tmp_check/log/*.log; do show_file "$f" 25; done
    fi
else
    echo "==> [tap] FAIL: no TAP tests (TAP_TESTS is empty)"
    NOTES+=("FAIL: [tap] no test to run")
    FAILED=$((FAILED + 1))
fi

if [ "$FAILED" -gt 0 ]; then
    show_file "$DLOCK_SERVER_LOG" 40
fi
if grep -qE 'terminated by signal|was terminated by exception' "$DLOCK_SERVER_LOG" 2>/dev/null; then
    NOTES+=("NOTE: a backend of the test cluster crashed: $(grep -m1 -E 'terminated by signal|was terminated by exception' "$DLOCK_SERVER_LOG")")
fi

dlock_cluster_stop "$WORK/cluster"

# ---- the client libraries (issue 27) --------------------------------------
# scripts/test-clients.sh tests clients/python and clients/node against a
# cluster of its own (its tests stop and restart the server), with the dlock
# just installed; its `N passed, N failed` is added to the totals.  Left out
# when DLOCK_ONLY names no "clients" entry.
# In a root of scripts/test-matrix.sh (its apt setting marks it) only the
# Python client runs: npm there has neither the host's CA bundle nor its
# proxy settings to reach the registry.
if [ -z "$ONLY" ] || [[ " $DLOCK_ONLY " == *" clients"* ]]; then
    CLIENTS_ONLY=
    if [ -f /etc/apt/apt.conf.d/99dlock-matrix ]; then
        CLIENTS_ONLY=python
        NOTES+=("NOTE: [clients] in a root of scripts/test-matrix.sh: the Python client only (no npm registry there)")
    fi
    echo
    echo "==> [clients] scripts/test-clients.sh (the Python and Node clients)"
    DLOCK_SRC="$SRC" DLOCK_CLIENTS_NO_BUILD=1 DLOCK_CLIENTS_ONLY="$CLIENTS_ONLY" \
        bash "$REPO/scripts/test-clients.sh" </dev/null 2>&1 | tee "$WORK/logs/clients.log"
    CLIENTS_RC=${PIPESTATUS[0]}
    CLIENTS_LINE=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$WORK/logs/clients.log" | tail -n 1)
    CLIENTS_P=$(sed -nE 's/^([0-9]+) passed.*/\1/p' <<<"$CLIENTS_LINE")
    CLIENTS_F=$(sed -nE 's/^[0-9]+ passed, ([0-9]+) failed$/\1/p' <<<"$CLIENTS_LINE")
    CLIENTS_P=${CLIENTS_P:-0}
    CLIENTS_F=${CLIENTS_F:-0}
    if [ "$CLIENTS_RC" -ne 0 ] && [ "$CLIENTS_F" -eq 0 ]; then CLIENTS_F=1; fi
    if [ "$CLIENTS_F" -gt 0 ]; then
        NOTES+=("FAIL: [clients] $CLIENTS_F failure(s) (exit $CLIENTS_RC); see scripts/test-clients.sh's output above")
    fi
    echo "==> [clients] $CLIENTS_P passed, $CLIENTS_F failed"
    PASSED=$((PASSED + CLIENTS_P))
    FAILED=$((FAILED + CLIENTS_F))
fi
# ---- end of the client libraries' block -----------------------------------
if [ "$FAILED" -eq 0 ] && [ "$PASSED" -gt 0 ] && [ "${DLOCK_KEEP:-0}" != 1 ]; then
    rm -rf "$WORK" "$BUILD"
    WORK=
fi
summary_and_exit
