/*-------------------------------------------------------------------------
 *
 * lease_multi_sql.c
 *		SQL-callable entry point for several keys at once,
 *		dlock_acquire_all: checks and unpacks its arguments and calls
 *		lease_multi.c.
 *
 * Not STRICT: NULL means "not acquired", so a NULL argument (or a NULL
 * key in the array) is an error, never a NULL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"

#include "base_args.h"
#include "compat.h"
#include "lease_multi.h"

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
