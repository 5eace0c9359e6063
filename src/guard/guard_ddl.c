/*-------------------------------------------------------------------------
 *
 * guard_ddl.c
 *		Putting a guard on a table (dlock_guard) and taking it off
 *		(dlock_unguard): the checks, then the two triggers, created and
 *		dropped through SPI as the caller.
 *
 * Only the table's owner (or a superuser) may: the guard is the table's
 * own rule, as its triggers are.  The triggers are the guard's whole
 * configuration (guard.h): the row trigger's arguments are the key
 * expression and the token column, its events the guarded operations.
 * dlock_guard on a guarded table drops both and creates them anew, in
 * the caller's transaction: a guard is replaced at commit, never missing.
 *
 * On a partitioned table the row trigger is cloned onto every partition,
 * present and future, by PostgreSQL; a statement trigger is not, so the
 * TRUNCATE trigger is put on each present partition too (a partition
 * attached later is covered by guard_truncate.c's check).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "base/base.h"
#include "guard/guard.h"
#include "compat.h"

/*
 * The operations array of dlock_guard as trigger type bits: each of
 * 'insert', 'update', 'delete' (in any case), at least one, no NULL.
 */
int
dlock_guard_ops(ArrayType *operations)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			ops = 0;

	deconstruct_array(operations, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
	{
		char	   *op = nulls[i] ? NULL : text_to_cstring(DatumGetTextPP(elems[i]));

		if (op != NULL && pg_strcasecmp(op, "insert") == 0)
			ops |= TRIGGER_TYPE_INSERT;
		else if (op != NULL && pg_strcasecmp(op, "update") == 0)
			ops |= TRIGGER_TYPE_UPDATE;
		else if (op != NULL && pg_strcasecmp(op, "delete") == 0)
			ops |= TRIGGER_TYPE_DELETE;
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid operation \"%s\" for dlock_guard",
							op ? op : "NULL"),
					 errdetail("The operations are insert, update and delete; TRUNCATE of a guarded table is always refused.")));
	}
	if (ops == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dlock_guard needs at least one operation"),
				 errhint("Call dlock_unguard(tbl) to take the guard off.")));
	return ops;
}

static char *
qualified_name_of(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/* the table, locked as CREATE TRIGGER locks it, if the caller owns it */
static Relation
open_owned(Oid relid, const char *fn)
{
	Relation	rel = table_open(relid, ShareRowExclusiveLock);

	if (rel->rd_rel->relkind != RELKIND_RELATION &&
		rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", RelationGetRelationName(rel)),
				 errdetail("%s takes a table or a partitioned table.", fn)));
	if (!dlock_class_ownercheck(relid, GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of table %s", RelationGetRelationName(rel)),
				 errdetail("Only the table's owner or a superuser may call %s on it.", fn)));
	return rel;
}

/* token_column: a bigint column of rel */
static void
check_token_column(Relation rel, const char *column)
{
	int			attnum = SPI_fnumber(RelationGetDescr(rel), column);

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of table \"%s\" does not exist",
						column, RelationGetRelationName(rel))));
	if (TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("token column \"%s\" must be of type bigint", column)));
}

static void
run(const char *sql)
{
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "dlock_guard: \"%s\" failed", sql);
}

/* Drop the guard's triggers of relid and of its partitions; any there? */
static bool
drop_triggers(Oid relid)
{
	List	   *rels = find_all_inheritors(relid, NoLock, NULL);
	bool		had = OidIsValid(get_trigger_oid(relid, DLOCK_GUARD_ROW_TRIGGER, true)) ||
		OidIsValid(get_trigger_oid(relid, DLOCK_GUARD_TRUNCATE_TRIGGER, true));
	ListCell   *lc;

	foreach(lc, rels)
	{
		Oid			r = lfirst_oid(lc);

		CHECK_FOR_INTERRUPTS();
		if (OidIsValid(get_trigger_oid(r, DLOCK_GUARD_TRUNCATE_TRIGGER, true)))
			run(psprintf("DROP TRIGGER %s ON %s",
						 quote_identifier(DLOCK_GUARD_TRUNCATE_TRIGGER),
						 qualified_name_of(r)));
	}
	if (OidIsValid(get_trigger_oid(relid, DLOCK_GUARD_ROW_TRIGGER, true)))
		run(psprintf("DROP TRIGGER %s ON %s",
					 quote_identifier(DLOCK_GUARD_ROW_TRIGGER),
					 qualified_name_of(relid)));
	return had;
}

static void
create_triggers(Oid relid, const char *fn, text *key, int ops,
				const char *token_column)
{
	List	   *rels = find_all_inheritors(relid, NoLock, NULL);
	StringInfoData events;
	ListCell   *lc;

	initStringInfo(&events);
	if (ops & TRIGGER_TYPE_INSERT)
		appendStringInfoString(&events, "INSERT");
	if (ops & TRIGGER_TYPE_UPDATE)
		appendStringInfo(&events, "%sUPDATE", events.len ? " OR " : "");
	if (ops & TRIGGER_TYPE_DELETE)
		appendStringInfo(&events, "%sDELETE", events.len ? " OR " : "");
	run(psprintf("CREATE TRIGGER %s BEFORE %s ON %s FOR EACH ROW"
				 " EXECUTE FUNCTION %s(%s, %s)",
				 quote_identifier(DLOCK_GUARD_ROW_TRIGGER), events.data,
				 qualified_name_of(relid), fn,
				 quote_literal_cstr(text_to_cstring(key)),
				 quote_literal_cstr(token_column ? token_column : "")));
	foreach(lc, rels)
	{
		CHECK_FOR_INTERRUPTS();
		if (get_rel_relkind(lfirst_oid(lc)) != RELKIND_RELATION &&
			get_rel_relkind(lfirst_oid(lc)) != RELKIND_PARTITIONED_TABLE)
			continue;
		run(psprintf("CREATE TRIGGER %s BEFORE TRUNCATE ON %s"
					 " FOR EACH STATEMENT EXECUTE FUNCTION %s()",
					 quote_identifier(DLOCK_GUARD_TRUNCATE_TRIGGER),
					 qualified_name_of(lfirst_oid(lc)), fn));
	}
}

/*
 * Put the guard (key, operations ops, token_column or NULL) on table
 * relid, replacing the one there; fn_nsp is the schema of dlock's
 * functions.  The caller must own the table.
 */
void
dlock_guard_put(Oid relid, Oid fn_nsp, text *key, int ops,
				const char *token_column)
{
	Relation	rel = open_owned(relid, "dlock_guard");
	char	   *fn = psprintf("%s.dlock_guard_trigger",
							  quote_identifier(get_namespace_name(fn_nsp)));

	if (token_column != NULL)
		check_token_column(rel, token_column);
	dlock_guard_key_check(rel, text_to_cstring(key));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	(void) drop_triggers(relid);
	create_triggers(relid, fn, key, ops, token_column);
	SPI_finish();
	table_close(rel, NoLock);
}

/* Take the guard off table relid; false when it had none. */
bool
dlock_guard_remove(Oid relid)
{
	Relation	rel = open_owned(relid, "dlock_unguard");
	bool		had;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	had = drop_triggers(relid);
	SPI_finish();
	table_close(rel, NoLock);
	return had;
}
