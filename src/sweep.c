/*-------------------------------------------------------------------------
 *
 * sweep.c
 *		Deleting the rows of lease keys that have been free or expired for
 *		longer than dlock.idle_key_lifetime: the sweep that grants run now
 *		and then, and the lease part of dlock_cleanup().
 *
 * A sweep must never make a free key look taken, nor hold anything past
 * its own work.  It takes no key lock: one statement locks the idle rows
 * FOR UPDATE SKIP LOCKED and deletes them (lease_store.c), skipping every
 * row another transaction is changing and waiting for nobody.  A
 * transaction that works on such a key meanwhile decides on an idle row
 * (which it still is once deleted) and its write waits for the sweep's
 * transaction to end.  That wait must be short, so the deletes of a sweep
 * are committed at once:
 *
 *  - one grant in 1024 (a lottery rather than a count, so that short
 *    sessions behind poolers take part too) sweeps a few rows at the
 *    pre-commit of its transaction, however long that transaction still
 *    runs after the grant; in a subtransaction, so that a failing sweep
 *    only logs and never fails the commit.  Not in a SERIALIZABLE
 *    transaction (it would take part in its conflict detection), nor in a
 *    prepared one (it would hold its row locks until COMMIT PREPARED);
 *  - dlock_cleanup() has dlock's background worker do it, in transactions
 *    of the worker's own (worker.c).
 *
 * The worker deletes the rows of abandoned hand-over grants the same way
 * (abandon.c): they read as free keys already, and must not look taken
 * while the worker deletes them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/pg_prng.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "lease_store.h"
#include "spi_access.h"
#include "sweep.h"

/* this transaction drew the sweep: it runs at pre-commit */
static bool sweep_pending = false;
static bool callback_registered = false;

/*
 * Delete up to limit lease rows free or expired for longer than idle_us,
 * in the whole table or in a part of it chosen at random (see
 * dlock_lease_store_delete_idle); returns how many.
 */
int64
dlock_lease_sweep(int64 idle_us, int limit, bool whole_table)
{
	TimestampTz before = GetCurrentTimestamp() - idle_us;
	DlockSpi	spi;
	int64		n;

	dlock_spi_begin(&spi);
	n = dlock_lease_store_delete_idle(before, limit, whole_table);
	dlock_spi_end(&spi);
	return n;
}

/*
 * dlock's worker (abandon.c): delete the row of an abandoned hand-over
 * grant, if it still holds that grant; true if it did.
 */
bool
dlock_lease_delete_abandoned(text *key, text *holder, Oid owner, int64 token)
{
	DlockSpi	spi;
	bool		deleted;

	dlock_spi_begin(&spi);
	deleted = dlock_lease_store_delete_grant(key, holder, owner, token);
	dlock_spi_end(&spi);
	return deleted;
}

/* the sweep, in a subtransaction whose error is logged, not raised */
static void
sweep_now(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		(void) dlock_lease_sweep((int64) dlock_idle_key_lifetime_s * USECS_PER_SEC,
								 DLOCK_SWEEP_ROWS, false);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		ereport(LOG,
				(errmsg("dlock could not sweep idle keys: %s", edata->message)));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
}

static void
sweep_xact_callback(XactEvent event, void *arg)
{
	if (!sweep_pending)
		return;
	if (event == XACT_EVENT_PRE_COMMIT && !IsolationIsSerializable())
	{
		sweep_pending = false;
		sweep_now();
	}
	else if (event != XACT_EVENT_PRE_COMMIT)
		sweep_pending = false;
}

/*
 * After a grant: one in dlock.debug_sweep_every (1024) draws the sweep of
 * its transaction's pre-commit.
 */
void
dlock_sweep_maybe(void)
{
	if (pg_prng_uint64_range(&pg_global_prng_state, 1,
							 (uint64) dlock_debug_sweep_every) != 1)
		return;
	if (!callback_registered)
	{
		RegisterXactCallback(sweep_xact_callback, NULL);
		callback_registered = true;
	}
	sweep_pending = true;
}
