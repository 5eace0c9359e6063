/*-------------------------------------------------------------------------
 *
 * base_store.c
 *		Direct access to dlock's own tables: open one with its primary key
 *		index, and look a row up by its primary key at the latest
 *		committed state, without SPI.
 *
 * The calls that read one row by key on every use (every lease call, the
 * per-row claim fence) come here instead of going through the executor:
 * no plan to revalidate, no executor state, no planner settings to pin.
 * Like base_spi.c, lookups see the latest committed state plus this
 * transaction's own changes (GetLatestSnapshot), so that a lease is
 * judged by what is committed now also under REPEATABLE READ.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "executor/tuptable.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "base/base.h"
#include "compat.h"

/*
 * Open table dlock.<name> and its primary key index with the locks an
 * UPDATE takes, kept to the end of the transaction.  natts is the number
 * of columns dlock--*.sql gives it; a table that no longer looks like
 * that is an error.
 */
void
dlock_store_open(DlockStore *s, const char *name, int natts)
{
	dlock_store_open_either(s, name, natts, natts);
}

/*
 * The same, for a table that has natts columns in this version of dlock
 * and older_natts before an ALTER EXTENSION dlock UPDATE added some.
 */
void
dlock_store_open_either(DlockStore *s, const char *name, int natts,
						int older_natts)
{
	Oid			nsp = get_namespace_oid(DLOCK_SCHEMA, true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid(name, nsp) : InvalidOid;
	Oid			pkey;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s.%s of extension dlock does not exist",
						DLOCK_SCHEMA, name),
				 errhint("Run CREATE EXTENSION dlock in this database.")));
	s->rel = table_open(relid, RowExclusiveLock);
	pkey = dlock_primary_key_index(s->rel);
	if ((RelationGetDescr(s->rel)->natts != natts &&
		 RelationGetDescr(s->rel)->natts != older_natts) ||
		s->rel->rd_rel->relkind != RELKIND_RELATION || !OidIsValid(pkey))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s.%s of extension dlock has been altered",
						DLOCK_SCHEMA, name),
				 errhint("Drop and re-create the extension dlock.")));
	s->idx = index_open(pkey, RowExclusiveLock);
	s->slot = table_slot_create(s->rel, NULL);
	s->scan = NULL;
	s->snap = NULL;
}

void
dlock_store_close(DlockStore *s)
{
	ExecDropSingleTupleTableSlot(s->slot);
	index_close(s->idx, NoLock);
	table_close(s->rel, NoLock);
}

/*
 * Find the row whose primary key equals the nkeys scan keys (index
 * columns 1..nkeys, set up by the caller with ScanKeyEntryInitialize) at
 * the latest committed state (or at the batch's snapshot, inside one).  On success its columns are in s->slot
 * (slot_getallattrs done) and its version's tid in s->slot->tts_tid;
 * the values are valid until the next call.
 */
bool
dlock_store_fetch(DlockStore *s, ScanKey keys, int nkeys)
{
	bool		batch = s->scan != NULL;
	bool		found;

	ExecClearTuple(s->slot);
	if (!batch)
		dlock_store_batch_begin(s, nkeys);
	index_rescan(s->scan, keys, nkeys, NULL, 0);
	found = index_getnext_slot(s->scan, ForwardScanDirection, s->slot);
	if (found)
	{
		/* a copy of its own: the values stay valid after the scan */
		ExecMaterializeSlot(s->slot);
		slot_getallattrs(s->slot);
	}
	if (!batch)
		dlock_store_batch_end(s);
	return found;
}

/*
 * Look up many rows at one snapshot, the latest committed state as of
 * this call (the caller holds the key locks of those rows already), with
 * one index scan: dlock_store_fetch calls until dlock_store_batch_end.
 */
void
dlock_store_batch_begin(DlockStore *s, int nkeys)
{
	s->snap = RegisterSnapshot(GetLatestSnapshot());
	s->scan = dlock_index_beginscan(s->rel, s->idx, s->snap, nkeys);
}

void
dlock_store_batch_end(DlockStore *s)
{
	index_endscan(s->scan);
	UnregisterSnapshot(s->snap);
	s->scan = NULL;
	s->snap = NULL;
}
