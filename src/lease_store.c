/*-------------------------------------------------------------------------
 *
 * lease_store.c
 *		Direct access to dlock.lease: a lookup by key through the primary
 *		key index, and the insert or update of one row, without SPI.
 *
 * Every lease call reads one row by key and writes at most one, so these
 * go to the heap and the index directly, the way PostgreSQL's own catalog
 * code does (CatalogTupleUpdate), instead of through the executor: no
 * plan to revalidate, no executor state, no planner settings to pin.
 * What the executor would otherwise check is checked here once per call:
 * the table must still look the way dlock--*.sql made it (its columns, and
 * the primary key as its only index, which is the only index maintained
 * here).  Reads use the latest committed state, like spi_access.c.
 *
 * The rare sweeps over many rows (release_all's list, cleanup) still run
 * as SQL through spi_access.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "dlock.h"
#include "lease_internal.h"

/* columns of dlock.lease, in the order dlock--0.1.sql creates them */
#define Anum_lease_key			1
#define Anum_lease_holder		2
#define Anum_lease_owner		3
#define Anum_lease_token		4
#define Anum_lease_ttl_us		5
#define Anum_lease_acquired_at	6
#define Anum_lease_expires_at	7
#define Natts_lease				7

static void
broken_table(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("table %s.lease of extension dlock has been altered", DLOCK_SCHEMA),
			 errdetail("%s", what),
			 errhint("Drop and re-create the extension dlock.")));
}

/*
 * Open dlock.lease and its primary key index for reading and writing.
 * The locks taken are those an UPDATE would take, kept to the end of the
 * transaction as usual.
 */
void
dlock_lease_store_open(LeaseStore *s)
{
	Oid			nsp = get_namespace_oid(DLOCK_SCHEMA, true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid("lease", nsp) : InvalidOid;
	List	   *indexes;
	Oid			pkey;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s.lease of extension dlock does not exist", DLOCK_SCHEMA),
				 errhint("Run CREATE EXTENSION dlock in this database.")));
	s->rel = table_open(relid, RowExclusiveLock);
	if (RelationGetDescr(s->rel)->natts != Natts_lease ||
		s->rel->rd_rel->relkind != RELKIND_RELATION)
		broken_table("Its columns are not those of the extension script.");
	indexes = RelationGetIndexList(s->rel);
	pkey = RelationGetPrimaryKeyIndex(s->rel);
	if (list_length(indexes) != 1 || linitial_oid(indexes) != pkey)
		broken_table("Its primary key must be its only index.");
	list_free(indexes);
	s->idx = index_open(pkey, RowExclusiveLock);
	s->index_info = NULL;
}

void
dlock_lease_store_close(LeaseStore *s)
{
	index_close(s->idx, NoLock);
	table_close(s->rel, NoLock);
}

/*
 * Read key's row at the latest committed state (and this transaction's
 * own changes) into *l; l->found is false when there is none.
 */
void
dlock_lease_store_fetch(LeaseStore *s, text *key, DlockLease *l)
{
	Snapshot	snap = RegisterSnapshot(GetLatestSnapshot());
	TupleTableSlot *slot = table_slot_create(s->rel, NULL);
	IndexScanDesc scan;
	ScanKeyData skey;

	memset(l, 0, sizeof(*l));
	ScanKeyEntryInitialize(&skey, 0, 1, BTEqualStrategyNumber, InvalidOid,
						   s->idx->rd_indcollation[0], F_TEXTEQ,
						   PointerGetDatum(key));
	scan = index_beginscan(s->rel, s->idx, snap, 1, 0);
	index_rescan(scan, &skey, 1, NULL, 0);
	if (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		slot_getallattrs(slot);
		l->found = true;
		l->tid = slot->tts_tid;
		if (!slot->tts_isnull[Anum_lease_holder - 1])
		{
			l->held = true;
			l->holder = DatumGetTextPCopy(slot->tts_values[Anum_lease_holder - 1]);
			l->owner = DatumGetObjectId(slot->tts_values[Anum_lease_owner - 1]);
		}
		l->token = DatumGetInt64(slot->tts_values[Anum_lease_token - 1]);
		l->ttl_us = DatumGetInt64(slot->tts_values[Anum_lease_ttl_us - 1]);
		l->acquired_at = DatumGetTimestampTz(slot->tts_values[Anum_lease_acquired_at - 1]);
		l->expires_at = DatumGetTimestampTz(slot->tts_values[Anum_lease_expires_at - 1]);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snap);
}

static HeapTuple
form_row(LeaseStore *s, text *key, const DlockLease *v)
{
	Datum		values[Natts_lease];
	bool		nulls[Natts_lease] = {0};

	values[Anum_lease_key - 1] = PointerGetDatum(key);
	if (v->held)
	{
		values[Anum_lease_holder - 1] = PointerGetDatum(v->holder);
		values[Anum_lease_owner - 1] = ObjectIdGetDatum(v->owner);
	}
	else
	{
		nulls[Anum_lease_holder - 1] = true;
		nulls[Anum_lease_owner - 1] = true;
	}
	values[Anum_lease_token - 1] = Int64GetDatum(v->token);
	values[Anum_lease_ttl_us - 1] = Int64GetDatum(v->ttl_us);
	values[Anum_lease_acquired_at - 1] = TimestampTzGetDatum(v->acquired_at);
	values[Anum_lease_expires_at - 1] = TimestampTzGetDatum(v->expires_at);
	return heap_form_tuple(RelationGetDescr(s->rel), values, nulls);
}

/* index the new version of a row, unless it is a heap-only tuple */
static void
index_row(LeaseStore *s, HeapTuple tup, bool key_unchanged)
{
	Datum		keyval;
	bool		isnull;

	if (HeapTupleIsHeapOnly(tup))
		return;
	if (s->index_info == NULL)
		s->index_info = BuildIndexInfo(s->idx);
	keyval = heap_getattr(tup, Anum_lease_key, RelationGetDescr(s->rel), &isnull);
	(void) index_insert(s->idx, &keyval, &isnull, &tup->t_self, s->rel,
						UNIQUE_CHECK_YES, key_unchanged, s->index_info);
}

/*
 * Write key's row with the values in *v: an insert when there is no row
 * (v->found false), else an update of the version at v->tid, which the
 * caller read under the key's lock.  The change is visible to the next
 * read of this transaction.
 */
void
dlock_lease_store_write(LeaseStore *s, text *key, const DlockLease *v)
{
	HeapTuple	tup = form_row(s, key, v);

	if (v->found)
	{
		ItemPointerData otid = v->tid;

		simple_heap_update(s->rel, &otid, tup);
		index_row(s, tup, true);
	}
	else
	{
		simple_heap_insert(s->rel, tup);
		index_row(s, tup, false);
	}
	heap_freetuple(tup);
	CommandCounterIncrement();
}
