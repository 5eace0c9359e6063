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
 *	  long ago: a key is in one partition only);
 *  - ALTER TYPE ... RENAME VALUE of an enum label renames the claim keys of
 *	  the tables keyed by that enum;
 *  - a change of the primary key's column, type or type modifier, dropping
 *	  it, or ALTER COLUMN ... TYPE ... USING on it (which can map every key
 *	  to another), and renaming a label of an enum that the key type only
 *	  contains (an array, a composite type, a range), change keys in ways
 *	  that cannot be followed: the table forgets its claims (live claims
 *	  end, their fences are false, and attempts and poison marks go).  A
 *	  primary key dropped and added again on the same column, of the same
 *	  type, keeps them;
 *  - DROP TABLE forgets the table's claims (a new table given the same OID
 *	  starts without them).
 *
 * Claims made while such DDL runs must not escape it.  ALTER TABLE: the
 * ddl_command_start trigger resolves the statement's table (and the
 * partition it attaches or detaches) as the statement will, with the
 * session's search_path, and takes the locks the statement will take
 * (AlterTableGetLockLevel; the partition and its partitions too) before it
 * reads what names the table's rows; claim calls lock the tables they name
 * (claim_target.c), so every claim of those tables is then committed, and
 * none starts until the DDL ends.  ALTER TYPE: the tables whose primary
 * key type contains the enum are locked (ExclusiveLock, with their
 * partitions) before their claims are read.  Moves take the key locks of
 * both keys, a chunk at a time.
 *
 * Event triggers do not fire in single-user mode, for a role with
 * session_replication_role = replica, or when disabled by a superuser; DDL
 * run so is not followed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/tablecmds.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "tcop/deparse_utility.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/typcache.h"

#include "claim.h"
#include "claim_store.h"
#include "compat.h"
#include "dlock.h"
#include "keylock.h"
#include "spi_access.h"

#define MOVE_CHUNK	500

/* what names the rows of a table */
typedef struct KeyFacts
{
	Oid			relid;
	bool		exists;
	Oid			root;			/* its partition root (itself if none) */
	AttrNumber	attnum;			/* its primary key column, 0: none */
	Oid			type;
	int32		typmod;
	char		attname[NAMEDATALEN];
} KeyFacts;

/* an ALTER TABLE statement, as its ddl_command_start found it */
typedef struct Before
{
	Node	   *parsetree;
	KeyFacts	root;			/* the root of the altered table */
	Oid			detached;		/* a partition it detaches, or InvalidOid */
	struct Before *next;
} Before;

static Before *befores = NULL;	/* innermost statement first */
static bool xact_callback_registered = false;

/*
 * A statement that failed never sees its ddl_command_end.  (One that
 * commits in the middle, DETACH PARTITION ... CONCURRENTLY, does: what its
 * start found is kept through that commit.)
 */
static void
ddl_xact_callback(XactEvent event, void *arg)
{
	if (event != XACT_EVENT_ABORT && event != XACT_EVENT_PARALLEL_ABORT)
		return;
	while (befores)
	{
		Before	   *b = befores;

		befores = b->next;
		pfree(b);
	}
}

static Oid
root_of(Oid relid)
{
	List	   *ancestors;
	Oid			root;

	if (!get_rel_relispartition(relid))
		return relid;
	ancestors = get_partition_ancestors(relid);
	root = llast_oid(ancestors);
	list_free(ancestors);
	return root;
}

/* the facts of table relid now, from the catalogs */
static void
read_facts(Oid relid, KeyFacts *f)
{
	Oid			conoid;
	Bitmapset  *cols;
	Oid			collation;

	memset(f, 0, sizeof(KeyFacts));
	f->relid = relid;
	f->exists = get_rel_relkind(relid) != '\0';
	if (!f->exists)
		return;
	f->root = root_of(relid);
	cols = get_primary_key_attnos(relid, true, &conoid);
	if (bms_num_members(cols) != 1)
		return;
	f->attnum = bms_singleton_member(cols) + FirstLowInvalidHeapAttributeNumber;
	get_atttypetypmodcoll(relid, f->attnum, &f->type, &f->typmod, &collation);
	strlcpy(f->attname, get_attname(relid, f->attnum, false), NAMEDATALEN);
}

/*
 * The table rv names, as a statement of the current user resolves it,
 * locked in lockmode, with its partitions (if any) in partmode; InvalidOid
 * if it is not a table the user owns (the statement will fail, or is not
 * about a table).
 */
static Oid
lock_named_table(RangeVar *rv, LOCKMODE lockmode, LOCKMODE partmode)
{
	Oid			relid = RangeVarGetRelid(rv, NoLock, true);
	char		relkind;

	if (!OidIsValid(relid))
		return InvalidOid;
	relkind = get_rel_relkind(relid);
	if ((relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE) ||
		!dlock_class_ownercheck(relid, GetUserId()))
		return InvalidOid;
	LockRelationOid(relid, lockmode);
	if (relkind == RELKIND_PARTITIONED_TABLE && partmode != NoLock)
		list_free(find_all_inheritors(relid, partmode, NULL));
	return relid;
}

