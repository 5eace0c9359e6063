/*-------------------------------------------------------------------------
 *
 * claim_store.c
 *		Every read and write of dlock.claim.  The per-row hot paths go to
 *		the table directly, without SPI: the claim query's per-row check,
 *		the claim fence's lookup, completion's give-back, and the insert of
 *		new claims.  Writes and sweeps of many rows run as SQL (the second
 *		half of the file).  Longer than the other files on purpose: it is
 *		the one place that touches dlock.claim.
 *
 * Lookups go through the primary key (relid, key) at the latest committed
 * state (store.c).  Every writer of a claim row holds that row's key lock
 * (keylock.c), so under the lock the row read is the row written.
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
#include "access/stratnum.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "claim_store.h"
#include "dlock.h"
#include "compat.h"
#include "keys.h"
#include "spi_access.h"
#include "store.h"

/* columns of dlock.claim, as dlock--0.1.sql creates it */
enum
{
	Anum_relid = 1,
	Anum_key,
	Anum_holder,
	Anum_owner,
	Anum_token,
	Anum_ttl_us,
	Anum_claimed_at,
	Anum_expires_at,
	Anum_attempts,
	Anum_poisoned_at,
	Natts_claim_table = Anum_poisoned_at
};

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

	dlock_store_open(&s, "claim", Natts_claim_table);
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

	dlock_store_open(&s, "claim", Natts_claim_table);
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

	dlock_store_open(&s, "claim", Natts_claim_table);
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
 * relid for holder and role.  Later statements of the transaction see the
 * rows (CommandCounterIncrement).
 */
void
dlock_claim_store_insert(Oid relid, text **keys, int n, text *holder,
						 Oid role, int64 token, int64 ttl_us,
						 TimestampTz now, TimestampTz expires)
{
	DlockStore	s;
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot **slots;

	if (n <= 0)
		return;
	dlock_store_open(&s, "claim", Natts_claim_table);
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
		memset(isnull, 0, sizeof(bool) * Natts_claim_table);
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

/*
 * The claim query's per-row check (dlock_claim_unheld): whether a row of
 * the user's table is held, looked up as the scan reaches the row, before
 * its row lock, through dlock.claim's primary key.  One index scan is
 * opened per claim query and re-keyed for every row.  It reads with a
 * dirty snapshot: claims committed, and claims another transaction is
 * writing or deleting right now, count as held; the claimer re-reads
 * every candidate under its key lock before writing (claim.c), so a row
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

	dlock_store_open(&p->s, "claim", Natts_claim_table);
	InitDirtySnapshot(p->dirty);
	p->scan = dlock_index_beginscan(p->s.rel, p->s.idx, &p->dirty, 2);
	p->relid = relid;
	p->now = GetCurrentTimestamp();
	p->cxt = CurrentMemoryContext;
	return p;
}

/*
 * A claim row of key (relid, key) is live or poisoned.  If so, and that
 * claim is committed and no open transaction is changing it,
 * *settled_until is when it can next change by itself (its expiry; the
 * end of time for a poison mark), else 0.
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

		slot_getallattrs(slot);
		poisoned = !slot->tts_isnull[Anum_poisoned_at - 1];
		held = poisoned ||
			(!slot->tts_isnull[Anum_holder - 1] &&
			 DatumGetTimestampTz(slot->tts_values[Anum_expires_at - 1]) > p->now);
		/* the dirty snapshot names an open inserter or deleter */
		if (held && !TransactionIdIsValid(p->dirty.xmin) &&
			!TransactionIdIsValid(p->dirty.xmax))
			*settled_until = poisoned ? DT_NOEND :
				DatumGetTimestampTz(slot->tts_values[Anum_expires_at - 1]);
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
 * ---- writes and sweeps of many rows, as SQL ----
 *
 * Between dlock_spi_begin and dlock_spi_end; each plan is prepared once
 * and kept, next to its text.  The caller holds the key locks the
 * protocol asks for (claim_manage.c, claim.c).
 */

/*
 * Keys of the holder's live claims on a table, sorted: all of them, or
 * those among keys (sorted and without duplicates).
 */
text	  **
dlock_claim_store_holder_keys(Oid relid, text *holder, Oid role,
							  text **among, int namong, int *n)
{
	static SPIPlanPtr all_plan = NULL;
	static SPIPlanPtr among_plan = NULL;
	Oid			types[4] = {OIDOID, TEXTOID, OIDOID, TEXTARRAYOID};
	Datum		values[4] = {ObjectIdGetDatum(relid), PointerGetDatum(holder),
	ObjectIdGetDatum(role), 0};
	SPIPlanPtr	plan;

	if (among == NULL)
		plan = dlock_spi_plan(&all_plan,
							  "SELECT key FROM " DLOCK_SCHEMA ".claim"
							  " WHERE relid" EQ "$1 AND holder" EQ "$2 AND owner" EQ "$3"
							  "   AND expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()"
							  " ORDER BY key",
							  3, types);
	else
	{
		values[3] = dlock_text_array(among, namong);
		plan = dlock_spi_plan(&among_plan,
							  "SELECT key FROM " DLOCK_SCHEMA ".claim"
							  " WHERE relid" EQ "$1 AND key" EQ "ANY ($4)"
							  "   AND holder" EQ "$2 AND owner" EQ "$3"
							  "   AND expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()"
							  " ORDER BY key",
							  4, types);
	}
	*n = (int) dlock_spi_run(plan, values, NULL, 0, SPI_OK_SELECT);
	return dlock_copy_key_column(*n);
}

/* Of these keys, those that have a claim row, sorted. */
text	  **
dlock_claim_store_existing_keys(Oid relid, text **keys, int nkeys, int *n)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[2] = {OIDOID, TEXTARRAYOID};
	Datum		values[2];

	values[0] = ObjectIdGetDatum(relid);
	values[1] = dlock_text_array(keys, nkeys);
	*n = (int) dlock_spi_run(dlock_spi_plan(&plan,
											"SELECT key FROM " DLOCK_SCHEMA ".claim"
											" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"
											" ORDER BY key",
											2, types),
							 values, NULL, 0, SPI_OK_SELECT);
	return dlock_copy_key_column(*n);
}

