/*-------------------------------------------------------------------------
 *
 * history_sql.c
 *		SQL-callable entry points that change what dlock's history tracks:
 *		dlock_history_track, dlock_history_untrack (lease key prefixes, for
 *		operators) and dlock_history_track_claims,
 *		dlock_history_untrack_claims (claim tables, for their owners).
 *		They check their arguments and call history_track.c.  The view's
 *		function is views_sql.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"

#include "compat.h"
#include "history/history.h"

/* the prefix argument: not NULL, '' (every key) up to a key's length */
static text *
arg_prefix(FunctionCallInfo fcinfo, int argno)
{
	text	   *prefix;

	dlock_arg_not_null(fcinfo, argno, "prefix");
	prefix = PG_GETARG_TEXT_PP(argno);
	if (VARSIZE_ANY_EXHDR(prefix) > DLOCK_MAX_KEY_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("prefix must be at most %d bytes", DLOCK_MAX_KEY_BYTES)));
	return prefix;
}

/* the table argument: not NULL, a table the caller owns (or a superuser) */
static Oid
arg_owned_table(FunctionCallInfo fcinfo, int argno, const char *fn)
{
	Oid			relid;
	char		kind;

	dlock_arg_not_null(fcinfo, argno, "table");
	relid = PG_GETARG_OID(argno);
	kind = get_rel_relkind(relid);
	if (kind == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table with OID %u does not exist", relid)));
	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", get_rel_name(relid))));
	if (!dlock_table_ownercheck(relid, GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of table %s to call %s",
						get_rel_name(relid), fn),
				 errdetail("The history of a table's claims is tracked or not by its owner or a superuser.")));
	return relid;
}

/*
 * dlock_history_track(prefix text) RETURNS boolean
 *
 * For operators (EXECUTE is revoked from PUBLIC): records the tenures of
 * the lease keys that begin with prefix ('': every key) in dlock.history
 * from the transactions that start after this one commits.  NULL is an
 * error.  True when the prefix was not tracked before.
 */
PG_FUNCTION_INFO_V1(dlock_history_track_sql);
Datum
dlock_history_track_sql(PG_FUNCTION_ARGS)
{
	text	   *prefix = arg_prefix(fcinfo, 0);

	dlock_arg_writes_allowed("dlock_history_track()");
	PG_RETURN_BOOL(dlock_history_set_key(prefix, true));
}

/*
 * dlock_history_untrack(prefix text) RETURNS boolean
 *
 * For operators: stops tracking that prefix (the rows written stay).  NULL
 * is an error.  True when it was tracked.
 */
PG_FUNCTION_INFO_V1(dlock_history_untrack_sql);
Datum
dlock_history_untrack_sql(PG_FUNCTION_ARGS)
{
	text	   *prefix = arg_prefix(fcinfo, 0);

	dlock_arg_writes_allowed("dlock_history_untrack()");
	PG_RETURN_BOOL(dlock_history_set_key(prefix, false));
}

/*
 * dlock_history_track_claims(tbl regclass) RETURNS boolean
 *
 * The table's owner or a superuser: records the tenures of the claims on
 * tbl.  NULL is an error.  True when the table was not tracked before.
 */
PG_FUNCTION_INFO_V1(dlock_history_track_claims_sql);
Datum
dlock_history_track_claims_sql(PG_FUNCTION_ARGS)
{
	Oid			relid = arg_owned_table(fcinfo, 0, "dlock_history_track_claims()");

	dlock_arg_writes_allowed("dlock_history_track_claims()");
	PG_RETURN_BOOL(dlock_history_set_table(relid, true));
}

/*
 * dlock_history_untrack_claims(tbl regclass) RETURNS boolean
 *
 * The table's owner or a superuser: stops tracking its claims.  NULL is
 * an error.  True when it was tracked.
 */
PG_FUNCTION_INFO_V1(dlock_history_untrack_claims_sql);
Datum
dlock_history_untrack_claims_sql(PG_FUNCTION_ARGS)
{
	Oid			relid = arg_owned_table(fcinfo, 0, "dlock_history_untrack_claims()");

	dlock_arg_writes_allowed("dlock_history_untrack_claims()");
	PG_RETURN_BOOL(dlock_history_set_table(relid, false));
}
