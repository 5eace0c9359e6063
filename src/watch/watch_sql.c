/*-------------------------------------------------------------------------
 *
 * watch_sql.c
 *		SQL-callable entry points for watching keys, reading a key's
 *		leader and counting the watches.  Each one checks and unpacks its
 *		arguments and calls the plain C code in watch_session.c (the
 *		count: watch_registry.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "lease/lease.h"
#include "watch/watch_int.h"

/*
 * dlock_watch(key text) RETURNS text
 *
 * Subscribes this session to key's changes and returns the channel (a
 * random name, already LISTENed on) on which they come.  NULL key is an
 * error; so is a server without dlock in shared_preload_libraries.
 */
PG_FUNCTION_INFO_V1(dlock_watch_sql);
Datum
dlock_watch_sql(PG_FUNCTION_ARGS)
{
	text	   *key = dlock_arg_key(fcinfo, 0);

	PG_RETURN_TEXT_P(cstring_to_text(dlock_watch_key(key)));
}

/*
 * dlock_unwatch(key text) RETURNS boolean
 *
 * Ends this session's watch of key when the transaction commits; false
 * when the session did not watch it.  NULL key is an error.
 */
PG_FUNCTION_INFO_V1(dlock_unwatch_sql);
Datum
dlock_unwatch_sql(PG_FUNCTION_ARGS)
{
	text	   *key = dlock_arg_key(fcinfo, 0);

	PG_RETURN_BOOL(dlock_watch_drop(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key)));
}

/*
 * dlock_unwatch() RETURNS bigint
 *
 * Ends every watch of this session in this database when the transaction
 * commits; returns how many there were.
 */
PG_FUNCTION_INFO_V1(dlock_unwatch_all_sql);
Datum
dlock_unwatch_all_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(dlock_watch_drop_all());
}

/*
 * dlock_leader(key text) RETURNS SETOF record (holder text, owner regrole,
 *		token bigint, acquired_at timestamptz, expires_at timestamptz)
 *
 * One row with key's live lease at the latest committed state, when the
 * caller may see it (as in dlock_locks); no row otherwise.  NULL key is an
 * error.
 */
PG_FUNCTION_INFO_V1(dlock_leader_sql);
Datum
dlock_leader_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *key = dlock_arg_key(fcinfo, 0);
	DlockLease	l;
	Datum		values[5];
	bool		nulls[5] = {0};

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != 5)
		elog(ERROR, "dlock_leader: expected 5 columns, got %d",
			 rsinfo->setDesc->natts);
	if (!dlock_watch_leader(key, &l))
		PG_RETURN_VOID();
	values[0] = PointerGetDatum(l.holder);
	values[1] = ObjectIdGetDatum(l.owner);
	values[2] = Int64GetDatum(l.token);
	values[3] = TimestampTzGetDatum(l.acquired_at);
	values[4] = TimestampTzGetDatum(l.expires_at);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	PG_RETURN_VOID();
}

/*
 * dlock_watch_count() RETURNS bigint
 *
 * How many watches (a session and a key each) this database has now, of
 * every role: for monitoring (EXECUTE for pg_monitor only).  0 on a server
 * without dlock in shared_preload_libraries.
 */
PG_FUNCTION_INFO_V1(dlock_watch_count_sql);
Datum
dlock_watch_count_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(dlock_watch_db_count(MyDatabaseId));
}