/*
 * Every live claim of holder and role, on any table, sorted by table and
 * key; returns how many, with the keys and tables in *keys and *relids.
 */
uint64
dlock_claim_store_holder_all(text *holder, Oid role, text ***keys, Oid **relids)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[2] = {TEXTOID, OIDOID};
	Datum		values[2];
	uint64		n;

	values[0] = PointerGetDatum(holder);
	values[1] = ObjectIdGetDatum(role);
	n = dlock_spi_run(dlock_spi_plan(&plan,
									 "SELECT key, relid FROM " DLOCK_SCHEMA ".claim"
									 " WHERE holder" EQ "$1 AND owner" EQ "$2"
									 "   AND expires_at OPERATOR(pg_catalog.>)"
									 " pg_catalog.clock_timestamp()"
									 " ORDER BY relid, key",
									 2, types),
					  values, NULL, 0, SPI_OK_SELECT);
	*keys = dlock_copy_key_column(n);
	*relids = dlock_copy_oid_column(n, 2);
	return n;
}

/*
 * Give back the holder's live claims on these keys: the claim rows stay,
 * free, with their attempt counts (a row given back after a failed attempt
 * still counts towards max_attempts); returns how many.
 */
int64
dlock_claim_store_give_back(Oid relid, text **keys, int n, text *holder, Oid role)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[4] = {OIDOID, TEXTARRAYOID, TEXTOID, OIDOID};
	Datum		values[4];

	if (n == 0)
		return 0;
	values[0] = ObjectIdGetDatum(relid);
	values[1] = dlock_text_array(keys, n);
	values[2] = PointerGetDatum(holder);
	values[3] = ObjectIdGetDatum(role);
	return (int64) dlock_spi_run(dlock_spi_plan(&plan,
												"UPDATE " DLOCK_SCHEMA ".claim"
												"   SET holder = NULL, owner = NULL,"
												"       expires_at = pg_catalog.clock_timestamp()"
												" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"
												"   AND holder" EQ "$3 AND owner" EQ "$4"
												"   AND expires_at OPERATOR(pg_catalog.>)"
												" pg_catalog.clock_timestamp()",
												4, types),
								 values, NULL, 0, SPI_OK_UPDATE);
}

/*
 * Extend the holder's live claims on these keys to now + ttl_us (ttl_us <
 * 0: each claim's own ttl); returns how many.
 */
