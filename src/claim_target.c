/*-------------------------------------------------------------------------
 *
 * claim_target.c
 *		Which table a claim is on, its primary key, and how a row's key is
 *		written as text in dlock.claim.
 *
 * A claim is keyed by (table oid, primary key value as text).  The text is
 * the primary key type's own output, so any value of any type that reads
 * back as the same key names the same row: dlock_claimed('jobs', 42, ...)
 * and dlock_claimed('jobs', '42'::text, ...) agree.  A row's key text is its
 * stored value's.  Where the key's equality is coarser than its text
 * (numeric 1.0 = 1.00, float -0 = 0, case-insensitive or nondeterministic
 * collations, intervals), a key given as an argument is first looked up in
 * the table, and the matching row's stored value names it.
 *
 * Key texts must not depend on the session: a timestamptz key written
 * under one TimeZone or DateStyle must give the same text under another,
 * or one row could carry two claims.  Conversions of keys whose types have
 * setting-dependent text forms run under fixed settings (ISO dates, UTC,
 * shortest exact floats, hex bytea; dlock_claim_io_begin).  They always run
 * as the caller, never as dlock's owner: a key's type may be a domain or a
 * type with functions the caller wrote.
 *
 * Only single-column primary keys are supported.  Targets are cached per
 * backend and rebuilt after a relcache invalidation of their table.
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
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
#include "utils/guc.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "claim.h"
#include "compat.h"
#include "keylock.h"

static List *targets = NIL;		/* of ClaimTarget *, in CacheMemoryContext */
static bool callback_registered = false;

/*
 * A relcache invalidation only marks targets stale: a caller may still be
 * using one.  Stale entries are freed when the top-level transaction ends
 * (no claim call runs then), so a long-lived pooled backend keeps only one
 * entry per table it claims from.
 */
