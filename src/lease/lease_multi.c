/*-------------------------------------------------------------------------
 *
 * lease_multi.c
 *		dlock_acquire_all: several keys at once, all of them or none.
 *
 * Each key is taken by dlock_acquire (lease_acquire.c), as one call would take
 * it, so every lease is an ordinary lease afterwards and waits are the
 * ordinary FIFO waits.  What this file adds:
 *
 * One global order.  The distinct keys are taken in the order of their
 * bytes (as COLLATE "C" sorts them), whatever the order of the caller's
 * array.  A call waits only for a key greater than every key it holds,
 * so no two calls can wait for each other in a cycle (the key locks
 * they hold are all below the key they wait for).
 *
 * All or none.  The acquires run in an internal subtransaction
 * (dlock_subxact_run, base_xact.c).  When a key cannot be had before the
 * deadline, or on an error (a cancel, a timeout), the subtransaction rolls
 * back: the grants already written are undone and their key locks go at
 * once, and lease_xact.c wakes those keys' waiters on the subtransaction's
 * abort; an error is then thrown again, as PL/pgSQL's exception blocks do.
 * The key that was waited for was left by its queue (lease_acquire.c).
 * Nothing is left held or queued.
 *
 * One deadline.  wait is the wait of the whole call: each key waits only
 * for what is left of it.  With wait = 0 no key waits at all.
 *
 * No hand-over.  Inside the subtransaction no release can hand a key
 * over to this waiter (dlock_xact_alone() is false there): a grant
 * committed by the releaser could not be undone with the others.  The
 * waiter is woken and takes the key itself.
 *
 * Expiry.  With wait > 0, the keys before the last are granted for ttl
 * plus the wait, so that none runs out while later keys are waited for,
 * and once all are had they are renewed to now + ttl: every lease runs
 * for ttl from the end of the call (on the server's clock).  Until the
 * transaction commits, the key locks keep everybody else out anyway.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "compat.h"
#include "lease/lease_int.h"

/* a key of the caller's array and its place there */
typedef struct MultiKey
{
	text	   *key;
	int			pos;
} MultiKey;

static int
key_cmp(text *a, text *b)
{
	int			la = VARSIZE_ANY_EXHDR(a);
	int			lb = VARSIZE_ANY_EXHDR(b);
	int			c = memcmp(VARDATA_ANY(a), VARDATA_ANY(b), Min(la, lb));

	if (c != 0)
		return c;
	return (la > lb) - (la < lb);
}

/* bytes first; equal keys in the caller's order */
static int
multikey_cmp(const void *a, const void *b)
{
	const MultiKey *x = (const MultiKey *) a;
	const MultiKey *y = (const MultiKey *) b;
	int			c = key_cmp(x->key, y->key);

	if (c != 0)
		return c;
	return (x->pos > y->pos) - (x->pos < y->pos);
}

/* one call's distinct keys, in the order they are taken */
typedef struct MultiCall
{
	text	  **keys;
	int			n;
	text	   *holder;
	int64		ttl_us;
	int64		wait_us;
	TimestampTz deadline;
	int64	   *tokens;			/* out: tokens[i] is keys[i]'s */
} MultiCall;

/*
 * Take the n distinct keys in the order given, all before deadline; run
 * in an internal subtransaction (dlock_subxact_run), kept when every key
 * was had.  False at the first key not had in time.
 */
static bool
acquire_in_order(void *arg)
{
	MultiCall  *c = (MultiCall *) arg;
	text	  **keys = c->keys;
	int			n = c->n;
	text	   *holder = c->holder;
	int64		ttl_us = c->ttl_us;
	int64		wait_us = c->wait_us;
	TimestampTz deadline = c->deadline;
	int64	   *tokens = c->tokens;
	int			i;

	for (i = 0; i < n; i++)
	{
		int64		left = 0;
		int64		grant_ttl = ttl_us;

		CHECK_FOR_INTERRUPTS();
		if (wait_us > 0)
		{
			left = Max(deadline - GetCurrentTimestamp(), 0);
			/* lives through the waits for the later keys; renewed below */
			if (i < n - 1)
				grant_ttl = ttl_us + wait_us;
		}
		if (!dlock_acquire(keys[i], holder, grant_ttl, left, 1, &tokens[i]))
			return false;
	}

	/* every lease runs for ttl from now, the earlier ones included */
	if (wait_us > 0)
	{
		for (i = 0; i < n - 1; i++)
		{
			CHECK_FOR_INTERRUPTS();
			if (!dlock_lease_renew(keys[i], holder, ttl_us, true, tokens[i]))
				return false;
		}
	}
	return true;
}

/*
 * Acquire every key of keys[0..nkeys-1] for holder, or none, waiting up to
 * wait_us in all.  True with tokens[i] the token of keys[i] (the same
 * token for a key given twice); false, with nothing held or queued, when
 * not every key could be had.  No keys: true.
 */
bool
dlock_acquire_all(text **keys, int nkeys, text *holder, int64 ttl_us,
				  int64 wait_us, int64 *tokens)
{
	MultiKey   *mk;
	text	  **distinct;
	int64	   *dtokens;
	int		   *which;
	int			nd = 0;
	int			i;
	MultiCall	call;
	ErrorData  *edata;
	bool		all;

	if (nkeys == 0)
		return true;

	mk = palloc(sizeof(MultiKey) * nkeys);
	for (i = 0; i < nkeys; i++)
	{
		mk[i].key = keys[i];
		mk[i].pos = i;
	}
	qsort(mk, nkeys, sizeof(MultiKey), multikey_cmp);

	/* the distinct keys in order; which[pos]: the distinct key at pos */
	distinct = palloc(sizeof(text *) * nkeys);
	dtokens = palloc(sizeof(int64) * nkeys);
	which = palloc(sizeof(int) * nkeys);
	for (i = 0; i < nkeys; i++)
	{
		if (nd == 0 || key_cmp(distinct[nd - 1], mk[i].key) != 0)
			distinct[nd++] = mk[i].key;
		which[mk[i].pos] = nd - 1;
	}

	call.keys = distinct;
	call.n = nd;
	call.holder = holder;
	call.ttl_us = ttl_us;
	call.wait_us = wait_us;
	call.deadline = GetCurrentTimestamp() + wait_us;
	call.tokens = dtokens;
	/* an error rolls the subtransaction back and is thrown again */
	edata = dlock_subxact_run(acquire_in_order, &call, &all);
	if (edata != NULL)
		ReThrowError(edata);
	if (!all)
		return false;
	for (i = 0; i < nkeys; i++)
		tokens[i] = dtokens[which[i]];
	return true;
}
