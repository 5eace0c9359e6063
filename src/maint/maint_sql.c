/*-------------------------------------------------------------------------
 *
 * maint_sql.c
 *		SQL-callable entry point of maintenance, dlock_cleanup: checks and
 *		unpacks its argument and asks the background worker (maint_worker.c)
 *		to sweep.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "maint/maint_int.h"

/*
 * dlock_cleanup(idle interval DEFAULT NULL) RETURNS bigint
 *
 * Deletes the rows of lease keys, and the claim rows, that have been free
 * or expired for longer than idle (NULL: dlock.idle_key_lifetime), never a
 * live lease or claim nor a poisoned claim row, and (0.5) the rows of
 * dlock.history older than dlock.history_retention; returns how many.  At
 * most DLOCK_CLEANUP_MAX_ROWS of each per call: call it again while it returns
 * more than zero.  The deletes are made and committed by dlock's
 * background worker (maint_worker.c), not in the caller's transaction, which is
 * left holding nothing.  Acquires and claims do this now and then by
 * themselves.
 */
PG_FUNCTION_INFO_V1(dlock_cleanup_sql);
Datum
dlock_cleanup_sql(PG_FUNCTION_ARGS)
{
	int64		idle_us;

	if (PG_ARGISNULL(0))
		idle_us = (int64) dlock_idle_key_lifetime_s * USECS_PER_SEC;
	else
	{
		idle_us = dlock_interval_usecs(PG_GETARG_INTERVAL_P(0));
		if (idle_us < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("idle must not be negative")));
	}
	dlock_arg_writes_allowed("dlock_cleanup()");
	PG_RETURN_INT64(dlock_worker_cleanup(idle_us,
										 (int64) dlock_history_retention_s * USECS_PER_SEC,
										 DLOCK_CLEANUP_MAX_ROWS));
}
