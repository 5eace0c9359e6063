/*-------------------------------------------------------------------------
 *
 * claim.c
 *		Claims: leases on rows of the user's own tables, kept in
 *		dlock.claim and handed out in batches with FOR UPDATE SKIP LOCKED.
 *
 * A claim of up to n rows:
 *	1. reads the keys of the table's live (and poisoned) claims, to leave
 *	   them out of the candidates (on an integer key in the default order,
 *	   long runs of them, and of the rows other claims are taking, are read
 *	   around instead: claim_runs.c, claim_inflight.c);
 *	2. runs the caller's query (claim_query.c) as the caller: rows that
 *	   match the filter, in order, locked FOR UPDATE SKIP LOCKED, so rows
 *	   another transaction is claiming or completing are skipped without
 *	   waiting, and a row completed a moment ago is re-checked against the
 *	   filter on its newest version;
 *	3. takes each candidate's key lock without waiting (skipping the row
 *	   if another transaction holds it), then re-reads those claims at the
 *	   latest committed state: a claim that committed after the query's
 *	   snapshot was taken is seen here, and its row is dropped (the
 *	   snapshot race of SKIP LOCKED claims with an anti-join);
 *	4. writes the claims (an insert for rows never claimed, a conditional
 *	   update, only where the claim is free or expired, for the others) and
 *	   returns exactly the rows it wrote.
 * A claimer never waits for another claimer, so claimers cannot deadlock
 * with each other; it never waits for a transaction completing claimed
 * work either (SKIP LOCKED, conditional key locks).
 *
 * A claim row keeps its attempts count after expiry; rows claimed
 * max_attempts times are marked poisoned and no longer handed out.
 * Everything done to claims after they are made is in claim_manage.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "claim.h"
#include "shmem.h"

#define EQ " OPERATOR(pg_catalog.=) "

/* one candidate row of a claim */
typedef struct Candidate
{
	text	   *key;
	Datum		row;			/* whole-row datum from the user's table */
	bool		locked;			/* we took its key lock */
	bool		claimable;
	bool		has_row;		/* a claim row exists (expired or given back) */
	bool		claimed;
} Candidate;

/* index of key in candidates sorted by key (through order[]), or -1 */
static int
find_candidate(Candidate *c, int *order, int n, text *key)
{
	int			lo = 0,
				hi = n - 1;

	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;
		int			r = dlock_text_cmp(&key, &c[order[mid]].key);

		if (r == 0)
			return order[mid];
		if (r < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return -1;
}

static Candidate *sort_base;

static int
candidate_cmp(const void *a, const void *b)
{
	return dlock_text_cmp(&sort_base[*(const int *) a].key,
					&sort_base[*(const int *) b].key);
}

/* keys of live or poisoned claims on a table: left out of candidates */
static text **
excluded_keys(Oid relid, TimestampTz now, int *n)
{
	Oid			types[2] = {OIDOID, TIMESTAMPTZOID};
	Datum		values[2] = {ObjectIdGetDatum(relid), TimestampTzGetDatum(now)};
	SPIPlanPtr	plan;

	plan = dlock_spi_plan(Q_CLAIM_LIVE_KEYS,
						  "SELECT key FROM " DLOCK_SCHEMA ".claim"
						  " WHERE relid" EQ "$1 AND expires_at OPERATOR(pg_catalog.>) $2"
						  " UNION ALL "
						  "SELECT key FROM " DLOCK_SCHEMA ".claim"
						  " WHERE relid" EQ "$1 AND poisoned_at IS NOT NULL",
						  2, types);
	*n = (int) dlock_spi_run(plan, values, NULL, 0, SPI_OK_SELECT);
	return dlock_copy_key_column(*n);
}

/* the primary key values of keys, converted as the caller */
static Datum *
key_values(const ClaimTarget *t, text **keys, int n, int extra)
{
	Datum	   *vals = palloc(sizeof(Datum) * (n + extra + 1));
	int			io = dlock_claim_io_begin(t, InvalidOid);

	for (int i = 0; i < n; i++)
		vals[i] = dlock_claim_key_value(t, keys[i]);
	dlock_claim_io_end(io);
	return vals;
}

static Datum
pk_array(const ClaimTarget *t, Datum *vals, int n)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;

	get_typlenbyvalalign(t->pk_type, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_array(vals, n, t->pk_type, typlen,
										   typbyval, typalign));
}

