/*-------------------------------------------------------------------------
 *
 * claim_store_probe.c
 *		The claim query's per-row check of dlock.claim: one index scan of
 *		its primary key, opened per claim query and re-keyed for every row
 *		the query's scan reaches (dlock_claim_unheld, claim_unheld.c).
 *
 * With claim_store.c and claim_store_spi.c, the only file that reads
 * dlock.claim.  It goes to the table directly, without SPI, with a dirty
 * snapshot: the check runs on every row a claim query reaches, before the
 * row lock, and must cost one probe of the index.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/transam.h"
#include "catalog/namespace.h"
#include "miscadmin.h"
#include "executor/tuptable.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "claim/claim.h"
#include "claim/claim_int.h"
#include "compat.h"

/*
 * The claim query's per-row check (dlock_claim_unheld): whether a row of
 * the user's table is held, looked up as the scan reaches the row, before
 * its row lock, through dlock.claim's primary key.  One index scan is
 * opened per claim query and re-keyed for every row.  It reads with a
 * dirty snapshot: claims committed, and claims another transaction is
 * writing or deleting right now, count as held; the claimer re-reads
 * every candidate under its key lock before writing (claim_batch.c), so a row
 * this check lets through by mistake is only dropped later, never handed
 * out twice.
 */
struct DlockClaimProbe
{
	DlockStore	s;
	IndexScanDesc scan;
	SnapshotData dirty;
	Oid			relid;
	TimestampTz now;			/* claims expiring before this are free */
	MemoryContext cxt;			/* the scan's: it outlives each row's check */
};

DlockClaimProbe *
dlock_claim_probe_begin(Oid relid)
{
	DlockClaimProbe *p = palloc0(sizeof(DlockClaimProbe));

	dlock_claim_store_open(&p->s);
	InitDirtySnapshot(p->dirty);
	p->scan = dlock_index_beginscan(p->s.rel, p->s.idx, &p->dirty, 2);
	p->relid = relid;
	p->now = GetCurrentTimestamp();
	p->cxt = CurrentMemoryContext;
	return p;
}

/*
 * A claim row of key (relid, key) is live, in its backoff, or poisoned.
 * If so, and that claim is committed and no open transaction is changing
 * it, *settled_until is when it can next change by itself (its expiry or
 * the end of its backoff: dlock_claim_slot_free_at; the end of time for a
 * poison mark), else 0.
 */
bool
dlock_claim_probe_held(DlockClaimProbe *p, text *key,
					   TimestampTz *settled_until)
{
	ScanKeyData skeys[2];
	TupleTableSlot *slot = p->s.slot;
	bool		held = false;
	MemoryContext old;

	*settled_until = 0;
	/* what the index scan keeps between rows (btree's killed items) */
	old = MemoryContextSwitchTo(p->cxt);
	ScanKeyEntryInitialize(&skeys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   InvalidOid, F_OIDEQ, ObjectIdGetDatum(p->relid));
	ScanKeyEntryInitialize(&skeys[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
						   p->s.idx->rd_indcollation[1], F_TEXTEQ,
						   PointerGetDatum(key));
	index_rescan(p->scan, skeys, 2, NULL, 0);
	/* a row being updated shows both versions to a dirty snapshot */
	while (!held && index_getnext_slot(p->scan, ForwardScanDirection, slot))
	{
		bool		poisoned;
		TimestampTz free_at;

		slot_getallattrs(slot);
		poisoned = !slot->tts_isnull[Anum_poisoned_at - 1];
		/* a live claim, or a lapsed one in its backoff */
		free_at = dlock_claim_slot_free_at(slot);
		held = poisoned || free_at > p->now;
		/* the dirty snapshot names an open inserter or deleter */
		if (held && !TransactionIdIsValid(p->dirty.xmin) &&
			!TransactionIdIsValid(p->dirty.xmax))
			*settled_until = poisoned ? DT_NOEND : free_at;
	}
	ExecClearTuple(slot);
	MemoryContextSwitchTo(old);
	return held;
}

void
dlock_claim_probe_end(DlockClaimProbe *p)
{
	index_endscan(p->scan);
	dlock_store_close(&p->s);
	pfree(p);
}

/*
 * How many claim rows of table relid in group grp (dlock_claim_group_id)
 * occupy it at now: poisoned_at IS NULL AND coalesce(retry_at, expires_at)
 * > now (a live claim, or a row waiting out its backoff), read through the
 * claim_group index.  dirty: with a dirty snapshot (claims other
 * transactions are writing count too: the scan's estimate), else at the
 * latest committed state and this transaction's own writes (the count the
 * batch decides by, under the group's lock).  A dirty snapshot shows a row
 * being updated twice: each key is counted once.
 */
int
dlock_claim_store_group_count(Oid relid, text *grp, bool dirty,
							  TimestampTz now)
{
	DlockStore	s;
	Oid			nsp = get_namespace_oid(DLOCK_SCHEMA, false);
	Oid			idxid = get_relname_relid("claim_group", nsp);
	Relation	idx;
	SnapshotData dirtysnap;
	Snapshot	snap;
	IndexScanDesc scan;
	ScanKeyData skeys[2];
	text	  **keys = NULL;
	int			n = 0,
				max = 0;

	if (!OidIsValid(idxid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index %s.claim_group of extension dlock does not exist",
						DLOCK_SCHEMA),
				 errhint("Run ALTER EXTENSION dlock UPDATE.")));
	dlock_claim_store_open(&s);
	idx = index_open(idxid, AccessShareLock);
	InitDirtySnapshot(dirtysnap);
	snap = dirty ? &dirtysnap : RegisterSnapshot(GetLatestSnapshot());
	scan = dlock_index_beginscan(s.rel, idx, snap, 2);
	ScanKeyEntryInitialize(&skeys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   InvalidOid, F_OIDEQ, ObjectIdGetDatum(relid));
	ScanKeyEntryInitialize(&skeys[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
						   idx->rd_indcollation[1], F_TEXTEQ,
						   PointerGetDatum(grp));
	index_rescan(scan, skeys, 2, NULL, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, s.slot))
	{
		TupleTableSlot *slot = s.slot;
		TimestampTz until;

		CHECK_FOR_INTERRUPTS();
		slot_getallattrs(slot);
		if (!slot->tts_isnull[Anum_poisoned_at - 1])
			continue;
		/* occupying: live, or in its backoff (as for claimers) */
		until = dlock_claim_slot_free_at(slot);
		if (until <= now)
			continue;
		if (n == max)
		{
			max = Max(8, max * 2);
			keys = keys ? repalloc(keys, sizeof(text *) * max) :
				palloc(sizeof(text *) * max);
		}
		keys[n++] = DatumGetTextPCopy(slot->tts_values[Anum_key - 1]);
	}
	index_endscan(scan);
	if (!dirty)
		UnregisterSnapshot(snap);
	index_close(idx, AccessShareLock);
	dlock_store_close(&s);
	return n > 1 ? dlock_sort_unique_keys(keys, n) : n;
}
