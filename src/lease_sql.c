/*-------------------------------------------------------------------------
 *
 * lease_sql.c
 *		SQL-callable entry points for lease locks.  Each one checks and
 *		unpacks its arguments and calls the plain C code in lease_acquire.c and
 *		lease.c.
 *
 * None of these functions is STRICT: NULL means "not acquired" for
 * dlock_acquire, so a NULL argument is an error (base_args.c), never a NULL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/xlog.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base_args.h"
#include "base_settings.h"
#include "claim_manage.h"
#include "base_limits.h"
#include "lease.h"
#include "base_stats.h"
#include "maint_worker.h"

/*
 * The three acquires: key, holder, ttl and wait in arguments 0 to 3, and
 * slots in argument slots_arg (-1: the given slots); checked in that order.
 * The token, or NULL when not acquired within wait.
 */
static Datum
acquire_sql(FunctionCallInfo fcinfo, const char *fn, int slots_arg, int slots)
{
	text	   *key = dlock_arg_key(fcinfo, 0);
	text	   *holder = dlock_arg_holder(fcinfo, 1);
	int64		ttl_us = dlock_arg_ttl(fcinfo, 2, false);
	int64		wait_us = dlock_arg_wait(fcinfo, 3);
	int64		token;

	if (slots_arg >= 0)
		slots = dlock_arg_slots(fcinfo, slots_arg);
	dlock_arg_writes_allowed(fn);
	if (!dlock_acquire(key, holder, ttl_us, wait_us, slots, &token))
		PG_RETURN_NULL();
	PG_RETURN_INT64(token);
}

/*
 * dlock_acquire(key text, holder text, ttl interval DEFAULT '30 seconds',
 *				 wait interval DEFAULT '0') RETURNS bigint
 *
 * The fencing token, or NULL when the key was not acquired within wait.
 * NULL arguments are errors.  The function of the install scripts up to
 * 0.4; since 0.5 dlock_acquire is dlock_acquire_slots_sql with slots
 * DEFAULT 1 (issue 36).
 */
PG_FUNCTION_INFO_V1(dlock_acquire_sql);
Datum
dlock_acquire_sql(PG_FUNCTION_ARGS)
{
	return acquire_sql(fcinfo, "dlock_acquire()", -1, 1);
}

/*
 * dlock_acquire(key text, holder text, ttl interval DEFAULT '30 seconds',
 *				 wait interval DEFAULT '0', slots integer DEFAULT 1)
 *		RETURNS bigint
 *
 * A counting semaphore: the key admits up to slots holders at once, each
 * with its own token (slots 1: a lease).  The defaults come with 0.5
 * (issue 36), when this function replaced the four-argument one.
 * Every acquire of a key names the same slots while anyone holds or waits
 * for it.  The fencing token, or NULL when not acquired within wait.  NULL
 * arguments are errors.
 */
PG_FUNCTION_INFO_V1(dlock_acquire_slots_sql);
Datum
dlock_acquire_slots_sql(PG_FUNCTION_ARGS)
{
	return acquire_sql(fcinfo, "dlock_acquire()", 4, 0);
}

/*
 * dlock_acquire_shared(key text, holder text,
 *						ttl interval DEFAULT '30 seconds',
 *						wait interval DEFAULT '0') RETURNS bigint
 *
 * A shared lease: any number of shared holders at once (up to
 * DLOCK_MAX_SLOTS), or the one holder of the key's lease (dlock_acquire),
 * in the FIFO order of the key's queue.  The fencing token, or NULL when
 * not acquired within wait.  NULL arguments are errors.
 */
PG_FUNCTION_INFO_V1(dlock_acquire_shared_sql);
Datum
dlock_acquire_shared_sql(PG_FUNCTION_ARGS)
{
	return acquire_sql(fcinfo, "dlock_acquire_shared()", -1, DLOCK_SLOTS_SHARED);
}

/*
 * dlock_release(key text, holder text, token bigint DEFAULT NULL)
 *		RETURNS boolean
 *
 * True when this holder (and role) held an unexpired lease on key, with
 * that token if one is given, and the key is now free.  NULL key or
 * holder is an error; a NULL token means "whatever grant".
 */
