/*-------------------------------------------------------------------------
 *
 * claim_wait.c
 *		Claims that wait for rows (dlock_claim's wait): the waiter's loop in
 *		its table's queue.
 *
 * The waiter joins its table's queue (dlock_claim_wait_queue, claim_wake.c)
 * before its first attempt, and takes its wake just before each attempt,
 * whose query then takes a new snapshot (READ COMMITTED), so a commit is
 * either seen by an attempt or wakes a waiter again.  A woken waiter that
 * leaves without its attempt passes the wake on; one that claims a full
 * batch wakes the next (there may be more rows).  Besides, the first
 * waiter of a table wakes by itself when the table's next claim lapses
 * (coalesce(retry_at, expires_at)) and every dlock.safety_wake.  What
 * wakes a waiter is claim_wake.c's; the protocol is in wait/README.md
 * ("Claim waiters") and claim/README.md ("Waiting for rows").
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "claim/claim_int.h"
#include "claim/claim.h"
#include "wait/wait.h"

static bool exit_callback_registered = false;

/* ---- the waiter ---- */

static void
claim_wait_exit_callback(int code, Datum arg)
{
	dlock_wait_leave_claim(false);
}

/* The next time a claim of the table lapses, read as dlock's owner; 0: none. */
static TimestampTz
next_lapse(Oid relid)
{
	DlockSpi	spi;
	TimestampTz at;

	dlock_spi_begin(&spi);
	at = dlock_claim_store_next_lapse(relid);
	dlock_spi_end(&spi);
	return at;
}

/*
 * dlock.debug_queue_delay: a woken waiting claim sleeps this long before
 * its attempt (interruptible), so that a test can cancel it while it holds
 * a wake it has not used.
 */
static void
debug_delay(void)
{
	TimestampTz until;

	if (dlock_debug_queue_delay_ms <= 0)
		return;
	until = GetCurrentTimestamp() + (int64) dlock_debug_queue_delay_ms * 1000;
	while (GetCurrentTimestamp() < until)
	{
		CHECK_FOR_INTERRUPTS();
		(void) dlock_wait_sleep(until - GetCurrentTimestamp());
	}
}

/*
 * Sleep until this waiter may try again: it was woken, or it is the
 * first of its queue and the table's next claim lapsed or the safety wake
 * came.  False when the deadline came first.
 */
static bool
sleep_for_turn(Oid relid, TimestampTz deadline)
{
	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		TimestampTz wake_at = deadline;
		TimestampTz lapse;
		bool		head;
		bool		latch;

		CHECK_FOR_INTERRUPTS();
		if (now >= deadline)
			return false;
		lapse = next_lapse(relid);
		if (lapse > now && lapse < wake_at)
			wake_at = lapse;
		latch = dlock_wait_sleep(wake_at - now);
		if (dlock_wait_claim_woken(&head))
		{
			debug_delay();
			return true;
		}
		if (latch)
			continue;			/* a latch set for something else */
		/* the timer: a lapse, or the safety wake; the first one tries */
		if (head && GetCurrentTimestamp() < deadline)
			return true;
	}
}

/* One attempt, in a memory context reset after it; returns the rows claimed. */
static int
attempt(const ClaimRequest *req, Tuplestorestate *out, TupleDesc outdesc,
		MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	int			got;

	/* take the wake first: a commit from now on wakes this waiter again */
	dlock_wait_take_wake();
	got = dlock_claim_rows(req, out, outdesc);
	MemoryContextSwitchTo(old);
	MemoryContextReset(cxt);
	return got;
}

/* REPEATABLE READ and SERIALIZABLE would never see a row inserted later */
static void
check_isolation(void)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dlock_claim cannot wait in a %s transaction",
						IsolationIsSerializable() ? "SERIALIZABLE" : "REPEATABLE READ"),
				 errdetail("A transaction snapshot never shows rows committed after it was taken, so a waiting claim would never see new work."),
				 errhint("Claim with wait in a READ COMMITTED transaction, or with wait => '0'.")));
}

/*
 * dlock_claim with wait > 0: join the table's queue, then try; while
 * nothing was claimed, sleep until woken (wait/README.md, "Claim
 * waiters") and try again, up to the deadline.  Leaves the queue on every
 * path; one that claimed a full batch wakes the next waiter.
 */
void
dlock_claim_wait(const ClaimRequest *req, Tuplestorestate *out,
				 TupleDesc outdesc)
{
	Oid			relid = req->target->claim_relid;
	TimestampTz deadline = GetCurrentTimestamp() + req->wait_us;
	MemoryContext cxt;
	volatile int got = 0;

	check_isolation();
	if (!exit_callback_registered)
	{
		before_shmem_exit(claim_wait_exit_callback, (Datum) 0);
		exit_callback_registered = true;
	}
	cxt = AllocSetContextCreate(CurrentMemoryContext, "dlock claim attempt",
								ALLOCSET_DEFAULT_SIZES);
	/* join before the first attempt: a commit after it wakes this waiter */
	dlock_wait_join_claim(dlock_claim_wait_queue(relid),
						  cstring_to_text(psprintf("claim:%s",
												   req->target->qualname)),
						  req->holder);
	PG_TRY();
	{
		got = attempt(req, out, outdesc, cxt);
		if (got == 0)
			dlock_count(DLOCK_STAT_CLAIM_WAITS, 1);
		while (got == 0 && sleep_for_turn(relid, deadline))
		{
			dlock_count(DLOCK_STAT_CLAIM_WAKEUPS, 1);
			got = attempt(req, out, outdesc, cxt);
		}
	}
	PG_CATCH();
	{
		dlock_wait_leave_claim(false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	/* a full batch: more rows may wait, for the next waiter */
	dlock_wait_leave_claim(got == req->n);
	MemoryContextDelete(cxt);
}
