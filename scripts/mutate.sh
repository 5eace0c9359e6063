#!/usr/bin/env bash
# scripts/mutate.sh - mutation testing: does the suite notice when a promise
# of the README is broken?
#
#   sudo bash scripts/mutate.sh              # every mutant, about 15 minutes (2 cores)
#   sudo bash scripts/mutate.sh no-fifo      # only the ones named
#
# Each mutant below is one small deliberate breakage of one promise, made in
# a copy of the source (the repository is not touched), and the tests that
# guard that promise.  For each mutant the script applies the change (it
# fails if the text to change is not there exactly once: update the list
# with the code), runs scripts/test.sh on the copy with DLOCK_ONLY set to
# those tests, and expects it to fail.  A mutant the tests let through
# "survived": the promise is not tested, and the exit status is non-zero.
# A mutant that does not build counts as a failure of this script, not as
# killed.  A mutant may take several lines (the same name on consecutive
# lines): all their changes are made in one copy, and it runs the tests of
# all of them.
#
# Control run: before any mutant, the unmutated source runs the union of
# the selected mutants' tests.  If that fails (a flaky or renamed test, a
# time limit too short), a failure of a mutant would prove nothing: the
# script says "control run failed" and stops, with a non-zero status.
#
# PostgreSQL: with DLOCK_PG_BIN (another installation's bin directory) the
# builds are installed there, and the unmutated dlock is reinstalled there
# at the end.  Without it, the script copies this machine's PostgreSQL
# (the major version scripts/lib.sh picks) into its work directory and
# installs every build into that copy: the machine's own installation is
# never touched.
#
# Run it before every release; add a mutant with every promise the README
# makes.  Environment: MUTANTS_KEEP=1 keeps the copies and logs;
# MUTANTS_REINSTALL=0 skips the reinstall into DLOCK_PG_BIN.
# The last line is `N passed, N failed` (killed; survived, broken, or a
# failed control run), which .ci/run reads.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/mutate.sh must run as root (it runs scripts/test.sh)." >&2
    exit 1
fi

