#!/usr/bin/env bash
# scripts/mutate.sh - mutation testing: does the suite notice when a promise
# of the README is broken?
#
#   sudo bash scripts/mutate.sh              # every mutant, about 15 minutes
#   sudo bash scripts/mutate.sh no-fifo      # only the ones named
#
# Each mutant below is one small deliberate breakage of one promise, made in
# a copy of the source (the repository is not touched), and the tests that
# guard that promise.  For each mutant the script applies the change (it
# fails if the text to change is no longer there: update the list with the
# code), runs scripts/test.sh on the copy with DLOCK_ONLY set to those tests,
# and expects it to fail.  A mutant the tests let through "survived": the
# promise is not tested, and the exit status is non-zero.  A mutant that
# does not build counts as a failure of this script, not as killed.
#
# Run it before every release; add a mutant with every promise the README
# makes.  Environment: MUTANTS_KEEP=1 keeps the copies and logs.
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
no-handover@src/lease.c@if (may_hand_over() && dlock_wait_offer(kl->hash, &o))@if (false && dlock_wait_offer(kl->hash, &o))@isolation:wait_handover
handover-to-xact-block@src/acquire.c@return !IsTransactionBlock() && GetCurrentTransactionNestLevel() == 1;@return true;@isolation:wait_handover
handover-ignores-withdrawal@src/lease.c@if (!dlock_wait_offer_settle(&p->offer, stands) && stands)@if (!dlock_wait_offer_settle(&p->offer, stands) && false)@isolation:wait_handover
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
EOF
)

WANT=" $* "
WORK=$(mktemp -d /tmp/dlock-mutate.XXXXXX)
chmod 755 "$WORK"
killed=0
survived=()
broken=()
total=0

while IFS='@' read -r name file old new tests; do
    [ -n "$name" ] || continue
    if [ $# -gt 0 ] && [[ "$WANT" != *" $name "* ]]; then
        continue
    fi
    total=$((total + 1))
    copy=$WORK/$name
    mkdir -p "$copy"
    (cd "$REPO" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$copy"
    old=$(printf '%b' "$old")
    new=$(printf '%b' "$new")
    if ! OLD=$old NEW=$new perl -0pi -e \
            'BEGIN { $c = 0 } $c += s/\Q$ENV{OLD}\E/$ENV{NEW}/; END { exit($c == 1 ? 0 : 3) }' \
            "$copy/$file"; then
        echo "==> $name: the text to change is not (once) in $file: update scripts/mutate.sh"
        broken+=("$name (text not found)")
        continue
    fi
    echo "==> $name: $file changed; running $tests"
    DLOCK_SRC=$copy DLOCK_ONLY=$tests DLOCK_IGNORE_WARNINGS=1 DLOCK_MAKE_FLAGS=with_llvm=no \
        bash "$REPO/scripts/test.sh" >"$WORK/$name.log" 2>&1
    rc=$?
    if grep -q 'FAIL: build or make install' "$WORK/$name.log"; then
        echo "    did not build (log $WORK/$name.log)"
        broken+=("$name (does not build)")
    elif [ $rc -ne 0 ]; then
        echo "    killed: $(grep -E '^  FAIL' "$WORK/$name.log" | head -n 2 | sed 's/^ *//' | tr '\n' ' ')"
        killed=$((killed + 1))
    else
        echo "    SURVIVED: $tests passed with it"
        survived+=("$name")
    fi
done <<<"$MUTANTS"

# put the real build back for whoever uses this machine's PostgreSQL next
if [ "${MUTANTS_REINSTALL:-1}" = 1 ]; then
    (. "$REPO/scripts/lib.sh" && dlock_build_install "$REPO" >/dev/null 2>&1 &&
        rm -rf "$DLOCK_BUILD_DIR") || echo "==> could not reinstall the unmutated dlock" >&2
fi

echo
echo "==================== dlock mutation testing ===================="
echo "  $total mutant(s): $killed killed, ${#survived[@]} survived, ${#broken[@]} broken"
for m in ${survived[@]+"${survived[@]}"}; do echo "  SURVIVED: $m"; done
for m in ${broken[@]+"${broken[@]}"}; do echo "  BROKEN: $m"; done
[ "${MUTANTS_KEEP:-0}" = 1 ] && echo "  copies and logs kept in $WORK" || rm -rf "$WORK"
echo "$killed passed, $(( ${#survived[@]} + ${#broken[@]} )) failed"
[ ${#survived[@]} -eq 0 ] && [ ${#broken[@]} -eq 0 ] && [ "$total" -gt 0 ]
