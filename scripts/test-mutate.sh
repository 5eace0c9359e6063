#!/usr/bin/env bash
# scripts/test-mutate.sh - scripts/mutate.sh's own promises, checked on a copy
# of this checkout (a git repository of its own) cut down to one regress
# test and one isolation spec, with a TAP file, a stand-in for the client
# suites, a C function of its own (dlock_mutate_probe: committed in
# src/base/base_args.c, then moved to src/wait/wait_queue.c) and a list of
# mutants of its own (MUTANTS_LIST):
#
#   probe-tap      breaks t/989_mutate_probe.pl (keyed by the file): killed,
#                  and with --all-tests credited to tap:989_mutate_probe
#                  (not BROKEN)
#   probe-clients  breaks a file the stand-in client suite reads: `clients`
#                  is a test name mutate.sh accepts, --all-tests runs it too,
#                  and the kill is credited to clients (not SURVIVED)
#   probe-broken   keyed by the function, changes the file it moved to; does
#                  not build: BROKEN, and its build directory is gone
#   probe-twice    its text is twice in the function: BROKEN, and said so
#   probe-unknown  names a function the tree lacks: BROKEN, and said so
#
# First `scripts/mutate.sh --check` (no root, no build: the two broken ones
# named; with the function defined in two files, probe-broken too; the
# repository's own list passes), and a run with MUTANTS_BUDGET=0 (the
# mutant of the function whose file changed comes first).  Then one run
# of `scripts/mutate.sh --all-tests` (no control run), then: nothing of
# its runs is left in /tmp (the copies carry this run's tag), and no
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
# the C function the mutants below name (its "n += 1;" is there twice)
probe_c=$(cat <<EOF

/* scripts/test-mutate.sh's probe ($TAG) */
extern int dlock_mutate_probe(void);

int
dlock_mutate_probe(void)
{
	int			n = 0;

	n += 1;
	n += 1;
	return n;
}
EOF
)
printf '%s\n' "$probe_c" >>"$S/src/base/base_args.c"
cat >"$W/mutants" <<'EOF'
# scripts/test-mutate.sh's mutants
probe-tap@t/989_mutate_probe.pl@ok(1, 'the probe holds');@ok(0, 'the probe holds');@tap:989_mutate_probe
probe-clients@clients/probe.txt@dlock-probe: fine@dlock-probe: broken@clients
probe-broken@dlock_mutate_probe@\treturn n;@#error "scripts/test-mutate.sh: a mutant that does not build"\n\treturn n;@regress:lease_errors
probe-twice@dlock_mutate_probe@\tn += 1;@\tn -= 1;@regress:lease_errors
probe-unknown@dlock_mutate_no_such_function@\treturn n;@\treturn 0;@regress:lease_errors
EOF
git_s() { git -C "$S" -c user.name=test-mutate -c user.email=test-mutate@localhost "$@"; }
# two commits: the copy, with the probe in src/base/base_args.c; the probe
# moved to src/wait/wait_queue.c
git_s init -q && git_s add -A && git_s commit -q -m copy &&
    head -n -"$(wc -l <<<"$probe_c")" "$S/src/base/base_args.c" >"$W/args.c" &&
    cat "$W/args.c" >"$S/src/base/base_args.c" &&
    printf '%s\n' "$probe_c" >>"$S/src/wait/wait_queue.c" &&
    git_s commit -q -a -m 'the probe moved' ||
    { notok "the copy is a git repository"; echo "$PASS passed, $FAIL failed"; exit 1; }
check "the probe moved: it is in src/wait/wait_queue.c only" \
    "! grep -q dlock_mutate_probe '$S/src/base/base_args.c' && grep -q '^dlock_mutate_probe(void)' '$S/src/wait/wait_queue.c'"

# --- --check: each mutant's text in one place (no root needed, no build) ---
C=$W/check.log
MUTANTS_LIST=$W/mutants bash "$S/scripts/mutate.sh" --check >"$C" 2>&1
rc=$?
sed 's/^/    /' "$C"
check "--check fails: two mutants are broken (exit $rc)" '[ "$rc" -ne 0 ]'
check "--check: a text twice in its function is broken, and said so" \
    "grep -qx 'BROKEN: probe-twice: the text to change is in dlock_mutate_probe (src/wait/wait_queue.c) 2 times, not once' '$C'"
check "--check: a function the tree lacks is broken, and said so" \
    "grep -q '^BROKEN: probe-unknown: no function dlock_mutate_no_such_function in ' '$C'"
check "--check: the other three are fine (the function found in the file it moved to)" \
    "[ \"\$(grep -c '^BROKEN' '$C')\" = 2 ]"
printf '%s\n' "$probe_c" >>"$S/src/claim/claim_key.c"
MUTANTS_LIST=$W/mutants bash "$S/scripts/mutate.sh" --check probe-broken >"$C" 2>&1
rc=$?
sed 's/^/    /' "$C"
git_s checkout -q -- src/claim/claim_key.c
check "--check: a function defined twice is broken, and said so (exit $rc)" \
    "[ '$rc' -ne 0 ] && grep -q '^BROKEN: probe-broken: dlock_mutate_probe is defined 2 times (src/claim/claim_key.c, src/wait/wait_queue.c)' '$C'"
check "--check: the repository's own list passes" "bash '$REPO/scripts/mutate.sh' --check >'$C' 2>&1"

# --- MUTANTS_BUDGET: the mutants of changed files first (budget 0: none runs) ---
echo "/* changed */" >>"$S/src/wait/wait_queue.c"
MUTANTS_LIST=$W/mutants MUTANTS_BUDGET=0 MUTANTS_SINCE=HEAD MUTANTS_CONTROL=0 MUTANTS_REINSTALL=0 MUTANTS_JOBS=1 \
    bash "$S/scripts/mutate.sh" probe-tap probe-broken >"$W/budget.log" 2>&1
rc=$?
git_s checkout -q -- src/wait/wait_queue.c
grep -E '^==> budget|NOT RUN|^[0-9]+ passed' "$W/budget.log" | sed 's/^/    /'
check "MUTANTS_BUDGET: the mutant of a function in a changed file comes first (exit $rc)" \
    "[ '$rc' -eq 0 ] && grep -q '^==> budget 0 s: 1 mutant(s) in files changed since HEAD first, then 1 more' '$W/budget.log' &&
     grep -q 'NOT RUN (MUTANTS_BUDGET spent): 2 mutant(s): probe-broken probe-tap\$' '$W/budget.log'"

# --- one run of mutate.sh --all-tests over the five ---
echo "==> scripts/mutate.sh --all-tests with probe-tap, probe-clients, probe-broken, probe-twice, probe-unknown (log $W/mutate.log)"
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
check "a mutant keyed by its function changes the file the function moved to" \
    "grep -qE '^==> probe-broken: src/wait/wait_queue.c changed; ' '$L'"
check "the summary: 5 mutants, 2 killed, 0 survived, 3 broken" \
    "grep -q '5 mutant(s): 2 killed, 0 survived, 3 broken' '$L' && grep -q 'BROKEN: probe-broken (does not build)' '$L'"
check "the summary names the mutant whose text is twice in its function" \
    "grep -qF 'BROKEN: probe-twice (the text to change is in dlock_mutate_probe (src/wait/wait_queue.c) 2 times, not once)' '$L'"
check "the summary names the mutant of a function the tree lacks" \
    "grep -q 'BROKEN: probe-unknown (no function dlock_mutate_no_such_function in ' '$L'"
check "the last line counts 2 killed and 3 failures" "[ \"\$(tail -n 1 '$L')\" = '2 passed, 3 failed' ]"
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
