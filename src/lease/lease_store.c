/*-------------------------------------------------------------------------
 *
 * lease_store.c
 *		Every read and write of dlock.lease: a lookup by key through the
 *		primary key index and the insert or update of one row, without SPI;
 *		the sweeps over many rows (a holder's keys, cleanup, the
 *		dlock_locks rows) as SQL.
 *
 * Every lease call reads one row by key and writes at most one, so these
 * go to the heap and the index directly, the way PostgreSQL's own catalog
 * code does (CatalogTupleUpdate), instead of through the executor: no
 * plan to revalidate, no executor state, no planner settings to pin.
 * What the executor would otherwise check is checked here once per call
 * (base_store.c, and below): the table must still look the way dlock--*.sql
 * made it, with its primary key as its only index, the one index kept up
 * to date here.  Reads use the latest committed state, like base_spi.c.
 *
 * The rare sweeps over many rows (release_all's list, cleanup, the view)
 * run as SQL through base_spi.c, with plans kept next to their text.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "executor/tuptable.h"
#include "storage/bufmgr.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "wait/wait.h"
#include "compat.h"
#include "base/base.h"
#include "history/history.h"
#include "lease/lease_int.h"
#include "lease/lease.h"

/*
 * columns of dlock.lease, in the order dlock--0.1.sql creates them; slot
 * and slots come with 0.4 (semaphores, issue 26), and the primary key is
 * (key, slot) from then on.  Until ALTER EXTENSION dlock UPDATE adds
 * them, every row is slot 0 of a lease (slots 1).
 */
#define Anum_lease_key			1
#define Anum_lease_holder		2
#define Anum_lease_owner		3
#define Anum_lease_token		4
#define Anum_lease_ttl_us		5
#define Anum_lease_acquired_at	6
#define Anum_lease_expires_at	7
#define Anum_lease_slot			8
#define Anum_lease_slots		9
#define Natts_lease				9
#define Natts_lease_03			7

/* Open dlock.lease for one call. */
void
dlock_lease_store_open(DlockStore *s)
{
	List	   *indexes;

	dlock_store_open_either(s, "lease", Natts_lease, Natts_lease_03);
	/* the primary key is the only index kept up to date here */
	indexes = RelationGetIndexList(s->rel);
	if (list_length(indexes) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s.lease of extension dlock has been altered", DLOCK_SCHEMA),
				 errdetail("It has %d indexes; dlock maintains only its primary key.",
						   list_length(indexes)),
				 errhint("Drop the other indexes, or re-create the extension dlock.")));
	list_free(indexes);
	s->index_info = NULL;
}

/* whether dlock.lease has the columns of semaphores (dlock 0.4 and later) */
bool
dlock_lease_store_has_slots(DlockStore *s)
{
	return RelationGetDescr(s->rel)->natts >= Anum_lease_slots;
}

/*
 * Who is changing the row version just fetched (in s->slot), if anyone
 * else: the transaction, still in progress, that updated it without
 * keeping the key's lock to its end (dlock_lease_release_all gives each
 * key lock back once it has written: lease_decide.c).  A delete in progress (a
 * sweep: lease_store_delete_idle) does not count: the row it deletes is
 * idle, and a decision taken on it stays right when it is gone; a write
 * then waits for the sweep (dlock_lease_store_write).  *stale: the change
 * committed after the snapshot the row was read with; read it again.
 */
static TransactionId
row_changed_by(DlockStore *s, bool *stale)
{
	HeapTuple	tup = ExecFetchSlotHeapTuple(s->slot, false, NULL);
	HeapTupleHeader h = tup->t_data;
	TransactionId xmax;

	*stale = false;
	if ((h->t_infomask & HEAP_XMAX_INVALID) ||
		HEAP_XMAX_IS_LOCKED_ONLY(h->t_infomask))
		return InvalidTransactionId;
	xmax = HeapTupleHeaderGetUpdateXid(h);
	if (!TransactionIdIsValid(xmax) || TransactionIdIsCurrentTransactionId(xmax))
		return InvalidTransactionId;
	if (TransactionIdIsInProgress(xmax))
		return ItemPointerEquals(&tup->t_self, &h->t_ctid) ?
			InvalidTransactionId : xmax;
	*stale = TransactionIdDidCommit(xmax);
	return InvalidTransactionId;
}