int64
dlock_claim_store_renew(Oid relid, text **keys, int n, text *holder, Oid role,
						int64 ttl_us)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[5] = {OIDOID, TEXTARRAYOID, TEXTOID, OIDOID, INT8OID};
	Datum		values[5];

	values[0] = ObjectIdGetDatum(relid);
	values[1] = dlock_text_array(keys, n);
	values[2] = PointerGetDatum(holder);
	values[3] = ObjectIdGetDatum(role);
	values[4] = Int64GetDatum(ttl_us);
	return (int64) dlock_spi_run(dlock_spi_plan(&plan,
												"UPDATE " DLOCK_SCHEMA ".claim"
												"   SET ttl_us = CASE WHEN $5 OPERATOR(pg_catalog.<) 0"
												"                THEN ttl_us ELSE $5 END,"
												"       expires_at = pg_catalog.clock_timestamp()"
												"         OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs =>"
												"         (CASE WHEN $5 OPERATOR(pg_catalog.<) 0 THEN ttl_us ELSE $5 END)"
												"         ::pg_catalog.float8 OPERATOR(pg_catalog./) 1000000)"
												" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"
												"   AND holder" EQ "$3 AND owner" EQ "$4"
												"   AND expires_at OPERATOR(pg_catalog.>)"
												" pg_catalog.clock_timestamp()",
												5, types),
								 values, NULL, 0, SPI_OK_UPDATE);
}

/* Delete the claim rows of these keys, whoever holds them; returns how many. */
int64
dlock_claim_store_delete(Oid relid, text **keys, int n)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[2] = {OIDOID, TEXTARRAYOID};
	Datum		values[2];

	values[0] = ObjectIdGetDatum(relid);
	values[1] = dlock_text_array(keys, n);
	return (int64) dlock_spi_run(dlock_spi_plan(&plan,
												"DELETE FROM " DLOCK_SCHEMA ".claim"
												" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)",
												2, types),
								 values, NULL, 0, SPI_OK_DELETE);
}

/* Mark the claim rows of these keys poisoned (reached max_attempts). */
void
dlock_claim_store_poison(Oid relid, text **keys, int n, TimestampTz now)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[3] = {OIDOID, TEXTARRAYOID, TIMESTAMPTZOID};
	Datum		values[3];

	values[0] = ObjectIdGetDatum(relid);
	values[1] = dlock_text_array(keys, n);
	values[2] = TimestampTzGetDatum(now);
	dlock_spi_run(dlock_spi_plan(&plan,
								 "UPDATE " DLOCK_SCHEMA ".claim SET poisoned_at = $3"
								 " WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"
								 "   AND poisoned_at IS NULL",
								 3, types),
				  values, NULL, 0, SPI_OK_UPDATE);
}

/*
 * Claim again the rows of these keys that have a claim row: only where the
 * claim is still free or expired at now and not poisoned, counting one
 * more attempt.  Returns how many were claimed, with their keys and
 * attempt counts in *got and *attempts.
 */
int
dlock_claim_store_reclaim(Oid relid, text **keys, int n, text *holder, Oid role,
						  int64 token, int64 ttl_us, TimestampTz now,
						  text ***got, int **attempts)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[8] = {OIDOID, TEXTARRAYOID, TEXTOID, OIDOID, INT8OID,
	INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	Datum		values[8];
	int			nrows;

	values[0] = ObjectIdGetDatum(relid);
	values[1] = dlock_text_array(keys, n);
	values[2] = PointerGetDatum(holder);
	values[3] = ObjectIdGetDatum(role);
	values[4] = Int64GetDatum(token);
	values[5] = Int64GetDatum(ttl_us);
	values[6] = TimestampTzGetDatum(now);
	values[7] = TimestampTzGetDatum(now + ttl_us);
	nrows = (int) dlock_spi_run(dlock_spi_plan(&plan,
											   "UPDATE " DLOCK_SCHEMA ".claim"
											   "   SET holder = $3, owner = $4, token = $5, ttl_us = $6,"
											   "       claimed_at = $7, expires_at = $8,"
											   "       attempts = attempts OPERATOR(pg_catalog.+) 1"
											   " WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"
											   "   AND poisoned_at IS NULL"
											   "   AND (holder IS NULL"
											   "        OR expires_at OPERATOR(pg_catalog.<=) $7)"
											   " RETURNING key, attempts",
											   8, types),
								values, NULL, 0, SPI_OK_UPDATE_RETURNING);
	*got = dlock_copy_key_column(nrows);
	*attempts = palloc(sizeof(int) * Max(nrows, 1));
	for (int r = 0; r < nrows; r++)
	{
		bool		isnull;

		(*attempts)[r] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[r],
													 SPI_tuptable->tupdesc, 2, &isnull));
	}
	return nrows;
}

