/*-------------------------------------------------------------------------
 *
 * claim_target.c
 *		Which table a claim is on: its partition root, its primary key, and
 *		the names and operators the claim query spells (claim_key.c writes
 *		its keys as text).
 *
 * Only single-column primary keys are supported.  Targets are cached per
 * backend.  Everything a target holds comes from the catalogs, and a target
 * is rebuilt after any change of what it was built from: a relcache
 * invalidation of its table or of any partition ancestor (rename, ALTER
 * TABLE ... SET SCHEMA, a column type, the primary key, ATTACH and DETACH
 * PARTITION), and a syscache invalidation of its schema or its operators'
 * (ALTER SCHEMA ... RENAME), of its operators, or of its key or row type.
 * Every lookup first takes the table's AccessShareLock and reads the
 * invalidations queued until then, as a query naming the table would, so
 * a target used by a call is never older than the catalogs the call sees.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "catalog/indexing.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
#include "utils/guc.h"
#include "storage/lmgr.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "base/base.h"
#include "claim/claim.h"
#include "claim/claim_int.h"
#include "compat.h"

static void check_access(Oid relid, const char *fn);

static List *targets = NIL;		/* of ClaimTarget *, in CacheMemoryContext */
static bool callback_registered = false;
static uint64 next_generation = 1;

/*
 * An invalidation only marks targets stale: a caller may still be using
 * one.  Stale entries are freed when the top-level transaction ends (no
 * claim call runs then), so a long-lived pooled backend keeps only one
 * entry per table it claims from.
 *
 * A relcache invalidation of the table, or of any of its partition
 * ancestors (DETACH of a partition between it and its root changes the
 * root its claims are keyed by, without touching the table itself).
 */
static void
target_relcache_callback(Datum arg, Oid relid)
{
	ListCell   *lc;

	foreach(lc, targets)
	{
		ClaimTarget *t = lfirst(lc);

		if (!OidIsValid(relid) || t->relid == relid)
			t->stale = true;
		for (int i = 0; i < t->nancestors && !t->stale; i++)
			if (t->ancestors[i] == relid)
				t->stale = true;
	}
}

/*
 * A syscache invalidation of a schema, operator or type a target was
 * built from (its names and operators are spelt into the claim query):
 * hashvalue 0 means every entry of that cache.
 */
static void
target_syscache_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	ListCell   *lc;

	foreach(lc, targets)
	{
		ClaimTarget *t = lfirst(lc);

		for (int i = 0; i < t->ndeps && !t->stale; i++)
			if (t->deps[i].cacheid == cacheid &&
				(hashvalue == 0 || t->deps[i].hashvalue == hashvalue))
				t->stale = true;
	}
}

/* t was built from catalog row oid of syscache cacheid */
static void
add_dep(ClaimTarget *t, int cacheid, Oid oid)
{
	if (!OidIsValid(oid) || t->ndeps >= lengthof(t->deps))
		return;
	t->deps[t->ndeps].cacheid = cacheid;
	t->deps[t->ndeps].hashvalue = GetSysCacheHashValue1(cacheid,
														ObjectIdGetDatum(oid));
	t->ndeps++;
}

static void
free_target(ClaimTarget *t)
{
	pfree(t->relname);
	pfree(t->qualname);
	pfree(t->pk_colname);
	pfree(t->pk_eq_op);
	if (t->pk_lt_op)
		pfree(t->pk_lt_op);
	if (t->pk_gt_op)
		pfree(t->pk_gt_op);
	pfree(t->pk_attname);
	pfree(t->plain_relname);
	if (t->ancestors)
		pfree(t->ancestors);
	pfree(t);
}

static void
targets_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PREPARE)
		return;
	foreach(lc, targets)
	{
		ClaimTarget *t = lfirst(lc);

		if (t->stale)
		{
			targets = foreach_delete_current(targets, lc);
			free_target(t);
		}
	}
}

/*
 * OPERATOR(schema.name) for an operator oid, safe from search_path; t now
 * depends on the operator and its schema.
 */
