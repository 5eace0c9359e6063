#!/usr/bin/env bash
# scripts/test-mutate.sh - scripts/mutate.sh's own promises, checked on a copy
# of this checkout (a git repository of its own) cut down to one regress
# test and one isolation spec, with a TAP file, a stand-in for the client
# suites and a list of mutants of its own (MUTANTS_LIST):
#
#   probe-tap      breaks t/989_mutate_probe.pl: killed, and with --all-tests
#                  credited to tap:989_mutate_probe (not BROKEN)
#   probe-clients  breaks a file the stand-in client suite reads: `clients`
#                  is a test name mutate.sh accepts, --all-tests runs it too,
#                  and the kill is credited to clients (not SURVIVED)
#   probe-broken   does not build: BROKEN, and its build directory is gone
#
# One run of `scripts/mutate.sh --all-tests` (no control run), then: nothing
# of its runs is left in /tmp (the copies carry this run's tag), and no
# process either.  Run by scripts/test-harness.sh (CI); alone:
#
#   sudo bash scripts/test-mutate.sh        (a build and three short runs)
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

TAG=mutate-test-$$-$RANDOM$RANDOM
export DLOCK_HARNESS_TAG=$TAG
W=$(mktemp -d /tmp/dlock-mutate-test.XXXXXX)
chmod 755 "$W"
# the /tmp directories of this test's runs: their copy of the probe names the tag
ours() {
    local d
    for d in /tmp/dlock-build.* /tmp/dlock-test.* /tmp/dlock-mutate.*; do
        [ -d "$d" ] || continue
        if grep -qs -e "$TAG" "$d/t/989_mutate_probe.pl" "$d"/*/t/989_mutate_probe.pl \
                "$d/logs/tap/989_mutate_probe.log"; then
            echo "$d"
        fi
    done
}
on_exit() {
    local rc=$? left d
    trap - EXIT INT TERM
    left=$(dlock_tagged_pids "DLOCK_HARNESS_TAG=$TAG")
    # shellcheck disable=SC2086
    [ -z "$left" ] || dlock_stop_pids $left 2>/dev/null
    for d in $(ours); do rm -rf "$d"; done
    rm -rf "$W"
    exit $rc
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the copy: a repository of its own, cut down ---
S=$W/src
mkdir -p "$S"
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | tar -C "$S" -xf -
perl -0pi -e 's/^REGRESS = \$\(REGRESS_FIRST\).*?\$\(REGRESS_LAST\)\n/REGRESS = lease_errors\n/ms;
              s/^ISOLATION = .*\n/ISOLATION = lease_wrong_holder\n/m' "$S/Makefile"
cat >"$S/t/989_mutate_probe.pl" <<EOF
# scripts/test-mutate.sh's probe ($TAG)
use strict;
use warnings;
use Test::More;
print "# $TAG\n";
ok(1, 'the probe holds');
done_testing();
EOF
echo "dlock-probe: fine" >"$S/clients/probe.txt"
# the stand-in for the client suites: fails when probe.txt is broken
cat >"$S/scripts/test-clients.sh" <<'EOF'
#!/usr/bin/env bash
if grep -q 'dlock-probe: fine' "${DLOCK_SRC:?}/clients/probe.txt"; then
    echo "ok 1 - the clients' probe holds"
    echo "1 passed, 0 failed"
    exit 0
fi
echo "not ok 1 - the clients' probe holds"
echo "0 passed, 1 failed"
exit 1
EOF
cat >"$W/mutants" <<'EOF'
# scripts/test-mutate.sh's mutants
probe-tap@t/989_mutate_probe.pl@ok(1, 'the probe holds');@ok(0, 'the probe holds');@tap:989_mutate_probe
probe-clients@clients/probe.txt@dlock-probe: fine@dlock-probe: broken@clients
probe-broken@src/lease/lease_decide.c@#include "postgres.h"\n@#include "postgres.h"\n#error "scripts/test-mutate.sh: a mutant that does not build"\n@regress:lease_errors
EOF
(cd "$S" && git init -q && git add -A &&
    git -c user.name=test-mutate -c user.email=test-mutate@localhost commit -q -m copy) ||
    { notok "the copy is a git repository"; echo "$PASS passed, $FAIL failed"; exit 1; }

# --- one run of mutate.sh --all-tests over the three ---
echo "==> scripts/mutate.sh --all-tests with probe-tap, probe-clients, probe-broken (log $W/mutate.log)"
MUTANTS_LIST=$W/mutants MUTANTS_CONTROL=0 MUTANTS_REINSTALL=0 MUTANTS_JOBS=1 \
    bash "$S/scripts/mutate.sh" --all-tests >"$W/mutate.log" 2>&1
rc=$?
L=$W/mutate.log
grep -E '^==> (probe|--all)|^    (killed|did not|SURVIVED|the run)|^  (SURVIVED|BROKEN|[0-9]+ mutant)|SINGLE|^[0-9]+ passed' "$L" | sed 's/^/    /'
check "the run fails: a mutant is broken (exit $rc)" '[ "$rc" -ne 0 ]'
check "clients is accepted as a test name" "! grep -q 'do not exist' '$L'"
check "--all-tests runs the TAP file a mutant names" \
    "grep -qE '^==> probe-tap: .*running every regress and isolation test tap:989_mutate_probe\$' '$L'"
check "--all-tests runs the client suites a mutant names" \
    "grep -qE '^==> probe-clients: .*running every regress and isolation test clients\$' '$L'"
check "a kill by a TAP file is credited to it" \
    "grep -A3 '^==> probe-tap:' '$L' | grep -q 'killed by 1: tap:989_mutate_probe\$'"
check "a kill by the client suites is credited to them" \
    "grep -A3 '^==> probe-clients:' '$L' | grep -q 'killed by 1: clients\$'"
check "the summary: 3 mutants, 2 killed, 0 survived, 1 broken" \
    "grep -q '3 mutant(s): 2 killed, 0 survived, 1 broken' '$L' && grep -q 'BROKEN: probe-broken (does not build)' '$L'"
check "the last line counts 2 killed and 1 failure" "[ \"\$(tail -n 1 '$L')\" = '2 passed, 1 failed' ]"
sleep 1
left=$(ours | tr '\n' ' ')
check "nothing of the runs is left in /tmp (${left:-none})" '[ -z "$left" ]'
left=$(dlock_tagged_pids "DLOCK_HARNESS_TAG=$TAG")
check "no process of the runs is left (${left:-none})" '[ -z "$left" ]'
if [ "$FAIL" -gt 0 ]; then
    echo "----- $L (last 60 lines) -----"
    tail -n 60 "$L"
fi

echo "==> test-mutate.sh: $((SECONDS - START)) s"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ] && [ "$PASS" -gt 0 ]
