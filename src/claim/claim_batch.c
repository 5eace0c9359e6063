/*-------------------------------------------------------------------------
 *
 * claim_batch.c
 *		Claiming one batch of candidate rows, the rows one run of a claim
 *		query returned, locked FOR UPDATE (claim_take.c): which of them are
 *		claimable, and their claims written, with dlock.claim entered
 *		twice, one lookup and one write (claim_store.c).
 *
 * A batch:
 *	0. with group_by and per_group, drops the candidates over their
 *	   group's room, under the group's lock (claim_group.c);
 *	1. reads the candidates' claim rows at the latest committed state: a
 *	   claim that committed after the query's per-row check is seen here,
 *	   and its row is dropped (the snapshot race of SKIP LOCKED claims).  A
 *	   row without a claim row is taken as it is (its row lock keeps other
 *	   claimers out, and only claimers write new claim rows); for a row
 *	   with a free or expired one, its key lock is taken without waiting
 *	   (skipped if another transaction holds it: a holder completing,
 *	   renewing or fencing it);
 *	2. under those key locks, looks again at those rows and decides: a
 *	   row is claimable if it has no claim row (any more), or a free or
 *	   expired one, not poisoned, not yet claimed max_attempts times (those
 *	   are poisoned);
 *	3. writes the batch (dlock_claim_store_write): poison marks, a first
 *	   claim for rows without a claim row, the others claimed again where
 *	   the claim is still free or expired, and anew where a sweep deleted
 *	   the claim row meanwhile; the claimed rows go to the caller's
 *	   tuplestore, the key locks of the others are given back.
 * The lookups go in key order, for the index's sake.  A batch never waits
 * for a lock (conditional key locks), so claimers cannot deadlock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "miscadmin.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "claim/claim_int.h"
#include "claim/claim.h"

static int
candidate_cmp(const void *a, const void *b, void *arg)
{
	ClaimCandidate *c = (ClaimCandidate *) arg;

	return dlock_text_cmp(&c[*(const int *) a].key, &c[*(const int *) b].key);
}

/*
 * The first look, at the latest committed state: candidates without a
 * claim row are fresh (claimable as they are: the claim query's row lock
 * keeps every other claimer away until this transaction ends, and only
 * claimers write new claim rows); of those with a free or expired claim
 * row (a holder may be completing, renewing or fencing it right now), the
 * key lock is taken without waiting, for the second look.
 */
static void
look_and_lock(const ClaimRequest *req, ClaimCandidate *c, int *order, int n)
{
	Oid			relid = req->target->claim_relid;
	text	  **keys = palloc(sizeof(text *) * n);
	bool	   *found = palloc(sizeof(bool) * n);
	bool	   *live = palloc(sizeof(bool) * n);
	int		   *attempts = palloc(sizeof(int) * n);
	bool	   *poisoned = palloc(sizeof(bool) * n);

	for (int k = 0; k < n; k++)
		keys[k] = c[order[k]].key;
	dlock_claim_store_lookup(relid, keys, n, found, live, attempts, poisoned);
	for (int k = 0; k < n; k++)
	{
		ClaimCandidate *cc = &c[order[k]];

		if (cc->dropped)
			continue;			/* over its group's cap */
		if (!found[k])
			cc->fresh = true;
		else if (!live[k] && !poisoned[k])
		{
			cc->kl = dlock_claim_keylock(relid, cc->key);
			cc->locked = dlock_key_trylock(&cc->kl, ExclusiveLock);
		}
	}
}

/*
 * The second look, under the key locks taken by look_and_lock, at the
 * latest committed state, then the decision (each candidate's action) and
 * the batch's write, as holder and role, from now.  Returns how many were
 * claimed; *token is drawn if it is 0 and some candidate is claimable.
 */
