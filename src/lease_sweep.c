/*-------------------------------------------------------------------------
 *
 * lease_sweep.c
 *		The sweep that one acquire in 1024 runs (lease.c, maybe_cleanup):
 *		deletes a few rows of dlock.lease that have been free or expired
 *		for longer than dlock.idle_key_lifetime, reading a window of 32
 *		blocks at a random place, without SQL.
 *
 * dlock_cleanup() sweeps the whole table through SQL (lease.c and
 * lease_store.c); this sweep does the same for one window of the table
 * with direct heap access, like every other write of an acquire
 * (lease_store.c), so that dlock_acquire runs no SQL on any path and
 * needs no pinned search_path (src/no_search_path.h).  Its cost does not
 * grow with the table: a TID range scan of SWEEP_BLOCKS blocks, then one
 * index lookup and one heap delete per idle row found, at most limit.
 *
 * Protocol, as for every write of a key: the row is deleted only under
 * the key's lock (keylock.c), taken without waiting (a key some other
 * transaction works on is skipped), and only if the latest committed row
 * read after the lock was granted is still idle.  The key stays locked
 * until commit; the caller runs the sweep only in a transaction of its
 * own, which commits at once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/tableam.h"
#include "common/pg_prng.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "keylock.h"
#include "lease_store.h"
#include "lease_sweep.h"
#include "store.h"
#include "wait.h"
#include "xact.h"

/* columns of dlock.lease read here (dlock--0.1.sql; lease_store.c) */
#define SWEEP_ATT_KEY			1
#define SWEEP_ATT_EXPIRES_AT	7

/* the window: as many blocks as lease_store.c's SQL sweep reads */
#define SWEEP_BLOCKS	32

/*
 * Up to limit keys of rows idle since before, in SWEEP_BLOCKS consecutive
 * blocks at a random place (the whole table when it is no bigger); every
 * block is as likely to be in the window as any other.
 */
static text **
idle_keys_in_window(DlockStore *s, TimestampTz before, int limit, int *n)
{
	BlockNumber nblocks = RelationGetNumberOfBlocks(s->rel);
	int64		start = 0;
	int64		end = nblocks;
	ItemPointerData from;
	ItemPointerData to;
	Snapshot	snap;
	TableScanDesc scan;
	TupleTableSlot *slot;
	text	  **keys = palloc(sizeof(text *) * limit);

	*n = 0;
	if (nblocks == 0)
		return keys;
	if (nblocks > SWEEP_BLOCKS)
	{
		/* a window start in [1 - SWEEP_BLOCKS, nblocks - 1], cut to the table */
		start = (int64) pg_prng_uint64_range(&pg_global_prng_state, 0,
											 nblocks + SWEEP_BLOCKS - 2)
			- (SWEEP_BLOCKS - 1);
		end = Min(start + SWEEP_BLOCKS, (int64) nblocks);
		start = Max(start, 0);
	}
	/* both ends of a TID range scan are included */
	ItemPointerSet(&from, (BlockNumber) start, FirstOffsetNumber);
	ItemPointerSet(&to, (BlockNumber) (end - 1), MaxOffsetNumber);

	snap = RegisterSnapshot(GetLatestSnapshot());
	slot = table_slot_create(s->rel, NULL);
	scan = table_beginscan_tidrange(s->rel, snap, &from, &to);
	while (*n < limit &&
		   table_scan_getnextslot_tidrange(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		Datum		expires;

		CHECK_FOR_INTERRUPTS();
		expires = slot_getattr(slot, SWEEP_ATT_EXPIRES_AT, &isnull);
		if (!isnull && DatumGetTimestampTz(expires) < before)
			keys[(*n)++] = DatumGetTextPCopy(slot_getattr(slot, SWEEP_ATT_KEY,
														  &isnull));
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snap);
	return keys;
}

/*
 * Delete up to limit rows of dlock.lease free or expired for longer than
 * idle_us, from a window of the table at a random place; returns how
 * many.  Keys another transaction works on are skipped.
 */
int64
dlock_lease_sweep(int64 idle_us, int limit)
{
	TimestampTz before = GetCurrentTimestamp() - idle_us;
	DlockStore	s;
	text	  **keys;
	int			n;
	int64		deleted = 0;

	dlock_lease_store_open(&s);
	keys = idle_keys_in_window(&s, before, limit, &n);
	for (int i = 0; i < n; i++)
	{
		DlockKeyLock kl = dlock_key_for_text(DLOCK_CLASS_LEASE,
											 VARDATA_ANY(keys[i]),
											 VARSIZE_ANY_EXHDR(keys[i]));
		DlockLease	l;

		CHECK_FOR_INTERRUPTS();
		if (!dlock_key_trylock(&kl, ExclusiveLock))
			continue;
		dlock_lease_store_fetch(&s, keys[i], &l);
		if (l.found && l.expires_at < before)
		{
			simple_heap_delete(s.rel, &l.tid);
			CommandCounterIncrement();
			dlock_xact_note_key(&kl);
			deleted++;
		}
		else
		{
			/* as lease.c gives back a key it did not write */
			dlock_key_unlock(&kl, ExclusiveLock);
			(void) dlock_wait_wake_key(kl.hash);
		}
	}
	dlock_store_close(&s);
	return deleted;
}
