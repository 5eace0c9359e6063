/*-------------------------------------------------------------------------
 *
 * claim_key.c
 *		How a row's primary key is written as text in dlock.claim, and read
 *		back.
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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "base/base.h"
#include "claim/claim.h"
#include "claim/claim_int.h"
#include "compat.h"

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

	if (!t->io_needs_pin && (!OidIsValid(other_type) || dlock_claim_type_io_stable(other_type)))
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
 * The key a claim row of a row with key text key is stored under (column
 * key of dlock.claim, its key lock): the text itself, unless it is longer
 * than DLOCK_CLAIM_KEY_INLINE_BYTES (the user's primary key can hold keys
 * far longer than an index entry of dlock.claim can) or begins with
 * DLOCK_CLAIM_KEY_DIGEST_MARK; then that mark and the hex SHA-256 of the
 * text (column long_key keeps the text itself).  The two forms cannot
 * meet: only digests begin with the mark.  Distinct texts with one digest
 * would share a claim (a SHA-256 collision: none is known).  The
 * digests go with the long_key column: until ALTER EXTENSION ... UPDATE
 * adds it, keys are their texts, as in dlock 0.3 (which the update then
 * rewrites).
 */
text *
dlock_claim_key_id(text *key)
{
	static const char hex[] = "0123456789abcdef";
	int			len = VARSIZE_ANY_EXHDR(key);
	bytea	   *digest;
	char		buf[1 + 2 * 32];

	if (len <= DLOCK_CLAIM_KEY_INLINE_BYTES &&
		(len == 0 || VARDATA_ANY(key)[0] != DLOCK_CLAIM_KEY_DIGEST_MARK))
		return key;
	/* not before ALTER EXTENSION ... UPDATE: keys are texts there, as in 0.3 */
	if (!dlock_claim_store_has_long_key())
		return key;
	digest = DatumGetByteaPP(DirectFunctionCall1(sha256_bytea,
												 PointerGetDatum(key)));
	buf[0] = DLOCK_CLAIM_KEY_DIGEST_MARK;
	for (int i = 0; i < 32; i++)
	{
		unsigned char b = (unsigned char) VARDATA_ANY(digest)[i];

		buf[1 + 2 * i] = hex[b >> 4];
		buf[2 + 2 * i] = hex[b & 15];
	}
	return cstring_to_text_with_len(buf, sizeof(buf));
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
 * storage); true, with the row's stored key in *stored, when a row has a
 * key equal to value: visible to a fresh snapshot (latest), or not known
 * to be dead (a dirty snapshot, which costs no snapshot: rows being
 * inserted or deleted count).  The table stays locked (AccessShareLock) to
 * the end of the transaction, as the claim call's table is.
 */
static bool
probe_stored_key(const ClaimTarget *t, Oid relid, Datum value, Datum *stored,
				 bool latest)
{
	Relation	heap = table_open(relid, AccessShareLock);
	Oid			idxoid = dlock_primary_key_index(heap);
	Relation	idx;
	SnapshotData dirty;
	Snapshot	snap;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	ScanKeyData key;
	bool		found = false;

	if (!OidIsValid(idxoid))
	{
		table_close(heap, NoLock);
		return false;
	}
	idx = index_open(idxoid, AccessShareLock);
	ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber,
						   idx->rd_opcintype[0], idx->rd_indcollation[0],
						   t->pk_eq_proc, value);
	if (latest)
		snap = RegisterSnapshot(GetLatestSnapshot());
	else
	{
		InitDirtySnapshot(dirty);
		snap = &dirty;
	}
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
	if (latest)
		UnregisterSnapshot(snap);
	index_close(idx, NoLock);
	table_close(heap, NoLock);
	return found;
}

/*
 * Replace *value, of the primary key's type, by the stored key of the
 * row of t it equals, visible to a fresh snapshot: the rows of a
 * partitioned table are looked up in its leaves; an inheritance parent's
 * claims are on its own rows only.  False when there is no such row.
 */
static bool
find_stored_key(const ClaimTarget *t, Datum *value, bool latest)
{
	List	   *rels;
	ListCell   *lc;
	bool		found = false;

	rels = t->relkind == RELKIND_PARTITIONED_TABLE ?
		find_all_inheritors(t->relid, AccessShareLock, NULL) :
		list_make1_oid(t->relid);
	foreach(lc, rels)
	{
		Oid			relid = lfirst_oid(lc);

		CHECK_FOR_INTERRUPTS();
		if (get_rel_relkind(relid) == RELKIND_RELATION &&
			probe_stored_key(t, relid, *value, value, latest))
		{
			found = true;
			break;
		}
	}
	list_free(rels);
	return found;
}

