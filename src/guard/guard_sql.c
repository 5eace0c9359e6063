/*-------------------------------------------------------------------------
 *
 * guard_sql.c
 *		SQL-callable entry points of the guard: dlock_guard, dlock_unguard
 *		and the triggers' function dlock_guard_trigger.  Each checks and
 *		unpacks its arguments and calls guard_ddl.c, guard_row.c or
 *		guard_truncate.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "base/base.h"
#include "guard/guard.h"

/*
 * dlock_guard(tbl regclass, key text,
 *             operations text[] DEFAULT '{insert,update,delete}',
 *             token_column name DEFAULT NULL) RETURNS void
 *
 * Puts a guard on tbl (replacing one there): its inserts, updates and
 * deletes (those of operations) are refused unless the transaction fenced
 * the row's key, the expression key over the row's columns, or the row's
 * claim; TRUNCATE is refused.  With token_column, a bigint column, writes
 * stamp it with the fence's token.  Only tbl's owner or a superuser.
 * NULL tbl, key or operations is an error; NULL token_column: none.
 */
PG_FUNCTION_INFO_V1(dlock_guard_sql);
Datum
dlock_guard_sql(PG_FUNCTION_ARGS)
{
	int			ops;

	dlock_arg_not_null(fcinfo, 0, "tbl");
	dlock_arg_not_null(fcinfo, 1, "key");
	dlock_arg_not_null(fcinfo, 2, "operations");
	ops = dlock_guard_ops(PG_GETARG_ARRAYTYPE_P(2));
	dlock_guard_put(PG_GETARG_OID(0),
					get_func_namespace(fcinfo->flinfo->fn_oid),
					PG_GETARG_TEXT_PP(1), ops,
					PG_ARGISNULL(3) ? NULL : NameStr(*PG_GETARG_NAME(3)));
	PG_RETURN_VOID();
}

/*
 * dlock_unguard(tbl regclass) RETURNS boolean
 *
 * Takes the guard off tbl; false when it had none.  Only tbl's owner or a
 * superuser.  NULL tbl is an error.
 */
PG_FUNCTION_INFO_V1(dlock_unguard_sql);
Datum
dlock_unguard_sql(PG_FUNCTION_ARGS)
{
	dlock_arg_not_null(fcinfo, 0, "tbl");
	PG_RETURN_BOOL(dlock_guard_remove(PG_GETARG_OID(0)));
}

/*
 * dlock_guard_trigger() RETURNS trigger
 *
 * The guard's triggers (dlock_guard puts them): BEFORE each guarded row
 * write, the row to write or an error (SQLSTATE LK001); BEFORE TRUNCATE,
 * always an error.
 */
PG_FUNCTION_INFO_V1(dlock_guard_trigger);
Datum
dlock_guard_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("dlock_guard_trigger() was not called by trigger manager")));
	if (TRIGGER_FIRED_BY_TRUNCATE(td->tg_event))
		dlock_guard_refuse_truncate(td->tg_relation);
	if (!TRIGGER_FIRED_FOR_ROW(td->tg_event) ||
		!TRIGGER_FIRED_BEFORE(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("dlock_guard_trigger() must be fired BEFORE, FOR EACH ROW")));
	return PointerGetDatum(dlock_guard_row(td));
}