static char *
qualified_operator(ClaimTarget *t, Oid opno)
{
	HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Form_pg_operator op;
	char	   *s;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	op = (Form_pg_operator) GETSTRUCT(tup);
	add_dep(t, OPEROID, opno);
	add_dep(t, NAMESPACEOID, op->oprnamespace);
	s = psprintf("OPERATOR(%s.%s)",
				 quote_identifier(get_namespace_name(op->oprnamespace)),
				 NameStr(op->oprname));
	ReleaseSysCache(tup);
	return s;
}

/*
 * The partition parent of relid, from pg_inherits (inh, open), also while
 * relid is being detached from it (DETACH PARTITION ... CONCURRENTLY that
 * is running, or was cancelled or failed in its second transaction: only
 * ... FINALIZE ends it); InvalidOid when relid has none (it was detached,
 * or dropped, meanwhile).
 */
static Oid
partition_parent(Relation inh, Oid relid)
{
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			parent = InvalidOid;

	ScanKeyInit(&key, Anum_pg_inherits_inhrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(inh, InheritsRelidSeqnoIndexId, true,
							  NULL, 1, &key);
	if (HeapTupleIsValid(tup = systable_getnext(scan)))
		parent = ((Form_pg_inherits) GETSTRUCT(tup))->inhparent;
	systable_endscan(scan);
	return parent;
}

/*
 * The partition ancestors of relid, its root last; NIL when relid is no
 * partition (or no longer exists).  Unlike get_partition_ancestors(),
 * which stops below a partition being detached (and so returns NIL for
 * that partition itself), a pending DETACH ... CONCURRENTLY counts as not
 * done yet: the claims of the partition's rows stay keyed by its tree's
 * root until the detach ends, and the detach's ddl_command_end moves them
 * (claim_ddl.c).  Only catalogs are read; nothing is locked but
 * pg_inherits, as any catalog lookup does.
 */
List *
dlock_claim_partition_ancestors(Oid relid)
{
	List	   *ancestors = NIL;
	Relation	inh;
	Oid			cur = relid;

	if (!get_rel_relispartition(relid))
		return NIL;
	inh = table_open(InheritsRelationId, AccessShareLock);
	while (get_rel_relispartition(cur))
	{
		Oid			parent = partition_parent(inh, cur);

		CHECK_FOR_INTERRUPTS();
		if (!OidIsValid(parent) || parent == relid ||
			list_member_oid(ancestors, parent))
			break;
		ancestors = lappend_oid(ancestors, parent);
		cur = parent;
	}
	table_close(inh, AccessShareLock);
	return ancestors;
}

/* relid's relkind, if rows can be claimed from it (a table) */
static char
target_relkind(Oid relid)
{
	char		relkind = get_rel_relkind(relid);

	if (relkind == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", get_rel_name(relid)),
				 errdetail("Rows can be claimed only from tables.")));
	return relkind;
}

/* rel's primary key index, opened, if it has one of a single column */
static Relation
open_primary_key(Relation rel)
{
	Oid			pkoid = dlock_primary_key_index(rel);
	Relation	idx;

	if (!OidIsValid(pkoid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" has no primary key",
						RelationGetRelationName(rel)),
				 errhint("dlock names claimed rows by their primary key; add one.")));
	idx = index_open(pkoid, AccessShareLock);
	if (idx->rd_index->indnkeyatts != 1)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" has a multi-column primary key",
						RelationGetRelationName(rel)),
				 errdetail("dlock supports claims on tables with a single-column primary key.")));
	return idx;
}

/*
 * Whether two keys equal under the primary key's equality can be written
 * differently: unless its operator class's "equalimage" support function
 * (the one B-tree deduplication asks) says equal keys are always the same
 * value, and so the same text; and for char(n), whose column pads what an
 * argument does not.
 */
static bool
key_has_spellings(Relation idx, Oid type, int32 typmod)
{
	Oid			opcintype = idx->rd_opcintype[0];
	Oid			proc = get_opfamily_proc(idx->rd_opfamily[0], opcintype,
										 opcintype, BTEQUALIMAGE_PROC);

	if (!OidIsValid(proc) ||
		!DatumGetBool(OidFunctionCall1Coll(proc, idx->rd_indcollation[0],
										   ObjectIdGetDatum(opcintype))))
		return true;
	return typmod >= 0 && getBaseType(type) == BPCHAROID;
}