/* the scan keys of key's rows (nkeys 1), or of its slot 0 (nkeys 2) */
static int
key_scankeys(DlockStore *s, text *key, bool slot0, ScanKeyData *skey)
{
	ScanKeyEntryInitialize(&skey[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   s->idx->rd_indcollation[0], F_TEXTEQ,
						   PointerGetDatum(key));
	if (!slot0 || !dlock_lease_store_has_slots(s))
		return 1;
	ScanKeyEntryInitialize(&skey[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
						   InvalidOid, F_INT2EQ, Int16GetDatum(0));
	return 2;
}

/*
 * The row version in s->slot into *l (found, changing are the caller's);
 * its holder copied, or (copy false) pointing into the slot.
 */
static void
read_row(DlockStore *s, DlockLease *l, bool copy)
{
	TupleTableSlot *slot = s->slot;

	l->found = true;
	l->tid = slot->tts_tid;
	l->slot = 0;
	l->slots = 1;
	if (dlock_lease_store_has_slots(s))
	{
		l->slot = DatumGetInt16(slot->tts_values[Anum_lease_slot - 1]);
		l->slots = DatumGetInt16(slot->tts_values[Anum_lease_slots - 1]);
	}
	if (!slot->tts_isnull[Anum_lease_holder - 1])
	{
		l->held = true;
		l->holder = copy ?
			DatumGetTextPCopy(slot->tts_values[Anum_lease_holder - 1]) :
			DatumGetTextPP(slot->tts_values[Anum_lease_holder - 1]);
		l->owner = DatumGetObjectId(slot->tts_values[Anum_lease_owner - 1]);
	}
	l->token = DatumGetInt64(slot->tts_values[Anum_lease_token - 1]);
	l->ttl_us = DatumGetInt64(slot->tts_values[Anum_lease_ttl_us - 1]);
	l->acquired_at = DatumGetTimestampTz(slot->tts_values[Anum_lease_acquired_at - 1]);
	l->expires_at = DatumGetTimestampTz(slot->tts_values[Anum_lease_expires_at - 1]);
}

/*
 * Read the row of key's slot 0 (the only row of a lease) at the latest
 * committed state (and this transaction's own changes) into *l, as it is
 * stored; l->found is false when there is none.  l->changing is set when
 * another transaction in progress is changing that row (see
 * row_changed_by).
 */
static void
fetch_stored(DlockStore *s, text *key, DlockLease *l)
{
	ScanKeyData skey[2];
	int			nkeys = key_scankeys(s, key, true, skey);
	bool		stale;

	memset(l, 0, sizeof(*l));
	for (;;)
	{
		if (!dlock_store_fetch(s, skey, nkeys))
			return;
		l->changing = row_changed_by(s, &stale);
		if (!stale)
			break;
		CHECK_FOR_INTERRUPTS();
	}
	read_row(s, l, true);
}

/* an abandoned hand-over grant (wait_abandon.c) reads as a free key */
static void
unless_abandoned(DlockLease *l)
{
	if (l->held && dlock_abandoned(l->token))
	{
		/* for its watchers: a grant over it frees it (lease_grant.c) */
		l->abandoned_by = l->holder;
		l->abandoned_owner = l->owner;
		l->held = false;
		l->holder = NULL;
		l->owner = InvalidOid;
	}
}

/*
 * Read key's row as it is stored (fetch_stored), except that a hand-over
 * grant that its waiter abandoned (wait_abandon.c) reads as a free key.
 */
void
dlock_lease_store_fetch(DlockStore *s, text *key, DlockLease *l)
{
	fetch_stored(s, key, l);
	unless_abandoned(l);
}

/*
 * Every row of key (a semaphore has one per slot it used), in slot order,
 * read at one snapshot as dlock_lease_store_fetch reads one: a palloc'd
 * array, its length in *n.  A row whose updater committed after that
 * snapshot makes it read them all again.
 */
DlockLease *
dlock_lease_store_fetch_all(DlockStore *s, text *key, int *n)
{
	ScanKeyData skey[2];
	int			nkeys = key_scankeys(s, key, false, skey);
	int			size = 4;
	DlockLease *ls = palloc(sizeof(DlockLease) * size);

	for (;;)
	{
		bool		stale = false;

		*n = 0;
		dlock_store_batch_begin(s, nkeys);
		index_rescan(s->scan, skey, nkeys, NULL, 0);
		while (index_getnext_slot(s->scan, ForwardScanDirection, s->slot))
		{
			DlockLease *l;

			CHECK_FOR_INTERRUPTS();
			ExecMaterializeSlot(s->slot);
			slot_getallattrs(s->slot);
			if (*n == size)
			{
				size *= 2;
				ls = repalloc(ls, sizeof(DlockLease) * size);
			}
			l = &ls[*n];
			memset(l, 0, sizeof(*l));
			l->changing = row_changed_by(s, &stale);
			if (stale)
				break;
			read_row(s, l, true);
			unless_abandoned(l);
			(*n)++;
		}
		dlock_store_batch_end(s);
		ExecClearTuple(s->slot);
		if (!stale)
			return ls;
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Call fn(l, arg) on every version of key's rows that is committed and not
 * deleted, or that another transaction in progress is writing (a dirty
 * read), in index order.  A version another transaction is writing comes
 * with uncommitted set and changing its writer; a committed version
 * another transaction is updating, with changing set (see row_changed_by:
 * a sweep's delete does not count).  A row being updated can so come
 * twice, as its committed version and as the new one.  l->holder points
 * into the scan's slot: valid during the call only (fn copies what it
 * keeps).  Nothing is allocated per row, so that a key of a thousand
 * shared holders costs one pass and no growing array.
 *
 * This is what every decision about a key reads (lease_decide.c, lease_grant.c):
 * the holders of a semaphore or shared leases write their own rows
 * without the key's lock, and a grant must count those writes in
 * progress.
 */
void
dlock_lease_store_scan_pending(DlockStore *s, text *key, DlockRowFn fn,
							   void *arg)
{
	ScanKeyData skey[2];
	int			nkeys = key_scankeys(s, key, false, skey);
	SnapshotData dirty;
	IndexScanDesc scan;

	/*
	 * A dirty read takes no part in serializable conflict detection; under
	 * SERIALIZABLE the rows are read at the latest committed state first,
	 * as every lease call read them before, so that dlock's reads still
	 * record their read/write dependencies (design.md, Transactions).
	 */
	if (IsolationIsSerializable())
	{
		int			n;

		pfree(dlock_lease_store_fetch_all(s, key, &n));
	}
	InitDirtySnapshot(dirty);
	scan = dlock_index_beginscan(s->rel, s->idx, &dirty, nkeys);
	index_rescan(scan, skey, nkeys, NULL, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, s->slot))
	{
		DlockLease	l;

		CHECK_FOR_INTERRUPTS();
		memset(&l, 0, sizeof(l));
		if (TransactionIdIsValid(dirty.xmin))
		{
			l.uncommitted = true;
			l.changing = dirty.xmin;
		}
		else if (TransactionIdIsValid(dirty.xmax))
		{
			HeapTuple	tup = ExecFetchSlotHeapTuple(s->slot, false, NULL);

			/* an update in progress, not a sweep's delete */
			if (!ItemPointerEquals(&tup->t_self, &tup->t_data->t_ctid))
				l.changing = dirty.xmax;
		}
		slot_getallattrs(s->slot);
		read_row(s, &l, false);
		unless_abandoned(&l);
		fn(&l, arg);
	}
	index_endscan(scan);
	ExecClearTuple(s->slot);
}

/* a DlockLease that keeps what it points to (dlock_lease_store_scan_pending) */
DlockLease *
dlock_lease_copy(const DlockLease *l)
{
	DlockLease *c = palloc(sizeof(DlockLease));

	*c = *l;
	if (l->holder != NULL)
		c->holder = DatumGetTextPCopy(PointerGetDatum(l->holder));
	if (l->abandoned_by != NULL)
		c->abandoned_by = DatumGetTextPCopy(PointerGetDatum(l->abandoned_by));
	return c;
}

static HeapTuple
form_row(DlockStore *s, text *key, const DlockLease *v)
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
	if (dlock_lease_store_has_slots(s))
	{
		values[Anum_lease_slot - 1] = Int16GetDatum((int16) v->slot);
		values[Anum_lease_slots - 1] = Int16GetDatum((int16) v->slots);
	}
	else if (v->slot != 0 || v->slots != 1)
		elog(ERROR, "dlock: a semaphore row in a table without slots");
	return heap_form_tuple(RelationGetDescr(s->rel), values, nulls);
}

/* index the new version of a row, unless it is a heap-only tuple */
static void
index_row(DlockStore *s, HeapTuple tup, bool key_unchanged)
{
	Datum		keyvals[2];
	bool		isnull[2] = {false, false};

	if (HeapTupleIsHeapOnly(tup))
		return;
	if (s->index_info == NULL)
		s->index_info = BuildIndexInfo(s->idx);
	/* (key), or (key, slot) from 0.4 on */
	keyvals[0] = heap_getattr(tup, Anum_lease_key, RelationGetDescr(s->rel),
							  &isnull[0]);
	if (dlock_lease_store_has_slots(s))
		keyvals[1] = heap_getattr(tup, Anum_lease_slot,
								  RelationGetDescr(s->rel), &isnull[1]);
	(void) index_insert(s->idx, keyvals, isnull, &tup->t_self, s->rel,
						UNIQUE_CHECK_YES, key_unchanged, s->index_info);
}

/*
 * Write key's row with the values in *v: an insert when there is no row
 * (v->found false), else an update of the version at v->tid, which the
 * caller read under the key's lock.  Under that lock, only a sweep can
 * have touched the row since (it takes no key lock: see
 * dlock_lease_store_delete_idle), and it deletes idle rows only: the
 * update waits for the sweep's transaction, and when the row is gone the
 * key's row is written anew.  The change is visible to the next read of
 * this transaction.
 */
static bool
dlock_lease_store_write(DlockStore *s, text *key, const DlockLease *v)
{
	HeapTuple	tup = form_row(s, key, v);
	bool		insert = !v->found;
	bool		replaced = v->found;

	if (v->found)
	{
		ItemPointerData otid = v->tid;
		TM_FailureData tmfd;
		TM_Result	r = dlock_heap_update_waiting(s->rel, &otid, tup, &tmfd);

		if (r == TM_Deleted)
		{
			insert = true;
			replaced = false;
		}
		else if (r != TM_Ok)
			elog(ERROR, "dlock: the lease row of a locked key was changed concurrently (%d)",
				 (int) r);
		else
			index_row(s, tup, true);
	}
	if (insert)
	{
		simple_heap_insert(s->rel, tup);
		index_row(s, tup, false);
	}
	heap_freetuple(tup);
	CommandCounterIncrement();
	return replaced;
}

/* ---- the three kinds of row write of the lease decisions ---- */

/*
 * A new grant: insert the row, or overwrite a free or expired one.  True
 * when it overwrote the version read as *old; false when there was none,
 * or a sweep deleted it meanwhile (and ended its tenure, if it held one).
 */
bool
dlock_lease_store_grant(DlockStore *s, text *key, const DlockLease *old,
						text *holder, Oid role, int64 token, int64 ttl_us,
						TimestampTz now, TimestampTz expires)
{
	DlockLease	v = *old;

	v.held = true;
	v.holder = holder;
	v.owner = role;
	v.token = token;
	v.ttl_us = ttl_us;
	v.acquired_at = now;
	v.expires_at = expires;
	return dlock_lease_store_write(s, key, &v);
}

/* a new expiry (and ttl) for the same grant */
void
dlock_lease_store_extend(DlockStore *s, text *key, const DlockLease *old,
						 int64 ttl_us, TimestampTz expires)
{
	DlockLease	v = *old;

	v.ttl_us = ttl_us;
	v.expires_at = expires;
	(void) dlock_lease_store_write(s, key, &v);
}

/* free the key; its row stays (with its last token) for HOT reuse */
void
dlock_lease_store_free(DlockStore *s, text *key, const DlockLease *old,
					   TimestampTz now)
{
	DlockLease	v = *old;

	v.held = false;
	v.holder = NULL;
	v.owner = InvalidOid;
	v.expires_at = now;
	(void) dlock_lease_store_write(s, key, &v);
}

/* ---- sweeps over many rows, as SQL (between dlock_spi_begin and _end) ---- */

/*
 * The keys of holder's leases taken as role owner, in key order: the
 * first limit of them above after ('' for the first ones), copied into
 * the current memory context.
 */
text	  **
dlock_lease_store_holder_keys(text *holder, Oid owner, text *after,
							  int limit, uint64 *n)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[4] = {TEXTOID, OIDOID, TEXTOID, INT4OID};
	Datum		values[4];
	text	  **keys;

	values[0] = PointerGetDatum(holder);
	values[1] = ObjectIdGetDatum(owner);
	values[2] = PointerGetDatum(after);
	values[3] = Int32GetDatum(limit);
	*n = dlock_spi_run(dlock_spi_plan(&plan,
									  "SELECT DISTINCT key FROM " DLOCK_SCHEMA ".lease"
									  " WHERE holder" EQ "$1 AND owner" EQ "$2"
									  "   AND key OPERATOR(pg_catalog.>) $3"
									  " ORDER BY key LIMIT $4",
									  4, types),
					   values, NULL, 0, SPI_OK_SELECT);
	keys = dlock_copy_key_column(*n);
	SPI_freetuptable(SPI_tuptable);
	return keys;
}

/* the columns a sweep's delete returns, for note_swept */
#define SWEPT_RETURNING \
	" RETURNING key, holder, owner, token, acquired_at, expires_at"

/*
 * The n rows a sweep deleted (SWEPT_RETURNING, in SPI_tuptable): each
 * that still held its lease (run out, or it would not be idle) ends that
 * tenure, found expired by this sweep, in dlock.history when its key is
 * tracked.  An abandoned hand-over grant (wait_abandon.c) was never
 * held.  Returns n.
 */
static int64
note_swept(uint64 n)
{
	SPITupleTable *tab = SPI_tuptable;

	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = tab->vals[i];
		bool		isnull;
		Datum		holder = SPI_getbinval(tup, tab->tupdesc, 2, &isnull);
		Datum		token;

		CHECK_FOR_INTERRUPTS();
		if (isnull)
			continue;
		token = SPI_getbinval(tup, tab->tupdesc, 4, &isnull);
		if (dlock_abandoned(DatumGetInt64(token)))
			continue;
		dlock_history_lease_ended(DatumGetTextPP(SPI_getbinval(tup, tab->tupdesc, 1, &isnull)),
								  DatumGetTextPP(holder),
								  DatumGetObjectId(SPI_getbinval(tup, tab->tupdesc, 3, &isnull)),
								  DatumGetInt64(token),
								  DatumGetTimestampTz(SPI_getbinval(tup, tab->tupdesc, 5, &isnull)),
								  DatumGetTimestampTz(SPI_getbinval(tup, tab->tupdesc, 6, &isnull)),
								  DLOCK_END_EXPIRED);
	}
	return (int64) n;
}

