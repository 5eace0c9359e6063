/*-------------------------------------------------------------------------
 *
 * maint_sweep.c
 *		Deleting the rows of lease keys and of claims that have been free
 *		or expired for longer than dlock.idle_key_lifetime, and the rows of
 *		dlock.history older than dlock.history_retention (a bounded batch
 *		each time): the sweep that grants and claims run now and then
 *		(drawn in base_worker.c), and dlock_cleanup()'s deletes.
 *
 * A sweep must never make a free key (or row) look taken, nor hold
 * anything past its own work.  It takes no key lock: one statement locks
 * the idle rows FOR UPDATE SKIP LOCKED and deletes them (lease_store.c,
 * claim_store_spi.c), skipping every row another transaction is changing
 * and waiting for nobody.  A transaction that works on such a key
 * meanwhile decides on an idle row (which it still is once deleted) and
 * its write waits for the sweep's transaction to end.  That wait must be
 * short, so the deletes of a sweep are committed at once:
 *
 *  - one grant in 1024, and one claim that took rows in 64 (a lottery
 *    rather than a count, so that short sessions behind poolers take part
 *    too), sweeps a few rows at the pre-commit of its transaction, however
 *    long that transaction still runs after the grant or claim; in a
 *    subtransaction (base_xact.c), so that a failing sweep only logs and
 *    never fails the commit.  Not in a SERIALIZABLE transaction (it would
 *    take part in its conflict detection), nor in a prepared one (it would
 *    hold its row locks until COMMIT PREPARED);
 *  - dlock_cleanup() has dlock's background worker do it, in transactions
 *    of the worker's own (maint_worker.c).
 *
 * The worker deletes the rows of abandoned hand-over grants the same way
 * (wait_abandon.c): they read as free keys already, and must not look taken
 * while the worker deletes them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "claim/claim.h"
#include "history/history.h"
#include "lease/lease.h"
#include "maint/maint_int.h"

/* rows the sweep of a grant deletes at most */
#define DLOCK_SWEEP_ROWS	64
/* claim rows the sweep of a claim deletes at most */
#define DLOCK_CLAIM_SWEEP_ROWS	256

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
 * Delete up to limit claim rows free or expired for longer than idle_us
 * (not poisoned ones), and claim rows of tables that no longer exist;
 * returns how many.
 */
int64
dlock_claim_sweep(int64 idle_us, int limit)
{
	TimestampTz idle_before = GetCurrentTimestamp() - idle_us;
	DlockSpi	spi;
	int64		n;

	dlock_spi_begin(&spi);
	n = dlock_claim_store_delete_idle(idle_before, limit);
	dlock_spi_end(&spi);
	return n;
}

/*
 * Delete up to limit rows of dlock.history whose tenures ended more than
 * retention_us ago (0: none, they are kept forever); returns how many.
 */
int64
dlock_history_sweep(int64 retention_us, int limit)
{
	DlockSpi	spi;
	int64		n;

	if (retention_us <= 0)
		return 0;
	dlock_spi_begin(&spi);
	n = dlock_history_store_sweep(GetCurrentTimestamp() - retention_us, limit);
	dlock_spi_end(&spi);
	return n;
}

/*
 * dlock's worker (wait_abandon.c): delete the row of an abandoned hand-over
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

/* the sweeps a transaction drew */
typedef struct SweepsDrawn
{
	bool		leases;
	bool		claims;
	int64		idle_us;
	int64		retention_us;	/* dlock.history_retention */
} SweepsDrawn;

static bool
sweep_drawn(void *arg)
{
	SweepsDrawn *d = (SweepsDrawn *) arg;

	if (d->leases)
		(void) dlock_lease_sweep(d->idle_us, DLOCK_SWEEP_ROWS, false);
	if (d->claims)
		(void) dlock_claim_sweep(d->idle_us, DLOCK_CLAIM_SWEEP_ROWS);
	/* and a batch of old history, whichever was drawn */
	(void) dlock_history_sweep(d->retention_us, DLOCK_HISTORY_SWEEP_ROWS);
	return true;
}

/*
 * The sweeps drawn (of leases, of claims), in a subtransaction whose error
 * is logged, not raised.
 */
static void
sweep_now(bool leases, bool claims)
{
	SweepsDrawn d;
	ErrorData  *edata;
	bool		kept;

	d.leases = leases;
	d.claims = claims;
	d.idle_us = (int64) dlock_idle_key_lifetime_s * USECS_PER_SEC;
	d.retention_us = (int64) dlock_history_retention_s * USECS_PER_SEC;
	edata = dlock_subxact_run(sweep_drawn, &d, &kept);
	if (edata != NULL)
	{
		ereport(LOG,
				(errmsg("dlock could not sweep idle keys: %s", edata->message)));
		FreeErrorData(edata);
	}
}

static void
sweep_xact_callback(XactEvent event, void *arg)
{
	bool		leases;
	bool		claims;

	if (event == XACT_EVENT_PRE_COMMIT && IsolationIsSerializable())
		return;					/* drawn sweeps are forgotten at its end */
	dlock_sweeps_drawn(&leases, &claims);
	if ((leases || claims) && event == XACT_EVENT_PRE_COMMIT)
		sweep_now(leases, claims);
}

/*
 * At load (_PG_init): the pre-commit callback that runs the sweeps a
 * grant or a claim drew (base_worker.c).
 */
void
dlock_sweep_init(void)
{
	RegisterXactCallback(sweep_xact_callback, NULL);
}