/*
 * Decide, for the candidates whose key lock we hold, which are claimable
 * now: no claim, or a free or expired one, not poisoned, and not yet
 * claimed max_attempts times (those are marked poisoned).
 */
static void
decide_claimable(const ClaimRequest *req, Candidate *c, int *order, int n,
				 TimestampTz now)
{
	text	  **locked = palloc(sizeof(text *) * Max(n, 1));
	int		   *at = palloc(sizeof(int) * Max(n, 1));
	bool	   *found = palloc(sizeof(bool) * Max(n, 1));
	bool	   *live = palloc(sizeof(bool) * Max(n, 1));
	int		   *attempts = palloc(sizeof(int) * Max(n, 1));
	bool	   *poisoned = palloc(sizeof(bool) * Max(n, 1));
	text	  **poison = palloc(sizeof(text *) * Max(n, 1));
	int			nlocked = 0;
	int			npoison = 0;

	/* in key order, for the index's sake */
	for (int k = 0; k < n; k++)
	{
		int			i = order[k];

		c[i].claimable = c[i].locked;
		if (c[i].locked)
		{
			at[nlocked] = i;
			locked[nlocked++] = c[i].key;
		}
	}
	if (nlocked == 0)
		return;

	/* under the key locks, at the latest committed state (claim_store.c) */
	dlock_claim_store_lookup(req->target->claim_relid, locked, nlocked, found, live,
							 attempts, poisoned);
	for (int j = 0; j < nlocked; j++)
	{
		int			i = at[j];

		if (!found[j])
			continue;
		c[i].has_row = true;
		if (live[j] || poisoned[j])
			c[i].claimable = false;
		else if (req->max_attempts > 0 && attempts[j] >= req->max_attempts)
		{
			c[i].claimable = false;
			poison[npoison++] = c[i].key;
		}
	}

	if (npoison > 0)
	{
		Oid			ptypes[3] = {OIDOID, TEXTARRAYOID, TIMESTAMPTZOID};
		Datum		values[3];
		SPIPlanPtr	plan;

		values[0] = ObjectIdGetDatum(req->target->claim_relid);
		values[1] = dlock_text_array(poison, npoison);
		values[2] = TimestampTzGetDatum(now);
		plan = dlock_spi_plan(Q_CLAIM_POISON,
							  "UPDATE " DLOCK_SCHEMA ".claim SET poisoned_at = $3"
							  " WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"
							  "   AND poisoned_at IS NULL",
							  3, ptypes);
		dlock_spi_run(plan, values, NULL, 0, SPI_OK_UPDATE);
	}
}

/* mark the candidates named in the first column of SPI_tuptable claimed */
static int
mark_claimed(Candidate *c, int *order, int n, int64 *redelivered)
{
	int			claimed = 0;

	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		bool		isnull;
		text	   *key = DatumGetTextPP(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
		int			attempts = DatumGetInt32(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull));
		int			i = find_candidate(c, order, n, key);

		if (i >= 0 && !c[i].claimed)
		{
			c[i].claimed = true;
			claimed++;
			if (attempts > 1)
				(*redelivered)++;
		}
	}
	return claimed;
}

/*
 * Write the claims of the claimable candidates and mark those written.
 * Under their key locks, the lookup in decide_claimable is final: rows
 * without a claim row get a plain insert (claim_store.c; no speculative
 * insertion), rows with one an UPDATE that still writes only where the
 * claim is free or expired (and not poisoned).
 */