static int
decide_and_write(const ClaimRequest *req, ClaimCandidate *c, int *order,
				 int n, Oid role, TimestampTz now, int64 *token,
				 int64 *redelivered)
{
	DlockClaimWrite w = {req->target->claim_relid, req->holder, role, 0,
	req->ttl_us, now, NULL};
	text	  **keys = palloc(sizeof(text *) * n);
	text	  **fulls = palloc(sizeof(text *) * n);
	DlockClaimAction *action = palloc(sizeof(DlockClaimAction) * n);
	int		   *at = palloc(sizeof(int) * n);
	bool	   *found = palloc(sizeof(bool) * n);
	bool	   *live = palloc(sizeof(bool) * n);
	int		   *attempts = palloc(sizeof(int) * n);
	bool	   *poisoned = palloc(sizeof(bool) * n);
	text	  **grps = req->group_by ? palloc(sizeof(text *) * n) : NULL;
	int			nlocked = 0;
	int			claimed;

	w.backoff_us = req->backoff_us;
	w.backoff_max_us = req->backoff_max_us;
	/* in key order, for the index's sake */
	for (int k = 0; k < n; k++)
	{
		int			i = order[k];

		action[i] = c[i].locked || c[i].fresh ? DLOCK_CLAIM_INSERT :
			DLOCK_CLAIM_SKIP;
		if (c[i].locked)
		{
			at[nlocked] = i;
			keys[nlocked++] = c[i].key;
		}
	}
	if (nlocked > 0)
		dlock_claim_store_lookup(w.relid, keys, nlocked, found, live,
								 attempts, poisoned);
	for (int j = 0; j < nlocked; j++)
	{
		int			i = at[j];

		if (!found[j])
			continue;			/* swept meanwhile: a first claim */
		if (live[j] || poisoned[j])
			action[i] = DLOCK_CLAIM_SKIP;
		else if (req->max_attempts > 0 && attempts[j] >= req->max_attempts)
			action[i] = DLOCK_CLAIM_POISON;
		else
			action[i] = DLOCK_CLAIM_AGAIN;
	}
	for (int i = 0; i < n; i++)
	{
		keys[i] = c[i].key;
		fulls[i] = c[i].full;
		if (grps)
			grps[i] = c[i].grp;
		if (*token == 0 && (action[i] == DLOCK_CLAIM_INSERT ||
							action[i] == DLOCK_CLAIM_AGAIN))
			*token = dlock_next_token();
	}
	w.token = *token;
	w.grps = grps;
	claimed = dlock_claim_store_write(&w, keys, fulls, action, n, attempts);
	for (int i = 0; i < n; i++)
	{
		c[i].claimed = attempts[i] > 0;
		if (attempts[i] > 1)
			(*redelivered)++;
	}
	return claimed;
}

/*
 * Claim what is claimable among the n candidates c (as dlock's owner; role
 * is the caller's); the claimed rows go to out, the key locks of the
 * others are given back.  Returns how many were claimed; *token is the
 * claims' fencing token (drawn here if 0), *redelivered counts the rows
 * claimed before.
 */
int
dlock_claim_batch(const ClaimRequest *req, ClaimCandidate *c, int n, Oid role,
				  int64 *token, int64 *redelivered, Tuplestorestate *out)
{
	int		   *order = palloc(sizeof(int) * n);
	TimestampTz now;
	int			claimed;
	DlockKeyLock *group_locks;
	int			ngroup_locks;

	for (int i = 0; i < n; i++)
		order[i] = i;
	qsort_arg(order, n, sizeof(int), candidate_cmp, c);
	/*
	 * group_by with per_group: at most its room per group, under the
	 * groups' locks until the claims are written (claim_group.c)
	 */
	group_locks = dlock_claim_group_limit(req, c, n, &ngroup_locks);
	look_and_lock(req, c, order, n);
	now = GetCurrentTimestamp();
	claimed = decide_and_write(req, c, order, n, role, now, token,
							   redelivered);
	dlock_claim_group_unlock(group_locks, ngroup_locks);

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