PG_FUNCTION_INFO_V1(dlock_release_sql);
Datum
dlock_release_sql(PG_FUNCTION_ARGS)
{
	text	   *key = dlock_arg_key(fcinfo, 0);
	text	   *holder = dlock_arg_holder(fcinfo, 1);
	int64		token = 0;
	bool		has_token = dlock_arg_token(fcinfo, 2, true, &token);
	bool		ok;

	dlock_arg_writes_allowed("dlock_release()");
	ok = dlock_lease_release(key, holder, has_token, token);
	if (ok)
		dlock_count(DLOCK_STAT_RELEASES, 1);
	PG_RETURN_BOOL(ok);
}

/*
 * dlock_renew(key text, holder text, ttl interval DEFAULT NULL,
 *			   token bigint DEFAULT NULL) RETURNS boolean
 *
 * Extends the holder's unexpired lease to now + ttl (NULL ttl: the ttl it
 * was granted with).  False when the lease is lost (expired, released,
 * taken over, or a different grant than token).
 */
PG_FUNCTION_INFO_V1(dlock_renew_sql);
Datum
dlock_renew_sql(PG_FUNCTION_ARGS)
{
	text	   *key = dlock_arg_key(fcinfo, 0);
	text	   *holder = dlock_arg_holder(fcinfo, 1);
	int64		ttl_us = dlock_arg_ttl(fcinfo, 2, true);
	int64		token = 0;
	bool		has_token = dlock_arg_token(fcinfo, 3, true, &token);
	bool		ok;

	dlock_arg_writes_allowed("dlock_renew()");
	ok = dlock_lease_renew(key, holder, ttl_us, has_token, token);
	if (ok)
		dlock_count(DLOCK_STAT_RENEWALS, 1);
	PG_RETURN_BOOL(ok);
}

/*
 * dlock_validate(key text, holder text, token bigint) RETURNS boolean
 *
 * True when holder holds key with exactly this token, unexpired; then the
 * lease cannot change hands until the calling transaction ends.  All
 * three arguments are required.
 */
PG_FUNCTION_INFO_V1(dlock_validate_sql);
Datum
dlock_validate_sql(PG_FUNCTION_ARGS)
{
	text	   *key = dlock_arg_key(fcinfo, 0);
	text	   *holder = dlock_arg_holder(fcinfo, 1);
	int64		token = 0;

	(void) dlock_arg_token(fcinfo, 2, false, &token);
	/* a standby cannot hold off a takeover on the primary: no fence there */
	dlock_arg_writes_allowed("dlock_validate()");
	PG_RETURN_BOOL(dlock_lease_validate(key, holder, token));
}

/*
 * dlock_release_all(holder text) RETURNS bigint
 *
 * Frees every unexpired lease and claim of this holder taken by the
 * calling role; returns how many.  NULL holder is an error.
 */
PG_FUNCTION_INFO_V1(dlock_release_all_sql);
Datum
dlock_release_all_sql(PG_FUNCTION_ARGS)
{
	text	   *holder = dlock_arg_holder(fcinfo, 0);
	int64		n;

	dlock_arg_writes_allowed("dlock_release_all()");
	n = dlock_lease_release_all(holder);
	dlock_count(DLOCK_STAT_RELEASES, n);
	n += dlock_claim_release_all(holder);
	PG_RETURN_INT64(n);
}

/*
 * dlock_force_release(key text) RETURNS boolean
 *
 * For operators (EXECUTE is revoked from PUBLIC): frees an unexpired
 * lease whoever holds it; false when there was none.
 */
PG_FUNCTION_INFO_V1(dlock_force_release_sql);
Datum
dlock_force_release_sql(PG_FUNCTION_ARGS)
{
	text	   *key = dlock_arg_key(fcinfo, 0);

	dlock_arg_writes_allowed("dlock_force_release()");
	PG_RETURN_BOOL(dlock_lease_force_release(key));
}

/*
 * dlock_cleanup(idle interval DEFAULT NULL) RETURNS bigint
 *
 * Deletes the rows of lease keys, and the claim rows, that have been free
 * or expired for longer than idle (NULL: dlock.idle_key_lifetime), never a
 * live lease or claim nor a poisoned claim row; returns how many.  At most
 * DLOCK_CLEANUP_MAX_ROWS of each per call: call it again while it returns
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
	PG_RETURN_INT64(dlock_worker_cleanup(idle_us, DLOCK_CLEANUP_MAX_ROWS));
}