/*
 * Delete up to limit rows that have been free or expired since before,
 * in the whole table (dlock_cleanup), or else in SWEEP_BLOCKS consecutive
 * blocks at a random place (a TID range scan), so that the sweep acquires
 * run now and then costs the same however many keys the table has (every
 * block is as likely to be in the window as any other); returns how many.
 *
 * Without key locks, and without waiting for anybody: one statement locks
 * the idle rows FOR UPDATE SKIP LOCKED (a row that another transaction is
 * changing is skipped) and deletes them.  A transaction that reads such a
 * row under its key lock meanwhile decides on an idle row (free, or
 * expired long ago), which it still is once gone; its write waits for the
 * sweep's end and writes the key's row anew (dlock_lease_store_write).
 * The sweep is therefore run only in transactions that end at once
 * (maint_sweep.c).
 */
#define SWEEP_BLOCKS	32

int64
dlock_lease_store_delete_idle(TimestampTz before, int limit, bool whole_table)
{
	static SPIPlanPtr whole_plan = NULL;
	static SPIPlanPtr window_plan = NULL;
	Oid			types[4] = {TIMESTAMPTZOID, INT4OID, TIDOID, TIDOID};
	Datum		values[4];
	ItemPointerData from;
	ItemPointerData to;
	BlockNumber nblocks = 0;

	values[0] = TimestampTzGetDatum(before);
	values[1] = Int32GetDatum(limit);
	if (!whole_table)
	{
		DlockStore	s;

		dlock_lease_store_open(&s);
		nblocks = RelationGetNumberOfBlocks(s.rel);
		dlock_store_close(&s);
	}
	if (whole_table || nblocks <= SWEEP_BLOCKS)
		return note_swept(dlock_spi_run(dlock_spi_plan(&whole_plan,
													"DELETE FROM " DLOCK_SCHEMA ".lease"
													" WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
													"   SELECT ctid FROM " DLOCK_SCHEMA ".lease"
													"    WHERE expires_at OPERATOR(pg_catalog.<) $1"
													"    LIMIT $2 FOR UPDATE SKIP LOCKED))"
													SWEPT_RETURNING,
													2, types),
									 values, NULL, 0, SPI_OK_DELETE_RETURNING));

	/* a window start in [1 - SWEEP_BLOCKS, nblocks - 1], cut to the table */
	{
		int64		start = (int64) pg_prng_uint64_range(&pg_global_prng_state, 0,
														 nblocks + SWEEP_BLOCKS - 2)
			- (SWEEP_BLOCKS - 1);

		ItemPointerSet(&from, (BlockNumber) Max(start, 0), 0);
		ItemPointerSet(&to, (BlockNumber) Min(start + SWEEP_BLOCKS, (int64) nblocks), 0);
	}
	values[2] = PointerGetDatum(&from);
	values[3] = PointerGetDatum(&to);
	return note_swept(dlock_spi_run(dlock_spi_plan(&window_plan,
												"DELETE FROM " DLOCK_SCHEMA ".lease"
												" WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
												"   SELECT ctid FROM " DLOCK_SCHEMA ".lease"
												"    WHERE ctid OPERATOR(pg_catalog.>=) $3"
												"      AND ctid OPERATOR(pg_catalog.<) $4"
												"      AND expires_at OPERATOR(pg_catalog.<) $1"
												"    LIMIT $2 FOR UPDATE SKIP LOCKED))"
												SWEPT_RETURNING,
												4, types),
								 values, NULL, 0, SPI_OK_DELETE_RETURNING));
}