static int
write_claims(const ClaimRequest *req, Candidate *c, int *order, int n,
			 Oid role, int64 token, TimestampTz now, int64 *redelivered)
{
	Oid			types[8] = {OIDOID, TEXTARRAYOID, TEXTOID, OIDOID, INT8OID,
	INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	Datum		values[8];
	text	  **fresh = palloc(sizeof(text *) * Max(n, 1));
	text	  **again = palloc(sizeof(text *) * Max(n, 1));
	int			nfresh = 0;
	int			nagain = 0;
	SPIPlanPtr	plan;
	int			claimed = 0;

	for (int i = 0; i < n; i++)
	{
		if (!c[i].claimable)
			continue;
		if (c[i].has_row)
			again[nagain++] = c[i].key;
		else
			fresh[nfresh++] = c[i].key;
	}

	values[0] = ObjectIdGetDatum(req->target->claim_relid);
	values[2] = PointerGetDatum(req->holder);
	values[3] = ObjectIdGetDatum(role);
	values[4] = Int64GetDatum(token);
	values[5] = Int64GetDatum(req->ttl_us);
	values[6] = TimestampTzGetDatum(now);
	values[7] = TimestampTzGetDatum(now + req->ttl_us);

	if (nfresh > 0)
	{
		/* no claim row yet: every one of them is written (claim_store.c) */
		dlock_claim_store_insert(req->target->claim_relid, fresh, nfresh, req->holder,
								 role, token, req->ttl_us, now,
								 now + req->ttl_us);
		for (int i = 0; i < n; i++)
		{
			if (c[i].claimable && !c[i].has_row)
			{
				c[i].claimed = true;
				claimed++;
			}
		}
	}
	if (nagain > 0)
	{
		values[1] = dlock_text_array(again, nagain);
		plan = dlock_spi_plan(Q_CLAIM_UPDATE,
							  "UPDATE " DLOCK_SCHEMA ".claim"
							  "   SET holder = $3, owner = $4, token = $5, ttl_us = $6,"
							  "       claimed_at = $7, expires_at = $8,"
							  "       attempts = attempts OPERATOR(pg_catalog.+) 1"
							  " WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"
							  "   AND poisoned_at IS NULL"
							  "   AND (holder IS NULL OR expires_at OPERATOR(pg_catalog.<=) $7)"
							  " RETURNING key, attempts",
							  8, types);
		dlock_spi_run(plan, values, NULL, 0, SPI_OK_UPDATE_RETURNING);
		claimed += mark_claimed(c, order, n, redelivered);
	}
	return claimed;
}

/*
 * Run the claim query (as the caller) and return its rows, locked FOR
 * UPDATE, as candidates, with their primary key values in *pksp; returns
 * how many.  The rows stay in SPI's tuple table.
 */
static uint64
fetch_candidates(const ClaimRequest *req, SPIPlanPtr uplan, Datum *values,
				 const char *nulls, Candidate **cp, Datum **pksp)
{
	const ClaimTarget *t = req->target;
	MemoryContext cxt = CurrentMemoryContext;
	int			rc = 0;
	uint64		n;
	SPITupleTable *tab;
	Candidate  *c;
	Datum	   *pks;
	int			io;

	/* errors in the caller's filter or order_by name the caller's text */
	PG_TRY();
	{
		rc = SPI_execute_plan(uplan, values, nulls, false, 0);
	}
	PG_CATCH();
	{
		dlock_claim_query_rethrow(cxt, t, req->filter, req->order_by);
	}
	PG_END_TRY();
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "claim query failed: %s", SPI_result_code_string(rc));
	n = SPI_processed;
	tab = SPI_tuptable;
	if (n == 0)
		return 0;
	if (SPI_gettypeid(tab->tupdesc, 1) != t->rowtype)
		elog(ERROR, "claim query returned %s, not the row type of \"%s\"",
			 format_type_be(SPI_gettypeid(tab->tupdesc, 1)), t->relname);

	c = palloc0(sizeof(Candidate) * n);
	pks = palloc(sizeof(Datum) * n);
	io = dlock_claim_io_begin(t, InvalidOid);
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;

		c[i].row = SPI_getbinval(tab->vals[i], tab->tupdesc, 1, &isnull);
		pks[i] = SPI_getbinval(tab->vals[i], tab->tupdesc, 2, &isnull);
		c[i].key = dlock_claim_key_text(t, pks[i], t->pk_type);
	}
	dlock_claim_io_end(io);
	*cp = c;
	*pksp = pks;
	return n;
}