static void
target_inval_callback(Datum arg, Oid relid)
{
	ListCell   *lc;

	foreach(lc, targets)
	{
		ClaimTarget *t = lfirst(lc);

		if (!OidIsValid(relid) || t->relid == relid)
			t->stale = true;
	}
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

/* types whose text form depends on no setting */
static bool
io_is_stable(Oid type)
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
 * Fixed settings for converting keys to and from text, when the primary
 * key's type (or other_type, the type a key was given as) needs them.
 * Returns the GUC nest level to end, or 0.
 */
int
dlock_claim_io_begin(const ClaimTarget *t, Oid other_type)
{
	static const char *const settings[][2] = {
		{"DateStyle", "ISO, YMD"},
		{"IntervalStyle", "postgres"},
		{"TimeZone", "UTC"},
		{"extra_float_digits", "1"},
		{"bytea_output", "hex"},
		{"lc_monetary", "C"},
		/* reg* types name objects relative to search_path */
		{"search_path", "pg_catalog"},
	};
	int			nestlevel;

	if (!t->io_needs_pin && (!OidIsValid(other_type) || io_is_stable(other_type)))
		return 0;
	nestlevel = NewGUCNestLevel();
	for (int i = 0; i < lengthof(settings); i++)
		(void) set_config_option(settings[i][0], settings[i][1],
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
								 true, 0, false);
	return nestlevel;
}

void
dlock_claim_io_end(int nestlevel)
{
	if (nestlevel > 0)
		AtEOXact_GUC(true, nestlevel);
}

/* OPERATOR(schema.name) for an operator oid, safe from search_path */
static char *
qualified_operator(Oid opno)
{
	HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Form_pg_operator op;
	char	   *s;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	op = (Form_pg_operator) GETSTRUCT(tup);
	s = psprintf("OPERATOR(%s.%s)",
				 quote_identifier(get_namespace_name(op->oprnamespace)),
				 NameStr(op->oprname));
	ReleaseSysCache(tup);
	return s;
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
	t->pk_eq_op = qualified_operator(eqop);

	/*
	 * the default ordering's operators: a claim steps over held rows with
	 * them
	 */
	tc = lookup_type_cache(t->pk_type, TYPECACHE_LT_OPR | TYPECACHE_GT_OPR);
	t->pk_lt_op = OidIsValid(tc->lt_opr) ? qualified_operator(tc->lt_opr) : NULL;
	t->pk_gt_op = OidIsValid(tc->gt_opr) ? qualified_operator(tc->gt_opr) : NULL;
	t->pk_attname = pstrdup(get_attname(relid, t->pk_attnum, false));
	get_typlenbyval(t->pk_type, &t->pk_typlen, &t->pk_byval);
	t->io_needs_pin = !io_is_stable(t->pk_type);
	getTypeOutputInfo(t->pk_type, &t->pk_out_fn, &isvarlena);
	fmgr_info_cxt(t->pk_out_fn, &t->pk_out_finfo, CacheMemoryContext);
	getTypeInputInfo(t->pk_type, &t->pk_in_fn, &t->pk_ioparam);
}

static ClaimTarget *
build_target(Oid relid)
{
	char		relkind = target_relkind(relid);
	Relation	rel;
	Relation	idx;
	ClaimTarget *t;
	MemoryContext old;

	rel = relation_open(relid, AccessShareLock);
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
	t->claim_relid = rel->rd_rel->relispartition ?
		llast_oid(get_partition_ancestors(relid)) : relid;
	t->rowtype = rel->rd_rel->reltype;
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

/* The claim target of a table given by oid (regclass arguments). */
const ClaimTarget *
dlock_claim_target_for_rel(Oid relid)
{
	ListCell   *lc;
	ClaimTarget *t;

	foreach(lc, targets)
	{
		t = lfirst(lc);
		if (t->relid == relid && !t->stale)
			return t;
	}
	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(target_inval_callback, (Datum) 0);
		RegisterXactCallback(targets_xact_callback, NULL);
		callback_registered = true;
	}
	t = build_target(relid);
	{
		MemoryContext old = MemoryContextSwitchTo(CacheMemoryContext);

		targets = lappend(targets, t);
		MemoryContextSwitchTo(old);
	}
	return t;
}

/*
 * dlock_claim and the holder-side claim functions (fn) need USAGE on the
 * table's schema and UPDATE on the table (or on one of its columns: what
 * FOR UPDATE needs to lock a row).  A role that
 * cannot touch the table must not learn which of its rows are claimed, nor
 * lock their keys.
 */
void
dlock_claim_check_access(const ClaimTarget *t, const char *fn)
{
	Oid			role = GetUserId();
	Oid			nsp = get_rel_namespace(t->relid);

	if (dlock_namespace_aclcheck(nsp, role, ACL_USAGE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for schema %s", get_namespace_name(nsp)),
				 errdetail("%s needs USAGE on the schema of table %s.", fn,
						   get_rel_name(t->relid))));
	if (pg_class_aclcheck(t->relid, role, ACL_UPDATE) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(t->relid, role, ACL_UPDATE, ACLMASK_ANY) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", get_rel_name(t->relid)),
				 errdetail("%s needs UPDATE on the table (or on one of its columns), "
						   "the privilege that locking its rows needs.", fn)));
}

/* The claim target whose row type is rowtype (dlock_claim(NULL::tbl, ...)). */
const ClaimTarget *
dlock_claim_target_for_type(Oid rowtype)
{
	Oid			relid = get_typ_typrelid(rowtype);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("type %s is not the row type of a table",
						format_type_be(rowtype)),
				 errhint("Pass the table's row type as NULL::tablename.")));
	return dlock_claim_target_for_rel(relid);
}

/* value, of type type, as a value of the primary key's type */
static Datum
as_key_type(const ClaimTarget *t, Datum value, Oid type)
{
	Oid			outfn;
	bool		isvarlena;

	if (type == t->pk_type)
		return value;
	getTypeOutputInfo(type, &outfn, &isvarlena);
	return OidInputFunctionCall(t->pk_in_fn,
								OidOutputFunctionCall(outfn, value),
								t->pk_ioparam, -1);
}