/*
 * Delete the row of key if it still holds this grant (holder, role owner,
 * token): an abandoned hand-over grant (wait_abandon.c), which every reader
 * takes for a free key already; true if it did.  Like the sweeps, without
 * a key lock (no free key must look taken meanwhile): a writer that meets
 * the delete waits for it and writes the key's row anew.
 */
bool
dlock_lease_store_delete_grant(text *key, text *holder, Oid owner,
							   int64 token)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[4] = {TEXTOID, TEXTOID, OIDOID, INT8OID};
	Datum		values[4];

	values[0] = PointerGetDatum(key);
	values[1] = PointerGetDatum(holder);
	values[2] = ObjectIdGetDatum(owner);
	values[3] = Int64GetDatum(token);
	return dlock_spi_run(dlock_spi_plan(&plan,
										"DELETE FROM " DLOCK_SCHEMA ".lease"
										" WHERE key" EQ "$1 AND holder" EQ "$2"
										"   AND owner" EQ "$3 AND token" EQ "$4",
										4, types),
						 values, NULL, 0, SPI_OK_DELETE) > 0;
}

/*
 * The unexpired leases, with the columns of the dlock_locks view, into
 * SPI_tuptable; returns how many.  Column 3 is the owning role.  Abandoned
 * hand-over grants (wait_abandon.c) are left out: they read as free keys.
 */
uint64
dlock_lease_store_read_live(void)
{
	static SPIPlanPtr plan = NULL;
	uint64		n;
	uint64		kept = 0;

	n = dlock_spi_run(dlock_spi_plan(&plan,
									 "SELECT key, holder, owner::pg_catalog.regrole, token,"
									 "       acquired_at, expires_at"
									 "  FROM " DLOCK_SCHEMA ".lease"
									 " WHERE holder IS NOT NULL"
									 "   AND expires_at OPERATOR(pg_catalog.>)"
									 " pg_catalog.clock_timestamp()",
									 0, NULL),
					  NULL, NULL, 0, SPI_OK_SELECT);
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		bool		isnull;
		Datum		token = SPI_getbinval(tup, SPI_tuptable->tupdesc, 4, &isnull);

		CHECK_FOR_INTERRUPTS();
		if (!isnull && dlock_abandoned(DatumGetInt64(token)))
			continue;
		SPI_tuptable->vals[kept++] = tup;
	}
	return kept;
}
