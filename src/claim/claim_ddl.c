/*-------------------------------------------------------------------------
 *
 * claim_ddl.c
 *		Claims through DDL: a row keeps one claim, and a claim names one
 *		row, whatever DDL does to the row's table, its partitions or its
 *		key's type.  Run by dlock's event triggers (dlock--0.3--0.4.sql);
 *		claim_target.c keeps every backend's cached facts up to date.
 *
 * A claim is keyed by (the root of the row's partition tree, the row's
 * primary key as text).  DDL that changes what such a key names is dealt
 * with in its own transaction:
 *
 *  - DETACH PARTITION takes rows out of a tree: their claims move from the
 *	  old root to the detached table, the root of a tree of its own now, so
 *	  that claiming from it does not hand out rows claimed through the old
 *	  tree (whose fences are then false: the rows are not in it);
 *  - ATTACH PARTITION puts a tree into another: its claims move to the new
 *	  root, in place of any the new root kept for those keys (rows deleted
 *	  long ago: a key is in one partition only).  Only the tables of the
 *	  trees the statement attached are looked at, one probe of the claims
 *	  each: what ALTER TABLE costs does not grow with the tables that have
 *	  claims;
 *  - a partition whose DETACH PARTITION ... CONCURRENTLY is pending (its
 *	  second transaction running, or cancelled until ... FINALIZE) is still
 *	  in its tree: its claims stay keyed by the old root until the detach's
 *	  (or FINALIZE's) ddl_command_end moves them
 *	  (dlock_claim_partition_ancestors);
 *  - ALTER TYPE ... RENAME VALUE of an enum label renames the claim keys of
 *	  the tables keyed by that enum (claim_ddl_type.c);
 *  - a change of the primary key's column, type or type modifier, dropping
 *	  it, or ALTER COLUMN ... TYPE ... USING on it (which can map every key
 *	  to another), and renaming a label of an enum that the key type only
 *	  contains (an array, a composite type, a range), change keys in ways
 *	  that cannot be followed: the table forgets its claims (live claims
 *	  end, their fences are false, and attempts and poison marks go).  A
 *	  primary key dropped and added again on the same column, of the same
 *	  type, keeps them;
 *  - DROP TABLE forgets the table's claims (a new table given the same OID
 *	  starts without them; claim_ddl_type.c).
 *
 * Claims made while such DDL runs must not escape it.  The
 * ddl_command_start trigger of ALTER TABLE notes the facts (partition root,
 * primary key column, type, modifier) of the trees of every table the
 * statement's names can mean (the statement resolves them later, with the
 * session's search_path, which dlock's functions never use); the
 * ddl_command_end trigger finds the table altered among them by its OID
 * (pg_event_trigger_ddl_commands), compares, and only then reads the
 * claims it moves or forgets: the statement holds its locks then, and
 * claim calls lock the tables they name (claim_target.c), so every claim
 * made before is committed and read, and none is made until the DDL ends.
 * ALTER TYPE: the tables whose primary key type contains the enum are
 * locked (ExclusiveLock, with their partitions) before their claims are
 * read.  Moves take the key locks of both keys, a chunk at a time.
 *
 * The ddl_command_start trigger runs before PostgreSQL checks the caller's
 * rights on the tables: it only reads catalogs (nothing is locked, nothing
 * reported, a table dropped meanwhile is skipped), and what it notes is
 * forgotten when the statement's subtransaction aborts.  The triggers'
 * queries run as dlock's owner: they need no privilege of the caller.
 *
 * Event triggers do not fire in single-user mode, for a role with
 * session_replication_role = replica, or when disabled by a superuser; DDL
 * run so is not followed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "tcop/deparse_utility.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "base/base.h"
#include "claim/claim_int.h"
#include "claim/claim.h"
#include "compat.h"

#define MOVE_CHUNK	500

/*
 * An ALTER TABLE statement, as its ddl_command_start found it: the tables
 * its names can mean (the statement resolves them later, with the
 * session's search_path), each with its root's facts then.
 */