/*
 * ddl_command_start of ALTER TABLE: lock what the statement will lock,
 * then note what names the rows of the altered table's tree, and the
 * partition it detaches.
 */
void
dlock_claim_ddl_start(Node *parsetree)
{
	AlterTableStmt *stmt = (AlterTableStmt *) parsetree;
	LOCKMODE	lockmode;
	Oid			altered;
	Before		b;
	ListCell   *lc;

	if (!IsA(stmt, AlterTableStmt) || stmt->objtype != OBJECT_TABLE)
		return;
	lockmode = AlterTableGetLockLevel(stmt->cmds);
	altered = lock_named_table(stmt->relation, lockmode, NoLock);
	if (!OidIsValid(altered))
		return;
	memset(&b, 0, sizeof(b));
	b.parsetree = parsetree;
	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst(lc);
		PartitionCmd *pc = (PartitionCmd *) cmd->def;
		Oid			part;

		if (cmd->subtype != AT_AttachPartition &&
			cmd->subtype != AT_DetachPartition &&
			cmd->subtype != AT_DetachPartitionFinalize)
			continue;

		/*
		 * The partition: AccessExclusiveLock, as the statement takes it
		 * (DETACH ... CONCURRENTLY takes it in its second transaction), and
		 * its own partitions, which claims can name too, in ExclusiveLock.
		 */
		part = lock_named_table(pc->name,
								pc->concurrent ? ShareUpdateExclusiveLock :
								AccessExclusiveLock,
								ExclusiveLock);

		if (cmd->subtype != AT_AttachPartition)
			b.detached = part;
	}
	read_facts(root_of(altered), &b.root);

	if (!xact_callback_registered)
	{
		RegisterXactCallback(ddl_xact_callback, NULL);
		xact_callback_registered = true;
	}
	b.next = befores;
	befores = MemoryContextAlloc(TopMemoryContext, sizeof(Before));
	*befores = b;
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
 * Every table with claim rows that is a partition now (ATTACH PARTITION
 * made it one, or made its tree part of another) moves its claims to its
 * root.
 */
static void
claims_follow_attach(void)
{
	DlockSpi	spi;
	Oid		   *relids;
	int			n;

	dlock_spi_begin(&spi);
	n = (int) dlock_claim_store_relids(&relids);
	for (int i = 0; i < n; i++)
	{
		Oid			root;
		text	  **keys;
		text	  **fulls;
		int			nkeys;

		CHECK_FOR_INTERRUPTS();
		if (get_rel_relkind(relids[i]) == '\0' ||
			(root = root_of(relids[i])) == relids[i])
			continue;
		nkeys = (int) dlock_claim_store_keys_of(relids[i], &keys, &fulls);
		(void) move_claims(relids[i], root, keys, nkeys);
		dlock_claim_returns_bump();
	}
	dlock_spi_end(&spi);
}

/* Forget every claim of table relid: its keys no longer name its rows. */
static void
claims_forget(Oid relid)
{
	DlockSpi	spi;

	dlock_spi_begin(&spi);
	(void) dlock_claim_store_forget(&relid, 1);
	dlock_spi_end(&spi);
	dlock_claim_returns_bump();
}

/*
 * Whether the ALTER TABLE statements just run (pg_event_trigger_ddl_commands)
 * ran ALTER COLUMN ... TYPE ... USING on column attname of a table of the
 * tree of root: USING can map every key to another, even of the same type.
 */
static bool
key_retyped_using(Oid root, const char *attname)
{
	MemoryContext cxt = CurrentMemoryContext;
	uint64		n;
	CollectedCommand **cmds;
	bool		found = false;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute("SELECT command FROM pg_catalog.pg_event_trigger_ddl_commands()",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "pg_event_trigger_ddl_commands() failed");
	n = SPI_processed;
	cmds = MemoryContextAlloc(cxt, sizeof(CollectedCommand *) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;

		cmds[i] = (CollectedCommand *)
			DatumGetPointer(SPI_getbinval(SPI_tuptable->vals[i],
										  SPI_tuptable->tupdesc, 1, &isnull));
	}
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");

	for (uint64 i = 0; i < n && !found; i++)
	{
		ListCell   *lc;

		if (cmds[i] == NULL || cmds[i]->type != SCT_AlterTable ||
			root_of(cmds[i]->d.alterTable.objectId) != root)
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
				found = true;
		}
	}
	pfree(cmds);
	return found;
}

/*
 * ddl_command_end of ALTER TABLE: claims follow detached partitions and
 * attached trees; a table whose primary key names its rows otherwise now
 * forgets its claims.
 */
void
dlock_claim_ddl_end(Node *parsetree)
{
	Before	   *b = take_before(parsetree);
	KeyFacts	now;

	if (b == NULL)
		return;					/* not a table the user owns */
	if (OidIsValid(b->detached) && b->root.exists &&
		root_of(b->detached) == b->detached)
		claims_follow_detach(b->root.relid, b->detached);
	claims_follow_attach();
	read_facts(b->root.relid, &now);
	if (now.exists && now.root == now.relid && b->root.exists &&
		(now.attnum != b->root.attnum || now.type != b->root.type ||
		 now.typmod != b->root.typmod ||
		 (b->root.attnum != 0 && key_retyped_using(now.relid, b->root.attname))))
		claims_forget(now.relid);
	pfree(b);
}

