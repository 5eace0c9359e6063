/*-------------------------------------------------------------------------
 *
 * claim.c
 *		Claims: leases on rows of the user's own tables, kept in
 *		dlock.claim and handed out in batches with FOR UPDATE SKIP LOCKED.
 *
 * A claim of up to n rows:
 *	1. runs the caller's query (claim_query.c) as the caller: rows that
 *	   match the filter, in order, that no live claim holds, locked FOR
 *	   UPDATE SKIP LOCKED.  Whether a claim holds a row is checked as the
 *	   scan reaches the row, before its row lock, by dlock_claim_unheld
 *	   (one index probe of dlock.claim, claim_unheld.c), so a claim costs
 *	   what its scan costs, whatever the number of live claims on the
 *	   table; rows another transaction is claiming or completing are
 *	   skipped without waiting, and a row completed a moment ago is
 *	   re-checked against the filter on its newest version;
 *	2. reads the candidates' claim rows at the latest committed state: a
 *	   claim that committed after the probe is seen here, and its row is
 *	   dropped (the snapshot race of SKIP LOCKED claims).  A row without a
 *	   claim row is taken as it is (its row lock keeps other claimers out,
 *	   and only claimers write new claim rows); a row with a free or
 *	   expired one is decided under its key lock, taken without waiting
 *	   (skipped if another transaction holds it: a holder completing,
 *	   renewing or fencing it), on a second look;
 *	3. writes the claims (an insert for rows never claimed, a conditional
 *	   update, only where the claim is free or expired, for the others) and
 *	   returns exactly the rows it wrote;
 *	4. if some candidates were dropped, runs the query again for the rest,
 *	   leaving out the rows it has already tried.
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
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "base_keylock.h"
#include "base_keys.h"
#include "base_spi.h"
#include "base_stats.h"
#include "base_token.h"
#include "claim.h"
#include "claim_key.h"
#include "claim_store.h"
#include "maint_sweep.h"

/* one candidate row of a claim */
typedef struct Candidate
{
	text	   *key;			/* its claim key (dlock_claim_key_id) */
	text	   *full;			/* its key text */
	Datum		row;			/* whole-row datum from the user's table */
	bool		locked;			/* we took its key lock, kl */
	DlockKeyLock kl;
	bool		fresh;			/* no claim row: claimable without a key lock */
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

static int
candidate_cmp(const void *a, const void *b, void *arg)
{
	Candidate  *c = (Candidate *) arg;

	return dlock_text_cmp(&c[*(const int *) a].key, &c[*(const int *) b].key);
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

		c[i].claimable = c[i].locked || c[i].fresh;
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
		dlock_claim_store_poison(req->target->claim_relid, poison, npoison, now);
}

/* mark the candidates with these keys (claimed again) claimed */
static int
mark_claimed(Candidate *c, int *order, int n, text **keys, int *attempts,
			 int nkeys, int64 *redelivered)
{
	int			claimed = 0;

	for (int r = 0; r < nkeys; r++)
	{
		int			i = find_candidate(c, order, n, keys[r]);

		if (i >= 0 && !c[i].claimed)
		{
			c[i].claimed = true;
			claimed++;
			if (attempts[r] > 1)
				(*redelivered)++;
		}
	}
	return claimed;
}

/*
 * The claimable candidates whose claim row a sweep deleted after we read it
 * (its delete committed while our update waited for it: maint_sweep.c) are idle
 * rows still: under their key locks, their claim rows are written anew.
 */
static int
write_swept(const ClaimRequest *req, Candidate *c, int n, Oid role,
			int64 token, TimestampTz now)
{
	text	  **keys = palloc(sizeof(text *) * n);
	text	  **fulls = palloc(sizeof(text *) * n);
	bool	   *found = palloc(sizeof(bool) * n);
	bool	   *live = palloc(sizeof(bool) * n);
	int		   *attempts = palloc(sizeof(int) * n);
	bool	   *poisoned = palloc(sizeof(bool) * n);
	int			nleft = 0;
	int			nswept = 0;

	for (int i = 0; i < n; i++)
		if (c[i].claimable && c[i].has_row && !c[i].claimed)
			keys[nleft++] = c[i].key;
	if (nleft == 0)
		return 0;
	dlock_claim_store_lookup(req->target->claim_relid, keys, nleft, found, live,
							 attempts, poisoned);
	for (int j = 0; j < nleft; j++)
	{
		if (found[j])
			continue;
		for (int i = 0; i < n; i++)
			if (c[i].key == keys[j])
			{
				c[i].claimed = true;
				fulls[nswept] = c[i].full;
				keys[nswept++] = c[i].key;
			}
	}
	if (nswept > 0)
		dlock_claim_store_insert(req->target->claim_relid, keys, fulls, nswept,
								 req->holder, role, token, req->ttl_us, now,
								 now + req->ttl_us);
	return nswept;
}

/*
 * Write the claims of the claimable candidates and mark those written.
 * Under their key locks, the lookup in decide_claimable is final: rows
 * without a claim row get a plain insert (no speculative insertion), rows
 * with one an update that still writes only where the claim is free or
 * expired (and not poisoned); both in claim_store.c.
 */
static int
write_claims(const ClaimRequest *req, Candidate *c, int *order, int n,
			 Oid role, int64 token, TimestampTz now, int64 *redelivered)
{
	text	  **fresh = palloc(sizeof(text *) * Max(n, 1));
	text	  **fresh_full = palloc(sizeof(text *) * Max(n, 1));
	text	  **again = palloc(sizeof(text *) * Max(n, 1));
	int			nfresh = 0;
	int			nagain = 0;
	int			claimed = 0;

	for (int i = 0; i < n; i++)
	{
		if (!c[i].claimable)
			continue;
		if (c[i].has_row)
			again[nagain++] = c[i].key;
		else
		{
			fresh_full[nfresh] = c[i].full;
			fresh[nfresh++] = c[i].key;
		}
	}

	if (nfresh > 0)
	{
		/* no claim row yet: every one of them is written (claim_store.c) */
		dlock_claim_store_insert(req->target->claim_relid, fresh, fresh_full,
								 nfresh, req->holder, role, token, req->ttl_us,
								 now, now + req->ttl_us);
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
		text	  **got;
		int		   *attempts;
		int			ngot;

		ngot = dlock_claim_store_reclaim(req->target->claim_relid, again, nagain,
										 req->holder, role, token, req->ttl_us,
										 now, &got, &attempts);
		claimed += mark_claimed(c, order, n, got, attempts, ngot, redelivered);
		if (ngot < nagain)
			claimed += write_swept(req, c, n, role, token, now);
	}
	return claimed;
}

/*
 * Run the claim query (as the caller) for up to need rows, leaving out
 * tried (the primary keys of rows tried before in this call), and return
 * its rows, locked FOR UPDATE, as candidates, with their primary key
 * values in *pksp; returns how many.  The rows stay in SPI's tuple table.
 */
static uint64
fetch_candidates(const ClaimRequest *req, Datum tried, int need,
				 Candidate **cp_out, Datum **pksp)
{
	const ClaimTarget *t = req->target;
	uint64		n = dlock_claim_query_run(req, tried, need);
	SPITupleTable *tab = SPI_tuptable;
	Candidate  *c;
	Datum	   *pks;
	int			io;

	if (n == 0)
		return 0;
	c = palloc0(sizeof(Candidate) * n);
	pks = palloc(sizeof(Datum) * n);
	io = dlock_claim_io_begin(t, InvalidOid);
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;

		c[i].row = SPI_getbinval(tab->vals[i], tab->tupdesc, 1, &isnull);
		pks[i] = SPI_getbinval(tab->vals[i], tab->tupdesc, 2, &isnull);
		c[i].full = dlock_claim_key_text(t, pks[i], t->pk_type);
		c[i].key = dlock_claim_key_id(c[i].full);
	}
	dlock_claim_io_end(io);
	*cp_out = c;
	*pksp = pks;
	return n;
}

