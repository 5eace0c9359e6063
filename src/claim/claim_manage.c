/*-------------------------------------------------------------------------
 *
 * claim_manage.c
 *		What happens to claims after they are made: the dlock_claimed
 *		fence, giving claims back, heartbeats, operator resets and
 *		dlock_release_all.  The sweep of long-expired claim rows is in
 *		maint_sweep.c.
 *
 * Lock order: functions that wait for key locks take them in key order
 * (and table order), a chunk at a time, so two of them cannot deadlock
 * with each other.
 * Claimers never wait (claim_take.c), so they cannot take part in a deadlock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "claim/claim.h"
#include "claim/claim_int.h"

/*
 * True when holder (and the calling role) holds an unexpired claim on the
 * row with this key; the share key lock kept to the end of the
 * transaction holds off any takeover until then.
 */
bool
dlock_claim_check(const ClaimTarget *t, text *key, text *holder)
{
	DlockKeyLock kl = dlock_claim_keylock(t->claim_relid, key);
	bool		ok;

	/*
	 * Lock first, then one read: completions call this once per row, and the
	 * only transactions that can make it wait (a claimer taking over an
	 * expired claim, an unclaim) are short.  If the lock is busy, wait for it
	 * only for a claim the caller holds (read first without the lock): how
	 * long a fence takes must not tell a role that someone is working on a
	 * row it does not hold, and may not see.
	 */
	if (!dlock_key_trylock(&kl, ShareLock))
	{
		if (!dlock_claim_store_held(t->claim_relid, key, holder, GetUserId()))
		{
			dlock_count(DLOCK_STAT_VALIDATE_FAIL, 1);
			return false;
		}
		dlock_key_lock(&kl, ShareLock);
	}
	ok = dlock_claim_store_held(t->claim_relid, key, holder, GetUserId());
	if (!ok)
	{
		dlock_key_unlock(&kl, ShareLock);
		dlock_count(DLOCK_STAT_VALIDATE_FAIL, 1);
	}
	else
		/* for the guard (src/guard/): this transaction fenced the row */
		dlock_fence_note_row(t->claim_relid, key);
	return ok;
}

static void
lock_keys(Oid relid, text **keys, int n, LOCKMODE mode)
{
	for (int i = 0; i < n; i++)
	{
		DlockKeyLock kl = dlock_claim_keylock(relid, keys[i]);

		CHECK_FOR_INTERRUPTS();
		dlock_key_lock(&kl, mode);
	}
}

static void
unlock_keys(Oid relid, text **keys, int n, LOCKMODE mode)
{
	for (int i = 0; i < n; i++)
	{
		DlockKeyLock kl = dlock_claim_keylock(relid, keys[i]);

		dlock_key_unlock(&kl, mode);
	}
}

typedef int64 (*ChunkWriter) (Oid relid, text **keys, int n, void *arg);

#define KEY_CHUNK	500

/*
 * Write claims of many keys (sorted) a chunk at a time: lock the chunk's
 * keys, write, and give the locks back at once.  These writes touch only
 * live claims of the caller (or, for resets, are the operator's), which
 * claimers leave alone, so the key locks are not needed to the end of the
 * transaction; holding thousands of them would fill the shared lock table.
 * (A claimer that meets such a claim just as it expires may wait for the
 * writer's row lock and then finds it taken: the one case a claimer waits.)
 */
static int64
write_in_chunks(Oid relid, text **keys, int n, LOCKMODE mode,
				ChunkWriter writer, void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	int64		total = 0;

	for (int start = 0; start < n; start += KEY_CHUNK)
	{
		int			m = Min(KEY_CHUNK, n - start);

		lock_keys(relid, keys + start, m, mode);
		total += writer(relid, keys + start, m, arg);
		/* SPI returns in its procedure's context: allocate in ours */
		MemoryContextSwitchTo(cxt);
		unlock_keys(relid, keys + start, m, mode);
	}
	return total;
}

typedef struct HolderArg
{
	text	   *holder;
	Oid			role;
	int64		ttl_us;
	int64		retry_us;		/* a give-back as failed: its retry_after */
	DlockHistoryEnd how;		/* a give-back: how its tenures end */
} HolderArg;

/*
 * Begin SPI for writes of holder's claims: they are the calling role's
 * (spi->caller), with ttl_us for a renewal.
 */
