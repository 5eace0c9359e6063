/*-------------------------------------------------------------------------
 *
 * claim_store.c
 *		Every read and write of dlock.claim, with claim_store_probe.c (the
 *		claim query's per-row check) and claim_store_spi.c (the writes and
 *		sweeps of many rows, as SQL).  This file opens the table and has
 *		the other per-row hot paths, which go to the table directly, without
 *		SPI (the claim fence's lookup, completion's give-back, and the
 *		insert of new claims).  No other file touches dlock.claim.
 *
 * Lookups go through the primary key (relid, key) at the latest committed
 * state (base_store.c).  Every writer of a claim row holds that row's key lock
 * (base_keylock.c), so under the lock the row read is the row written.
 *
 * A claim of n rows that were never claimed before inserts n rows in one
 * go, the way COPY does: one table_multi_insert (a WAL record per heap
 * page, not per row), then the entries of every index of dlock.claim,
 * partial ones included (ExecInsertIndexTuples evaluates their
 * predicates).  The caller holds the user-table row lock of every row
 * (only claimers write new claim rows, and they all lock the row first)
 * and has just read, at the latest committed state, that none of them
 * has a claim row, so the primary key can only object if that protocol
 * is broken; then it raises its usual unique violation.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "base_keys.h"
#include "base_store.h"
#include "claim_store.h"
#include "claim_store_int.h"
#include "compat.h"
#include "base_limits.h"


/*
 * The number of columns of dlock.claim (0: no such table), kept until a
 * relcache invalidation of it (ALTER EXTENSION ... UPDATE adds one; DROP
 * EXTENSION drops the table).
 */
static Oid	claim_relid = InvalidOid;
static int	claim_natts_kept = -1;

static void
claim_natts_inval(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == claim_relid)
		claim_natts_kept = -1;
}

static int
claim_natts(void)
{
	static bool registered = false;
	Oid			nsp;
	HeapTuple	tup;

	if (claim_natts_kept >= 0)
		return claim_natts_kept;
	if (!registered)
	{
		CacheRegisterRelcacheCallback(claim_natts_inval, (Datum) 0);
		registered = true;
	}
	nsp = get_namespace_oid(DLOCK_SCHEMA, true);
	claim_relid = OidIsValid(nsp) ? get_relname_relid("claim", nsp) : InvalidOid;
	if (!OidIsValid(claim_relid))
		return 0;				/* not kept: CREATE EXTENSION makes one */
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(claim_relid));
	if (!HeapTupleIsValid(tup))
		return 0;
	claim_natts_kept = ((Form_pg_class) GETSTRUCT(tup))->relnatts;
	ReleaseSysCache(tup);
	return claim_natts_kept;
}

/*
 * Open dlock.claim: as dlock 0.4 made it, or as 0.1 to 0.3 did (the
 * library was updated, the extension not yet: no long_key column, so a
 * digest key's text is not kept).
 */
void
dlock_claim_store_open(DlockStore *s)
{
	dlock_store_open(s, "claim", claim_natts() == Natts_claim_table_03 ?
					 Natts_claim_table_03 : Natts_claim_table);
}

/* whether dlock.claim has its long_key column (dlock 0.4 and later) */
bool
dlock_claim_store_has_long_key(void)
{
	return claim_natts() >= Anum_long_key;
}