/* whether type is, or contains, the type part (domains, arrays, rows, ranges) */
static bool
type_contains(Oid type, Oid part, int depth)
{
	check_stack_depth();
	if (type == part)
		return true;
	if (depth > 16)
		return true;			/* unlikely; err on the safe side */
	switch (get_typtype(type))
	{
		case TYPTYPE_DOMAIN:
			return type_contains(getBaseType(type), part, depth + 1);
		case TYPTYPE_RANGE:
			return type_contains(get_range_subtype(type), part, depth + 1);
		case TYPTYPE_MULTIRANGE:
			return type_contains(get_multirange_range(type), part, depth + 1);
		case TYPTYPE_COMPOSITE:
			{
				TupleDesc	td = lookup_rowtype_tupdesc(type, -1);
				bool		found = false;

				for (int i = 0; i < td->natts && !found; i++)
				{
					Form_pg_attribute att = TupleDescAttr(td, i);

					if (!att->attisdropped)
						found = type_contains(att->atttypid, part, depth + 1);
				}
				ReleaseTupleDesc(td);
				return found;
			}
		default:
			if (OidIsValid(get_element_type(type)))
				return type_contains(get_element_type(type), part, depth + 1);
			return false;
	}
}

/* the first column of a query run as the caller, as oids */
static int
oid_query(const char *sql, Oid **oids)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			n;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(sql, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "dlock query failed: %s", sql);
	n = (int) SPI_processed;
	*oids = MemoryContextAlloc(cxt, sizeof(Oid) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		(*oids)[i] = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
													SPI_tuptable->tupdesc, 1,
													&isnull));
	}
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
	return n;
}

/*
 * ddl_command_end of ALTER TYPE ... RENAME VALUE: a label of an enum type
 * (the one pg_event_trigger_ddl_commands() names) was renamed from oldval
 * to newval.  The tables keyed by the enum rename their claim keys; those
 * whose key type only contains it forget their claims.
 */
void
dlock_claim_ddl_enum_renamed(const char *oldval, const char *newval)
{
	Oid		   *types;
	Oid		   *relids;
	int			n;

	if (oid_query("SELECT objid FROM pg_catalog.pg_event_trigger_ddl_commands()"
				  " WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass",
				  &types) != 1)
		return;
	/* the roots of partition trees, and plain tables, with a primary key */
	n = oid_query("SELECT i.indrelid FROM pg_catalog.pg_index i"
				  "  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indrelid"
				  " WHERE i.indisprimary AND NOT c.relispartition"
				  "   AND i.indnkeyatts OPERATOR(pg_catalog.=) 1"
				  " ORDER BY 1",
				  &relids);
	for (int i = 0; i < n; i++)
	{
		KeyFacts	f;

		CHECK_FOR_INTERRUPTS();
		read_facts(relids[i], &f);
		if (!f.exists || f.attnum == 0 || !type_contains(f.type, types[0], 0))
			continue;

		/* every claim of the tree is committed, and none starts, until we end */
		if (get_rel_relkind(f.relid) == RELKIND_PARTITIONED_TABLE)
			list_free(find_all_inheritors(f.relid, ExclusiveLock, NULL));
		else
			LockRelationOid(f.relid, ExclusiveLock);
		if (getBaseType(f.type) == types[0])
		{
			text	   *from = dlock_claim_key_id(cstring_to_text(oldval));
			text	   *to_full = cstring_to_text(newval);
			text	   *to = dlock_claim_key_id(to_full);
			DlockKeyLock a = dlock_claim_keylock(f.relid, from);
			DlockKeyLock b = dlock_claim_keylock(f.relid, to);
			DlockSpi	spi;

			dlock_key_lock(&a, ExclusiveLock);
			dlock_key_lock(&b, ExclusiveLock);
			dlock_spi_begin(&spi);
			(void) dlock_claim_store_rekey(f.relid, from, to,
										   to == to_full ? NULL : to_full);
			dlock_spi_end(&spi);
			dlock_claim_returns_bump();
		}
		else
			claims_forget(f.relid);
	}
}

/* sql_drop: the dropped tables forget their claims */
void
dlock_claim_ddl_dropped(void)
{
	Oid		   *relids;
	int			n;
	DlockSpi	spi;

	n = oid_query("SELECT objid FROM pg_catalog.pg_event_trigger_dropped_objects()"
				  " WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
				  "   AND objsubid OPERATOR(pg_catalog.=) 0"
				  "   AND object_type IN ('table', 'partitioned table')",
				  &relids);
	if (n == 0 || !OidIsValid(get_relname_relid("claim",
												 get_namespace_oid(DLOCK_SCHEMA, true))))
		return;
	dlock_spi_begin(&spi);
	(void) dlock_claim_store_forget(relids, n);
	dlock_spi_end(&spi);
}