static void
holder_spi_begin(DlockSpi *spi, HolderArg *arg, text *holder, int64 ttl_us)
{
	dlock_spi_begin(spi);
	arg->holder = holder;
	arg->role = spi->caller;
	arg->ttl_us = ttl_us;
	arg->retry_us = -1;
	arg->how = DLOCK_END_GIVEN_BACK;
}

/*
 * Write, a page of KEY_CHUNK keys at a time, the live claims of the holder
 * on table relid, read page by page in key order: neither the keys of a
 * million claims nor their locks are ever held at once.
 */
static int64
write_holder_pages(Oid relid, HolderArg *h, LOCKMODE mode, ChunkWriter writer)
{
	MemoryContext page_cxt = AllocSetContextCreate(CurrentMemoryContext,
												   "dlock claim page",
												   ALLOCSET_DEFAULT_SIZES);
	MemoryContext old;
	text	   *after = NULL;
	int64		total = 0;
	int			n;

	do
	{
		text	  **keys;

		CHECK_FOR_INTERRUPTS();
		old = MemoryContextSwitchTo(page_cxt);
		keys = dlock_claim_store_holder_page(relid, h->holder, h->role, after,
											 KEY_CHUNK, &n);
		total += write_in_chunks(relid, keys, n, mode, writer, h);
		MemoryContextSwitchTo(old);
		if (after)
			pfree(after);
		after = n > 0 ? DatumGetTextPCopy(PointerGetDatum(keys[n - 1])) : NULL;
		MemoryContextReset(page_cxt);
	} while (n == KEY_CHUNK);
	MemoryContextDelete(page_cxt);
	return total;
}

/*
 * Write the claims of keys (sorted, without duplicates), KEY_CHUNK at a
 * time: pick(relid, chunk) chooses those of a chunk to write (sorted).
 */
typedef text **(*ChunkPicker) (Oid relid, text **keys, int n, int *npicked,
							   void *arg);

static int64
write_given_keys(Oid relid, text **keys, int nkeys, LOCKMODE mode,
				 ChunkPicker pick, ChunkWriter writer, void *arg)
{
	MemoryContext page_cxt = AllocSetContextCreate(CurrentMemoryContext,
												   "dlock claim page",
												   ALLOCSET_DEFAULT_SIZES);
	int64		total = 0;

	for (int start = 0; start < nkeys; start += KEY_CHUNK)
	{
		MemoryContext old = MemoryContextSwitchTo(page_cxt);
		int			npicked;
		text	  **picked;

		CHECK_FOR_INTERRUPTS();
		picked = pick(relid, keys + start, Min(KEY_CHUNK, nkeys - start),
					  &npicked, arg);
		total += write_in_chunks(relid, picked, npicked, mode, writer, arg);
		MemoryContextSwitchTo(old);
		MemoryContextReset(page_cxt);
	}
	MemoryContextDelete(page_cxt);
	return total;
}

/* of these keys, those of the holder's live claims */
static text **
pick_holder_keys(Oid relid, text **keys, int n, int *npicked, void *arg)
{
	HolderArg  *h = (HolderArg *) arg;
	text	  **picked = dlock_claim_store_holder_keys(relid, h->holder, h->role,
													   keys, n, npicked);

	SPI_freetuptable(SPI_tuptable);
	return picked;
}

/* of these keys, those that have claim rows */
static text **
pick_existing_keys(Oid relid, text **keys, int n, int *npicked, void *arg)
{
	text	  **picked = dlock_claim_store_existing_keys(relid, keys, n, npicked);

	SPI_freetuptable(SPI_tuptable);
	return picked;
}

/* give back the holder's live claims on these keys (locked) */
static int64
give_back_holder_claims(Oid relid, text **keys, int n, void *arg)
{
	HolderArg  *h = (HolderArg *) arg;

	return dlock_claim_store_give_back(relid, keys, n, h->holder, h->role,
									   h->how);
}

/* give back the holder's live claims on these keys (locked) as failed */
static int64
give_back_failed_holder_claims(Oid relid, text **keys, int n, void *arg)
{
	HolderArg  *h = (HolderArg *) arg;

	return dlock_claim_store_give_back_failed(relid, keys, n, h->holder,
											  h->role, h->retry_us);
}