/* types whose text form depends on no setting */
bool
dlock_claim_type_io_stable(Oid type)
{
	switch (getBaseType(type))
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case NAMEOID:
		case CHAROID:
		case BOOLOID:
		case UUIDOID:
		case NUMERICOID:
			return true;
		default:
			return false;
	}
}

/*
 * The primary key's column, type, operators and text conversions, from its
 * index idx, into t (in CurrentMemoryContext, CacheMemoryContext here).
 */
static void
describe_primary_key(ClaimTarget *t, Relation rel, Relation idx)
{
	Oid			relid = t->relid;
	Oid			eqop;
	int32		typmod;
	Oid			collation;
	bool		isvarlena;
	TypeCacheEntry *tc;

	t->pk_attnum = idx->rd_index->indkey.values[0];
	t->pk_colname = pstrdup(quote_identifier(get_attname(relid, t->pk_attnum, false)));
	get_atttypetypmodcoll(relid, t->pk_attnum, &t->pk_type, &typmod,
						  &collation);
	t->pk_spellings = key_has_spellings(idx, t->pk_type, typmod);
	t->pk_array_type = get_array_type(t->pk_type);
	eqop = get_opfamily_member(idx->rd_opfamily[0], idx->rd_opcintype[0],
							   idx->rd_opcintype[0], BTEqualStrategyNumber);
	if (!OidIsValid(eqop) || !OidIsValid(t->pk_array_type))
		elog(ERROR, "no equality operator or array type for the primary key of \"%s\"",
			 RelationGetRelationName(rel));
	t->pk_eq_op = qualified_operator(t, eqop);
	t->pk_eq_proc = get_opcode(eqop);

	/*
	 * the default ordering's operators: a claim steps over held rows with
	 * them
	 */
	tc = lookup_type_cache(t->pk_type, TYPECACHE_LT_OPR | TYPECACHE_GT_OPR);
	t->pk_lt_op = OidIsValid(tc->lt_opr) ? qualified_operator(t, tc->lt_opr) : NULL;
	t->pk_gt_op = OidIsValid(tc->gt_opr) ? qualified_operator(t, tc->gt_opr) : NULL;
	t->pk_attname = pstrdup(get_attname(relid, t->pk_attnum, false));
	get_typlenbyval(t->pk_type, &t->pk_typlen, &t->pk_byval);
	t->io_needs_pin = !dlock_claim_type_io_stable(t->pk_type);
	getTypeOutputInfo(t->pk_type, &t->pk_out_fn, &isvarlena);
	fmgr_info_cxt(t->pk_out_fn, &t->pk_out_finfo, CacheMemoryContext);
	getTypeInputInfo(t->pk_type, &t->pk_in_fn, &t->pk_ioparam);
	add_dep(t, TYPEOID, t->pk_type);
	add_dep(t, TYPEOID, getBaseType(t->pk_type));
}

static ClaimTarget *
build_target(Oid relid)
{
	char		relkind = target_relkind(relid);
	Relation	rel;
	Relation	idx;
	ClaimTarget *t;
	MemoryContext old;

	/* dropped after its name or OID was read: as if it never existed */
	rel = try_relation_open(relid, AccessShareLock);
	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid),
				 errdetail("It was dropped while the call waited for its lock.")));
	idx = open_primary_key(rel);

	old = MemoryContextSwitchTo(CacheMemoryContext);
	t = palloc0(sizeof(ClaimTarget));
	t->relid = relid;

	/*
	 * A row has one claim however it is reached: the rows of a partition tree
	 * are claimed under its root, whether the call names the root, a
	 * partition, or a partition of a partition.  (A plain inheritance parent
	 * is read with ONLY: its children are tables of their own.)
	 */
	t->generation = next_generation++;
	t->claim_relid = relid;
	if (rel->rd_rel->relispartition)
	{
		List	   *ancestors = dlock_claim_partition_ancestors(relid);
		int			i = 0;
		ListCell   *lc;

		if (ancestors != NIL)
			t->claim_relid = llast_oid(ancestors);
		t->nancestors = list_length(ancestors);
		t->ancestors = palloc(sizeof(Oid) * Max(t->nancestors, 1));
		foreach(lc, ancestors)
			t->ancestors[i++] = lfirst_oid(lc);
		list_free(ancestors);
	}
	t->rowtype = rel->rd_rel->reltype;
	add_dep(t, NAMESPACEOID, RelationGetNamespace(rel));
	add_dep(t, TYPEOID, t->rowtype);
	t->relkind = relkind;
	t->relname = pstrdup(quote_identifier(RelationGetRelationName(rel)));
	t->qualname = pstrdup(quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
													 RelationGetRelationName(rel)));
	describe_primary_key(t, rel, idx);
	t->plain_relname = pstrdup(RelationGetRelationName(rel));
	MemoryContextSwitchTo(old);

	index_close(idx, AccessShareLock);
	relation_close(rel, AccessShareLock);
	return t;
}