typedef struct Candidate
{
	Oid			relid;
	bool		partition;		/* named by ATTACH/DETACH PARTITION */
	KeyFacts	root;			/* its root's facts before the statement */
} Candidate;

typedef struct Before
{
	Node	   *parsetree;
	SubTransactionId subid;		/* the subtransaction that ran its start */
	int			n;
	Candidate  *cands;
	struct Before *next;
} Before;

static Before *befores = NULL;	/* innermost statement first */
static bool xact_callback_registered = false;

/*
 * Forget what the starts of statements run in subtransaction subid or
 * later found (all of them: InvalidSubTransactionId).
 */
static void
forget_befores(SubTransactionId subid)
{
	while (befores && befores->subid >= subid)
	{
		Before	   *b = befores;

		befores = b->next;
		pfree(b->cands);
		pfree(b);
	}
}

/*
 * A statement that failed never sees its ddl_command_end.  (One that
 * commits in the middle, DETACH PARTITION ... CONCURRENTLY, does: what its
 * start found is kept through that commit.)
 */
static void
ddl_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		forget_befores(InvalidSubTransactionId);
}

/*
 * Nor does one that failed in a subtransaction (a savepoint, a PL/pgSQL
 * exception block) whose transaction goes on: what its start found would
 * otherwise be kept to the end of the session.  The statements of
 * subtransactions started later are inner ones, and their starts later.
 */
static void
ddl_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		forget_befores(mySubid);
}

/*
 * The root of relid's partition tree (relid itself when it is no
 * partition, or no longer exists), a partition being detached counted in
 * the tree it is leaving (dlock_claim_partition_ancestors).
 */
static Oid
dlock_claim_ddl_root_of(Oid relid)
{
	List	   *ancestors = dlock_claim_partition_ancestors(relid);
	Oid			root = ancestors == NIL ? relid : llast_oid(ancestors);

	list_free(ancestors);
	return root;
}

/*
 * The facts of table relid now, from the catalogs; f->exists is false
 * when it does not exist (also when it was dropped while they were read:
 * nothing here is locked).
 */
void
dlock_claim_ddl_read_facts(Oid relid, KeyFacts *f)
{
	Oid			conoid;
	Bitmapset  *cols;
	HeapTuple	tup;
	Form_pg_attribute att;

	memset(f, 0, sizeof(KeyFacts));
	f->relid = relid;
	f->exists = get_rel_relkind(relid) != '\0';
	if (!f->exists)
		return;
	f->root = dlock_claim_ddl_root_of(relid);
	cols = get_primary_key_attnos(relid, true, &conoid);
	if (bms_num_members(cols) != 1)
		return;
	f->attnum = bms_singleton_member(cols) + FirstLowInvalidHeapAttributeNumber;
	tup = SearchSysCache2(ATTNUM, ObjectIdGetDatum(relid),
						  Int16GetDatum(f->attnum));
	if (!HeapTupleIsValid(tup))
	{
		f->exists = false;
		f->attnum = 0;
		return;
	}
	att = (Form_pg_attribute) GETSTRUCT(tup);
	f->type = att->atttypid;
	f->typmod = att->atttypmod;
	strlcpy(f->attname, NameStr(att->attname), NAMEDATALEN);
	ReleaseSysCache(tup);
}

/*
 * Add the tables that rv can name (all tables of that name, unless it
 * names a schema: the statement resolves it with the session's
 * search_path, which dlock's functions do not use) to the candidates.
 */