/*
 * n claims of table claim_relid were given back (written, not committed):
 * end the step hints and wake a waiting claim of the table at the commit.
 * Returns n.
 *
 * A give-back ends the step hints (claim_hint.c) by bumping the give-back
 * count, here and in dlock_claim_release_all: only when it changed a row,
 * after the writes and before the commit.  That is enough: a hint learned
 * before the writes carries the count they bump, and a scan after them
 * finds the rows they lock unsettled (an open updater), so no hint
 * published after the commit covers a row given back.  A call that gives
 * back nothing (a claim loop ending with no claim, a waiting call
 * cancelled) leaves every hint standing: with 100,000 held rows at a
 * queue's head, such calls had each workers' next claims scan the whole
 * stretch again.
 */
static int64
gave_back(Oid claim_relid, int64 n)
{
	if (n > 0)
	{
		dlock_claim_returns_bump();
		dlock_claim_wait_note_change(claim_relid);
	}
	return n;
}

/*
 * Give back the holder's live claims on a table with writer: all of them
 * (keys NULL) or those rows.
 */
static int64
unclaim_with(const ClaimTarget *t, text *holder, text **keys, int nkeys,
			 int64 retry_us, ChunkWriter writer)
{
	DlockSpi	spi;
	int64		n;
	HolderArg	arg;

	holder_spi_begin(&spi, &arg, holder, -1);
	arg.retry_us = retry_us;
	/* only its own live claims' keys: a caller cannot lock others' rows */
	if (keys == NULL)
		n = write_holder_pages(t->claim_relid, &arg, ExclusiveLock, writer);
	else
		n = write_given_keys(t->claim_relid, keys,
							 dlock_sort_unique_keys(keys, nkeys), ExclusiveLock,
							 pick_holder_keys, writer, &arg);
	dlock_spi_end(&spi);
	return gave_back(t->claim_relid, n);
}

/*
 * Give back the holder's live claims on a table: all of them (keys NULL)
 * or those rows.  The claim rows stay, with their attempt counts, and are
 * claimable at once.
 */
int64
dlock_claim_unclaim(const ClaimTarget *t, text *holder, text **keys, int nkeys)
{
	return unclaim_with(t, holder, keys, nkeys, -1, give_back_holder_claims);
}

/*
 * Give back the holder's live claims on these rows of a table as failed:
 * the claim rows stay, with their attempt counts, and are not claimable
 * before now + retry_us (retry_us < 0: each claim's own backoff).
 */
int64
dlock_claim_unclaim_failed(const ClaimTarget *t, text *holder, text **keys,
						   int nkeys, int64 retry_us)
{
	return unclaim_with(t, holder, keys, nkeys, retry_us,
						give_back_failed_holder_claims);
}

/*
 * Completion: give back the holder's live claims on these rows (sorted,
 * without duplicates) and keep each one's exclusive key lock to the end of
 * the transaction, so that it is also the fence: until the transaction
 * ends nobody can claim these rows again, and if it rolls back the claims
 * are still the holder's.  done[i] says whether keys[i] was given back.
 *
 * Like dlock_claimed, it locks first and reads under the lock: all keys,
 * in key order (the caller bounds nkeys), then the holder's live claims
 * among them are deleted, each read through the primary key
 * (claim_store.c); the locks of keys it did not give back are released at
 * once, so a caller cannot keep rows it does not hold locked.
 */
int
dlock_claim_complete(const ClaimTarget *t, text *holder, text **keys,
					 int nkeys, bool *done)
{
	Oid			role = GetUserId();
	text	  **mine = palloc(sizeof(text *) * Max(nkeys, 1));
	int		   *at = palloc(sizeof(int) * Max(nkeys, 1));
	bool	   *mine_done = palloc(sizeof(bool) * Max(nkeys, 1));
	bool	   *held = palloc(sizeof(bool) * Max(nkeys, 1));
	int			nmine = 0;
	int			ndone;

	memset(done, 0, sizeof(bool) * nkeys);
	if (nkeys == 0)
		return 0;

	/*
	 * Lock only the keys whose claims the caller holds (read without a lock
	 * first): a caller must not be able to hold up the claims of rows it does
	 * not hold.  The read under the locks decides.
	 */
	dlock_claim_store_held_keys(t->claim_relid, keys, nkeys, holder, role,
								held);
	for (int i = 0; i < nkeys; i++)
	{
		if (held[i])
		{
			at[nmine] = i;
			mine[nmine++] = keys[i];
		}
	}
	lock_keys(t->claim_relid, mine, nmine, ExclusiveLock);
	ndone = dlock_claim_store_delete_held(t->claim_relid, mine, nmine, holder,
										  role, mine_done);
	for (int j = 0; j < nmine; j++)
	{
		if (mine_done[j])
			done[at[j]] = true;
		else
		{
			DlockKeyLock kl = dlock_claim_keylock(t->claim_relid, mine[j]);

			dlock_key_unlock(&kl, ExclusiveLock);
		}
	}
	return ndone;
}