/* the cached, current target of relid, built if need be */
static ClaimTarget *
lookup_target(Oid relid)
{
	ListCell   *lc;
	ClaimTarget *t;
	MemoryContext old;

	foreach(lc, targets)
	{
		t = lfirst(lc);
		if (t->relid == relid && !t->stale)
			return t;
	}
	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(target_relcache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, target_syscache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(OPEROID, target_syscache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(TYPEOID, target_syscache_callback, (Datum) 0);
		RegisterXactCallback(targets_xact_callback, NULL);
		callback_registered = true;
	}
	t = build_target(relid);
	old = MemoryContextSwitchTo(CacheMemoryContext);
	targets = lappend(targets, t);
	MemoryContextSwitchTo(old);
	return t;
}

/*
 * The claim target of a table given by oid (regclass arguments).  fn, when
 * given, is the calling function, which needs what dlock_claim needs
 * (check_access).  The table is then locked in AccessShareLock
 * to the end of the transaction, as by a query that reads it: DDL that
 * changes the table (or moves its claims, claim_ddl.c) waits for the
 * transaction, and invalidations that arrived until the lock was granted
 * are read.  A target they made stale is built again.
 */
const ClaimTarget *
dlock_claim_target_for_rel(Oid relid, const char *fn)
{
	ClaimTarget *t;

	AcceptInvalidationMessages();
	/* a role that cannot touch the table learns nothing more of it */
	if (fn)
		check_access(relid, fn);
	for (;;)
	{
		t = lookup_target(relid);
		LockRelationOid(relid, AccessShareLock);
		if (!t->stale)
			return t;
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * dlock_claim and the holder-side claim functions (fn) need USAGE on the
 * table's schema and UPDATE on the table (or on one of its columns: what
 * FOR UPDATE needs to lock a row).  A role that
 * cannot touch the table must not learn which of its rows are claimed, nor
 * lock their keys.  The table may have been dropped.
 */
static void
check_access(Oid relid, const char *fn)
{
	Oid			role = GetUserId();
	Oid			nsp = get_rel_namespace(relid);
	char	   *relname = get_rel_name(relid);

	if (!OidIsValid(nsp) || relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));

	if (dlock_namespace_aclcheck(nsp, role, ACL_USAGE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for schema %s", get_namespace_name(nsp)),
				 errdetail("%s needs USAGE on the schema of table %s.", fn,
						   relname)));
	if (pg_class_aclcheck(relid, role, ACL_UPDATE) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(relid, role, ACL_UPDATE, ACLMASK_ANY) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", relname),
				 errdetail("%s needs UPDATE on the table (or on one of its columns), "
						   "the privilege that locking its rows needs.", fn)));
}

/* The claim target whose row type is rowtype (dlock_claim(NULL::tbl, ...)). */
const ClaimTarget *
dlock_claim_target_for_type(Oid rowtype, const char *fn)
{
	Oid			relid = get_typ_typrelid(rowtype);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("type %s is not the row type of a table",
						format_type_be(rowtype)),
				 errhint("Pass the table's row type as NULL::tablename.")));
	return dlock_claim_target_for_rel(relid, fn);
}