/*
 * This transaction holds the key locks of the rows it is about to claim,
 * c[i] with c[i].claimable (keys pks[i]), to its end: let other claimers
 * read around the long runs among them (claim_inflight.c).
 */
static void
publish_inflight(const ClaimTarget *t, const Candidate *c, const Datum *pks,
				 int n)
{
	Datum	   *vals;
	DlockKeyRun *runs;
	int			nvals = 0;
	int			nruns;

	if (n < DLOCK_MIN_SKIPPED_RUN || dlock_inflight_max() == 0)
		return;
	vals = palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
		if (c[i].claimable)
			vals[nvals++] = pks[i];
	nruns = dlock_claim_long_runs(t->pk_type, vals, &nvals, &runs);
	dlock_inflight_publish(t->claim_relid, runs, nruns);
	pfree(vals);
	pfree(runs);
}

/*
 * The runs an integer-keyed claim reads around now: those of the live
 * claims it read (base), and those other claims hold in flight or
 * committed since mark (claim_inflight.c), read afresh for every query.
 */
static int
current_runs(Oid relid, uint64 mark, const DlockKeyRun *base, int nbase,
			 DlockKeyRun *runs)
{
	int			n;

	memcpy(runs, base, sizeof(DlockKeyRun) * nbase);
	n = nbase + dlock_inflight_read(relid, mark, runs + nbase);
	return dlock_claim_merge_runs(runs, n);
}

/*
 * Claim up to req->n rows; the claimed rows go to out, in the order of
 * the caller's order_by.
 */
