#!/usr/bin/env bash
# scripts/mutate.sh - mutation testing: does the suite notice when a promise
# of the README is broken?
#
#   sudo bash scripts/mutate.sh              # every mutant, about 25 minutes (2 cores)
#   sudo bash scripts/mutate.sh no-fifo      # only the ones named
#   sudo bash scripts/mutate.sh --all-tests [NAME...]   # which tests kill each one
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
# --all-tests (or MUTANTS_ALL_TESTS=1): each mutant runs the whole regress
# and isolation suite (every sql/*.sql and specs/*.spec, in the Makefile's
# order) plus the other tests its lines name (TAP files, `clients`), and the
# script reports which
# tests killed it: a mutant killed by a single test is flagged ("SINGLE":
# one edited expected file and the promise is unguarded).  A mutant killed
# by none survived, as above; a single killer is reported, not a failure.
# Cost: every mutant is a build and the whole regress and isolation suite,
# about 1.5 minutes on 2 cores (plus its TAP files): over an hour for the
# whole list, too slow for CI; run it on a few names, or before a release.
#
# Control run: before any mutant, the unmutated source runs the union of
# the selected mutants' tests.  If that fails (a flaky or renamed test, a
# time limit too short), a failure of a mutant would prove nothing: the
# script says "control run failed" and stops, with a non-zero status.
# MUTANTS_CONTROL=0 skips it: .ci/run sets it when scripts/test.sh has
# just passed the whole suite on the same source.  Every test a mutant
# names must exist in any case (checked first).
#
# PostgreSQL: with DLOCK_PG_BIN (another installation's bin directory) the
# builds are installed there, and the unmutated dlock is reinstalled there
# at the end.  Without it, the script copies this machine's PostgreSQL
# (the major version scripts/lib.sh picks) into its work directory and
# installs every build into that copy: the machine's own installation is
# never touched.
#
# Processes: each scripts/test.sh run is a session of its own.  Interrupted
# (SIGINT, SIGTERM, SIGHUP), the script stops that session's processes
# (SIGTERM, then SIGKILL after 30 s) and any PostgreSQL server left running
# in the run's build or test directories, then removes its copies.  After
# every run, a server left running there is stopped and reported.
#
# MUTANTS_BUDGET=SECONDS (CI: what is left of its 55 minutes) starts no
# mutant once that time is spent, and runs the mutants of the files changed
# since the last release first (below, "MUTANTS_BUDGET").
#
# MUTANTS_JOBS=N (CI: 2) runs the mutants in N lanes side by side, each
# with its own copy of PostgreSQL (not with DLOCK_PG_BIN).  Mutants share
# one build: each starts from the control run's and recompiles only the
# files it changed (DLOCK_BUILD_CACHE, scripts/lib.sh).
#
# Run it before every release; add a mutant with every promise the README
# makes.  Environment: MUTANTS_KEEP=1 keeps the copies and logs;
# MUTANTS_REINSTALL=0 skips the reinstall into DLOCK_PG_BIN; MUTANTS_LIST=FILE
# runs the mutants of FILE instead of the list below.  The directories
# of every scripts/test.sh run (build, test) are removed after it, whatever
# its outcome; its log stays in the work directory while the script runs.
# scripts/test-mutate.sh tests this script.
# The last line is `N passed, N failed` (killed; survived, broken, or a
# failed control run), which .ci/run reads.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/mutate.sh must run as root (it runs scripts/test.sh)." >&2
    exit 1
fi

ALL_TESTS=${MUTANTS_ALL_TESTS:-0}
args=()
for a in "$@"; do
    case "$a" in
        --all-tests) ALL_TESTS=1 ;;
        -*) echo "scripts/mutate.sh: unknown option $a" >&2; exit 64 ;;
        *) args+=("$a") ;;
    esac
done
set -- ${args[@]+"${args[@]}"}

