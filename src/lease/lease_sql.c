/*-------------------------------------------------------------------------
 *
 * lease_sql.c
 *		SQL-callable entry points for leases: one key (lease_acquire.c,
 *		lease_decide.c) and several keys at once (lease_multi.c).  Each one checks
 *		and unpacks its arguments and calls plain C.
 *
 * None of these functions is STRICT: NULL means "not acquired" for
 * dlock_acquire and dlock_acquire_all, so a NULL argument (or a NULL key in
 * the array) is an error (base_args.c), never a NULL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "compat.h"
#include "claim/claim.h"
#include "lease/lease_int.h"

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
 * dlock_release and dlock_renew: key and holder in arguments 0 and 1, for
 * a renewal the ttl in argument 2 (NULL: the ttl the lease was granted
 * with), then the token (NULL: whatever grant); checked in that order.
 * True, and counted, when the holder's unexpired lease was released or
 * renewed.
 */
static Datum
release_or_renew_sql(FunctionCallInfo fcinfo, bool renew)
{
	text	   *key = dlock_arg_key(fcinfo, 0);
	text	   *holder = dlock_arg_holder(fcinfo, 1);
	int64		ttl_us = renew ? dlock_arg_ttl(fcinfo, 2, true) : 0;
	int64		token = 0;
	bool		has_token = dlock_arg_token(fcinfo, renew ? 3 : 2, true, &token);
	bool		ok;

	dlock_arg_writes_allowed(renew ? "dlock_renew()" : "dlock_release()");
	if (renew)
		ok = dlock_lease_renew(key, holder, ttl_us, has_token, token);
	else
		ok = dlock_lease_release(key, holder, has_token, token);
	if (ok)
		dlock_count(renew ? DLOCK_STAT_RENEWALS : DLOCK_STAT_RELEASES, 1);
	PG_RETURN_BOOL(ok);
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
	return release_or_renew_sql(fcinfo, false);
}

/*
 * dlock_renew(key text, holder text, ttl interval DEFAULT NULL,
 *			   token bigint DEFAULT NULL) RETURNS boolean
 *
 * Extends the holder's unexpired lease to now + ttl (NULL ttl: the ttl it
 * was granted with).  False when the lease is lost (expired, released,
 * taken over, or a different grant than token).  NULL key or holder is an
 * error.
 */
PG_FUNCTION_INFO_V1(dlock_renew_sql);
Datum
dlock_renew_sql(PG_FUNCTION_ARGS)
{
	return release_or_renew_sql(fcinfo, true);
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

/* the keys array: one dimension, no NULL, each a valid key */
static text **
keys_arg(FunctionCallInfo fcinfo, int argno, int *nkeys)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	text	  **keys;
	int			n;
	int			i;

	dlock_arg_not_null(fcinfo, argno, "keys");
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("keys must be a one-dimensional array"),
				 errdetail("This array has %d dimensions.", ARR_NDIM(arr))));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	if (n > DLOCK_MAX_ACQUIRE_ALL_KEYS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many keys"),
				 errdetail("dlock_acquire_all takes at most %d keys; this call has %d.",
						   DLOCK_MAX_ACQUIRE_ALL_KEYS, n),
				 errhint("Each key keeps an entry in the shared lock table until the transaction ends.")));
	keys = palloc(sizeof(text *) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("key must not be null"),
					 errdetail("Element %d of keys is null.", i + 1)));
		keys[i] = dlock_check_key(DatumGetTextPP(elems[i]));
	}
	*nkeys = n;
	return keys;
}

/*
 * dlock_acquire_all(keys text[], holder text,
 *					 ttl interval DEFAULT '30 seconds',
 *					 wait interval DEFAULT '0') RETURNS bigint[]
 *
 * One token per element of keys, in their order (the same token for a
 * key given twice), when every key was acquired within wait; NULL when
 * not, and then nothing is held or queued.  An empty array gives an
 * empty array.  NULL arguments and NULL keys are errors.
 */
PG_FUNCTION_INFO_V1(dlock_acquire_all_sql);
Datum
dlock_acquire_all_sql(PG_FUNCTION_ARGS)
{
	int			nkeys;
	text	  **keys = keys_arg(fcinfo, 0, &nkeys);
	text	   *holder = dlock_arg_holder(fcinfo, 1);
	int64		ttl_us = dlock_arg_ttl(fcinfo, 2, false);
	int64		wait_us = dlock_arg_wait(fcinfo, 3);
	int64	   *tokens = palloc(sizeof(int64) * Max(nkeys, 1));
	Datum	   *out;
	int			i;

	dlock_arg_writes_allowed("dlock_acquire_all()");
	if (!dlock_acquire_all(keys, nkeys, holder, ttl_us, wait_us, tokens))
		PG_RETURN_NULL();
	if (nkeys == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(INT8OID));
	out = palloc(sizeof(Datum) * nkeys);
	for (i = 0; i < nkeys; i++)
		out[i] = Int64GetDatum(tokens[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(out, nkeys, INT8OID, sizeof(int64),
										  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}