void
dlock_claim_rows(const ClaimRequest *req, Tuplestorestate *out,
				 TupleDesc outdesc)
{
	const ClaimTarget *t = req->target;
	DlockSpi	spi;
	SPIPlanPtr	uplan;
	text	  **excl;
	Datum	   *exclvals;
	int			nexcl;
	int			maxexcl;
	int			claimed = 0;
	int64		redelivered = 0;
	int64		token = 0;
	bool		ranged = dlock_claim_query_ranged(t, req->order_by);
	uint64		mark = 0;
	DlockKeyRun *base = NULL;	/* long runs of the live claims read */
	int			nbase = 0;
	DlockKeyRun *runs = NULL;
	bool		has_lo = false; /* reading keys after lo (ranged) */
	int64		lo = 0;

	/*
	 * Where the runs of committing claims are, before the live claims are
	 * read: a claim that commits after this is found among them.
	 */
	if (ranged)
		mark = dlock_inflight_mark();

	dlock_spi_begin(&spi);
	excl = excluded_keys(t->claim_relid, GetCurrentTimestamp(), &nexcl);
	maxexcl = nexcl + req->n + 1;

	/* from here on, everything that runs the table's types runs as the caller */
	dlock_spi_as_caller(&spi);
	exclvals = key_values(t, excl, nexcl, req->n);
	if (ranged)
	{
		nbase = dlock_claim_long_runs(t->pk_type, exclvals, &nexcl, &base);
		runs = palloc(sizeof(DlockKeyRun) * (nbase + dlock_inflight_max() + 1));
	}
	uplan = dlock_claim_user_plan(t, req->filter, req->order_by);

	while (claimed < req->n)
	{
		int			need = req->n - claimed;
		Datum		uvalues[4];
		char		unulls[5] = "    ";
		bool		has_hi = false;
		int64		hi = 0;
		int64		after_hi = 0;
		bool		last = false;
		uint64		ncand;
		Candidate  *c;
		Datum	   *pks;
		int		   *order;
		TimestampTz now;

		CHECK_FOR_INTERRUPTS();

		/* candidate rows, read and locked as the caller */
		uvalues[0] = pk_array(t, exclvals, nexcl);
		uvalues[1] = Int64GetDatum(need);
		if (ranged)
		{
			/* around the runs as they are now; exclusive bounds */
			int			nruns = current_runs(t->claim_relid, mark, base, nbase, runs);

			dlock_claim_next_range(runs, nruns, &has_lo, &lo, &has_hi, &hi,
								   &after_hi);
			if (has_lo)
				uvalues[2] = dlock_int_key_datum(t->pk_type, lo);
			else
				unulls[2] = 'n';
			if (has_hi)
				uvalues[3] = dlock_int_key_datum(t->pk_type, hi);
			else
				unulls[3] = 'n';
		}
		ncand = fetch_candidates(req, uplan, uvalues, unulls, &c, &pks);
		if (ncand < (uint64) need)
		{
			/* this key range is done: on to the next one, if any */
			last = !has_hi;
			has_lo = true;
			lo = after_hi;
		}
		else if (ranged)
		{
			/* the rows before the last one returned were returned or skipped */
			has_lo = true;
			lo = dlock_int_key(t->pk_type, pks[ncand - 1]);
		}
		if (ncand == 0)
		{
			if (last)
				break;
			continue;
		}

		order = palloc(sizeof(int) * ncand);
		if (nexcl + ncand > (uint64) maxexcl)
		{
			maxexcl = nexcl + ncand + req->n;
			exclvals = repalloc(exclvals, sizeof(Datum) * maxexcl);
		}
		for (uint64 i = 0; i < ncand; i++)
		{
			order[i] = (int) i;
			/* never offer this row again in this call */
			exclvals[nexcl++] = pks[i];
		}
		sort_base = c;
		qsort(order, ncand, sizeof(int), candidate_cmp);

		/* dlock's own work, as dlock's owner */
		dlock_spi_as_owner(&spi);
		for (uint64 i = 0; i < ncand; i++)
		{
			DlockKeyLock kl = dlock_claim_keylock(t->claim_relid, c[i].key);

			c[i].locked = dlock_key_trylock(&kl, ExclusiveLock);
		}
		now = GetCurrentTimestamp();
		decide_claimable(req, c, order, (int) ncand, now);
		if (ranged)
			publish_inflight(t, c, pks, (int) ncand);
		if (token == 0)
		{
			for (uint64 i = 0; i < ncand && token == 0; i++)
				if (c[i].claimable)
					token = dlock_next_token();
		}
		claimed += write_claims(req, c, order, (int) ncand, spi.caller, token,
								now, &redelivered);

		for (uint64 i = 0; i < ncand; i++)
		{
			if (c[i].claimed)
			{
				HeapTupleHeader hdr = DatumGetHeapTupleHeader(c[i].row);
				HeapTupleData tup;

				tup.t_len = HeapTupleHeaderGetDatumLength(hdr);
				ItemPointerSetInvalid(&tup.t_self);
				tup.t_tableOid = InvalidOid;
				tup.t_data = hdr;
				tuplestore_puttuple(out, &tup);
			}
			else if (c[i].locked)
			{
				DlockKeyLock kl = dlock_claim_keylock(t->claim_relid, c[i].key);

				dlock_key_unlock(&kl, ExclusiveLock);
			}
		}
		dlock_spi_as_caller(&spi);
		if (last)
			break;
	}
	dlock_spi_as_owner(&spi);
	dlock_claim_user_plan_done(uplan);

	dlock_count(DLOCK_STAT_CLAIMS, claimed);
	dlock_count(DLOCK_STAT_REDELIVERIES, redelivered);
	if (claimed > 0)
		dlock_claim_maybe_cleanup();
	dlock_spi_end(&spi);
}