/*
 * The claim key (dlock_claim_key_id) of a primary key value given as an
 * argument (to dlock_claimed, dlock_complete, ...).  Where equal keys can be written
 * differently (an equality coarser than the value, or char(n), which the
 * column pads), the value is replaced by the stored key of the row it
 * matches, if any.  With exists, the row is always looked up, and
 * *exists says whether the table has it (a fence is false for a key that
 * names no row: its row may have moved to another key, and the claim of
 * that key is the row's).
 */
text *
dlock_claim_key_text_of_arg(const ClaimTarget *t, Datum value, Oid type,
							bool *exists)
{
	value = as_key_type(t, value, type);
	if (t->pk_spellings || exists)
	{
		/* a fresh snapshot where the stored spelling matters */
		bool		found = find_stored_key(t, &value, t->pk_spellings);

		if (exists)
			*exists = found;
	}
	return dlock_claim_key_id(dlock_claim_key_text(t, value, t->pk_type));
}

/*
 * Whether table relid (a table with storage, or the leaves of a
 * partitioned table) has a row, visible to a fresh snapshot, whose primary
 * key is the key whose text is key (the text of a value of t's key type,
 * read back under t's fixed settings).
 */
bool
dlock_claim_key_in(const ClaimTarget *t, Oid relid, text *key)
{
	int			io = dlock_claim_io_begin(t, InvalidOid);
	Datum		value = dlock_claim_key_value(t, key);
	Datum		stored;
	List	   *rels;
	ListCell   *lc;
	bool		found = false;

	dlock_claim_io_end(io);
	rels = get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE ?
		find_all_inheritors(relid, AccessShareLock, NULL) :
		list_make1_oid(relid);
	foreach(lc, rels)
	{
		CHECK_FOR_INTERRUPTS();
		if (get_rel_relkind(lfirst_oid(lc)) == RELKIND_RELATION &&
			probe_stored_key(t, lfirst_oid(lc), value, &stored, true))
		{
			found = true;
			break;
		}
	}
	list_free(rels);
	return found;
}

/*
 * Whether the current user can see a row of t (of t itself, for a plain
 * inheritance parent) whose primary key equals value, of type type: its
 * SELECT, run as the user, applies row-level security and the privileges
 * of the key's column.  Answers of claim functions about rows must not
 * tell a role anything about the rows it cannot see.
 */
bool
dlock_claim_row_visible(const ClaimTarget *t, Datum value, Oid type)
{
	int			io = dlock_claim_io_begin(t, type);
	char	   *sql;
	Oid			argtype = t->pk_type;
	bool		found;

	value = as_key_type(t, value, type);
	dlock_claim_io_end(io);
	sql = psprintf("SELECT 1 FROM %s%s WHERE %s.%s %s $1 LIMIT 1",
				   t->relkind == RELKIND_RELATION ? "ONLY " : "", t->qualname,
				   t->relname, t->pk_colname, t->pk_eq_op);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql, 1, &argtype, &value, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_with_args failed: %s", sql);
	found = SPI_processed > 0;
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
	pfree(sql);
	return found;
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

/*
 * For the guard (src/guard/): the claim relid (*claim_relid) and claim key
 * of row tup (of descriptor desc) of table relid, a table or partition
 * that rows can be claimed from; NULL when relid is no such table or the
 * row's primary key is NULL.  The key is the one dlock_claimed notes for
 * its fence (base_fence.c).
 */
text *
dlock_claim_row_key(Oid relid, HeapTuple tup, TupleDesc desc,
					Oid *claim_relid)
{
	const ClaimTarget *t = dlock_claim_target_for_rel(relid, NULL);
	Datum		value;
	bool		isnull;
	int			io;
	text	   *key;

	value = heap_getattr(tup, t->pk_attnum, desc, &isnull);
	if (isnull)
		return NULL;
	*claim_relid = t->claim_relid;
	io = dlock_claim_io_begin(t, InvalidOid);
	key = dlock_claim_key_id(dlock_claim_key_text(t, value, t->pk_type));
	dlock_claim_io_end(io);
	return key;
}