/* extend the holder's live claims on these keys (locked) */
static int64
renew_holder_claims(Oid relid, text **keys, int n, void *arg)
{
	HolderArg  *h = (HolderArg *) arg;

	return dlock_claim_store_renew(relid, keys, n, h->holder, h->role, h->ttl_us);
}

/*
 * Heartbeat: extend every live claim of the holder on a table to now +
 * ttl (ttl_us < 0: each claim's own ttl).  Share key locks, so a renewal
 * and the holder's own fenced completions do not wait for each other.
 */
int64
dlock_claim_renew(const ClaimTarget *t, text *holder, int64 ttl_us)
{
	DlockSpi	spi;
	int64		n;
	HolderArg	arg;

	holder_spi_begin(&spi, &arg, holder, ttl_us);
	n = write_holder_pages(t->claim_relid, &arg, ShareLock, renew_holder_claims);
	dlock_spi_end(&spi);
	return n;
}

/* delete the claim rows of these keys (locked), whoever holds them */
static int64
delete_claims(Oid relid, text **keys, int n, void *arg)
{
	return dlock_claim_store_delete(relid, keys, n);
}

/* Operators: forget the claims, attempts and poison marks of these rows. */
int64
dlock_claim_reset(const ClaimTarget *t, text **keys, int nkeys)
{
	DlockSpi	spi;
	int64		n;

	dlock_spi_begin(&spi);
	/* only the keys that have claim rows, in order */
	n = write_given_keys(t->claim_relid, keys, dlock_sort_unique_keys(keys, nkeys),
						 ExclusiveLock, pick_existing_keys, delete_claims, NULL);
	dlock_spi_end(&spi);
	return gave_back(t->claim_relid, n);
}

/*
 * dlock_release_all's part: give back every live claim of holder and role,
 * read a page of KEY_CHUNK at a time in table and key order.
 */
int64
dlock_claim_release_all(text *holder)
{
	DlockSpi	spi;
	MemoryContext page_cxt;
	Oid			after_relid = InvalidOid;
	text	   *after_key = NULL;
	int64		n = 0;
	int			nrows;
	HolderArg	arg;

	holder_spi_begin(&spi, &arg, holder, -1);
	arg.how = DLOCK_END_RELEASED_ALL;
	page_cxt = AllocSetContextCreate(CurrentMemoryContext, "dlock claim page",
									 ALLOCSET_DEFAULT_SIZES);
	do
	{
		MemoryContext old = MemoryContextSwitchTo(page_cxt);
		Oid		   *relids;
		text	  **keys;
		int			start = 0;

		CHECK_FOR_INTERRUPTS();
		nrows = dlock_claim_store_holder_all_page(holder, arg.role, after_relid,
												  after_key, KEY_CHUNK, &keys,
												  &relids);
		/* one table at a time, keys in order */
		for (int i = 1; i <= nrows; i++)
		{
			if (i == nrows || relids[i] != relids[start])
			{
				n += write_in_chunks(relids[start], keys + start, i - start,
									 ExclusiveLock, give_back_holder_claims, &arg);
				dlock_claim_wait_note_change(relids[start]);
				start = i;
			}
		}
		MemoryContextSwitchTo(old);
		if (after_key)
			pfree(after_key);
		after_key = NULL;
		if (nrows > 0)
		{
			after_relid = relids[nrows - 1];
			after_key = DatumGetTextPCopy(PointerGetDatum(keys[nrows - 1]));
		}
		MemoryContextReset(page_cxt);
	} while (nrows == KEY_CHUNK);
	MemoryContextDelete(page_cxt);
	dlock_spi_end(&spi);
	if (n > 0)
		dlock_claim_returns_bump();
	return n;
}
