/*-------------------------------------------------------------------------
 *
 * watch_expiry.c
 *		The expiry worker's rounds: it notices leases of watched keys
 *		running out, with nobody calling anything, and sends their
 *		"expired" notifications.
 *
 * The worker (its slot: watch_worker.c) sleeps until the earliest expiry
 * among the watched keys' live leases (at most dlock.safety_wake), or
 * until it is woken.  Then, in a transaction of its own, it reads each
 * watched key's rows (every holder of a semaphore or shared leases) at the
 * latest committed state (through lease_store.c; it never writes
 * dlock.lease) and records an expiry for each holder that has run out;
 * watch_notify.c sends them at its commit, each once per watcher.  A
 * lease whose key another transaction is writing (a renewal, a takeover)
 * is looked at again 50 ms later: the row is read only while the worker
 * holds the key's lock in share mode, so a renewal that has not committed
 * yet is never taken for an expiry, and a lease that has run out can no
 * longer be renewed.
 *
 * An error in a round is logged and the round tried again a second later.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "base/base.h"
#include "compat.h"
#include "lease/lease.h"
#include "wait/wait.h"
#include "watch/watch_int.h"

/* how soon a key another transaction is writing is looked at again */
#define BUSY_RETRY_MS		50
/* how soon a round that failed is tried again */
#define ERROR_RETRY_MS		1000

/*
 * The keys whose lock this round keeps to its end (see check_key), in the
 * worker's own memory: their head waiters are woken once it has ended.
 */
static uint64 *kept_keys = NULL;
static int	nkept = 0;

/*
 * Look at one watched key: record the expiry of each of its holders (a
 * lease, a semaphore's slots, shared holders) that has run out, else lower
 * *next to when the first will.
 *
 * When a holder has run out, the key's lock is kept until the round's
 * transaction ends, so that an acquire that would take that holder over
 * waits for the round's outcome: at its commit the expiry is sent; at a
 * rollback the watchers' marks are given back first (watch_notify.c), and
 * the acquire sends the expiry itself.  Given back at once, an acquire
 * could take the holder over between the two and, finding the mark moved,
 * leave the expiry to a round that then rolls back: it would never be sent.
 */
/*
 * True when no row of key is being written by another transaction and
 * the slot lock of every semaphore or shared holder that ran out could be
 * had in share mode (kept to the round's end, as the key's lock is).
 */
static bool
slots_settled(text *key, const DlockLease *ls, int n, TimestampTz now)
{
	for (int i = 0; i < n; i++)
	{
		DlockKeyLock sl;

		if (TransactionIdIsValid(ls[i].changing))
			return false;
		if (!ls[i].held || ls[i].slots == 1 || ls[i].expires_at > now)
			continue;
		sl = dlock_key_for_slot(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
								ls[i].slot);
		if (!dlock_key_trylock(&sl, ShareLock))
			return false;
	}
	return true;
}

static void
check_key(DlockStore *s, text *key, TimestampTz *next)
{
	DlockKeyLock kl = dlock_key_for_text(DLOCK_CLASS_LEASE, VARDATA_ANY(key),
										 VARSIZE_ANY_EXHDR(key));
	DlockLease *ls;
	int			n;
	TimestampTz now;
	bool		ran_out = false;

	if (!dlock_key_trylock(&kl, ShareLock))
	{
		/* being written: a renewal, takeover or release is committing */
		*next = Min(*next, GetCurrentTimestamp() + BUSY_RETRY_MS * 1000);
		return;
	}
	ls = dlock_lease_store_fetch_all(s, key, &n);
	now = GetCurrentTimestamp();
	/*
	 * A holder of a semaphore or shared leases writes and fences its row
	 * under its slot's lock only (lease_decide.c): a row being written, or one
	 * that ran out whose slot lock cannot be had (its holder's fence, a
	 * takeover), is looked at again later, as a key being written is.
	 */
	if (!slots_settled(key, ls, n, now))
	{
		dlock_key_unlock(&kl, ShareLock);
		*next = Min(*next, GetCurrentTimestamp() + BUSY_RETRY_MS * 1000);
		return;
	}
	/* before an acquire may take one of them over */
	dlock_watch_read_through(key, now);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (ls[i].held && ls[i].expires_at <= now)
		{
			dlock_watch_expired(key, ls[i].holder, ls[i].owner, ls[i].token,
								ls[i].expires_at);
			ran_out = true;
		}
		else if (ls[i].held)
			*next = Min(*next, ls[i].expires_at);
	}
	if (ran_out)
		kept_keys[nkept++] = kl.hash;
	else
	{
		dlock_key_unlock(&kl, ShareLock);
		/* a head waiter that found the key locked just now tries again */
		(void) dlock_wait_wake_key(kl.hash);
	}
}

/* One round; returns when to start the next one. */
static TimestampTz
round_once(Oid dboid)
{
	TimestampTz next = GetCurrentTimestamp() +
		(int64) dlock_safety_wake_ms * 1000;
	int			n;
	text	  **keys = dlock_watch_db_keys(dboid, &n);

	nkept = 0;
	if (n == 0)
		return next;
	kept_keys = palloc(sizeof(uint64) * n);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "checking watched keys for expiry");
	/* the extension may have been dropped under its watchers */
	if (OidIsValid(get_extension_oid("dlock", true)))
	{
		DlockStore	s;

		dlock_lease_store_open(&s);
		for (int i = 0; i < n; i++)
		{
			CHECK_FOR_INTERRUPTS();
			check_key(&s, keys[i], &next);
		}
		dlock_store_close(&s);
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	return next;
}

/* a round, with its errors logged rather than ending the worker */
static TimestampTz
round_safely(Oid dboid, MemoryContext cxt)
{
	volatile TimestampTz next = 0;

	PG_TRY();
	{
		next = round_once(dboid);
	}
	PG_CATCH();
	{
		HOLD_INTERRUPTS();
		EmitErrorReport();
		AbortCurrentTransaction();
		FlushErrorState();
		RESUME_INTERRUPTS();
		next = GetCurrentTimestamp() + ERROR_RETRY_MS * 1000;
	}
	PG_END_TRY();
	/* the kept keys' locks went with the transaction: waiters try again */
	for (int i = 0; i < nkept; i++)
		(void) dlock_wait_wake_key(kept_keys[i]);
	nkept = 0;
	MemoryContextSwitchTo(cxt);
	MemoryContextReset(cxt);
	return next;
}

/*
 * The worker's entry point (bgw_function_name); bgw_main_arg is the
 * database's oid.
 */
void
dlock_watch_worker_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	MemoryContext cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* before connecting: the database may be gone with its watchers */
	if (!dlock_watch_worker_attach(dboid))
		proc_exit(0);
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	cxt = AllocSetContextCreate(TopMemoryContext, "dlock watch worker",
								ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(cxt);

	for (;;)
	{
		TimestampTz next;
		long		sleep_ms;

		/* reset first: a wake-up during the round starts another one */
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (dlock_watch_worker_may_exit(dboid))
			proc_exit(0);
		next = round_safely(dboid, cxt);
		sleep_ms = (long) ((next - GetCurrentTimestamp() + 999) / 1000);
		if (sleep_ms > 0)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 sleep_ms, PG_WAIT_EXTENSION);
	}
}
