/*-------------------------------------------------------------------------
 *
 * guard_truncate.c
 *		TRUNCATE of a guarded table, refused: it fires no row trigger, so
 *		the guard could not check the keys of the rows it removes.
 *
 * Two ways, because neither alone covers everything:
 *
 *  - the guard's BEFORE TRUNCATE statement trigger (guard_ddl.c puts it on
 *    the table and on its partitions of the time), which works whether or
 *    not this backend has loaded dlock;
 *  - a check before every TRUNCATE through dlock's ProcessUtility hook
 *    (base_xact.c), once dlock is loaded in the backend (always, with
 *    shared_preload_libraries): a table whose guard row trigger is there
 *    and enabled is refused.  A partition created or attached after
 *    dlock_guard has the row trigger (PostgreSQL clones it) but no
 *    statement trigger: this is what refuses its TRUNCATE.
 *
 * Like the triggers, the check stands aside under session_replication_role
 * = replica (the row trigger would not fire either), and for a table whose
 * row trigger its owner disabled.  Logical replication's apply truncates
 * without ProcessUtility, under that role anyway.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "base/base.h"
#include "guard/guard.h"

/* The refusal of TRUNCATE of rel. */
void
dlock_guard_refuse_truncate(Relation rel)
{
	ereport(ERROR,
			(errcode(ERRCODE_DLOCK_GUARD_REFUSED),
			 errmsg("truncate of guarded table %s refused",
					quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
											   RelationGetRelationName(rel))),
			 errdetail("TRUNCATE fires no row trigger: the guard could not check the keys of the rows it removes."),
			 errhint("Delete the rows under their fences, or call dlock_unguard(tbl) first.")));
}

/* whether rel has the guard's row trigger, enabled as triggers fire now */
static bool
guard_firing(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;

	if (td == NULL)
		return false;
	for (int i = 0; i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];

		/* as the trigger manager decides (a disabled one: neither) */
		if (strcmp(t->tgname, DLOCK_GUARD_ROW_TRIGGER) == 0 &&
			(t->tgenabled == TRIGGER_FIRES_ALWAYS ||
			 (t->tgenabled == TRIGGER_FIRES_ON_ORIGIN) ==
			 (SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA)))
			return true;
	}
	return false;
}

/* before every utility statement: refuses TRUNCATE of a guarded table */
static bool
truncate_check(Node *stmt)
{
	ListCell   *lc;

	if (!IsA(stmt, TruncateStmt))
		return false;
	foreach(lc, ((TruncateStmt *) stmt)->relations)
	{
		Oid			relid = RangeVarGetRelid(lfirst_node(RangeVar, lc), NoLock, true);
		Relation	rel;

		CHECK_FOR_INTERRUPTS();
		if (!OidIsValid(relid))
			continue;			/* TRUNCATE itself will say so */
		rel = try_relation_open(relid, AccessShareLock);
		if (rel == NULL)
			continue;
		if (guard_firing(rel))
			dlock_guard_refuse_truncate(rel);
		relation_close(rel, AccessShareLock);
	}
	return false;
}

static void
truncate_after(void)
{
}

/* called from _PG_init */
void
dlock_guard_init(void)
{
	dlock_utility_hook_add(truncate_check, truncate_after);
}
