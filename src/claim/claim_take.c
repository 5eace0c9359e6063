/*-------------------------------------------------------------------------
 *
 * claim_take.c
 *		Claims: leases on rows of the user's own tables, kept in
 *		dlock.claim and handed out in batches with FOR UPDATE SKIP LOCKED.
 *
 * A claim of up to n rows takes these steps, once a batch, each through
 * a callee of this file:
 *	1. runs the caller's query (claim_query.c) as the caller: rows that
 *	   match the filter, in order, that no live claim holds, locked FOR
 *	   UPDATE SKIP LOCKED.  Whether a claim holds a row is checked as the
 *	   scan reaches the row, before its row lock, by dlock_claim_unheld
 *	   (one index probe of dlock.claim, claim_unheld.c), so a claim costs
 *	   what its scan costs, whatever the number of live claims on the
 *	   table; rows another transaction is claiming or completing are
 *	   skipped without waiting, and a row completed a moment ago is
 *	   re-checked against the filter on its newest version;
 *	2. takes those rows' claim keys (claim_key.c) and claims the batch,
 *	   as dlock's owner (claim_batch.c): it re-reads their claim rows at
 *	   the latest committed state (a claim committed after the check
 *	   drops its row), decides under key locks taken without waiting, and
 *	   writes the claims; the claimed rows go to the caller;
 *	3. if some candidates were dropped, runs the query again for the rest,
 *	   leaving out the rows it has already tried; with fair (claim_group.c),
 *	   also when a round's cap per group turned rows away, with the cap
 *	   raised.
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

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/lsyscache.h"

#include "base/base.h"
#include "claim/claim_int.h"
#include "claim/claim.h"

/* the primary key values vals[0..n-1] as an array */
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
 * Run the claim query (as the caller) for up to need rows, leaving out the
 * ntried rows tried before in this call (their primary keys in tried), and
 * return its rows, locked FOR UPDATE, as candidates, with their primary key
 * values in *pksp; returns how many.  The rows stay in SPI's tuple table.
 */
static uint64
fetch_candidates(const ClaimRequest *req, Datum *tried, int ntried, int need,
				 ClaimCandidate **cp_out, Datum **pksp)
{
	const ClaimTarget *t = req->target;
	Datum		tried_array = pk_array(t, tried, ntried);
	uint64		n = dlock_claim_query_run(req, tried_array, need);
	SPITupleTable *tab = SPI_tuptable;
	ClaimCandidate *c;
	Datum	   *pks;
	int			io;

	if (n == 0)
		return 0;
	c = palloc0(sizeof(ClaimCandidate) * n);
	pks = palloc(sizeof(Datum) * n);
	io = dlock_claim_io_begin(t, InvalidOid);
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;

		c[i].row = SPI_getbinval(tab->vals[i], tab->tupdesc, 1, &isnull);
		pks[i] = SPI_getbinval(tab->vals[i], tab->tupdesc, 2, &isnull);
		c[i].full = dlock_claim_key_text(t, pks[i], t->pk_type);
		c[i].key = dlock_claim_key_id(c[i].full);
		if (req->group_by)
		{
			Datum		g = SPI_getbinval(tab->vals[i], tab->tupdesc, 3, &isnull);

			c[i].grp = dlock_claim_group_id(isnull ? NULL : DatumGetTextPP(g));
		}
	}
	dlock_claim_io_end(io);
	*cp_out = c;
	*pksp = pks;
	return n;
}

/*
 * Claim up to req->n rows; the claimed rows go to out, in the order of
 * the caller's order_by.  Returns how many were claimed.
 */
int
dlock_claim_rows(const ClaimRequest *call, Tuplestorestate *out,
				 TupleDesc outdesc)
{
	ClaimRequest r = *call;
	const ClaimRequest *req = &r;
	DlockSpi	spi;
	Datum	   *tried = palloc(sizeof(Datum) * req->n);
	int			ntried = 0;
	int			maxtried = req->n;
	int			claimed = 0;
	int64		redelivered = 0;
	int64		token = 0;

	r.groups = dlock_claim_groups_begin(&r);
	dlock_spi_begin(&spi);
	/* from here on, everything that runs the table's types runs as the caller */
	dlock_spi_as_caller(&spi);

	while (claimed < req->n)
	{
		int			need = req->n - claimed;
		uint64		ncand;
		ClaimCandidate *c;
		Datum	   *pks;

		CHECK_FOR_INTERRUPTS();

		/* candidate rows, read and locked as the caller */
		ncand = fetch_candidates(req, tried, ntried, need, &c, &pks);
		if (ncand == 0)
		{
			/* fair: groups turned away at this round's cap have more */
			if (dlock_claim_groups_next_round(r.groups, need))
				continue;
			break;
		}
		if (ntried + ncand > (uint64) maxtried)
		{
			maxtried = ntried + ncand + req->n;
			tried = repalloc(tried, sizeof(Datum) * maxtried);
		}
		/* never offer these rows again in this call */
		for (uint64 i = 0; i < ncand; i++)
			tried[ntried++] = pks[i];

		/* dlock's own work, as dlock's owner */
		dlock_spi_as_owner(&spi);
		claimed += dlock_claim_batch(req, c, (int) ncand, spi.caller, &token,
									 &redelivered, out);
		dlock_spi_as_caller(&spi);
		if (r.groups)
			dlock_claim_groups_taken(r.groups, c, (int) ncand);

		/* fewer rows than asked for: there are no more (in this round) */
		if (ncand < (uint64) need &&
			!dlock_claim_groups_next_round(r.groups, req->n - claimed))
			break;
	}
	dlock_spi_as_owner(&spi);

	dlock_count(DLOCK_STAT_CLAIMS, claimed);
	dlock_count(DLOCK_STAT_REDELIVERIES, redelivered);
	if (claimed > 0)
	{
		dlock_claim_sweep_maybe();
		/* if this transaction rolls back, its claims vanish: wake a waiter */
		dlock_claim_wait_note_claimed(req->target->claim_relid);
	}
	dlock_spi_end(&spi);
	return claimed;
}