/*
 * Take the key locks of the candidates, decide which are claimable, and
 * write their claims (as dlock's owner); the claimed rows go to out, the
 * key locks of the others are given back.  Returns how many were claimed.
 */
static int
claim_candidates(const ClaimRequest *req, Candidate *c, int n, Oid role,
				 int64 *token, int64 *redelivered, Tuplestorestate *out)
{
	const ClaimTarget *t = req->target;
	int		   *order = palloc(sizeof(int) * n);
	TimestampTz now;
	int			claimed;

	for (int i = 0; i < n; i++)
		order[i] = i;
	qsort_arg(order, n, sizeof(int), candidate_cmp, c);

	/*
	 * A row without a claim row is claimable as it is: its row lock, taken by
	 * the claim query, keeps every other claimer away from it until this
	 * transaction ends, and only claimers write new claim rows.  A row with
	 * one may have a holder completing, renewing or fencing it right now: it
	 * is decided under its key lock (taken without waiting), on a second
	 * look.
	 */
	{
		text	  **keys = palloc(sizeof(text *) * n);
		bool	   *found = palloc(sizeof(bool) * n);
		bool	   *live = palloc(sizeof(bool) * n);
		int		   *attempts = palloc(sizeof(int) * n);
		bool	   *poisoned = palloc(sizeof(bool) * n);

		for (int k = 0; k < n; k++)
			keys[k] = c[order[k]].key;
		dlock_claim_store_lookup(t->claim_relid, keys, n, found, live, attempts,
								 poisoned);
		for (int k = 0; k < n; k++)
		{
			Candidate  *cc = &c[order[k]];

			if (!found[k])
				cc->fresh = true;
			else if (!live[k] && !poisoned[k])
			{
				cc->kl = dlock_claim_keylock(t->claim_relid, cc->key);
				cc->locked = dlock_key_trylock(&cc->kl, ExclusiveLock);
			}
		}
	}
	now = GetCurrentTimestamp();
	decide_claimable(req, c, order, n, now);
	if (*token == 0)
	{
		for (int i = 0; i < n && *token == 0; i++)
			if (c[i].claimable)
				*token = dlock_next_token();
	}
	claimed = write_claims(req, c, order, n, role, *token, now, redelivered);

	for (int i = 0; i < n; i++)
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
			dlock_key_unlock(&c[i].kl, ExclusiveLock);
	}
	pfree(order);
	return claimed;
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
	Datum	   *tried = palloc(sizeof(Datum) * req->n);
	int			ntried = 0;
	int			maxtried = req->n;
	int			claimed = 0;
	int64		redelivered = 0;
	int64		token = 0;

	dlock_spi_begin(&spi);
	/* from here on, everything that runs the table's types runs as the caller */
	dlock_spi_as_caller(&spi);

	while (claimed < req->n)
	{
		int			need = req->n - claimed;
		uint64		ncand;
		Candidate  *c;
		Datum	   *pks;

		CHECK_FOR_INTERRUPTS();

		/* candidate rows, read and locked as the caller */
		ncand = fetch_candidates(req, pk_array(t, tried, ntried), need, &c,
								 &pks);
		if (ncand == 0)
			break;
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
		claimed += claim_candidates(req, c, (int) ncand, spi.caller, &token,
									&redelivered, out);
		dlock_spi_as_caller(&spi);

		/* fewer rows than asked for: there are no more */
		if (ncand < (uint64) need)
			break;
	}
	dlock_spi_as_owner(&spi);

	dlock_count(DLOCK_STAT_CLAIMS, claimed);
	dlock_count(DLOCK_STAT_REDELIVERIES, redelivered);
	if (claimed > 0)
		dlock_claim_sweep_maybe();
	dlock_spi_end(&spi);
}