static void
add_candidates(List **cands, RangeVar *rv, bool partition)
{
	List	   *relids = NIL;
	ListCell   *lc;

	if (rv->schemaname)
	{
		Oid			nsp = LookupExplicitNamespace(rv->schemaname, true);

		if (OidIsValid(nsp) && OidIsValid(get_relname_relid(rv->relname, nsp)))
			relids = list_make1_oid(get_relname_relid(rv->relname, nsp));
	}
	else
	{
		CatCList   *list = SearchSysCacheList1(RELNAMENSP,
											   CStringGetDatum(rv->relname));

		for (int i = 0; i < list->n_members; i++)
			relids = lappend_oid(relids,
								 ((Form_pg_class) GETSTRUCT(&list->members[i]->tuple))->oid);
		ReleaseSysCacheList(list);
	}
	foreach(lc, relids)
	{
		Candidate  *c;
		char		relkind = get_rel_relkind(lfirst_oid(lc));

		if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
			continue;
		c = palloc0(sizeof(Candidate));
		c->relid = lfirst_oid(lc);
		c->partition = partition;
		dlock_claim_ddl_read_facts(dlock_claim_ddl_root_of(c->relid), &c->root);
		*cands = lappend(*cands, c);
	}
	list_free(relids);
}

/*
 * ddl_command_start of ALTER TABLE: note what names the rows of the trees
 * of the tables the statement can mean, and of the partitions it attaches
 * or detaches.  Nothing is locked: the facts are the catalogs', which only
 * DDL changes, and claims are read at ddl_command_end, when the statement
 * holds its locks (claims made meanwhile are read then too).
 */
void
dlock_claim_ddl_start(Node *parsetree)
{
	AlterTableStmt *stmt = (AlterTableStmt *) parsetree;
	MemoryContext old;
	List	   *cands = NIL;
	Before	   *b;
	ListCell   *lc;
	int			i = 0;

	if (!IsA(stmt, AlterTableStmt) || stmt->objtype != OBJECT_TABLE)
		return;
	add_candidates(&cands, stmt->relation, false);
	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst(lc);

		if (cmd->subtype == AT_AttachPartition ||
			cmd->subtype == AT_DetachPartition ||
			cmd->subtype == AT_DetachPartitionFinalize)
			add_candidates(&cands, ((PartitionCmd *) cmd->def)->name, true);
	}
	if (cands == NIL)
		return;

	if (!xact_callback_registered)
	{
		RegisterXactCallback(ddl_xact_callback, NULL);
		RegisterSubXactCallback(ddl_subxact_callback, NULL);
		xact_callback_registered = true;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	b = palloc0(sizeof(Before));
	b->parsetree = parsetree;
	b->subid = GetCurrentSubTransactionId();
	b->n = list_length(cands);
	b->cands = palloc(sizeof(Candidate) * b->n);
	MemoryContextSwitchTo(old);
	foreach(lc, cands)
		b->cands[i++] = *(Candidate *) lfirst(lc);
	b->next = befores;
	befores = b;
}

/* what the ddl_command_start of parsetree found, taken off the list */
static Before *
take_before(Node *parsetree)
{
	for (Before **p = &befores; *p; p = &(*p)->next)
	{
		Before	   *b = *p;

		if (b->parsetree == parsetree)
		{
			*p = b->next;
			return b;
		}
	}
	return NULL;
}

/*
 * Move the claim rows of keys (sorted) from table from to table to, a
 * chunk at a time under the key locks of both; returns how many moved.
 */
static int64
move_claims(Oid from, Oid to, text **keys, int n)
{
	int64		moved = 0;

	for (int start = 0; start < n; start += MOVE_CHUNK)
	{
		int			m = Min(MOVE_CHUNK, n - start);

		for (int i = 0; i < m; i++)
		{
			DlockKeyLock a = dlock_claim_keylock(from, keys[start + i]);
			DlockKeyLock b = dlock_claim_keylock(to, keys[start + i]);

			CHECK_FOR_INTERRUPTS();
			dlock_key_lock(&a, ExclusiveLock);
			dlock_key_lock(&b, ExclusiveLock);
		}
		moved += dlock_claim_store_move(from, to, keys + start, m);
		for (int i = 0; i < m; i++)
		{
			DlockKeyLock a = dlock_claim_keylock(from, keys[start + i]);
			DlockKeyLock b = dlock_claim_keylock(to, keys[start + i]);

			dlock_key_unlock(&a, ExclusiveLock);
			dlock_key_unlock(&b, ExclusiveLock);
		}
	}
	return moved;
}