# name @ file @ text to replace @ replacement @ tests (DLOCK_ONLY)
# (in the texts, \t is a tab and \n a newline)
MUTANTS=$(cat <<'EOF'
no-wake-at-expiry@src/acquire.c@if (!pending && r == DLOCK_ACQ_BUSY && expires_at > now &&@if (false && r == DLOCK_ACQ_BUSY && expires_at > now &&@isolation:wait_wake_expiry tap:015_wake
no-handover@src/handover.c@if (dlock_xact_alone() && dlock_wait_offer(kl->hash, &o))@if (false && dlock_wait_offer(kl->hash, &o))@isolation:wait_handover
handover-to-xact-block@src/acquire.c@dlock_wait_enqueue(hash, key, holder, ttl_us, dlock_xact_alone());@dlock_wait_enqueue(hash, key, holder, ttl_us, true);@isolation:wait_handover
handover-ignores-withdrawal@src/handover.c@if (!dlock_wait_offer_settle(&p->offer, stands) && stands)@if (!dlock_wait_offer_settle(&p->offer, stands) && false)@isolation:wait_handover
handover-not-flushed@src/wait.c@\tXLogFlush(g->lsn);@\t(void) g;@tap:016_release_flush
no-wake-on-release@src/xact.c@woke |= dlock_wait_wake_key(*(uint64 *) lfirst(lc));@(void) lc;@isolation:wait_wake_release tap:015_wake
no-fence@src/lease_sql.c@PG_RETURN_BOOL(dlock_lease_validate(key, holder, token));@(void) dlock_lease_validate(key, holder, token);\n\tPG_RETURN_BOOL(true);@regress:lease_basic isolation:lease_validate_fence
release-always-async@src/xact.c@\tif (!async_candidate)\n\t\tasync_pending = false;@\tasync_candidate = true;@tap:016_release_flush
release-never-async@src/xact.c@\tif (!async_candidate)\n\t\tasync_pending = false;@\tasync_candidate = false;\n\tasync_pending = false;@tap:016_release_flush
tokens-plain-sequence@src/token.c@\tv = nextval_internal(seq, false);\n\tif (v < clock_floor() - DLOCK_TOKEN_SLACK_US)@\tv = nextval_internal(seq, false);\n\tif (false)@tap:035_tokens
no-fifo@src/wait.c@(head < 0 || s->ticket < waitq->slots[head].ticket)@(head < 0 || s->ticket > waitq->slots[head].ticket)@isolation:wait_fifo
no-role-check@src/lease.c@return l->held && l->owner == role &&@return l->held &&@regress:lease_roles
views-show-all@src/views_sql.c@\treturn superuser_arg(role) ||@\treturn true ||@regress:views_roles
no-claim-recheck@src/claim.c@\t\t\tif (!found[k])\n\t\t\t\tcc->fresh = true;@\t\t\tif (true)\n\t\t\t\tcc->fresh = true;@isolation:claim_race_committed tap:070_claim_exactly_once
no-claim-keylock@src/claim.c@\t\t\t\tcc->locked = dlock_key_trylock(&kl, ExclusiveLock);@\t\t\t\tcc->locked = true;@isolation:claim_complete_fence isolation:claim_complete_vs_takeover
no-row-check@src/claim.c@\t\theld = dlock_claim_probe_held(a->probe, key, &settled_until);@\t\theld = false;\n\t\tsettled_until = 0;@regress:claim_ranges isolation:claim_inflight
hints-outlive-giveback@src/claim_manage.c@\tdlock_claim_returns_bump();\n\tdlock_spi_begin(&spi);\n\t/* only its own@\tdlock_spi_begin(&spi);\n\t/* only its own@regress:claim_ranges
hints-outlive-rollback@src/claim_plan.c@\t\tif (event == XACT_EVENT_ABORT)\n\t\t\tforget_hint(up);@\t\t(void) 0;@regress:claim_ranges
no-claim-fence@src/claim_sql.c@PG_RETURN_BOOL(dlock_claim_check(t, key, holder));@(void) dlock_claim_check(t, key, holder);\n\tPG_RETURN_BOOL(true);@regress:claim_basic isolation:claim_complete_fence
no-claim-access-check@src/claim_target.c@\tif (pg_class_aclcheck(t->relid, role, ACL_UPDATE) != ACLCHECK_OK &&@\tif (false &&@regress:claim_roles regress:claim_review regress:claim_errors
hints-outlive-savepoint@src/claim_plan.c@\tif (event != SUBXACT_EVENT_ABORT_SUB)\n\t\treturn;@\treturn;@regress:claim_ranges
views-locks-own-snapshot@src/views_sql.c@emit_visible(fcinfo, spi.caller, dlock_lease_store_read_live(), 3, 0);@emit_visible(fcinfo, spi.caller, (SPI_execute("SELECT key, holder, owner::regrole, token, acquired_at, expires_at FROM dlock.lease WHERE holder IS NOT NULL AND expires_at > clock_timestamp()", true, 0), SPI_processed), 3, 0);@isolation:views_latest
views-claims-own-snapshot@src/views_sql.c@emit_visible(fcinfo, spi.caller, dlock_claim_store_read_live(), 4, 1);@emit_visible(fcinfo, spi.caller, (SPI_execute("SELECT relid::regclass, key, holder, owner::regrole, token, claimed_at, expires_at, attempts FROM dlock.claim WHERE holder IS NOT NULL AND expires_at > clock_timestamp()", true, 0), SPI_processed), 4, 1);@isolation:views_latest
no-waiters-shown@src/views_sql.c@\tn = dlock_wait_list(&w);@\tn = 0 * dlock_wait_list(&w);@isolation:views_latest
cleanup-deletes-live-leases@src/sweep.c@TimestampTz before = GetCurrentTimestamp() - idle_us;@TimestampTz before = GetCurrentTimestamp() + USECS_PER_DAY;@regress:promises regress:idle_sweep
cleanup-deletes-live-claims@src/claim_manage.c@TimestampTz before = GetCurrentTimestamp() - idle_us;@TimestampTz before = GetCurrentTimestamp() + USECS_PER_DAY;@regress:promises regress:idle_sweep
cleanup-deletes-poisoned@src/claim_store_spi.c@"      AND c.poisoned_at IS NULL"@"      AND true"@regress:promises regress:idle_sweep
cleanup-deletes-poisoned@src/claim_store_spi.c@"         AND poisoned_at IS NULL)"@"         AND true)"@regress:promises regress:idle_sweep
no-lease-sweep@src/lease.c@\t\tdlock_sweep_maybe();@\t\t(void) 0;@regress:idle_sweep
no-claim-sweep@src/claim.c@\t\tdlock_claim_maybe_cleanup();@\t\t(void) 0;@regress:idle_sweep
no-claim-schema-check@src/claim_target.c@\tif (dlock_namespace_aclcheck(nsp, role, ACL_USAGE) != ACLCHECK_OK)@\tif (false)@regress:claim_roles
fence-wait-polls@src/keylock.c@\t(void) LockAcquire(&tag, mode, false, false);@\twhile (LockAcquire(&tag, mode, false, true) == LOCKACQUIRE_NOT_AVAIL)\n\t{\n\t\tCHECK_FOR_INTERRUPTS();\n\t\tpg_usleep(1000L);\n\t}@isolation:fence_waits
claims-first-chunk-only@src/claim_manage.c@for (int start = 0; start < n; start += KEY_CHUNK)@for (int start = 0; start < Min(n, KEY_CHUNK); start += KEY_CHUNK)@regress:promises
no-count-extended@src/acquire.c@\t\tdlock_count(DLOCK_STAT_EXTENDED, 1);@\t\t(void) 0;@regress:promises
no-count-renewals@src/lease_sql.c@\t\tdlock_count(DLOCK_STAT_RENEWALS, 1);@\t\t(void) 0;@regress:promises
no-count-validation-failures@src/lease.c@\t\tdlock_count(DLOCK_STAT_VALIDATE_FAIL, 1);@\t\t(void) 0;@regress:promises
claim-keys-as-written@src/claim_target.c@\tif (t->pk_spellings)@\tif (false)@regress:claim_keys
claim-fence-unlocked@src/claim_manage.c@\tdlock_key_lock(&kl, ShareLock);\n\tok = dlock_claim_store_held(@\tok = dlock_claim_store_held(@tap:075_two_phase
abandon-nothing-on-abort@src/abandon.c@\t\t\t\tdlock_abandon(r->key, r->holder, r->owner, r->token,@\t\t\t\tif (false)\n\t\t\t\t\tdlock_abandon(r->key, r->holder, r->owner, r->token,@isolation:wait_abandoned
abandoned-grants-read-held@src/lease_store.c@if (l->held && dlock_abandoned(l->token))@if (false && dlock_abandoned(l->token))@tap:095_abandoned
abandoned-rows-kept@src/worker.c@while (dlock_abandoned_take(&a))@while (false && dlock_abandoned_take(&a))@isolation:wait_abandoned
releaser-keeps-orphan-grant@src/handover.c@\t\tcommitted && p->committing)@\t\tfalse && p->committing)@tap:095_abandoned
wait-ignores-closed-client@src/wait.c@(sock != PGINVALID_SOCKET ? WL_SOCKET_CLOSED : 0)@0@tap:095_abandoned
commit-for-gone-client@src/xact.c@\t\t\t\tif (dlock_client_gone())@\t\t\t\tif (false)@tap:095_abandoned
release-all-keeps-key-locks@src/lease.c@\t\t\t\tdlock_key_unlock(&kl, ExclusiveLock);\n\t\t\t\tfreed++;@\t\t\t\tfreed++;@tap:096_bulk_release
decide-on-row-being-freed@src/lease.c@\t\tif (!TransactionIdIsValid(l->changing))\n\t\t\treturn;@\t\tif (true)\n\t\t\treturn;@isolation:release_all_inflight
take-over-row-being-freed@src/lease.c@\tif (TransactionIdIsValid(l.changing))\n\t{\n\t\t/* a bulk release@\tif (false)\n\t{\n\t\t/* a bulk release@isolation:release_all_inflight
sweep-at-once@src/sweep.c@\tsweep_pending = true;\n}@\tsweep_now();\n}@isolation:sweep_no_block
cleanup-in-callers-transaction@src/worker.c@\tdsm_segment *seg = dsm_create(sizeof(CleanupRequest), 0);@\treturn dlock_lease_sweep(idle_us, limit, true) + dlock_claim_cleanup(idle_us, limit);\n\tdsm_segment *seg = dsm_create(sizeof(CleanupRequest), 0);@isolation:sweep_no_block
write-over-swept-row-fails@src/lease_store.c@\t\tif (r == TM_Deleted)\n\t\t\tinsert = true;@\t\tif (false)\n\t\t\tinsert = true;@isolation:sweep_no_block
EOF
)

WORK=$(mktemp -d /tmp/dlock-mutate.XXXXXX)
chmod 755 "$WORK"
# interrupted: remove the copies (and the private PostgreSQL)
trap 'rm -rf "$WORK"; exit 130' INT TERM
killed=0
survived=()
broken=()
total=0

finish() {      # finish PASSED FAILED: summary, clean up, last line, exit status
    echo
    echo "==================== dlock mutation testing ===================="
    echo "  $total mutant(s): $killed killed, ${#survived[@]} survived, ${#broken[@]} broken"
    for m in ${survived[@]+"${survived[@]}"}; do echo "  SURVIVED: $m"; done
    for m in ${broken[@]+"${broken[@]}"}; do echo "  BROKEN: $m"; done
    [ -n "${control_failed:-}" ] && echo "  FAIL: control run failed (log kept: $control_log); no mutant was run"
    rm -rf "$WORK/pg"
    if [ "${MUTANTS_KEEP:-0}" = 1 ]; then
        echo "  copies and logs kept in $WORK"
    elif [ -z "${control_failed:-}" ]; then
        rm -rf "$WORK"
    fi
    echo "$1 passed, $2 failed"
    [ "$2" -eq 0 ] && [ "$1" -gt 0 ]
    exit $?
}

# ---- the selected mutants: names in list order, each with its lines ----
names=()
declare -A lines_of=()
for want in "$@"; do
    if ! grep -q "^$want@" <<<"$MUTANTS"; then
        echo "==> $want: no such mutant in scripts/mutate.sh"
        broken+=("$want (no such mutant)")
    fi
done
n=0
while IFS= read -r line; do
    n=$((n + 1))
    name=${line%%@*}
    [ -n "$name" ] || continue
    if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
        continue
    fi
    if [ -z "${lines_of[$name]:-}" ]; then
        names+=("$name")
    fi
    lines_of[$name]+="$n "
done <<<"$MUTANTS"

line_no() { sed -n "${1}p" <<<"$MUTANTS"; }
# tests_of NAME: the union of the tests of NAME's lines
tests_of() {
    local i out=" " t
    for i in ${lines_of[$1]}; do
        for t in $(line_no "$i" | cut -d@ -f5); do
            [[ "$out" == *" $t "* ]] || out+="$t "
        done
    done
    out=${out# }
    echo "${out% }"
}

# ---- PostgreSQL to install into ----
if [ -z "${DLOCK_PG_BIN:-}" ]; then
    # shellcheck source=scripts/lib.sh
    major=$(. "$REPO/scripts/lib.sh" >/dev/null 2>&1 && dlock_ensure_packages >&2 && echo "$DLOCK_PG_MAJOR")
    orig=/usr/lib/postgresql/$major
    if [ -z "$major" ] || [ ! -x "$orig/bin/pg_config" ]; then
        echo "==> no PostgreSQL installation found to copy (major version '${major}')" >&2
        broken+=("(no PostgreSQL to copy)")
        finish 0 1
    fi
    libdir=$("$orig/bin/pg_config" --libdir)          # e.g. /usr/lib/x86_64-linux-gnu
    includedir=$("$orig/bin/pg_config" --includedir)  # e.g. /usr/include/postgresql
    P=$WORK/pg
    echo "==> copying PostgreSQL $major to $P (builds are installed there, not into $orig)"
    if ! { mkdir -p "$P/lib/postgresql" "$P/share/postgresql" "$P/include" &&
            cp -a "$orig" "$P/lib/postgresql/" &&
            cp -a "/usr/share/postgresql/$major" "$P/share/postgresql/" &&
            ln -sfn "$includedir" "$P/include/$(basename "$includedir")" &&
            ln -sfn "$libdir" "$P/lib/$(basename "$libdir")"; }; then
        broken+=("(could not copy PostgreSQL $major to $P)")
        finish 0 1
    fi
    export DLOCK_PG_BIN=$P/lib/postgresql/$major/bin
    reinstall=0
else
    export DLOCK_PG_BIN
    reinstall=${MUTANTS_REINSTALL:-1}
fi
echo "==> PostgreSQL: $DLOCK_PG_BIN"

# run_tests SRC TESTS LOG: scripts/test.sh on SRC with DLOCK_ONLY=TESTS
run_tests() {
    DLOCK_SRC=$1 DLOCK_ONLY=$2 DLOCK_IGNORE_WARNINGS=1 DLOCK_MAKE_FLAGS=with_llvm=no \
        bash "$REPO/scripts/test.sh" >"$3" 2>&1
}
# forget_kept LOG: scripts/test.sh keeps its build and test directories in
# /tmp when a test fails, as it does for every killed mutant (gigabytes
# over a run): remove those named in LOG, unless MUTANTS_KEEP=1
forget_kept() {
    local d
    [ "${MUTANTS_KEEP:-0}" = 1 ] && return 0
    for d in $(sed -nE 's/^  work directories kept for inspection: //p' "$1"); do
        case "$d" in
            /tmp/dlock-build.*|/tmp/dlock-test.*) rm -rf "$d" ;;
        esac
    done
}
copy_source() { # copy_source DIR: the tracked files, as they are in the work tree
    mkdir -p "$1"
    (cd "$REPO" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$1"
}

# ---- control run: the unmutated source with every selected test ----
all_tests=" "
for name in ${names[@]+"${names[@]}"}; do
    for t in $(tests_of "$name"); do
        [[ "$all_tests" == *" $t "* ]] || all_tests+="$t "
    done
done
all_tests=${all_tests# }
all_tests=${all_tests% }
if [ ${#names[@]} -gt 0 ]; then
    echo "==> control run (unmutated): $all_tests"
    copy_source "$WORK/control"
    control_log=$WORK/control.log
    if ! run_tests "$WORK/control" "$all_tests" "$control_log"; then
        control_failed=1
        echo "    control run failed: $(grep -E '^  FAIL' "$control_log" | head -n 3 | sed 's/^ *//' | tr '\n' ' ')"
        echo "    (log $control_log)"
        rm -rf "$WORK/control"
        finish 0 1
    fi
    echo "    passed: $(tail -n 1 "$control_log")"
    rm -rf "$WORK/control"
fi

# ---- the mutants ----
for name in ${names[@]+"${names[@]}"}; do
    total=$((total + 1))
    copy=$WORK/$name
    copy_source "$copy"
    tests=$(tests_of "$name")
    ok=1
    files=
    for i in ${lines_of[$name]}; do
        IFS='@' read -r _ file old new _ <<<"$(line_no "$i")"
        old=$(printf '%b' "$old")
        new=$(printf '%b' "$new")
        if ! OLD=$old NEW=$new perl -0pi -e \
                'BEGIN { $c = 0 } $c += s/\Q$ENV{OLD}\E/$ENV{NEW}/g; END { exit($c == 1 ? 0 : 3) }' \
                "$copy/$file"; then
            echo "==> $name: the text to change is not exactly once in $file: update scripts/mutate.sh"
            broken+=("$name (text not found once in $file)")
            ok=0
            break
        fi
        files+="$file "
    done
    [ $ok = 1 ] || continue
    echo "==> $name: ${files% } changed; running $tests"
    run_tests "$copy" "$tests" "$WORK/$name.log"
    rc=$?
    if grep -q 'FAIL: build or make install' "$WORK/$name.log"; then
        echo "    did not build (log $WORK/$name.log)"
        broken+=("$name (does not build)")
    elif [ $rc -ne 0 ]; then
        echo "    killed: $(grep -E '^  FAIL' "$WORK/$name.log" | head -n 2 | sed 's/^ *//' | tr '\n' ' ')"
        killed=$((killed + 1))
        forget_kept "$WORK/$name.log"
    else
        echo "    SURVIVED: $tests passed with it"
        survived+=("$name")
    fi
    [ "${MUTANTS_KEEP:-0}" = 1 ] || rm -rf "$copy"
done

# put the real build back into the installation given by DLOCK_PG_BIN (a
# private copy made above is simply removed)
if [ "$reinstall" = 1 ]; then
    (. "$REPO/scripts/lib.sh" && dlock_build_install "$REPO" >/dev/null 2>&1 &&
        rm -rf "$DLOCK_BUILD_DIR") || echo "==> could not reinstall the unmutated dlock" >&2
fi

[ "$total" -gt 0 ] || broken+=("(no mutant selected)")
finish "$killed" $(( ${#survived[@]} + ${#broken[@]} ))