/*
 * The key text of a primary key value given as any type: the value is
 * written out, read back as the primary key's type and written out again,
 * so that every spelling of one key gives the same text.
 */
text *
dlock_claim_key_text(const ClaimTarget *t, Datum value, Oid type)
{
	value = as_key_type(t, value, type);
	/* an output function may cache in fn_extra, kept in CacheMemoryContext */
	return cstring_to_text(OutputFunctionCall((FmgrInfo *) &t->pk_out_finfo,
											  value));
}

/*
 * Look value up in the primary key index of table relid (a table with
 * storage); true, with the row's stored key in *stored, when a row
 * visible to a fresh snapshot has a key equal to value.
 */
static bool
probe_stored_key(const ClaimTarget *t, Oid relid, Datum value, Datum *stored)
{
	Relation	heap = table_open(relid, AccessShareLock);
	Oid			idxoid = dlock_primary_key_index(heap);
	Relation	idx;
	Snapshot	snap;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	ScanKeyData key;
	Oid			opcintype;
	Oid			eqop;
	bool		found = false;

	if (!OidIsValid(idxoid))
	{
		table_close(heap, AccessShareLock);
		return false;
	}
	idx = index_open(idxoid, AccessShareLock);
	opcintype = idx->rd_opcintype[0];
	eqop = get_opfamily_member(idx->rd_opfamily[0], opcintype, opcintype,
							   BTEqualStrategyNumber);
	ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, opcintype,
						   idx->rd_indcollation[0], get_opcode(eqop), value);
	snap = RegisterSnapshot(GetLatestSnapshot());
	scan = dlock_index_beginscan(heap, idx, snap, 1);
	index_rescan(scan, &key, 1, NULL, 0);
	slot = table_slot_create(heap, NULL);
	if (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		Datum		d = slot_getattr(slot, idx->rd_index->indkey.values[0],
									 &isnull);

		if (!isnull)
		{
			*stored = datumCopy(d, t->pk_byval, t->pk_typlen);
			found = true;
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	index_endscan(scan);
	UnregisterSnapshot(snap);
	index_close(idx, AccessShareLock);
	table_close(heap, AccessShareLock);
	return found;
}

/*
 * The key text of a primary key value given as an argument (to
 * dlock_claimed, dlock_complete, ...).  Where equal keys can be written
 * differently (an equality coarser than the value, or char(n), which the
 * column pads), the value is replaced by the stored key of
 * the row it matches, if any.  The rows of a partitioned table are looked
 * up in its leaves; an inheritance parent's claims are on its own rows
 * only.
 */
text *
dlock_claim_key_text_of_arg(const ClaimTarget *t, Datum value, Oid type)
{
	value = as_key_type(t, value, type);
	if (t->pk_spellings)
	{
		List	   *rels;
		ListCell   *lc;

		rels = t->relkind == RELKIND_PARTITIONED_TABLE ?
			find_all_inheritors(t->relid, AccessShareLock, NULL) :
			list_make1_oid(t->relid);
		foreach(lc, rels)
		{
			Oid			relid = lfirst_oid(lc);

			CHECK_FOR_INTERRUPTS();
			if (get_rel_relkind(relid) == RELKIND_RELATION &&
				probe_stored_key(t, relid, value, &value))
				break;
		}
	}
	return dlock_claim_key_text(t, value, t->pk_type);
}

/* A key text back as a value of the primary key's type. */
Datum
dlock_claim_key_value(const ClaimTarget *t, text *key)
{
	return OidInputFunctionCall(t->pk_in_fn, text_to_cstring(key),
								t->pk_ioparam, -1);
}

DlockKeyLock
dlock_claim_keylock(Oid relid, text *key)
{
	return dlock_key_for_row(relid, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
}
