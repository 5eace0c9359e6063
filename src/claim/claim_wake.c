/*-------------------------------------------------------------------------
 *
 * claim_wake.c
 *		What wakes claims that wait for rows: the changes a transaction
 *		made that can make rows of a table claimable, noted per
 *		subtransaction level and woken at commit (or, for claims, at a
 *		rollback), and dlock_claim_wakeup's statement trigger.
 *
 * A table's waiting claims queue in the wait family's queue (wait_queue.c),
 * keyed by the hash of a key lock of class DW over the table's claim relid
 * (dlock_claim_wait_queue).  A committed change of the table wakes ONE
 * waiter, the first not woken yet; the waiter's side is claim_wait.c.
 *
 * Changes that wake: inserts and updates of a table with the trigger
 * (dlock_claim_wakeup), give-backs and resets of its claims, all at their
 * commit; and the rollback of a transaction or subtransaction that claimed
 * rows of it (its claims vanish).  The protocol is in wait/README.md
 * ("Claim waiters") and claim/README.md ("Waiting for rows").
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_trigger.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "base/base.h"
#include "claim/claim_int.h"
#include "claim/claim.h"
#include "wait/wait.h"

/* a table this transaction changed (wakes at commit) or claimed from */
typedef struct WaitNote
{
	Oid			relid;			/* its claim relid */
	int			level;			/* the subtransaction nest level */
	bool		on_abort;		/* claimed: wakes if that level rolls back */
} WaitNote;

static List *notes = NIL;		/* of WaitNote, in TopTransactionContext */
static bool callbacks_registered = false;

/* the queue of a table's waiting claims: a key lock hash of class DW */
uint64
dlock_claim_wait_queue(Oid relid)
{
	return dlock_key_for_text(DLOCK_CLASS_CLAIM_WAIT, (const char *) &relid,
							  sizeof(Oid)).hash;
}

/* Wake one waiter of each table noted (on_abort's), dropping the notes. */
static void
wake_noted(int from_level, bool on_abort)
{
	List	   *woken = NIL;
	List	   *kept = NIL;
	ListCell   *lc;

	foreach(lc, notes)
	{
		WaitNote   *n = lfirst(lc);

		if (n->level < from_level)
		{
			kept = lappend(kept, n);
			continue;
		}
		if (n->on_abort == on_abort && !list_member_oid(woken, n->relid))
		{
			woken = lappend_oid(woken, n->relid);
			(void) dlock_wait_wake_claim(dlock_claim_wait_queue(n->relid));
		}
	}
	list_free(woken);
	notes = kept;
	if (woken != NIL)
		dlock_wait_yield();
}

static void
xact_callback(XactEvent event, void *arg)
{
	if (notes == NIL)
		return;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
			/* the commit is visible now: wake a waiter per changed table */
			wake_noted(0, false);
			notes = NIL;
			break;
		case XACT_EVENT_ABORT:
			/* the claims it wrote vanish: wake a waiter per table */
			wake_noted(0, true);
			notes = NIL;
			break;
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			/* COMMIT PREPARED wakes every queue's first (lease_xact.c) */
			notes = NIL;
			break;
		default:
			break;
	}
}

static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	if (notes == NIL)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);

		/* its changes are gone; its claims too, at once */
		wake_noted(level, true);
		MemoryContextSwitchTo(old);
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		foreach(lc, notes)
		{
			WaitNote   *n = lfirst(lc);

			if (n->level >= level)
				n->level = level - 1;
		}
}

/* Note table relid at this subtransaction level, once. */
static void
note(Oid relid, bool on_abort)
{
	int			level = GetCurrentTransactionNestLevel();
	MemoryContext old;
	WaitNote   *n;
	ListCell   *lc;

	if (!callbacks_registered)
	{
		RegisterXactCallback(xact_callback, NULL);
		RegisterSubXactCallback(subxact_callback, NULL);
		callbacks_registered = true;
	}
	foreach(lc, notes)
	{
		n = lfirst(lc);
		if (n->relid == relid && n->level == level && n->on_abort == on_abort)
			return;
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	n = palloc(sizeof(WaitNote));
	n->relid = relid;
	n->level = level;
	n->on_abort = on_abort;
	notes = lappend(notes, n);
	MemoryContextSwitchTo(old);
}

/*
 * This transaction changed rows of a table (relid: a table with the
 * trigger, or a claim relid whose claims it gave back or reset): at its
 * commit, a waiter of the table is woken.  A rolled-back savepoint drops
 * the note.
 */
void
dlock_claim_wait_note_change(Oid relid)
{
	List	   *ancestors = dlock_claim_partition_ancestors(relid);

	/* a partition's claims are keyed by its root */
	if (ancestors != NIL)
		relid = llast_oid(ancestors);
	note(relid, false);
}

/* This transaction claimed rows of a table: should it roll back, wake one. */
void
dlock_claim_wait_note_claimed(Oid relid)
{
	note(relid, true);
}

/* ---- dlock_claim_wakeup's trigger ---- */

/* the oid of schema nsp's dlock_claim_wakeup_trigger() */
static Oid
trigger_function(Oid nsp)
{
	List	   *name = list_make2(makeString(get_namespace_name(nsp)),
								  makeString("dlock_claim_wakeup_trigger"));

	return LookupFuncName(name, 0, NULL, false);
}

/*
 * Whether relation rel has dlock's trigger: one that runs function fn
 * after inserts and updates, for each statement.
 */
static bool
has_trigger(Relation rel, Oid fn)
{
	if (rel->trigdesc == NULL)
		return false;
	for (int i = 0; i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *t = &rel->trigdesc->triggers[i];

		if (t->tgfoid == fn && !TRIGGER_FOR_ROW(t->tgtype) &&
			TRIGGER_FOR_AFTER(t->tgtype) && TRIGGER_FOR_INSERT(t->tgtype) &&
			TRIGGER_FOR_UPDATE(t->tgtype))
			return true;
	}
	return false;
}

/*
 * Put dlock's statement trigger on table relid, as the caller (who needs
 * the right to create a trigger on it), unless one is there: AFTER INSERT
 * OR UPDATE ... FOR EACH STATEMENT, running nsp's
 * dlock_claim_wakeup_trigger().  The table is locked as CREATE TRIGGER
 * locks it before the look, so two calls at once make one trigger.
 */
void
dlock_claim_wakeup_install(Oid relid, Oid nsp)
{
	Oid			fn = trigger_function(nsp);
	Relation	rel = table_open(relid, ShareRowExclusiveLock);
	bool		have = has_trigger(rel, fn);
	char	   *sql;

	if (rel->rd_rel->relkind != RELKIND_RELATION &&
		rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", RelationGetRelationName(rel)),
				 errdetail("dlock_claim_wakeup puts a trigger on a table or a partitioned table.")));
	sql = psprintf("CREATE TRIGGER dlock_claim_wakeup"
				   " AFTER INSERT OR UPDATE ON %s"
				   " FOR EACH STATEMENT EXECUTE FUNCTION %s.dlock_claim_wakeup_trigger()",
				   quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
											  RelationGetRelationName(rel)),
				   quote_identifier(get_namespace_name(nsp)));
	table_close(rel, NoLock);
	if (have)
		return;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "dlock_claim_wakeup: CREATE TRIGGER failed");
	SPI_finish();
}