/*
 * Up to limit claim rows that are free or expired since before and not
 * poisoned, or of tables that no longer exist; returns how many, with
 * their keys and tables in *keys and *relids.
 *
 * Claims call this now and then, so its cost must not grow with the
 * number of claim rows: it walks the tables that have claim rows (a
 * loose index scan, one probe per table) and, for each, reads only the
 * rows it returns, through claim_live (relid, expires_at), or all rows of
 * a table that no longer exists through the primary key.  A scan of the
 * whole table here cost 78 ms with 400,000 live claims, every 64th claim.
 */
uint64
dlock_claim_store_idle(TimestampTz before, int limit, text ***keys, Oid **relids)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[2] = {TIMESTAMPTZOID, INT4OID};
	Datum		values[2];
	uint64		n;

	values[0] = TimestampTzGetDatum(before);
	values[1] = Int32GetDatum(limit);
	n = dlock_spi_run(dlock_spi_plan(&plan,
									 "WITH RECURSIVE t(relid) AS ("
									 "  SELECT pg_catalog.min(relid) FROM " DLOCK_SCHEMA ".claim"
									 "  UNION ALL"
									 "  SELECT (SELECT pg_catalog.min(c.relid)"
									 "            FROM " DLOCK_SCHEMA ".claim c"
									 "           WHERE c.relid OPERATOR(pg_catalog.>) t.relid)"
									 "    FROM t WHERE t.relid IS NOT NULL)"
									 "SELECT c.key, c.relid FROM t CROSS JOIN LATERAL ("
									 "  (SELECT c.key, c.relid FROM " DLOCK_SCHEMA ".claim c"
									 "    WHERE c.relid" EQ "t.relid"
									 "      AND c.expires_at OPERATOR(pg_catalog.<) $1"
									 "      AND c.poisoned_at IS NULL"
									 "      AND EXISTS (SELECT FROM pg_catalog.pg_class r"
									 "                   WHERE r.oid" EQ "t.relid)"
									 "    LIMIT $2)"
									 "  UNION ALL"
									 "  (SELECT c.key, c.relid FROM " DLOCK_SCHEMA ".claim c"
									 "    WHERE c.relid" EQ "t.relid"
									 "      AND NOT EXISTS (SELECT FROM pg_catalog.pg_class r"
									 "                       WHERE r.oid" EQ "t.relid)"
									 "    LIMIT $2)) c"
									 " WHERE t.relid IS NOT NULL"
									 " LIMIT $2",
									 2, types),
					  values, NULL, 0, SPI_OK_SELECT);
	*keys = dlock_copy_key_column(n);
	*relids = dlock_copy_oid_column(n, 2);
	return n;
}

/*
 * Delete the claim row of (relid, key) if it is still idle as
 * dlock_claim_store_idle found it (the caller holds its key lock); true if
 * deleted.
 */
bool
dlock_claim_store_delete_idle(Oid relid, text *key, TimestampTz before)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[3] = {OIDOID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[3];

	values[0] = ObjectIdGetDatum(relid);
	values[1] = PointerGetDatum(key);
	values[2] = TimestampTzGetDatum(before);
	return dlock_spi_run(dlock_spi_plan(&plan,
										"DELETE FROM " DLOCK_SCHEMA ".claim c"
										" WHERE relid" EQ "$1 AND key" EQ "$2"
										"   AND ((expires_at OPERATOR(pg_catalog.<) $3"
										"         AND poisoned_at IS NULL)"
										"        OR NOT EXISTS (SELECT FROM pg_catalog.pg_class r"
										"                        WHERE r.oid" EQ "c.relid))",
										3, types),
						 values, NULL, 0, SPI_OK_DELETE) > 0;
}

/*
 * The unexpired claims, with the columns of the dlock_claims view, into
 * SPI_tuptable; returns how many.  Column 1 is the table, 4 the owning
 * role.
 */
uint64
dlock_claim_store_read_live(void)
{
	static SPIPlanPtr plan = NULL;

	return dlock_spi_run(dlock_spi_plan(&plan,
										"SELECT relid::pg_catalog.regclass, key, holder,"
										"       owner::pg_catalog.regrole, token, claimed_at,"
										"       expires_at, attempts"
										"  FROM " DLOCK_SCHEMA ".claim"
										" WHERE holder IS NOT NULL"
										"   AND expires_at OPERATOR(pg_catalog.>)"
										" pg_catalog.clock_timestamp()",
										0, NULL),
						 NULL, NULL, 0, SPI_OK_SELECT);
}