/* find the claim row of (relid, key) into s->slot */
static bool
fetch_claim(DlockStore *s, Oid relid, text *key)
{
	ScanKeyData skeys[2];

	ScanKeyEntryInitialize(&skeys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   InvalidOid, F_OIDEQ, ObjectIdGetDatum(relid));
	ScanKeyEntryInitialize(&skeys[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
						   s->idx->rd_indcollation[1], F_TEXTEQ,
						   PointerGetDatum(key));
	return dlock_store_fetch(s, skeys, 2);
}

/* the fetched claim is held by someone and unexpired */
static bool
fetched_live(DlockStore *s)
{
	TupleTableSlot *slot = s->slot;

	return !slot->tts_isnull[Anum_holder - 1] &&
		DatumGetTimestampTz(slot->tts_values[Anum_expires_at - 1]) >
		GetCurrentTimestamp();
}

/* the fetched claim is holder's and role's, and unexpired */
static bool
fetched_held(DlockStore *s, text *holder, Oid role)
{
	TupleTableSlot *slot = s->slot;
	text	   *h;

	if (!fetched_live(s))
		return false;
	h = DatumGetTextPP(slot->tts_values[Anum_holder - 1]);
	return DatumGetObjectId(slot->tts_values[Anum_owner - 1]) == role &&
		dlock_text_cmp(&h, &holder) == 0;
}

/* holder and role hold an unexpired claim on (relid, key) */
bool
dlock_claim_store_held(Oid relid, text *key, text *holder, Oid role)
{
	DlockStore	s;
	bool		held;

	dlock_claim_store_open(&s);
	held = fetch_claim(&s, relid, key) && fetched_held(&s, holder, role);
	dlock_store_close(&s);
	return held;
}

/*
 * Read the claims on keys[0..n-1] (locked by the caller) at the latest
 * committed state: found[i] says whether keys[i] has a claim row, and if
 * so live[i] whether it is held unexpired, attempts[i] how often it was
 * claimed, poisoned[i] whether it is poisoned.
 */
void
dlock_claim_store_lookup(Oid relid, text **keys, int n, bool *found,
						 bool *live, int *attempts, bool *poisoned)
{
	DlockStore	s;

	dlock_claim_store_open(&s);
	dlock_store_batch_begin(&s, 2);
	for (int i = 0; i < n; i++)
	{
		TupleTableSlot *slot = s.slot;

		CHECK_FOR_INTERRUPTS();
		found[i] = fetch_claim(&s, relid, keys[i]);
		if (!found[i])
			continue;
		live[i] = fetched_live(&s);
		attempts[i] = DatumGetInt32(slot->tts_values[Anum_attempts - 1]);
		poisoned[i] = !slot->tts_isnull[Anum_poisoned_at - 1];
	}
	dlock_store_batch_end(&s);
	dlock_store_close(&s);
}

/*
 * Delete the claims on keys[0..n-1] (locked by the caller) that holder
 * and role hold unexpired; done[i] says whether keys[i]'s was deleted.
 * Returns how many were.
 */
int
dlock_claim_store_delete_held(Oid relid, text **keys, int n, text *holder,
							  Oid role, bool *done)
{
	DlockStore	s;
	int			ndone = 0;

	dlock_claim_store_open(&s);
	dlock_store_batch_begin(&s, 2);
	for (int i = 0; i < n; i++)
	{
		done[i] = false;
		for (;;)
		{
			TM_FailureData tmfd;
			TM_Result	r;

			CHECK_FOR_INTERRUPTS();
			if (!fetch_claim(&s, relid, keys[i]) ||
				!fetched_held(&s, holder, role))
				break;

			/*
			 * A renewal or give-back of the same holder may have written the
			 * row and given its key lock back before committing: wait for it
			 * to end, then look again (renewed: still ours; given back: not).
			 */
			r = heap_delete(s.rel, &s.slot->tts_tid, GetCurrentCommandId(true),
							InvalidSnapshot, true, &tmfd, false);
			if (r == TM_Ok)
			{
				done[i] = true;
				ndone++;
				break;
			}
			if (r == TM_Deleted)
				break;
			if (r != TM_Updated)
				elog(ERROR, "unexpected result %d deleting a claim row", (int) r);
			/* it has ended: look again at the state after it */
			dlock_store_batch_end(&s);
			dlock_store_batch_begin(&s, 2);
		}
	}
	dlock_store_batch_end(&s);
	dlock_store_close(&s);
	if (ndone > 0)
		CommandCounterIncrement();
	return ndone;
}

/*
 * Insert a first claim (attempts 1) on each of keys[0..n-1] of table
 * relid for holder and role; fulls[i] is the key text of keys[i] (another
 * text when keys[i] is its digest, kept in long_key).  Later statements of
 * the transaction see the rows (CommandCounterIncrement).
 */
void
dlock_claim_store_insert(Oid relid, text **keys, text **fulls, int n,
						 text *holder, Oid role, int64 token, int64 ttl_us,
						 TimestampTz now, TimestampTz expires)
{
	DlockStore	s;
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot **slots;

	if (n <= 0)
		return;
	dlock_claim_store_open(&s);
	rel = s.rel;
	estate = CreateExecutorState();
	rri = makeNode(ResultRelInfo);
	InitResultRelInfo(rri, rel, 1, NULL, 0);
	ExecOpenIndices(rri, false);

	slots = palloc(sizeof(TupleTableSlot *) * n);
	for (int i = 0; i < n; i++)
	{
		TupleTableSlot *slot = table_slot_create(rel, NULL);
		Datum	   *v = slot->tts_values;
		bool	   *isnull = slot->tts_isnull;

		CHECK_FOR_INTERRUPTS();
		ExecClearTuple(slot);
		memset(isnull, 0, sizeof(bool) * slot->tts_tupleDescriptor->natts);
		v[Anum_relid - 1] = ObjectIdGetDatum(relid);
		v[Anum_key - 1] = PointerGetDatum(keys[i]);
		v[Anum_holder - 1] = PointerGetDatum(holder);
		v[Anum_owner - 1] = ObjectIdGetDatum(role);
		v[Anum_token - 1] = Int64GetDatum(token);
		v[Anum_ttl_us - 1] = Int64GetDatum(ttl_us);
		v[Anum_claimed_at - 1] = TimestampTzGetDatum(now);
		v[Anum_expires_at - 1] = TimestampTzGetDatum(expires);
		v[Anum_attempts - 1] = Int32GetDatum(1);
		v[Anum_poisoned_at - 1] = (Datum) 0;
		isnull[Anum_poisoned_at - 1] = true;
		if (slot->tts_tupleDescriptor->natts >= Anum_long_key)
		{
			v[Anum_long_key - 1] = PointerGetDatum(fulls[i]);
			isnull[Anum_long_key - 1] = fulls[i] == keys[i];
		}
		ExecStoreVirtualTuple(slot);
		slots[i] = slot;
	}

	table_multi_insert(rel, slots, n, GetCurrentCommandId(true), 0, NULL);
	for (int i = 0; i < n; i++)
	{
		List	   *recheck;

		CHECK_FOR_INTERRUPTS();
		ResetPerTupleExprContext(estate);
		recheck = dlock_insert_index_tuples(rri, slots[i], estate);
		list_free(recheck);
		ExecDropSingleTupleTableSlot(slots[i]);
	}

	ExecCloseIndices(rri);
	FreeExecutorState(estate);
	dlock_store_close(&s);
	CommandCounterIncrement();
}
