/*-------------------------------------------------------------------------
 *
 * claim_store.c
 *		Every read and write of dlock.claim, with claim_store_probe.c (the
 *		claim query's per-row check) and claim_store_spi.c (the holders'
 *		writes and the sweeps of many rows, as SQL).  This file opens the
 *		table and has the hot paths: a claim batch's lookup and its one
 *		write (claim_batch.c), the claim fence's lookup and completion's
 *		give-back, which go to the table directly, without SPI.  No other
 *		file touches dlock.claim.
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
 * A claim batch's write does, in one call, everything the batch decided:
 * poison marks and claims again are SQL plans (prepared once and kept:
 * they are conditional updates of rows that exist, which is what SQL does
 * well), first claims the multi-row insert, and the claims again whose
 * claim row a sweep deleted meanwhile are written anew here too, so a
 * claim enters this file twice, a lookup and a write.
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
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "base/base.h"
#include "claim/claim.h"
#include "claim/claim_int.h"
#include "history/history.h"
#include "compat.h"


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
 * Open dlock.claim: as dlock 0.5 made it, or as 0.4 did (no retry_at and
 * grp: the library was updated, the extension not yet), or as 0.1 to 0.3
 * did (no long_key column either, so a digest key's text is not kept).
 */
void
dlock_claim_store_open(DlockStore *s)
{
	int			natts = claim_natts();

	dlock_store_open(s, "claim",
					 natts == Natts_claim_table_03 ||
					 natts == Natts_claim_table_04 ? natts : Natts_claim_table);
}

/* whether dlock.claim has its retry_at and grp columns (dlock 0.5 and later) */
bool
dlock_claim_store_has_05(void)
{
	return claim_natts() >= Anum_grp;
}

/* whether dlock.claim has its long_key column (dlock 0.4 and later) */
bool
dlock_claim_store_has_long_key(void)
{
	return claim_natts() >= Anum_long_key;
}

/*
 * Run q on the claim rows of keys[0..n-1] of table relid: its $1 is the
 * table, $2 the keys, and the caller's values[2..] its other arguments.
 * Returns how many rows it processed.
 */