# name @ file @ text to replace @ replacement @ tests (DLOCK_ONLY entries:
# regress:NAME isolation:NAME tap:NNN_name, and `clients` for the Python and
# Node clients; in the texts, \t is a tab and \n a newline; a line that
# starts with # is a comment: a topic's heading)
MUTANTS=$(cat <<'EOF'
no-wake-at-expiry@src/lease/lease_acquire.c@if (!pending && r == DLOCK_ACQ_BUSY && expires_at > now &&@if (false && r == DLOCK_ACQ_BUSY && expires_at > now &&@isolation:wait_wake_expiry tap:015_wake
no-handover@src/lease/lease_handover.c@if (l->slots == 1 && dlock_xact_alone() && dlock_wait_offer(k->lock.hash, &o))@if (false && dlock_wait_offer(k->lock.hash, &o))@isolation:wait_handover isolation:time_at_once
handover-to-xact-block@src/lease/lease_acquire.c@slots == 1 && dlock_xact_alone());@slots == 1);@isolation:wait_handover isolation:time_at_once isolation:multi_fifo
handover-ignores-withdrawal@src/lease/lease_handover.c@if (!p->committing && stands)@if (!p->committing && false)@isolation:wait_handover isolation:time_at_once
handover-not-flushed@src/wait/wait_sleep.c@\tXLogFlush(lsn);@\t(void) lsn;@tap:016_release_flush
no-wake-on-release@src/lease/lease_xact.c@woke |= dlock_wait_wake_key(*(uint64 *) lfirst(lc));@(void) lc;@isolation:wait_wake_release tap:015_wake
no-fence@src/lease/lease_sql.c@PG_RETURN_BOOL(dlock_lease_validate(key, holder, token));@(void) dlock_lease_validate(key, holder, token);\n\tPG_RETURN_BOOL(true);@regress:lease_basic isolation:lease_validate_fence
release-always-async@src/lease/lease_xact.c@\tif (!async_candidate)\n\t\tasync_pending = false;@\tasync_candidate = true;@tap:016_release_flush
release-never-async@src/lease/lease_xact.c@\tif (!async_candidate)\n\t\tasync_pending = false;@\tasync_candidate = false;\n\tasync_pending = false;@tap:016_release_flush
release-async-sticks@src/lease/lease_xact.c@\t\t\t\tsynchronous_commit = async_saved_sync;@\t\t\t\t(void) async_saved_sync;@tap:018_release_flush_after
tokens-plain-sequence@src/base/base_token.c@\tv = nextval_internal(seq, false);\n\tif (v < clock_floor() - DLOCK_TOKEN_SLACK_US)@\tv = nextval_internal(seq, false);\n\tif (false)@tap:035_tokens regress:time_promises
no-fifo@src/wait/wait_queue.c@(head < 0 || s->ticket < waitq->slots[head].ticket)@(head < 0 || s->ticket > waitq->slots[head].ticket)@isolation:wait_fifo tap:015_wake
no-role-check@src/lease/lease_int.h@return l->held && l->owner == role &&@return l->held &&@regress:lease_roles isolation:time_at_once
views-show-all@src/views/views_sql.c@\treturn superuser_arg(role) ||@\treturn true ||@regress:views_roles isolation:time_at_once
wait0-sleeps@src/lease/lease_acquire.c@\t\tif (wait_us == 0)\n\t\t\treturn false;@\t\tif (wait_us == 0)\n\t\t{\n\t\t\tpg_usleep(500000L);\n\t\t\treturn false;\n\t\t}@regress:time_promises isolation:time_at_once tap:082_cli_time
wait0-waits@src/lease/lease_acquire.c@\t\tif (wait_us == 0)\n\t\t\treturn false;@\t\tif (wait_us == 0)\n\t\t\twait_us = 200000;@regress:time_promises isolation:time_at_once tap:082_cli_time
wait-ends-early@src/lease/lease_acquire.c@slots, start + wait_us, token);@slots, start + wait_us / 2, token);@regress:lease_basic regress:time_promises isolation:time_at_once tap:082_cli_time
wait-ends-at-wakeup@src/lease/lease_acquire.c@\t\t\tif (now >= deadline)\n\t\t\t\tbreak;@\t\t\tif (now >= deadline || woken)\n\t\t\t\tbreak;@isolation:time_at_once isolation:wait_fifo
acquire-waits-for-open-xact@src/lease/lease_grant.c@\tif (!dlock_key_trylock(&st.k.lock, ExclusiveLock))\n\t{\n\t\tdlock_store_close(&s);\n\t\treturn DLOCK_ACQ_LOCKED;@\tdlock_key_lock(&st.k.lock, ExclusiveLock);\n\tif (false)\n\t{\n\t\tdlock_store_close(&s);\n\t\treturn DLOCK_ACQ_LOCKED;@isolation:lease_try_open_xact isolation:time_at_once tap:082_cli_time
wrong-holder-waits@src/lease/lease_decide.c@\t\tif (h.held == NULL)\n\t\t\treturn false;\n\t\t*l = *h.held;@\t\tif (h.held == NULL)\n\t\t{\n\t\t\tdlock_key_lock(&h.k.lock, mode);\n\t\t\treturn false;\n\t\t}\n\t\t*l = *h.held;@isolation:lease_wrong_holder isolation:time_at_once tap:082_cli_time
ttl-from-xact-start@src/lease/lease_grant.c@\t*expires_at = st->now + ttl_us;@\t*expires_at = GetCurrentTransactionStartTimestamp() + ttl_us;@regress:lease_basic regress:time_promises isolation:time_at_once
renew-from-xact-start@src/lease/lease_decide.c@dlock_lease_store_extend(&s, key, &l, ttl_us, now + ttl_us);@dlock_lease_store_extend(&s, key, &l, ttl_us, GetCurrentTransactionStartTimestamp() + ttl_us);@regress:time_promises isolation:time_at_once
expiry-at-xact-start@src/lease/lease_decide.c@\th->now = GetCurrentTimestamp();\n\th->slot = slot;@\th->now = GetCurrentTransactionStartTimestamp();\n\th->slot = slot;@regress:lease_basic regress:time_promises
claims-ttl-from-xact-start@src/claim/claim_batch.c@\tnow = GetCurrentTimestamp();\n\tclaimed = decide_and_write(@\tnow = GetCurrentTransactionStartTimestamp();\n\tclaimed = decide_and_write(@regress:time_promises isolation:time_at_once
claims-ttl-from-xact-start@src/claim/claim_batch.c@#include "access/htup_details.h"\n@#include "access/htup_details.h"\n#include "access/xact.h"\n@regress:time_promises isolation:time_at_once
claim-renew-from-xact-start@src/claim/claim_store_spi.c@"       expires_at = pg_catalog.clock_timestamp()"\n\t\t\t\t\t\t\t\t\t\t\t\t"         OPERATOR(pg_catalog.+)@"       expires_at = pg_catalog.transaction_timestamp()"\n\t\t\t\t\t\t\t\t\t\t\t\t"         OPERATOR(pg_catalog.+)@regress:time_promises isolation:time_at_once
claims-wait-for-claimers@src/claim/claim_query.c@FOR UPDATE OF %s SKIP LOCKED"@FOR UPDATE OF %s"@isolation:claim_complete_vs_takeover isolation:time_at_once
claims-wait-for-keylock@src/claim/claim_batch.c@\t\t\tcc->locked = dlock_key_trylock(&cc->kl, ExclusiveLock);@\t\t\tdlock_key_lock(&cc->kl, ExclusiveLock);\n\t\t\tcc->locked = true;@isolation:time_at_once isolation:claim_complete_vs_takeover
takeover-reuses-token@src/lease/lease_grant.c@\t*token = dlock_next_token();@\t*token = l->held ? l->token : dlock_next_token();@regress:lease_basic regress:time_promises tap:035_tokens
max-attempts-ignored@src/claim/claim_batch.c@else if (req->max_attempts > 0 && attempts[j] >= req->max_attempts)@else if (false && attempts[j] >= req->max_attempts)@regress:claim_basic regress:promises tap:070_claim_exactly_once
claim-batch-n-plus-1@src/claim/claim_query.c@SKIP LOCKED", req->n,@SKIP LOCKED", req->n + 1,@regress:claim_basic regress:time_promises isolation:claim_disjoint tap:070_claim_exactly_once
claim-batch-n-plus-1@src/claim/claim_take.c@\t\tint\t\t\tneed = req->n - claimed;@\t\tint\t\t\tneed = req->n + 1 - claimed;@regress:claim_basic
unclaim-of-others@src/claim/claim_store_spi.c@"ANY ($4)"\n\t\t\t\t\t\t\t  "   AND holder" EQ "$2 AND owner" EQ "$3"@"ANY ($4)"\n\t\t\t\t\t\t\t  "   AND $2::text IS NOT NULL AND $3::oid IS NOT NULL"@regress:claim_basic regress:time_promises isolation:time_at_once
unclaim-of-others@src/claim/claim_store_spi.c@"   SET holder = NULL, owner = NULL,"\n\t\t\t\t\t\t\t\t\t\t\t\t"       expires_at = pg_catalog.clock_timestamp()"\n\t\t\t\t\t\t\t\t\t\t\t\t" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"\n\t\t\t\t\t\t\t\t\t\t\t\t"   AND holder" EQ "$3 AND owner" EQ "$4"@"   SET holder = NULL, owner = NULL,"\n\t\t\t\t\t\t\t\t\t\t\t\t"       expires_at = pg_catalog.clock_timestamp()"\n\t\t\t\t\t\t\t\t\t\t\t\t" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"\n\t\t\t\t\t\t\t\t\t\t\t\t"   AND $3::text IS NOT NULL AND $4::oid IS NOT NULL"@regress:claim_basic
no-claim-recheck@src/claim/claim_batch.c@\t\tif (!found[k])\n\t\t\tcc->fresh = true;@\t\tif (true)\n\t\t\tcc->fresh = true;@isolation:claim_race_committed tap:070_claim_exactly_once
no-claim-keylock@src/claim/claim_batch.c@\t\t\tcc->locked = dlock_key_trylock(&cc->kl, ExclusiveLock);@\t\t\tcc->locked = true;@isolation:claim_complete_fence isolation:claim_complete_vs_takeover
no-row-check@src/claim/claim_unheld.c@\theld = dlock_claim_probe_held(a->probe, key, &settled_until);@\theld = false;\n\tsettled_until = 0;@regress:claim_ranges isolation:claim_inflight
hints-outlive-giveback@src/claim/claim_manage.c@\tdlock_claim_returns_bump();\n\tdlock_spi_begin(&spi);\n\targ.holder = holder;\n\targ.role = spi.caller;\n\t/* only its own@\tdlock_spi_begin(&spi);\n\targ.holder = holder;\n\targ.role = spi.caller;\n\t/* only its own@regress:claim_ranges isolation:time_at_once
hints-outlive-rollback@src/claim/claim_hint.c@\t\t(event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE))@\t\t(event == XACT_EVENT_PREPARE))@regress:claim_ranges isolation:claim_hint_shared
hints-outlive-prepare@src/claim/claim_hint.c@\t\t(event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE))@\t\t(event == XACT_EVENT_ABORT))@tap:075_two_phase
no-claim-fence@src/claim/claim_sql.c@PG_RETURN_BOOL(dlock_claim_check(t, key, holder));@(void) dlock_claim_check(t, key, holder);\n\tPG_RETURN_BOOL(true);@regress:claim_basic isolation:claim_complete_fence
no-claim-access-check@src/claim/claim_target.c@\tif (pg_class_aclcheck(relid, role, ACL_UPDATE) != ACLCHECK_OK &&@\tif (false &&@regress:claim_roles regress:claim_review regress:claim_errors
hints-outlive-savepoint@src/claim/claim_hint.c@\tif (event == SUBXACT_EVENT_ABORT_SUB && published_in_xact)@\tif (false)@regress:claim_ranges isolation:claim_hint_shared
hints-published-at-end-only@src/claim/claim_unheld.c@\tif (a->nlead % 128 == 0)@\tif (false)@isolation:claim_hint_shared
views-locks-own-snapshot@src/views/views_sql.c@emit_visible(fcinfo, &spi, dlock_lease_store_read_live(), 3, 0, 0);@emit_visible(fcinfo, &spi, (SPI_execute("SELECT key, holder, owner::regrole, token, acquired_at, expires_at FROM dlock.lease WHERE holder IS NOT NULL AND expires_at > clock_timestamp()", true, 0), SPI_processed), 3, 0, 0);@isolation:views_latest isolation:time_at_once
views-claims-own-snapshot@src/views/views_sql.c@emit_visible(fcinfo, &spi, dlock_claim_store_read_live(), 4, 1, 2);@emit_visible(fcinfo, &spi, (SPI_execute("SELECT relid::regclass, COALESCE(long_key, key), holder, owner::regrole, token, claimed_at, expires_at, attempts FROM dlock.claim WHERE holder IS NOT NULL AND expires_at > clock_timestamp()", true, 0), SPI_processed), 4, 1, 2);@isolation:views_latest isolation:time_at_once
no-waiters-shown@src/views/views_sql.c@\tn = dlock_wait_list(&w);@\tn = 0 * dlock_wait_list(&w);@isolation:views_latest
cleanup-deletes-live-leases@src/maint/maint_sweep.c@TimestampTz before = GetCurrentTimestamp() - idle_us;@TimestampTz before = GetCurrentTimestamp() + USECS_PER_DAY;@regress:promises regress:idle_sweep
cleanup-deletes-live-claims@src/maint/maint_sweep.c@TimestampTz idle_before = GetCurrentTimestamp() - idle_us;@TimestampTz idle_before = GetCurrentTimestamp() + USECS_PER_DAY;@regress:promises regress:idle_sweep
cleanup-deletes-poisoned@src/claim/claim_store_spi.c@"      AND c.poisoned_at IS NULL"@"      AND true"@regress:promises regress:idle_sweep
unpinned-unlisted@dlock--0.3--0.4.sql@ALTER FUNCTION dlock_validate(text, text, bigint) RESET search_path;@ALTER FUNCTION dlock_validate(text, text, bigint) RESET search_path;\nALTER FUNCTION dlock_cleanup(interval) RESET search_path;@regress:security_pins
unpinned-unlisted@dlock--0.5.sql@LANGUAGE C VOLATILE PARALLEL UNSAFE\nSET search_path = pg_catalog, pg_temp;\nREVOKE EXECUTE ON FUNCTION dlock_cleanup(interval) FROM PUBLIC;@LANGUAGE C VOLATILE PARALLEL UNSAFE;\nREVOKE EXECUTE ON FUNCTION dlock_cleanup(interval) FROM PUBLIC;@regress:security_pins
full-script-drifts@dlock--0.5.sql@  WHEN TAG IN ('ALTER TABLE', 'ALTER TYPE')@  WHEN TAG IN ('ALTER TABLE')@regress:upgrade regress:claim_ddl
unpinned-reaches-spi@src/lease/lease_grant.c@\t\tdlock_sweep_maybe();@\t\t{\n\t\t\textern int64 dlock_lease_sweep(int64 idle_us, int limit, bool whole_table);\n\n\t\t\t(void) dlock_lease_sweep(1, 1, false);\n\t\t}@tap:092_no_search_path
no-lease-sweep@src/lease/lease_grant.c@\t\tdlock_sweep_maybe();@\t\t(void) 0;@regress:idle_sweep
no-claim-sweep@src/claim/claim_take.c@\t\tdlock_claim_sweep_maybe();@\t\t(void) 0;@regress:idle_sweep isolation:claim_sweep_no_block
no-claim-schema-check@src/claim/claim_target.c@\tif (dlock_namespace_aclcheck(nsp, role, ACL_USAGE) != ACLCHECK_OK)@\tif (false)@regress:claim_roles
fence-wait-polls@src/base/base_keylock.c@\t(void) LockAcquire(&tag, mode, false, false);@\twhile (LockAcquire(&tag, mode, false, true) == LOCKACQUIRE_NOT_AVAIL)\n\t{\n\t\tCHECK_FOR_INTERRUPTS();\n\t\tpg_usleep(1000L);\n\t}@isolation:fence_waits
no-count-extended@src/lease/lease_acquire.c@\t\tdlock_count(DLOCK_STAT_EXTENDED, 1);@\t\t(void) 0;@regress:promises isolation:time_at_once
no-count-renewals@src/lease/lease_sql.c@\t\tdlock_count(DLOCK_STAT_RENEWALS, 1);@\t\t(void) 0;@regress:promises isolation:time_at_once
no-count-validation-failures@src/lease/lease_decide.c@\t\tdlock_count(DLOCK_STAT_VALIDATE_FAIL, 1);@\t\t(void) 0;@regress:promises isolation:time_at_once
claim-keys-as-written@src/claim/claim_key.c@\tif (t->pk_spellings || exists)@\tif (exists)@regress:claim_keys isolation:claim_key_spellings
claim-fence-unlocked@src/claim/claim_manage.c@\tif (!dlock_key_trylock(&kl, ShareLock))\n\t{@\tif (false)\n\t{@tap:075_two_phase
targets-miss-schema-rename@src/claim/claim_target.c@\t\tCacheRegisterSyscacheCallback(NAMESPACEOID, target_syscache_callback, (Datum) 0);@\t\t(void) 0;@regress:claim_ddl isolation:claim_ddl_sessions
claims-stay-in-detached-rows-tree@src/claim/claim_ddl.c@\t\t\t\tclaims_follow_detach(before->relid, p->relid);@\t\t\t\t(void) 0;@regress:claim_ddl isolation:claim_ddl_sessions
claims-outlive-key-change@src/claim/claim_ddl.c@\t\t\tdlock_claim_ddl_forget(now.relid);@\t\t\t(void) 0;@regress:claim_ddl isolation:claim_ddl_sessions
claims-miss-enum-rename@src/claim/claim_ddl_type.c@\t\tif (getBaseType(f.type) == types[0])@\t\tif (false)@regress:claim_ddl isolation:claim_ddl_sessions
fence-on-rowless-key@src/claim/claim_sql.c@\tif (!exists)\n\t\tPG_RETURN_BOOL(false);@\tif (false)\n\t\tPG_RETURN_BOOL(false);@regress:claim_ddl
long-keys-inline@src/claim/claim_key.c@\tif (len <= DLOCK_CLAIM_KEY_INLINE_BYTES &&@\tif (true &&@regress:claim_long_keys
long-key-text-lost@src/claim/claim_store.c@isnull[Anum_long_key - 1] = fulls[i] == keys[i];@isnull[Anum_long_key - 1] = true;@regress:claim_long_keys
unheld-tells-hidden-rows@src/claim/claim_unheld.c@\tif (!dlock_claim_row_visible(t, value, type))\n\t\treturn true;@\tif (false)\n\t\treturn true;@regress:claim_rls isolation:claim_rls_wait
unheld-ticket-ignored@src/claim/claim_unheld.c@\tif (ticket == dlock_claim_ticket())@\tif (true)@regress:claim_rls
views-ignore-row-security@src/views/views_sql.c@\t\t\t\t\tcheck_enable_rls(relid, caller, true) == RLS_ENABLED &&@\t\t\t\t\tfalse &&@regress:claim_rls
fence-waits-for-hidden-rows@src/claim/claim_manage.c@\tif (!dlock_key_trylock(&kl, ShareLock))\n\t{@\tdlock_key_lock(&kl, ShareLock);\n\tif (false)\n\t{@isolation:claim_rls_wait
unclaim-all-keys-at-once@src/claim/claim_manage.c@\t\t\t\t\t\t\t\t\t\t\t KEY_CHUNK, &n);@\t\t\t\t\t\t\t\t\t\t\t 100000000, &n);@tap:078_claims_bulk
release-all-keys-at-once@src/claim/claim_manage.c@after_key, KEY_CHUNK, &keys,@after_key, 100000000, &keys,@tap:078_claims_bulk
watch-savepoint-rollback-sent@src/watch/watch_notify.c@\t\t\tevents = foreach_delete_current(events, lc);@\t\t\t(void) lc;@tap:095_watch
watch-ignores-role@src/watch/watch_registry.c@\treturn superuser_arg(role) ||@\treturn true ||@tap:095_watch
watch-no-expiry@src/watch/watch_expiry.c@\t\t\tdlock_watch_expired(key, ls[i].holder, ls[i].owner, ls[i].token,@\t\t\tif (false) dlock_watch_expired(key, ls[i].holder, ls[i].owner, ls[i].token,@tap:095_watch
watch-expiry-while-live@src/watch/watch_expiry.c@\t\tif (ls[i].held && ls[i].expires_at <= now)@\t\tif (ls[i].held)@tap:095_watch
watch-expiry-twice@src/watch/watch_notify.c@\t\t\tev->expires_at <= expired_through_before(&w[i]))@\t\t\tfalse)@tap:095_watch
watch-joins-unsafely@src/watch/watch_session.c@\t\tdlock_watch_after_add(key);@\t\t(void) 0;@tap:095_watch
watch-no-handover-grant@src/lease/lease_handover.c@\t\tif (dlock_lease_events != NULL)\n\t\t\tdlock_lease_events->granted(key, DLOCK_CAUSE_HANDOVER,@\t\tif (false)\n\t\t\tdlock_lease_events->granted(key, DLOCK_CAUSE_HANDOVER,@tap:095_watch
watch-worker-not-restarted@src/watch/watch_worker.c@\tbgw.bgw_restart_time = 5;@\tbgw.bgw_restart_time = BGW_NEVER_RESTART;@tap:095_watch
watch-rolled-back-watch-stays@src/watch/watch_session.c@\t\t: (op->add && !op->readd))@\t\t: false)@regress:watch
watch-leader-shows-all@src/watch/watch_session.c@return found && dlock_watch_role_sees(GetUserId(), l->owner);@return found;@regress:watch
watch-expiry-slot-0-only@src/watch/watch_expiry.c@\t\tif (ls[i].held && ls[i].expires_at <= now)@\t\tif (ls[i].held && ls[i].expires_at <= now && ls[i].slot == 0)@tap:098_watch_shapes
watch-expiry-mark-not-moved@src/watch/watch_expiry.c@\tdlock_watch_read_through(key, now);@\t(void) 0;@tap:098_watch_shapes
watch-expiry-mark-after-read@src/watch/watch_notify.c@\t\t\treturn c->previous;@\t\t\treturn c->through;@tap:098_watch_shapes
watch-abandoned-not-released@src/maint/maint_worker.c@\t\tdlock_watch_abandoned(key, holder, a->owner, a->token, a->expires_at);@\t\t(void) 0;@tap:098_watch_shapes
watch-expiry-lock-given-back-early@src/watch/watch_expiry.c@\tif (ran_out)@\tif (false)@tap:099_watch_once
watch-abandoned-released-twice@src/watch/watch_notify.c@\tif (n > 0 && ev->abandoned && !claim_release(ev->token))@\tif (false)@tap:099_watch_once
watch-leader-slot-0-only@src/watch/watch_session.c@\t\tif (!dlock_lease_live(&ls[i], now))@\t\tif (!dlock_lease_live(&ls[i], now) || ls[i].slot != 0)@regress:watch
watch-abandoned-taken-not-released@src/lease/lease_grant.c@\tif (old->abandoned_by != NULL)@\tif (false)@tap:098_watch_shapes
abandon-nothing-on-abort@src/lease/lease_xact.c@\t\t\t\tdlock_abandon(r->key, r->holder, r->owner, r->token,@\t\t\t\tif (false)\n\t\t\t\t\tdlock_abandon(r->key, r->holder, r->owner, r->token,@isolation:wait_abandoned
abandoned-grants-read-held@src/lease/lease_store.c@if (l->held && dlock_abandoned(l->token))@if (false && dlock_abandoned(l->token))@tap:097_abandoned
abandoned-rows-kept@src/maint/maint_worker.c@while (dlock_abandoned_take(&a))@while (false && dlock_abandoned_take(&a))@isolation:wait_abandoned
releaser-keeps-orphan-grant@src/lease/lease_handover.c@\t\tcommitted && p->committing)@\t\tfalse && p->committing)@tap:097_abandoned
wait-ignores-closed-client@src/wait/wait_sleep.c@(sock != PGINVALID_SOCKET ? WL_SOCKET_CLOSED : 0)@0@tap:097_abandoned
commit-for-gone-client@src/lease/lease_xact.c@\t\t\t\tif (dlock_client_gone())@\t\t\t\tif (false)@tap:097_abandoned
waiter-exit-keeps-grant@src/lease/lease_acquire.c@wait_exit_callback(int code, Datum arg)\n{\n\tleave_for_good();@wait_exit_callback(int code, Datum arg)\n{\n\t(void) 0;@tap:100_waiter_exit
release-all-keeps-key-locks@src/lease/lease_decide.c@\t\t\t\tdlock_key_unlock(&hl, ExclusiveLock);\n\t\t\t\tfreed++;@\t\t\t\tfreed++;@tap:096_bulk_release
decide-on-row-being-freed@src/lease/lease_decide.c@\t\tif (busy == NULL)\n\t\t\treturn;@\t\tif (true)\n\t\t\treturn;@isolation:release_all_inflight
take-over-row-being-freed@src/lease/lease_grant.c@\tbool\t\tbusy = TransactionIdIsValid(l->changing);@\tbool\t\tbusy = false;@isolation:release_all_inflight
sweep-at-once@src/base/base_worker.c@\t\tlease_sweep_drawn = true;\n}@\t{\n\t\textern int64 dlock_lease_sweep(int64 idle_us, int limit, bool whole_table);\n\n\t\t(void) dlock_lease_sweep((int64) dlock_idle_key_lifetime_s * USECS_PER_SEC, 64, false);\n\t}\n}@isolation:sweep_no_block
claim-sweep-at-once@src/base/base_worker.c@\t\tclaim_sweep_drawn = true;\n}@\t{\n\t\textern int64 dlock_claim_sweep(int64 idle_us, int limit);\n\n\t\t(void) dlock_claim_sweep((int64) dlock_idle_key_lifetime_s * USECS_PER_SEC, 256);\n\t}\n}@isolation:claim_sweep_no_block
claim-write-over-swept-row-fails@src/claim/claim_store.c@\t\tif (found[j])\n\t\t\tcontinue;@\t\tif (true)\n\t\t\tcontinue;@isolation:claim_sweep_no_block
cleanup-in-callers-transaction@src/maint/maint_worker.c@\tdsm_segment *seg = dsm_create(sizeof(CleanupRequest), 0);@\treturn dlock_lease_sweep(idle_us, limit, true) + dlock_claim_sweep(idle_us, limit);\n\tdsm_segment *seg = dsm_create(sizeof(CleanupRequest), 0);@isolation:sweep_no_block
write-over-swept-row-fails@src/lease/lease_store.c@\t\tif (r == TM_Deleted)\n\t\t\tinsert = true;@\t\tif (false)\n\t\t\tinsert = true;@isolation:sweep_no_block
slots-limit-ignored@src/base/base_args.c@if (slots < 1 || slots > DLOCK_MAX_SLOTS)@if (slots < 1)@regress:lease_slots
slots-mismatch-unchecked@src/lease/lease_grant.c@\tif (st->live > 0 && !dlock_slots_compatible(st->key_slots, slots))\n\t\tdlock_slots_mismatch(st->key_slots, slots);@\t(void) st->key_slots;@regress:lease_slots
slots-lease-mismatch-unchecked@src/lease/lease_grant.c@\tif (st->live > 0 && !dlock_slots_compatible(st->key_slots, slots))@\tif (st->live > 0 && st->key_slots != 1 && !dlock_slots_compatible(st->key_slots, slots))@regress:lease_slots
slots-queue-mismatch-unchecked@src/lease/lease_grant.c@if (queue_slots != 0 && !dlock_slots_compatible(queue_slots, slots))@if (false)@isolation:slots_race
slots-one-too-many@src/lease/lease_grant.c@DLOCK_MAX_SLOTS : slots;@DLOCK_MAX_SLOTS : slots + 1;@regress:lease_slots isolation:slots_race tap:036_semaphores
slots-token-not-per-holder@src/lease/lease_grant.c@\tif (dlock_lease_is_ours(l, r->holder, r->role))\n\t\tr->ours = dlock_lease_copy(l);@\tif (r->ours == NULL)\n\t\tr->ours = dlock_lease_copy(l);@regress:lease_slots isolation:slots_race tap:036_semaphores
slots-no-fifo@src/lease/lease_grant.c@\tif (woken && st.queue_blocks)\n\t\treturn DLOCK_ACQ_QUEUED;@\tst.queue_blocks = st.queue_blocks && slots == 1;\n\tif (woken && st.queue_blocks)\n\t\treturn DLOCK_ACQ_QUEUED;@isolation:slots_race
slots-lease-reads-slot0-only@src/lease/lease_grant.c@\tif (slot < 0 || slot >= DLOCK_MAX_SLOTS)\n\t\treturn;@\tif (slot < 0 || slot >= DLOCK_MAX_SLOTS || (r->slots == 1 && slot > 0))\n\t\treturn;@regress:lease_slots
shared-writer-starved@src/lease/lease_grant.c@\tif (woken && st.queue_blocks)\n\t\treturn DLOCK_ACQ_QUEUED;@\tst.queue_blocks = st.queue_blocks && slots != DLOCK_SLOTS_SHARED;\n\tif (woken && st.queue_blocks)\n\t\treturn DLOCK_ACQ_QUEUED;@isolation:shared_rw
shared-upgrade@src/lease/lease_grant.c@\tif (st->live > 0 && st->key_slots != slots)\n\t\treturn DLOCK_ACQ_BUSY;@\tif (st->live > 0 && st->key_slots != slots && slots != 1)\n\t\treturn DLOCK_ACQ_BUSY;@regress:lease_shared
shared-upgrade@src/lease/lease_grant.c@\tif (slots == 1 && st->live > 0)\n\t\treturn DLOCK_ACQ_BUSY;@\tif (false)\n\t\treturn DLOCK_ACQ_BUSY;@regress:lease_shared
shared-and-lease-do-not-mix@src/base/base.h@return a == b || (a <= 1 && b <= 1);@return a == b;@regress:lease_shared isolation:shared_rw
shared-readers-exclude@src/lease/lease_grant.c@st.cap = slots == DLOCK_SLOTS_SHARED ? DLOCK_MAX_SLOTS@st.cap = slots == DLOCK_SLOTS_SHARED ? 1@regress:lease_shared isolation:shared_rw
shared-over-lease@src/lease/lease_grant.c@\tif (st->live > 0 && st->key_slots != slots)\n\t\treturn DLOCK_ACQ_BUSY;@\tif (st->live > 0 && st->key_slots != slots && slots == 1)\n\t\treturn DLOCK_ACQ_BUSY;@regress:lease_shared
cli-shared-ignored@cli/acquire.c@\telse if (o->shared)@\telse if (false)@tap:081_cli_args
cli-slots-ignored@cli/acquire.c@\tif (o->slots > 0)\n\t{@\tif (false)\n\t{@tap:081_cli_args
cli-old-extension-unexplained@cli/acquire.c@\tif (rc == DB_NOT_INSTALLED && (o->slots > 0 || o->shared))@\tif (false)@tap:081_cli_args
cli-old-extension-version-ignored@cli/db.c@(major < need_major || (major == need_major && minor < need_minor));@(major < need_major);@tap:081_cli_args
cli-watch-old-extension-unexplained@cli/watch.c@	if (rc == DB_NOT_INSTALLED && db_older_than(db, "0.4", "dlock watch"))@	if (false)@tap:081_cli_args
multi-unsorted@src/lease/lease_multi.c@\tqsort(mk, nkeys, sizeof(MultiKey), multikey_cmp);@\tif (false)\n\t\tqsort(mk, nkeys, sizeof(MultiKey), multikey_cmp);@regress:lease_multi isolation:multi_opposite_order
multi-no-undo@src/lease/lease_multi.c@\telse\n\t\tRollbackAndReleaseCurrentSubTransaction();@\telse\n\t\tReleaseCurrentSubTransaction();@regress:lease_multi isolation:multi_fifo
multi-deadline-per-key@src/lease/lease_multi.c@left = Max(deadline - GetCurrentTimestamp(), 0);@left = wait_us;@isolation:multi_fifo
multi-no-renew-at-end@src/lease/lease_multi.c@\tif (wait_us > 0)\n\t{\n\t\tfor@\tif (false)\n\t{\n\t\tfor@regress:lease_multi
multi-error-keeps-subxact@src/lease/lease_multi.c@\t\tFlushErrorState();\n\t\tRollbackAndReleaseCurrentSubTransaction();@\t\tFlushErrorState();@regress:lease_multi
# claims through DDL: pending detaches, what DDL costs, dlock's objects changed by an administrator (issue 35), long keys and deep trees (issue 36)
ddl-root-stops-at-pending-detach@src/claim/claim_ddl.c@\tList\t   *ancestors = dlock_claim_partition_ancestors(relid);@\tList\t   *ancestors = get_partition_ancestors(relid);@tap:072_claim_detach_pending
target-root-stops-at-pending-detach@src/claim/claim_target.c@\t\tList\t   *ancestors = dlock_claim_partition_ancestors(relid);@\t\tList\t   *ancestors = get_partition_ancestors(relid);@tap:072_claim_detach_pending
ddl-walks-every-claim-table@src/claim/claim_ddl.c@\tclaims_follow_attach(b);@\t{\n\t\tDlockSpi\tspi;\n\t\tOid\t\t   *all;\n\n\t\tdlock_spi_begin(&spi);\n\t\t(void) dlock_claim_store_relids(&all);\n\t\tdlock_spi_end(&spi);\n\t}\n\tclaims_follow_attach(b);@regress:claim_ddl_cost
ddl-start-kept-after-subxact-abort@src/claim/claim_ddl.c@\t\tRegisterSubXactCallback(ddl_subxact_callback, NULL);@\t\t(void) ddl_subxact_callback;@regress:claim_ddl_cost
internal-role-is-schema-owner@src/base/base_spi.c@\towner = extension_owner();@\towner = InvalidOid;@regress:claim_ddl_admin
ddl-commands-read-as-caller@src/claim/claim_ddl.c@\tdlock_spi_begin(&spi);\n\tif (SPI_execute(@\tdlock_spi_begin(&spi);\n\tdlock_spi_as_caller(&spi);\n\tif (SPI_execute(@regress:claim_ddl_admin
ddl-long-key-detach-by-digest@src/claim/claim_ddl.c@dlock_claim_key_in(t, part, fulls[i])@dlock_claim_key_in(t, part, keys[i])@regress:claim_ddl_deep
ddl-long-key-attach-by-text@src/claim/claim_ddl.c@\t\t(void) move_claims(relid, root, keys, nkeys);@\t\t(void) move_claims(relid, root, fulls, nkeys);@regress:claim_ddl_deep
ddl-root-is-parent@src/claim/claim_ddl.c@root = ancestors == NIL ? relid : llast_oid(ancestors);@root = ancestors == NIL ? relid : linitial_oid(ancestors);@regress:claim_ddl_deep
target-root-is-parent@src/claim/claim_target.c@\t\t\tt->claim_relid = llast_oid(ancestors);@\t\t\tt->claim_relid = linitial_oid(ancestors);@regress:claim_ddl_deep
# watch shares, a pooler's reset, the channel's privacy, the CLI's messages and text (issue 35 items 4, 9; issue 36)
watch-no-role-share@src/watch/watch_registry.c@((taken = role_count_locked(role)) >= dlock_max_watches_per_role ||@((taken = role_count_locked(role)) < 0 ||@tap:101_watch_share
watch-no-superuser-reserve@src/watch/watch_registry.c@ nfree <= dlock_superuser_reserved_watches))@ nfree < 0))@tap:101_watch_share
watch-superuser-bound@src/watch/watch_registry.c@bool\t\tbound = !superuser_arg(role);@bool\t\tbound = true;@tap:101_watch_share
watch-reset-ignored@src/watch/watch_session.c@\tif (reset && dlock_watch_available())@\tif (false)@tap:101_watch_share
watch-discard-all-ignored@src/watch/watch_session.c@return ((DiscardStmt *) stmt)->target == DISCARD_ALL;@return false;@tap:101_watch_share
watch-unlisten-channel-ignored@src/watch/watch_session.c@return name == NULL || strcmp(name, channel) == 0;@return name == NULL;@tap:101_watch_share
watch-reset-keeps-channel@src/watch/watch_session.c@\tif (reset && !dlock_watch_entry_any())@\tif (false)@tap:101_watch_share
watch-channel-not-random@src/watch/watch_session.c@\t\tif (!pg_strong_random(rnd, sizeof(rnd)))@\t\tif (memset(rnd, 0, sizeof(rnd)) == NULL)@tap:101_watch_share
watch-rewatch-after-unwatch-ignored@src/watch/watch_session.c@(!op->add && !rewatched_after(op->key, op->len, lc))@(!op->add)@tap:101_watch_share
watch-rolled-back-rewatch-kept@src/watch/watch_session.c@\t\telse if (commit)\n\t\t{\n\t\t\top->subid = parent;@\t\telse if (commit || op->readd)\n\t\t{\n\t\t\top->subid = parent;@tap:101_watch_share
watch-savepoint-watch-leaks@src/watch/watch_session.c@\t\telse if (op->add && !op->readd)\n\t\t{@\t\telse if (false)\n\t\t{@tap:101_watch_share
cli-notices-bare@cli/db.c@\tPQsetNoticeProcessor(db->conn, notice_to_stderr, NULL);@\t(void) notice_to_stderr;@tap:102_watch_cli
cli-watch-lost-lines-bare@cli/watch.c@print_lines(stderr, PQerrorMessage(db->conn));@fputs(PQerrorMessage(db->conn), stderr);@tap:102_watch_cli
cli-watch-error-lines-bare@cli/watch.c@\tstatus = db_failure(db, rc);@\tfprintf(stderr, "dlock: %s", db->error);\n\tstatus = EXIT_UNAVAIL;@tap:102_watch_cli
cli-watch-count-zero@cli/watch.c@\t\tn < 1 || n > MAX_COUNT)@\t\tn < 0 || n > MAX_COUNT)@tap:102_watch_cli
cli-watch-count-huge@cli/watch.c@\t\tn < 1 || n > MAX_COUNT)@\t\tn < 1)@tap:102_watch_cli
cli-watch-usage-two-lines@cli/watch.c@\tfprintf(stderr, " (see \\"dlock watch --help\\")\\n");@\tfprintf(stderr, "\\nTry \\"dlock watch --help\\".\\n");@tap:102_watch_cli
cli-watch-text-no-cause@cli/watch.c@\t\t\t   field(f, n, "expires_at"), field(f, n, "cause"));@\t\t\t   field(f, n, "expires_at"), "acquire");@tap:102_watch_cli
cli-watch-text-expiry-time@cli/watch.c@\t\tprintf("%s expired: %s token %s ran out at %s\\n", field(f, n, "key"),\n\t\t\t   field(f, n, "holder"), field(f, n, "token"),\n\t\t\t   field(f, n, "expires_at"));@\t\tprintf("%s expired: %s token %s ran out at %s\\n", field(f, n, "key"),\n\t\t\t   field(f, n, "holder"), field(f, n, "token"),\n\t\t\t   field(f, n, "at"));@tap:102_watch_cli
cli-watch-text-current-json@cli/watch.c@\telse if (PQntuples(r) == 0)\n\t\tprintf("%s free\\n", o->key);@\telse if (PQntuples(r) == 0)\n\t\tprintf("%s none\\n", o->key);@tap:102_watch_cli
cli-run-lost-no-cause@cli/run.c@\t\tsay_lost(l, rc, "");@\t\tfprintf(stderr, "dlock: lease %s lost\\n", o->key);@tap:102_watch_cli
cli-quiet-if-held-ignored@cli/acquire.c@\tif (o->quiet_if_held)\n\t\treturn EXIT_NOT_ACQUIRED;@\tif (false)\n\t\treturn EXIT_NOT_ACQUIRED;@tap:102_watch_cli
# the Python and Node clients' promises (issues 35 and 36): renewal connection, one lease per key and holder, fence in the write's transaction, loss from the sending, loss signalled
client-node-renew-through-pool@clients/node/lib/lease.js@  const caller = Caller.own(pool)@  const caller = new Caller(pool)@clients:node:pool.busy clients:node:own.connection.cannot
client-node-claims-renew-through-pool@clients/node/lib/claims.js@    renewCaller: Caller.own(pool),@    renewCaller: new Caller(pool),@clients:node:pool.busy
client-node-same-holder-twice@clients/node/lib/core.js@  if (i >= 0) {\n    throw new HolderInUseError@  if (false) {\n    throw new HolderInUseError@clients:node:^the.same.holder
client-node-holder-freed-before-release@clients/node/lib/lease.js@    this._done = true\n    try {\n      await this._releaseCall()@    this._done = true\n    this._unreserve()\n    try {\n      await this._releaseCall()@clients:node:refused.until.the.first
client-node-fence-own-transaction@clients/node/lib/lease.js@    const own = status !== 'T'@    const own = false@clients:node:fence.s.transaction clients:node:no.change.of.hands
client-node-write-after-refused-fence@clients/node/lib/lease.js@      if (fence.rows[0].r !== true) {@      if (false) {@clients:node:^a.refused.fence clients:node:the.fence.checks.every.key
client-node-refused-fence-not-loss@clients/node/lib/lease.js@        this._keeper.declareLost('the fence (dlock_validate) refused the token')\n@@clients:node:^a.refused.fence clients:node:the.fence.checks.every.key
client-node-loss-from-answer@clients/node/lib/core.js@        this.deadline = sent + this.ttlMs@        this.deadline = now() + this.ttlMs@clients:node:sending.of.a.renewal
client-node-refused-renewal-not-loss@clients/node/lib/core.js@        this._lose('the server refused the renewal (expired, released or taken over)')\n        return@        nextAt = sent + this.period@clients:node:^lost.by.dlock_force_release
client-node-loss-not-signalled@clients/node/lib/lease.js@    this.lostReason = err.message\n    this._ctl.abort(err)@    this.lostReason = err.message@clients:node:^lost.by.dlock_force_release
client-py-same-holder-twice@clients/python/src/dlock/_core.py@            if (k, h) in _holding:@            if False:@clients:python:same_holder
client-py-holder-freed-before-release@clients/python/src/dlock/_lease.py@        await keeper.stop()\n        try:@        await keeper.stop()\n        self._unreserved()\n        try:@clients:python:same_holder_refused_until_the_first_release
client-py-fence-own-transaction@clients/python/src/dlock/_lease.py@                raise self._fence_refused()\n            cursor.execute(query, params)@                raise self._fence_refused()\n        cursor.execute(query, params)@clients:python:test_execute_runs_in_the_fence_transaction clients:python:test_no_takeover_between_the_fence_and_the_write
client-py-aio-fence-own-transaction@clients/python/src/dlock/aio.py@                raise self._fence_refused()\n            await cursor.execute(query, params)@                raise self._fence_refused()\n        await cursor.execute(query, params)@clients:python:test_execute_asyncio_runs_in_the_fence_transaction
client-py-write-after-refused-fence@clients/python/src/dlock/_lease.py@            if not row or not row[0]:\n                self._declare_lost()@            if False:\n                self._declare_lost()@clients:python:test_fence_refused_declares_the_loss
client-py-refused-fence-not-loss@clients/python/src/dlock/_lease.py@                self._declare_lost()\n                raise self._fence_refused()@                raise self._fence_refused()@clients:python:test_fence_refused_declares_the_loss
client-py-loss-from-answer@clients/python/src/dlock/_core.py@                self.deadline = sent + self.ttl@                self.deadline = now() + self.ttl@clients:python:late_renewal
client-py-refused-renewal-not-loss@clients/python/src/dlock/_core.py@                self._lose("the server refused the renewal (expired, released or taken over)")\n                return@                next_at = sent + self.period@clients:python:test_lost_by_force_release
client-py-loss-not-signalled@clients/python/src/dlock/_core.py@        self.lost_reason = str(exc)\n        self.lost.set()@        self.lost_reason = str(exc)@clients:python:test_lost_by_force_release
client-node-first-deadline-from-answer@clients/node/lib/lease.js@o.ttl, tokens, sent, o.onLost, unreserve)@o.ttl, tokens, now(), o.onLost, unreserve)@clients:node:sending.of.an.acquire
client-py-first-deadline-from-answer@clients/python/src/dlock/_core.py@        return tokens, sent\n@        return tokens, now()\n@clients:python:late_acquire
# semaphores and shared leases: each holding its own lock (issue 35)
slot-fence-holds-key@src/lease/lease_decide.c@\tif (l->slots == 1)\n\t\treturn k->lock;@\tif (true)\n\t\treturn k->lock;@isolation:lease_slot_fences
slot-grant-keeps-key@src/lease/lease_grant.c@\tif (!DLOCK_ACQ_OK(res) || st->slots != 1)@\tif (!DLOCK_ACQ_OK(res))@isolation:lease_slot_open_xact
slot-takeover-ignores-fence@src/lease/lease_grant.c@\t\tif (dlock_key_trylock(&sl, ExclusiveLock))\n\t\t\treturn i;@\t\t(void) dlock_key_trylock(&sl, ExclusiveLock);\n\t\treturn i;@isolation:lease_slot_fences
lease-takeover-ignores-slot-fences@src/lease/lease_grant.c@return fences_ended(st) ? res : DLOCK_ACQ_LOCKED;@return res;@isolation:lease_slot_fences
shared-over-pending-lease@src/lease/lease_grant.c@\tif (st->pending_other || (slots == 1 && st->pending))@\tif (slots == 1 && st->pending)@isolation:lease_slot_open_xact
other-kind-of-own-key-waits@src/lease/lease_grant.c@\tif (st->ours != NULL && st->ours->slots != slots)@\tif (false)@regress:lease_shared
savepoint-keeps-watch-events@src/watch/watch_notify.c@\t\t\tpfree(ev->key);\n\t\t\tif (ev->holder != NULL)\n\t\t\t\tpfree(ev->holder);\n\t\t\tpfree(ev);@\t\t\t(void) ev;@regress:lease_savepoints
# wake-ups the safety wake hides (issue 36): each with dlock.safety_wake = 1h in its tests
no-wake-on-leave@src/wait/wait_queue.c@\tleave_slot_locked();\n\tif (!granted)\n\t\twake_head_locked(hash);@\tleave_slot_locked();\n\t(void) hash;@tap:019_wake_shapes
no-wake-on-abandon@src/lease/lease_xact.c@\t(void) dlock_wait_wake_key(dlock_key_for_text(DLOCK_CLASS_LEASE, key,@\tif (false)\n\t\t(void) dlock_wait_wake_key(dlock_key_for_text(DLOCK_CLASS_LEASE, key,@tap:019_wake_shapes
no-wake-on-prepared-end@src/lease/lease_xact.c@\tif (finishes_prepared)\n\t\tdlock_wait_wake_all_heads();@\t(void) finishes_prepared;@tap:019_wake_shapes tap:015_wake
no-wake-on-subxact-abort@src/lease/lease_xact.c@\tif (!isTopLevel && isCommit)\n\t\treturn;@\tif (!isTopLevel)\n\t\treturn;@tap:019_wake_shapes tap:015_wake
no-wake-on-abort@src/lease/lease_xact.c@\tif (!isTopLevel && isCommit)\n\t\treturn;@\tif (isTopLevel ? !isCommit : isCommit)\n\t\treturn;@tap:019_wake_shapes tap:015_wake
no-wake-many@src/lease/lease_xact.c@\tif (touched_many)\n\t{\n\t\tdlock_wait_wake_all_heads();@\tif (false)\n\t{\n\t\tdlock_wait_wake_all_heads();@tap:019_wake_shapes
handover-abort-leaves-offer@src/wait/wait_queue.c@\t\telse\n\t\t\ts->offer = DLOCK_OFFER_NONE;\n\t\tSetLatch@\t\telse if (committed)\n\t\t\ts->offer = DLOCK_OFFER_NONE;\n\t\tSetLatch@tap:019_wake_shapes
slots-wake-at-last-expiry@src/lease/lease_grant.c@if (r->busy_until == 0 || l->expires_at < r->busy_until)@if (r->busy_until == 0 || l->expires_at > r->busy_until)@tap:019_wake_shapes
EOF
)

# MUTANTS_LIST=FILE: the mutants of FILE (lines as above; # comments) instead
# of this list (scripts/test-mutate.sh tests this script with a few of its own)
if [ -n "${MUTANTS_LIST:-}" ]; then
    if ! MUTANTS=$(grep -v '^#' "$MUTANTS_LIST"); then
        echo "scripts/mutate.sh: MUTANTS_LIST=$MUTANTS_LIST has no mutant" >&2
        echo "0 passed, 1 failed"
        exit 1
    fi
fi

WORK=$(mktemp -d /tmp/dlock-mutate.XXXXXX)
chmod 755 "$WORK"
RUN_PID=
RUN_LOG=

# session_pids SID: the processes of session SID
session_pids() {
    ps -e -o pid=,sid= | awk -v s="$1" '$2 == s { printf "%s ", $1 }'
}
# run_dirs LOG: the build and test directories a scripts/test.sh run named
run_dirs() {
    [ -f "$1" ] || return 0
    sed -nE 's/^==> building (dlock )?in ([^ ]+) .*/\2/p; s/^==> test cluster: PGHOST=(\/tmp\/dlock-test\.[^/ ]+).*/\1/p' "$1" |
        grep -E '^/tmp/dlock-(build|test)\.' || true
}
# stop_servers LOG: stops the PostgreSQL servers (and whatever else) still
# running in the directories of LOG's run (their postmasters' working
# directories are their data directories, there even once deleted);
# prints how many processes it found
stop_servers() {
    local dirs d p cwd found=() i
    dirs=$(run_dirs "$1")
    [ -n "$dirs" ] || { echo 0; return 0; }
    for p in /proc/[0-9]*; do
        cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
        for d in $dirs; do
            case "$cwd" in "$d"/*|"$d") found+=("${p#/proc/}") ;; esac
        done
    done
    echo ${#found[@]}
    [ ${#found[@]} -gt 0 ] || return 0
    kill -QUIT "${found[@]}" 2>/dev/null     # a postmaster's immediate shutdown
    for i in $(seq 1 20); do
        kill -0 "${found[@]}" 2>/dev/null || return 0
        sleep 0.5
    done
    kill -KILL "${found[@]}" 2>/dev/null
    return 0
}
# stop_run: stops the running scripts/test.sh run, all of it
stop_run() {
    local pids i n
    [ -n "$RUN_PID" ] || return 0
    pids=$(session_pids "$RUN_PID")
    if [ -n "$pids" ]; then
        echo "==> stopping the test run (session $RUN_PID)"
        kill -TERM $pids 2>/dev/null
        for i in $(seq 1 30); do     # its EXIT traps and TAP END blocks stop their servers
            pids=$(session_pids "$RUN_PID")
            [ -n "$pids" ] || break
            sleep 1
        done
        [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
    fi
    n=$(stop_servers "$RUN_LOG")
    [ "$n" -eq 0 ] || echo "==> stopped $n process(es) left running in its directories"
    rm -rf $(run_dirs "$RUN_LOG")
    RUN_PID=
}
interrupted() {
    trap - INT TERM HUP
    echo
    echo "==> interrupted"
    stop_run
    rm -rf "$WORK"
    if [ "${reinstall:-0}" = 1 ]; then
        echo "==> $DLOCK_PG_BIN may hold a mutant's build now: run scripts/test.sh (or make install) to put dlock back"
    fi
    exit 130
}
trap interrupted INT TERM HUP
killed=0
declare -A killers=()   # --all-tests: the tests that killed each mutant
survived=()
broken=()
total=0
declare -A took=()      # seconds each mutant's run took

finish() {      # finish PASSED FAILED: summary, clean up, last line, exit status
    echo
    echo "==================== dlock mutation testing ===================="
    echo "  $total mutant(s): $killed killed, ${#survived[@]} survived, ${#broken[@]} broken"
    if [ "$ALL_TESTS" = 1 ] && [ ${#killers[@]} -gt 0 ]; then
        local m n single=0
        echo "  tests that killed each mutant (whole regress and isolation suite, and its TAP files):"
        for m in ${names[@]+"${names[@]}"}; do
            [ -n "${killers[$m]:-}" ] || continue
            n=$(wc -w <<<"${killers[$m]}")
            if [ "$n" -eq 1 ]; then
                single=$((single + 1))
                printf '    %-32s %2d  %s   <- SINGLE\n' "$m" "$n" "${killers[$m]}"
            else
                printf '    %-32s %2d  %s\n' "$m" "$n" "${killers[$m]}"
            fi
        done
        echo "  $single mutant(s) killed by a single test"
    fi
    if [ ${#took[@]} -gt 0 ]; then
        echo "  slowest mutants (seconds of their test runs; $(( $(printf '%s+' "${took[@]}")0 )) s in all):"
        for m in "${!took[@]}"; do echo "${took[$m]} $m"; done | sort -rn | head -n 8 |
            while read -r s m; do printf '    %5d s  %s\n' "$s" "$m"; done
    fi
    if [ ${#notrun[@]} -gt 0 ]; then
        echo "  NOT RUN (MUTANTS_BUDGET spent): ${#notrun[@]} mutant(s): ${notrun[*]}"
    fi
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
    [ "$2" -eq 0 ] && { [ "$1" -gt 0 ] || [ ${#notrun[@]} -gt 0 ]; }
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
    case "$line" in '#'*) continue ;; esac     # a comment line (a topic's heading)
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

# ---- MUTANTS_BUDGET=SECONDS: as many as fit, the changed code's first ----
# CI gives the mutants what is left of its time (.ci/run).  With a budget,
# the mutants of files changed since MUTANTS_SINCE (default: the newest
# release tag, or without tags the commit before dlock.control last
# changed) run first, then the others from a place that moves with HEAD's
# hash, so that successive runs reach all of them; no mutant is started
# once the budget is spent, and those left are named at the end (not a
# failure: run them by name).  In a lane (below) the order given is kept.
if [ -n "${MUTANTS_LANE:-}" ]; then
    [ ${#broken[@]} -eq 0 ] && [ $# -gt 0 ] && names=("$@")
elif [ -n "${MUTANTS_BUDGET:-}" ] && [ ${#names[@]} -gt 1 ]; then
    since=${MUTANTS_SINCE:-$(git -C "$REPO" describe --tags --abbrev=0 --match 'v*' 2>/dev/null)}
    if [ -z "$since" ]; then
        since=$(git -C "$REPO" log -1 --format=%H -- dlock.control 2>/dev/null)
        [ -z "$since" ] || since=$since^
    fi
    changed=" $(git -C "$REPO" diff --name-only "$since" 2>/dev/null | tr '\n' ' ') "
    first=()
    rest=()
    for name in "${names[@]}"; do
        hit=0
        for i in ${lines_of[$name]}; do
            [[ "$changed" == *" $(line_no "$i" | cut -d@ -f2) "* ]] && hit=1
        done
        if [ $hit = 1 ]; then first+=("$name"); else rest+=("$name"); fi
    done
    if [ ${#rest[@]} -gt 0 ]; then
        r=$(( $(printf '%d' "0x$(git -C "$REPO" rev-parse --short=7 HEAD 2>/dev/null || echo 0)") % ${#rest[@]} ))
        rest=("${rest[@]:r}" "${rest[@]:0:r}")
    fi
    names=(${first[@]+"${first[@]}"} ${rest[@]+"${rest[@]}"})
    echo "==> budget ${MUTANTS_BUDGET} s: ${#first[@]} mutant(s) of files changed since ${since:-?} first, then ${#rest[@]} more"
    MUTANTS_DEADLINE=$(( $(date +%s) + MUTANTS_BUDGET ))
    export MUTANTS_DEADLINE
fi
notrun=()

# ---- MUTANTS_JOBS=N: N lanes side by side (CI: 2, on 2 cores) ----
# Each lane is this script on every Nth mutant, with its own copy of
# PostgreSQL, build cache and work directory; most of a mutant's run waits
# on sleeps, locks and fsyncs, so two lanes take about half the time.  Not
# with DLOCK_PG_BIN (one installation cannot hold two builds at once).
JOBS=${MUTANTS_JOBS:-1}
if [ "$JOBS" -gt 1 ] && [ -z "${DLOCK_PG_BIN:-}" ] && [ -z "${MUTANTS_LANE:-}" ] &&
        [ ${#names[@]} -gt 1 ] && [ ${#broken[@]} -eq 0 ]; then
    echo "==> ${#names[@]} mutants in $JOBS lanes (MUTANTS_JOBS)"
    lane_pids=()
    for ((k = 0; k < JOBS; k++)); do
        lane=()
        for ((j = k; j < ${#names[@]}; j += JOBS)); do lane+=("${names[$j]}"); done
        flags=()
        [ "$ALL_TESTS" = 1 ] && flags+=(--all-tests)
        MUTANTS_LANE=$((k + 1)) MUTANTS_JOBS=1 \
            bash "$REPO/scripts/mutate.sh" ${flags[@]+"${flags[@]}"} "${lane[@]}" >"$WORK/lane$((k + 1)).log" 2>&1 &
        lane_pids+=($!)
    done
    stop_lanes() {
        trap - INT TERM HUP
        kill -TERM "${lane_pids[@]}" 2>/dev/null
        wait
        rm -rf "$WORK"
        exit 130
    }
    trap stop_lanes INT TERM HUP
    lp=0
    lf=0
    for ((k = 0; k < JOBS; k++)); do
        wait "${lane_pids[$k]}"
        echo "==================== lane $((k + 1)) of $JOBS ===================="
        cat "$WORK/lane$((k + 1)).log"
        last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$WORK/lane$((k + 1)).log" | tail -n 1)
        p=$(sed -nE 's/^([0-9]+) passed.*/\1/p' <<<"$last")
        f=$(sed -nE 's/^[0-9]+ passed, ([0-9]+) failed$/\1/p' <<<"$last")
        lp=$((lp + ${p:-0}))
        lf=$((lf + ${f:-1}))
    done
    rm -rf "$WORK"
    echo
    echo "==================== dlock mutation testing: $JOBS lanes ===================="
    echo "$lp passed, $lf failed"
    [ "$lf" -eq 0 ] && [ "$lp" -gt 0 ]
    exit $?
fi
# tests_of NAME: the union of the tests of NAME's lines; with --all-tests,
# the whole regress and isolation suite and the other tests of NAME's lines
# (TAP files, clients)
tests_of() {
    local i out=" " t
    if [ "$ALL_TESTS" = 1 ]; then
        out=" $SUITE "
    fi
    for i in ${lines_of[$1]}; do
        for t in $(line_no "$i" | cut -d@ -f5); do
            # (the suite holds every regress and isolation test already;
            # tap: and clients entries are run as named)
            [ "$ALL_TESTS" = 1 ] && case "$t" in regress:*|isolation:*) true ;; *) false ;; esac && continue
            [[ "$out" == *" $t "* ]] || out+="$t "
        done
    done
    out=${out# }
    echo "${out% }"
}
# killers_of LOG: the tests a scripts/test.sh run reported failed, as
# kind:name (tap:NNN_name, clients); a suite that failed as a whole (time
# limit, no result) as kind:(how).  The lines read are scripts/test.sh's
# summary ("  FAIL: [regress] 2 test(s) failed: a b", "  FAIL: [tap]
# t/015_wake.pl: 1 failure(s)", "  FAIL: [tap] t/015_wake.pl timed out ...",
# "  FAIL: [clients] 1 failure(s) ...", "  FAIL: [isolation] timed out ...").
killers_of() {
    local kind rest t out=" "
    while read -r kind rest; do
        for t in $rest; do
            [[ "$out" == *" $kind:$t "* ]] || out+="$kind:$t "
        done
    done < <(sed -nE 's/^  FAIL: \[(regress|isolation)\] [0-9]+ test\(s\) failed: (.*)$/\1 \2/p' "$1")
    for t in $(sed -nE 's/^  FAIL: \[tap\] t\/([^ :]+)\.pl[ :].*/\1/p' "$1"); do
        [[ "$out" == *" tap:$t "* ]] || out+="tap:$t "
    done
    grep -qE '^  FAIL: \[clients\]' "$1" && out+="clients "
    while read -r kind rest; do
        [ -n "$kind" ] && out+="$kind:($rest) "
    done < <(sed -nE 's/^  FAIL: \[(regress|isolation)\] (timed out|aborted|ran no test).*/\1 \2/p' "$1" |
             sed 's/ /_/2g')
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
echo "==> PostgreSQL: $DLOCK_PG_BIN; work directory $WORK"

# A mutant's run stops at its first failing test (DLOCK_FAIL_FAST): one is
# enough to kill it.  Not the control run (every test must pass) nor
# --all-tests (which reports every test that kills).
fail_fast=0
# run_tests SRC TESTS LOG: scripts/test.sh on SRC with DLOCK_ONLY=TESTS, in a
# session of its own (setsid: its process id is the session's id), waited
# for in the background so that a signal reaches the trap at once
run_tests() {
    local rc n
    RUN_LOG=$3
    DLOCK_SRC=$1 DLOCK_ONLY=$2 DLOCK_IGNORE_WARNINGS=1 DLOCK_MAKE_FLAGS=with_llvm=no \
        DLOCK_FAIL_FAST=$fail_fast \
        DLOCK_BUILD_CACHE="$WORK/build-cache" \
        setsid bash "$REPO/scripts/test.sh" >"$3" 2>&1 </dev/null &
    RUN_PID=$!
    wait "$RUN_PID"
    rc=$?
    # scripts/test.sh's own processes are gone; servers its tests started
    # and did not stop are not
    n=$(stop_servers "$3")
    if [ "$n" -gt 0 ]; then
        echo "    NOTE: $n process(es) were left running in the run's directories; stopped"
        echo "LEFT RUNNING: $n process(es) (mutate.sh)" >>"$3"
    fi
    RUN_PID=
    return $rc
}
# forget_kept LOG: scripts/test.sh keeps its build and test directories in
# /tmp when a test fails, as it does for every killed mutant (gigabytes
# over a run), and a failed build its build directory: remove those of
# LOG's run, whatever its outcome (killed, survived, broken, the control
# run), unless MUTANTS_KEEP=1; the log itself stays in the work directory
forget_kept() {
    local d
    [ "${MUTANTS_KEEP:-0}" = 1 ] && return 0
    for d in $(sed -nE 's/^  work directories kept for inspection: //p' "$1") $(run_dirs "$1"); do
        case "$d" in
            /tmp/dlock-build.*|/tmp/dlock-test.*) rm -rf "$d" ;;
        esac
    done
}
# vanished LOG: a failed run's build or test directory is gone (scripts/test.sh
# keeps them when a test fails): something else removed it during the run
vanished() {
    local d
    grep -q 'getcwd() failed' "$1" && return 0
    for d in $(run_dirs "$1"); do
        [ -d "$d" ] || return 0
    done
    return 1
}
copy_source() { # copy_source DIR: the tracked files, as they are in the work tree
    mkdir -p "$1"
    (cd "$REPO" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$1"
}

# ---- --all-tests: every regress and isolation test, in the Makefile's order ----
SUITE=
if [ "$ALL_TESTS" = 1 ]; then
    cat >"$WORK/print.mk" <<'MK'
dlock-print-%:
	@echo '$($*)'
MK
    copy_source "$WORK/suite"
    for v in REGRESS ISOLATION; do
        kind=$( [ $v = REGRESS ] && echo regress || echo isolation )
        for t in $(cd "$WORK/suite" && make --no-print-directory -s -f Makefile -f "$WORK/print.mk" \
                PG_CONFIG="$DLOCK_PG_BIN/pg_config" "dlock-print-$v" 2>/dev/null | tail -n 1); do
            SUITE+="$kind:$t "
        done
    done
    rm -rf "$WORK/suite"
    SUITE=${SUITE% }
    if [ -z "$SUITE" ]; then
        broken+=("(could not list the regress and isolation tests)")
        finish 0 1
    fi
    # a mutant that makes steps block or hang would run the suites into
    # their time limits, which names no test: generous ones by default
    export DLOCK_TIMEOUT_REGRESS=${DLOCK_TIMEOUT_REGRESS:-600}
    export DLOCK_TIMEOUT_ISOLATION=${DLOCK_TIMEOUT_ISOLATION:-900}
    echo "==> --all-tests: $(wc -w <<<"$SUITE") regress and isolation tests for every mutant"
fi

# ---- control run: the unmutated source with every selected test ----
all_tests=" "
for name in ${names[@]+"${names[@]}"}; do
    for t in $(tests_of "$name"); do
        [[ "$all_tests" == *" $t "* ]] || all_tests+="$t "
    done
done
all_tests=${all_tests# }
all_tests=${all_tests% }
# every test a mutant names must exist: a misspelt one fails the run of
# every mutant that names it, which would count as killing them
missing=
for t in $all_tests; do
    case "$t" in
        regress:*) f=sql/${t#regress:}.sql ;;
        isolation:*) f=specs/${t#isolation:}.spec ;;
        tap:*) f=t/${t#tap:}.pl ;;
        clients|clients:python|clients:node) f=scripts/test-clients.sh ;;   # the clients' tests
        clients:python:*)   # a test function whose name holds NAME (pytest -k)
            f=scripts/test-clients.sh
            grep -qE "^(async )?def [A-Za-z0-9_]*${t#clients:python:}" "$REPO"/clients/python/tests/*.py || f= ;;
        clients:node:*)     # a test whose title matches PATTERN (node --test-name-pattern)
            f=scripts/test-clients.sh
            sed -nE "s/^ *test\('(.*)', async.*/\1/p" "$REPO"/clients/node/test/*.js | sed "s/\\\\'/'/g" |
                grep -qE -- "${t#clients:node:}" || f= ;;
        *) f= ;;
    esac
    [ -n "$f" ] && [ -f "$REPO/$f" ] || missing+="$t "
done
if [ -n "$missing" ]; then
    echo "==> the mutants name tests that do not exist: $missing"
    broken+=("(tests named by mutants do not exist: ${missing% })")
    finish 0 1
fi
if [ ${#names[@]} -gt 0 ] && [ "${MUTANTS_CONTROL:-1}" = 0 ]; then
    # .ci/run: scripts/test.sh has just passed every test on this source
    echo "==> control run skipped (MUTANTS_CONTROL=0: the whole suite passed on this source just before)"
elif [ ${#names[@]} -gt 0 ]; then
    echo "==> control run (unmutated): $all_tests"
    copy_source "$WORK/control"
    control_log=$WORK/control.log
    if ! run_tests "$WORK/control" "$all_tests" "$control_log"; then
        control_failed=1
        forget_kept "$control_log"
        echo "    control run failed: $(grep -E '^  FAIL' "$control_log" | head -n 3 | sed 's/^ *//' | tr '\n' ' ')"
        echo "    (log $control_log)"
        rm -rf "$WORK/control"
        finish 0 1
    fi
    echo "    passed: $(tail -n 1 "$control_log")"
    rm -rf "$WORK/control"
fi

# ---- the mutants ----
[ "$ALL_TESTS" = 1 ] || fail_fast=1
for name in ${names[@]+"${names[@]}"}; do
    if [ -n "${MUTANTS_DEADLINE:-}" ] && [ "$(date +%s)" -ge "$MUTANTS_DEADLINE" ]; then
        notrun+=("$name")
        continue
    fi
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
    if [ "$ALL_TESTS" = 1 ]; then
        echo "==> $name: ${files% } changed; running every regress and isolation test${tests#"$SUITE"}"
    else
        echo "==> $name: ${files% } changed; running $tests"
    fi
    t0=$SECONDS
    run_tests "$copy" "$tests" "$WORK/$name.log"
    rc=$?
    took[$name]=$((SECONDS - t0))
    if [ $rc -ne 0 ] && vanished "$WORK/$name.log"; then
        echo "    a work directory of the run was removed under it (by something else); run it again (log $WORK/$name.log)"
        broken+=("$name (a work directory was removed during its run)")
    elif grep -q 'FAIL: build or make install' "$WORK/$name.log"; then
        echo "    did not build (log $WORK/$name.log)"
        broken+=("$name (does not build)")
    elif [ $rc -ne 0 ] && [ "$ALL_TESTS" = 1 ] && [ -z "$(killers_of "$WORK/$name.log")" ]; then
        echo "    the run failed, but no test did (log $WORK/$name.log)"
        broken+=("$name (the run failed, but no test did: see its log)")
    elif [ $rc -ne 0 ]; then
        echo "    killed in ${took[$name]} s: $(grep -E '^  FAIL' "$WORK/$name.log" | head -n 2 | sed 's/^ *//' | tr '\n' ' ')"
        killed=$((killed + 1))
        if [ "$ALL_TESTS" = 1 ]; then
            killers[$name]=$(killers_of "$WORK/$name.log")
            echo "    killed by $(wc -w <<<"${killers[$name]}"): ${killers[$name]}"
        fi
    else
        echo "    SURVIVED: $tests passed with it"
        survived+=("$name")
    fi
    forget_kept "$WORK/$name.log"
    [ "${MUTANTS_KEEP:-0}" = 1 ] || rm -rf "$copy"
done

# put the real build back into the installation given by DLOCK_PG_BIN (a
# private copy made above is simply removed)
if [ "$reinstall" = 1 ]; then
    (. "$REPO/scripts/lib.sh" && dlock_build_install "$REPO" >/dev/null 2>&1 &&
        rm -rf "$DLOCK_BUILD_DIR") || echo "==> could not reinstall the unmutated dlock" >&2
fi

[ "$total" -gt 0 ] || [ ${#notrun[@]} -gt 0 ] || broken+=("(no mutant selected)")
finish "$killed" $(( ${#survived[@]} + ${#broken[@]} ))