/*
 * Table part was detached from a tree whose root is root: the claims of
 * root on rows that are now in part move to part.
 */
static void
claims_follow_detach(Oid root, Oid part)
{
	DlockSpi	spi;
	const ClaimTarget *t;
	text	  **keys;
	text	  **fulls;
	text	  **moving;
	int			n;
	int			nmoving = 0;

	dlock_spi_begin(&spi);
	n = (int) dlock_claim_store_keys_of(root, &keys, &fulls);
	if (n == 0)
	{
		dlock_spi_end(&spi);
		return;
	}
	/* the key's type, and the partition's rows, as the caller */
	dlock_spi_as_caller(&spi);
	t = dlock_claim_target_for_rel(part, NULL);
	moving = palloc(sizeof(text *) * n);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (fulls[i] && dlock_claim_key_in(t, part, fulls[i]))
			moving[nmoving++] = keys[i];
	}
	dlock_spi_as_owner(&spi);
	if (nmoving > 0)
	{
		(void) move_claims(root, part, moving, nmoving);
		dlock_claim_returns_bump();
	}
	dlock_spi_end(&spi);
}

/*
 * The claims of relid, a partition now, move to its root.  One probe of
 * dlock.claim's primary key when it has none.
 */
static void
claims_move_to_root(Oid relid)
{
	DlockSpi	spi;
	Oid			root = dlock_claim_ddl_root_of(relid);
	text	  **keys;
	text	  **fulls;
	int			nkeys;

	if (root == relid)
		return;
	dlock_spi_begin(&spi);
	nkeys = (int) dlock_claim_store_keys_of(relid, &keys, &fulls);
	if (nkeys > 0)
	{
		(void) move_claims(relid, root, keys, nkeys);
		dlock_claim_returns_bump();
	}
	dlock_spi_end(&spi);
}

/*
 * ATTACH PARTITION made a table a partition, and the partitions of its
 * tree partitions of another: the claims of each of them (the table's own,
 * and any that a member of its tree kept) move to the new root.  Only the
 * trees of the tables the statement named as partitions are looked at,
 * one probe of the claims a table: what ALTER TABLE costs does not depend
 * on how many other tables have claims.
 */
static void
claims_follow_attach(Before *b)
{
	for (int i = 0; i < b->n; i++)
	{
		Candidate  *p = &b->cands[i];
		List	   *tree;
		ListCell   *lc;

		if (!p->partition || !get_rel_relispartition(p->relid))
			continue;
		/* the statement holds the locks of the tree it attached */
		tree = find_all_inheritors(p->relid, NoLock, NULL);
		foreach(lc, tree)
		{
			CHECK_FOR_INTERRUPTS();
			if (get_rel_relkind(lfirst_oid(lc)) != '\0')
				claims_move_to_root(lfirst_oid(lc));
		}
		list_free(tree);
	}
}

/* Forget every claim of table relid: its keys no longer name its rows. */
void
dlock_claim_ddl_forget(Oid relid)
{
	DlockSpi	spi;

	dlock_spi_begin(&spi);
	(void) dlock_claim_store_forget(&relid, 1);
	dlock_spi_end(&spi);
	dlock_claim_returns_bump();
}

/*
 * The commands of the statement just run (pg_event_trigger_ddl_commands());
 * returns how many, in *cmds (in the current memory context).  Read as
 * dlock's owner: the trigger needs no privilege of the role running the
 * DDL.
 */