uint64
dlock_claim_store_run_on_keys(DlockQuery *q, Oid relid, text **keys, int n,
							  Datum *values)
{
	values[0] = ObjectIdGetDatum(relid);
	values[1] = dlock_text_array(keys, n);
	return dlock_spi_query(q, values, NULL);
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

/*
 * When the row of a fetched claim row (all its columns read) may be claimed
 * again, poison marks aside: the later of its claim's expiry (none for a
 * claim given back) and its retry_at (dlock 0.5: the end of a backoff),
 * which claimers must wait for.  Holders go by expires_at alone
 * (fetched_live).
 */
TimestampTz
dlock_claim_slot_free_at(TupleTableSlot *slot)
{
	TimestampTz at = DT_NOBEGIN;

	if (!slot->tts_isnull[Anum_holder - 1])
		at = DatumGetTimestampTz(slot->tts_values[Anum_expires_at - 1]);
	if (slot->tts_tupleDescriptor->natts >= Anum_retry_at &&
		!slot->tts_isnull[Anum_retry_at - 1])
		at = Max(at, DatumGetTimestampTz(slot->tts_values[Anum_retry_at - 1]));
	return at;
}

/* the fetched claim keeps claimers away: live, or in its backoff */
static bool
fetched_busy(DlockStore *s)
{
	return dlock_claim_slot_free_at(s->slot) > GetCurrentTimestamp();
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
 * Which of keys[0..n-1] holder and role hold unexpired claims on: held[i];
 * one open of the table and its index for them all.
 */
void
dlock_claim_store_held_keys(Oid relid, text **keys, int n, text *holder,
							Oid role, bool *held)
{
	DlockStore	s;

	dlock_claim_store_open(&s);
	dlock_store_batch_begin(&s, 2);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		held[i] = fetch_claim(&s, relid, keys[i]) &&
			fetched_held(&s, holder, role);
	}
	dlock_store_batch_end(&s);
	dlock_store_close(&s);
}

/*
 * Read the claims on keys[0..n-1] (locked by the caller) at the latest
 * committed state: found[i] says whether keys[i] has a claim row, and if
 * so live[i] whether it keeps claimers away (held unexpired, or in its
 * backoff: dlock_claim_slot_free_at), attempts[i] how often it was
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
		live[i] = fetched_busy(&s);
		attempts[i] = DatumGetInt32(slot->tts_values[Anum_attempts - 1]);
		poisoned[i] = !slot->tts_isnull[Anum_poisoned_at - 1];
	}
	dlock_store_batch_end(&s);
	dlock_store_close(&s);
}

/*
 * The claim in s->slot (its columns read), of table relid, is deleted by
 * its completion: its tenure ends now (dlock.history; the caller checked
 * that the table is tracked).
 */
static void
note_completed(DlockStore *s, Oid relid)
{
	TupleTableSlot *slot = s->slot;
	DlockTenure t;

	memset(&t, 0, sizeof(t));
	t.claim = true;
	t.relid = relid;
	t.key = DatumGetTextPP(slot->tts_values[Anum_key - 1]);
	if (slot->tts_tupleDescriptor->natts >= Anum_long_key &&
		!slot->tts_isnull[Anum_long_key - 1])
		t.key = DatumGetTextPP(slot->tts_values[Anum_long_key - 1]);
	t.holder = DatumGetTextPP(slot->tts_values[Anum_holder - 1]);
	t.owner = DatumGetObjectId(slot->tts_values[Anum_owner - 1]);
	t.token = DatumGetInt64(slot->tts_values[Anum_token - 1]);
	t.granted_at = DatumGetTimestampTz(slot->tts_values[Anum_claimed_at - 1]);
	t.ended_at = GetCurrentTimestamp();
	t.ended = DLOCK_END_COMPLETED;
	t.attempts = DatumGetInt32(slot->tts_values[Anum_attempts - 1]);
	dlock_history_write(&t);
}

/*
 * Delete the claims on keys[0..n-1] (locked by the caller) that holder
 * and role hold unexpired; done[i] says whether keys[i]'s was deleted
 * (and, of a tracked table, its tenure written to dlock.history).
 * Returns how many were.
 */
int
dlock_claim_store_delete_held(Oid relid, text **keys, int n, text *holder,
							  Oid role, bool *done)
{
	DlockStore	s;
	int			ndone = 0;
	bool		tracked = n > 0 && dlock_history_tracks_table(relid);

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
				if (tracked)
					note_completed(&s, relid);
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
 * Insert a first claim (attempts 1) of w on each of keys[0..n-1]; fulls[i]
 * is the key text of keys[i] (another text when keys[i] is its digest,
 * kept in long_key), grps[i] its group (grps NULL: none).  With a backoff, the row is claimable again at the
 * expiry plus the first attempt's delay, the backoff itself.  Later
 * statements of the transaction see the rows (CommandCounterIncrement).
 */
static void
insert_claims(const DlockClaimWrite *w, text **keys, text **fulls,
			  text **grps, int n)
{
	TimestampTz expires = w->now + w->ttl_us;
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
		v[Anum_relid - 1] = ObjectIdGetDatum(w->relid);
		v[Anum_key - 1] = PointerGetDatum(keys[i]);
		v[Anum_holder - 1] = PointerGetDatum(w->holder);
		v[Anum_owner - 1] = ObjectIdGetDatum(w->role);
		v[Anum_token - 1] = Int64GetDatum(w->token);
		v[Anum_ttl_us - 1] = Int64GetDatum(w->ttl_us);
		v[Anum_claimed_at - 1] = TimestampTzGetDatum(w->now);
		v[Anum_expires_at - 1] = TimestampTzGetDatum(expires);
		v[Anum_attempts - 1] = Int32GetDatum(1);
		v[Anum_poisoned_at - 1] = (Datum) 0;
		isnull[Anum_poisoned_at - 1] = true;
		if (slot->tts_tupleDescriptor->natts >= Anum_long_key)
		{
			v[Anum_long_key - 1] = PointerGetDatum(fulls[i]);
			isnull[Anum_long_key - 1] = fulls[i] == keys[i];
		}
		if (slot->tts_tupleDescriptor->natts >= Anum_grp)
		{
			v[Anum_retry_at - 1] = TimestampTzGetDatum(expires + w->backoff_us);
			isnull[Anum_retry_at - 1] = w->backoff_us <= 0;
			v[Anum_grp - 1] = grps ? PointerGetDatum(grps[i]) : (Datum) 0;
			isnull[Anum_grp - 1] = grps == NULL;
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

/*
 * One claim batch's write: SQL queries for the rows that have a claim row
 * (their plans prepared once and kept), the multi-row insert above for
 * those that have none.
 */

/* ---- the history of claims (history/) ---- */

/*
 * The n rows in SPI_tuptable (DLOCK_CLAIM_ENDED_COLUMNS) are claims that end now, as
 * how says: each gets its row in dlock.history if its table is tracked
 * and it was held.  It ended now, or when it ran out (expired, taken over,
 * dead-lettered).
 */
void
dlock_claim_store_note_ended(uint64 n, DlockHistoryEnd how)
{
	SPITupleTable *tab = SPI_tuptable;
	TimestampTz now = GetCurrentTimestamp();

	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = tab->vals[i];
		TupleDesc	d = tab->tupdesc;
		bool		isnull;
		Datum		holder;
		DlockTenure t;

		CHECK_FOR_INTERRUPTS();
		memset(&t, 0, sizeof(t));
		t.claim = true;
		t.relid = DatumGetObjectId(SPI_getbinval(tup, d, 1, &isnull));
		holder = SPI_getbinval(tup, d, 3, &isnull);
		if (isnull || !dlock_history_tracks_table(t.relid))
			continue;
		t.holder = DatumGetTextPP(holder);
		t.key = DatumGetTextPP(SPI_getbinval(tup, d, 2, &isnull));
		t.owner = DatumGetObjectId(SPI_getbinval(tup, d, 4, &isnull));
		t.token = DatumGetInt64(SPI_getbinval(tup, d, 5, &isnull));
		t.granted_at = DatumGetTimestampTz(SPI_getbinval(tup, d, 6, &isnull));
		t.ended_at = DatumGetTimestampTz(SPI_getbinval(tup, d, 7, &isnull));
		if (how == DLOCK_END_GIVEN_BACK || how == DLOCK_END_RELEASED_ALL)
			t.ended_at = now;
		t.attempts = DatumGetInt32(SPI_getbinval(tup, d, 8, &isnull));
		t.ended = how;
		dlock_history_write(&t);
	}
}

/*
 * Before the rows of these keys of table relid are claimed again
 * (taken_over) or set aside as poisoned (dead_lettered) at now: the
 * claims on them that ran out end, when the table is tracked.  Those
 * given back ended then.  reclaim: only rows a claim again writes (past
 * their backoff, not poisoned).
 */
static void
note_lapsed(Oid relid, text **keys, int n, TimestampTz now, bool reclaim)
{
	static DlockQuery q = {
		"SELECT " DLOCK_CLAIM_ENDED_COLUMNS " FROM " DLOCK_SCHEMA ".claim"
		" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"
		"   AND holder IS NOT NULL AND poisoned_at IS NULL"
		"   AND expires_at OPERATOR(pg_catalog.<=) $3"
		"   AND ($4 OPERATOR(pg_catalog.=) false OR retry_at IS NULL"
		"        OR retry_at OPERATOR(pg_catalog.<=) $3)"
		" FOR UPDATE",
		SPI_OK_SELECT, {OIDOID, TEXTARRAYOID, TIMESTAMPTZOID, BOOLOID}
	};
	Datum		values[4];

	if (n == 0 || !dlock_history_tracks_table(relid))
		return;
	values[2] = TimestampTzGetDatum(now);
	values[3] = BoolGetDatum(reclaim);
	dlock_claim_store_note_ended(dlock_claim_store_run_on_keys(&q, relid, keys, n, values),
			   reclaim ? DLOCK_END_TAKEN_OVER : DLOCK_END_DEAD_LETTERED);
	SPI_freetuptable(SPI_tuptable);
}

/* Mark the claim rows of these keys poisoned (reached max_attempts). */
static void
poison_claims(Oid relid, text **keys, int n, TimestampTz now)
{
	static DlockQuery q = {
		"UPDATE " DLOCK_SCHEMA ".claim SET poisoned_at = $3"
		" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"
		"   AND poisoned_at IS NULL",
		SPI_OK_UPDATE, {OIDOID, TEXTARRAYOID, TIMESTAMPTZOID}
	};
	Datum		values[3];

	note_lapsed(relid, keys, n, now, false);
	values[2] = TimestampTzGetDatum(now);
	(void) dlock_claim_store_run_on_keys(&q, relid, keys, n, values);
}

/*
 * Claim again the rows of these keys that have a claim row: only where the
 * claim is still free or expired at w->now, past its backoff, and not
 * poisoned, counting one more attempt.  With a backoff, the row is
 * claimable again at the new expiry plus attempt k's delay: the backoff,
 * or with backoff_max the backoff doubled per attempt up to backoff_max
 * (the exponent is capped so the product stays finite).  Returns how many
 * were claimed, with their keys and attempt counts in *got and *attempts.
 */
#define RECLAIM_SET \
	"UPDATE " DLOCK_SCHEMA ".claim" \
	"   SET holder = $3, owner = $4, token = $5, ttl_us = $6," \
	"       claimed_at = $7, expires_at = $8," \
	"       attempts = attempts OPERATOR(pg_catalog.+) 1"
#define RECLAIM_WHERE \
	" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)" \
	"   AND poisoned_at IS NULL" \
	"   AND (holder IS NULL" \
	"        OR expires_at OPERATOR(pg_catalog.<=) $7)"
#define RECLAIM_RETURNING " RETURNING key, attempts"
static int
reclaim_claims(const DlockClaimWrite *w, text **keys, int n, text ***got,
			   int **attempts)
{
	static DlockQuery q = {
		RECLAIM_SET ","
		"       retry_at = CASE WHEN $9 OPERATOR(pg_catalog.>) 0"
		"         THEN $8 OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs =>"
		"           CASE WHEN $10 OPERATOR(pg_catalog.>) 0"
		"             THEN LEAST($10::pg_catalog.float8,"
		"                        $9::pg_catalog.float8 OPERATOR(pg_catalog.*)"
		"                        pg_catalog.power(2::pg_catalog.float8,"
		"                                         LEAST(attempts, 60)))"
		"             ELSE $9::pg_catalog.float8 END"
		"           OPERATOR(pg_catalog./) 1000000) END"
		RECLAIM_WHERE
		"   AND (retry_at IS NULL OR retry_at OPERATOR(pg_catalog.<=) $7)"
		RECLAIM_RETURNING,
		SPI_OK_UPDATE_RETURNING,
		{OIDOID, TEXTARRAYOID, TEXTOID, OIDOID, INT8OID, INT8OID,
		TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, INT8OID}
	};
	/* dlock.claim as 0.4 made it: no backoff */
	static DlockQuery q_04 = {
		RECLAIM_SET RECLAIM_WHERE RECLAIM_RETURNING,
		SPI_OK_UPDATE_RETURNING,
		{OIDOID, TEXTARRAYOID, TEXTOID, OIDOID, INT8OID, INT8OID,
		TIMESTAMPTZOID, TIMESTAMPTZOID}
	};
	Datum		values[10];
	int			nrows;

	note_lapsed(w->relid, keys, n, w->now, true);
	values[2] = PointerGetDatum(w->holder);
	values[3] = ObjectIdGetDatum(w->role);
	values[4] = Int64GetDatum(w->token);
	values[5] = Int64GetDatum(w->ttl_us);
	values[6] = TimestampTzGetDatum(w->now);
	values[7] = TimestampTzGetDatum(w->now + w->ttl_us);
	values[8] = Int64GetDatum(w->backoff_us);
	values[9] = Int64GetDatum(w->backoff_max_us);
	nrows = (int) dlock_claim_store_run_on_keys(dlock_claim_store_has_05() ?
												&q : &q_04,
												w->relid, keys, n, values);
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
#undef RECLAIM_SET
#undef RECLAIM_WHERE
#undef RECLAIM_RETURNING

/* order of positions of keys (the arg) by key */
static int
key_pos_cmp(const void *a, const void *b, void *arg)
{
	text	  **keys = (text **) arg;

	return dlock_text_cmp(&keys[*(const int *) a], &keys[*(const int *) b]);
}

/*
 * Note the claims again that reclaim_claims wrote, got[0..ngot-1] with
 * their attempt counts, at their positions among keys; again[0..nagain-1]
 * are the positions asked for.  Returns how many were noted.
 */
static int
note_reclaimed(text **keys, int *again, int nagain, text **got,
			   int *got_attempts, int ngot, int *attempts)
{
	int		   *by_key = palloc(sizeof(int) * nagain);
	int			noted = 0;

	memcpy(by_key, again, sizeof(int) * nagain);
	qsort_arg(by_key, nagain, sizeof(int), key_pos_cmp, keys);
	for (int r = 0; r < ngot; r++)
	{
		int			lo = 0,
					hi = nagain - 1;

		CHECK_FOR_INTERRUPTS();
		while (lo <= hi)
		{
			int			mid = (lo + hi) / 2;
			int			i = by_key[mid];
			int			cmp = dlock_text_cmp(&got[r], &keys[i]);

			if (cmp == 0)
			{
				if (attempts[i] == 0)
				{
					attempts[i] = got_attempts[r];
					noted++;
				}
				break;
			}
			if (cmp < 0)
				hi = mid - 1;
			else
				lo = mid + 1;
		}
	}
	pfree(by_key);
	return noted;
}

/*
 * The claims again that reclaim_claims did not write because a sweep
 * deleted their claim row after the caller read it (its delete committed
 * while the update waited for it: maint_sweep.c) are of idle rows still:
 * under their key locks, their claim rows are written anew, as first
 * claims.  Returns how many were.
 */
static int
write_swept(const DlockClaimWrite *w, text **keys, text **fulls, int *again,
			int nagain, int *attempts)
{
	text	  **left = palloc(sizeof(text *) * nagain);
	int		   *at = palloc(sizeof(int) * nagain);
	text	  **swept_full = palloc(sizeof(text *) * nagain);
	text	  **swept_grp = palloc(sizeof(text *) * nagain);
	bool	   *found = palloc(sizeof(bool) * nagain);
	bool	   *live = palloc(sizeof(bool) * nagain);
	int		   *left_attempts = palloc(sizeof(int) * nagain);
	bool	   *poisoned = palloc(sizeof(bool) * nagain);
	int			nleft = 0;
	int			nswept = 0;

	for (int k = 0; k < nagain; k++)
	{
		if (attempts[again[k]] != 0)
			continue;
		at[nleft] = again[k];
		left[nleft++] = keys[again[k]];
	}
	if (nleft == 0)
		return 0;
	dlock_claim_store_lookup(w->relid, left, nleft, found, live, left_attempts,
							 poisoned);
	for (int j = 0; j < nleft; j++)
	{
		if (found[j])
			continue;
		attempts[at[j]] = 1;
		swept_full[nswept] = fulls[at[j]];
		swept_grp[nswept] = w->grps ? w->grps[at[j]] : NULL;
		left[nswept++] = left[j];
	}
	if (nswept > 0)
		insert_claims(w, left, swept_full, w->grps ? swept_grp : NULL, nswept);
	return nswept;
}

/*
 * The claims again that reclaim_claims wrote (attempts > 1; the claim
 * keys at positions again[0..nagain-1]) are in their row's group now:
 * grp is written for them (a second version of the rows, in the same
 * transaction; first claims write it as they insert).
 */
static void
set_groups(const DlockClaimWrite *w, text **keys, int *again, int nagain,
		   const int *attempts)
{
	static DlockQuery q = {
		"UPDATE " DLOCK_SCHEMA ".claim c SET grp = g.grp"
		"  FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3))"
		"       AS g(key, grp)"
		" WHERE c.relid" EQ "$1 AND c.key" EQ "g.key",
		SPI_OK_UPDATE, {OIDOID, TEXTARRAYOID, TEXTARRAYOID}
	};
	text	  **k = palloc(sizeof(text *) * nagain);
	text	  **g = palloc(sizeof(text *) * nagain);
	Datum		values[3];
	int			m = 0;

	for (int j = 0; j < nagain; j++)
	{
		if (attempts[again[j]] <= 1)
			continue;			/* not written, or written anew as a first claim */
		k[m] = keys[again[j]];
		g[m++] = w->grps[again[j]];
	}
	if (m == 0)
		return;
	values[2] = dlock_text_array(g, m);
	(void) dlock_claim_store_run_on_keys(&q, w->relid, k, m, values);
}

/*
 * Write one claim batch: action[i] says what is done with keys[i] (fulls[i]
 * is its key text), in this order: the rows claimed max_attempts times are
 * marked poisoned, the rows without a claim row get a first claim (the
 * multi-row insert), the others are claimed again, only where the claim is
 * still free or expired and not poisoned, and those whose claim row a sweep
 * deleted meanwhile get a first claim after all.  The caller holds the
 * user-table row lock of every key and the key lock of every key with a
 * claim row.  attempts[i] is the attempt count of the claim written on
 * keys[i], 0 if none was; returns how many were written.
 */
int
dlock_claim_store_write(const DlockClaimWrite *w, text **keys, text **fulls,
						const DlockClaimAction *action, int n, int *attempts)
{
	text	  **poison = palloc(sizeof(text *) * Max(n, 1));
	text	  **fresh = palloc(sizeof(text *) * Max(n, 1));
	text	  **fresh_full = palloc(sizeof(text *) * Max(n, 1));
	text	  **fresh_grp = palloc(sizeof(text *) * Max(n, 1));
	text	  **again_keys = palloc(sizeof(text *) * Max(n, 1));
	int		   *again = palloc(sizeof(int) * Max(n, 1));
	int			npoison = 0,
				nfresh = 0,
				nagain = 0,
				written = 0;

	for (int i = 0; i < n; i++)
	{
		attempts[i] = 0;
		if (action[i] == DLOCK_CLAIM_POISON)
			poison[npoison++] = keys[i];
		else if (action[i] == DLOCK_CLAIM_INSERT)
		{
			attempts[i] = 1;
			fresh_full[nfresh] = fulls[i];
			fresh_grp[nfresh] = w->grps ? w->grps[i] : NULL;
			fresh[nfresh++] = keys[i];
		}
		else if (action[i] == DLOCK_CLAIM_AGAIN)
		{
			again[nagain] = i;
			again_keys[nagain++] = keys[i];
		}
	}
	if (npoison > 0)
		poison_claims(w->relid, poison, npoison, w->now);
	/* no claim row yet: every one of them is written */
	insert_claims(w, fresh, fresh_full, w->grps ? fresh_grp : NULL, nfresh);
	written = nfresh;
	if (nagain > 0)
	{
		text	  **got;
		int		   *got_attempts;
		int			ngot;

		ngot = reclaim_claims(w, again_keys, nagain, &got, &got_attempts);
		written += note_reclaimed(keys, again, nagain, got, got_attempts, ngot,
								  attempts);
		if (ngot < nagain)
			written += write_swept(w, keys, fulls, again, nagain, attempts);
		if (w->grps && ngot > 0)
			set_groups(w, keys, again, nagain, attempts);
	}
	return written;
}