static int
collected_commands(CollectedCommand ***cmds)
{
	MemoryContext cxt = CurrentMemoryContext;
	DlockSpi	spi;
	int			n;

	dlock_spi_begin(&spi);
	if (SPI_execute("SELECT command FROM pg_catalog.pg_event_trigger_ddl_commands()",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "pg_event_trigger_ddl_commands() failed");
	n = (int) SPI_processed;
	*cmds = MemoryContextAlloc(cxt, sizeof(CollectedCommand *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		(*cmds)[i] = (CollectedCommand *)
			DatumGetPointer(SPI_getbinval(SPI_tuptable->vals[i],
										  SPI_tuptable->tupdesc, 1, &isnull));
	}
	dlock_spi_end(&spi);
	return n;
}

/*
 * Whether the commands ran ALTER COLUMN ... TYPE ... USING on column
 * attname of table relid: USING can map every key to another, even of the
 * same type.
 */
static bool
key_retyped_using(CollectedCommand **cmds, int n, Oid relid,
				  const char *attname)
{
	for (int i = 0; i < n; i++)
	{
		ListCell   *lc;

		if (cmds[i] == NULL || cmds[i]->type != SCT_AlterTable ||
			cmds[i]->d.alterTable.objectId != relid)
			continue;
		foreach(lc, cmds[i]->d.alterTable.subcmds)
		{
			CollectedATSubcmd *sub = lfirst(lc);
			AlterTableCmd *cmd = (AlterTableCmd *) sub->parsetree;
			ColumnDef  *def;

			if (cmd == NULL || !IsA(cmd, AlterTableCmd) ||
				cmd->subtype != AT_AlterColumnType || cmd->name == NULL ||
				strcmp(cmd->name, attname) != 0)
				continue;
			def = (ColumnDef *) cmd->def;
			if (def && IsA(def, ColumnDef) && def->raw_default)
				return true;
		}
	}
	return false;
}

/*
 * ddl_command_end of ALTER TABLE: claims follow detached partitions and
 * attached trees; a table whose primary key names its rows otherwise now
 * forgets its claims.  The altered table is the one the collected commands
 * name (by OID), among the candidates its start noted.
 */
void
dlock_claim_ddl_end(Node *parsetree)
{
	Before	   *b = take_before(parsetree);
	CollectedCommand **cmds;
	int			ncmds;
	List	   *done = NIL;

	if (b == NULL)
		return;					/* its names named no table */
	ncmds = collected_commands(&cmds);
	for (int i = 0; i < b->n; i++)
	{
		Candidate  *c = &b->cands[i];
		KeyFacts   *before = &c->root;
		KeyFacts	now;
		bool		altered = false;

		for (int j = 0; j < ncmds && !altered; j++)
			altered = cmds[j] && cmds[j]->type == SCT_AlterTable &&
				cmds[j]->d.alterTable.objectId == c->relid;
		if (c->partition || !altered || !before->exists ||
			list_member_oid(done, before->relid))
			continue;
		done = lappend_oid(done, before->relid);

		/* partitions that were in its tree and are trees of their own now */
		for (int k = 0; k < b->n; k++)
		{
			Candidate  *p = &b->cands[k];

			if (p->partition && p->root.exists &&
				p->root.relid == before->relid && p->relid != before->relid &&
				get_rel_relkind(p->relid) != '\0' &&
				dlock_claim_ddl_root_of(p->relid) == p->relid)
				claims_follow_detach(before->relid, p->relid);
		}

		/* its key */
		dlock_claim_ddl_read_facts(before->relid, &now);
		if (now.exists && now.root == now.relid &&
			(now.attnum != before->attnum || now.type != before->type ||
			 now.typmod != before->typmod ||
			 (before->attnum != 0 &&
			  key_retyped_using(cmds, ncmds, c->relid, before->attname))))
			dlock_claim_ddl_forget(now.relid);
	}
	claims_follow_attach(b);
	pfree(b->cands);
	pfree(b);
}
