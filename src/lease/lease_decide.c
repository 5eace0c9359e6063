/*-------------------------------------------------------------------------
 *
 * lease_decide.c
 *		The holder's calls on its leases: release (freeing the key, or
 *		handing it over), renew and validate one holding, release every
 *		lease of a holder, and free a key whoever holds it.  Acquiring is
 *		lease_grant.c's and lease_acquire.c's.
 *
 * One row per key.  A free key keeps its row (holder NULL) so that steady
 * churn on a fixed set of keys is a chain of HOT updates: only "key" is
 * indexed, and no update touches it.  Rows idle for longer than
 * dlock.idle_key_lifetime are deleted by the sweeps of maint_sweep.c, which
 * grants also run now and then.
 *
 * Every read and write of dlock.lease goes through lease_store.c.
 *
 * Protocol: every write happens under the lock of the holding
 * (base_keylock.c), and every decision is taken on the latest committed row
 * read after that lock was granted.  Release, renew and validate, which
 * mostly come from the holder, take the lock first and read once (an
 * acquire reads before: lease_grant.c).
 *
 * Locks (issue 35).  A lease's holding is guarded by its key's lock; a
 * semaphore's or shared leases' holding by its slot's own lock
 * (dlock_key_for_slot): renewal and release take it in exclusive mode,
 * the fence in share mode, to the transaction's end, and none takes the
 * key's lock, so one holder's open fence makes no other holder wait (the
 * grants' side: lease_grant.c, "Locks").
 *
 * Hand-over.  A release (or release_all, force_release) in a transaction
 * of its own that frees a key with a waiter at the head of its queue
 * grants the lease to that waiter in the same write, with a new token,
 * instead of freeing it: the hand-off then costs one commit, not a
 * release commit followed by the waiter's own (lease_handover.c).  Leases only:
 * a semaphore's freed slot goes to its head waiter when it is woken at
 * the release's commit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "base/base.h"
#include "lease/lease_int.h"
#include "wait/wait.h"
#include "lease/lease.h"

/* the watch family's, set at load (lease.h) */
const DlockLeaseEvents *dlock_lease_events = NULL;

/* ---- reading a holder's row under its lock ---- */

/* ours, live, and (if a token is given) exactly that grant */
static bool
lease_held_by(const DlockLease *l, text *holder, Oid role, TimestampTz now,
			  bool has_token, int64 token)
{
	return dlock_lease_live(l, now) && dlock_lease_is_ours(l, holder, role) &&
		(!has_token || l->token == token);
}

/* every version dlock_lease_store_scan_pending passes, kept (fetch_key) */
typedef struct RowArray
{
	DlockLease *ls;
	int			n;
	int			size;
} RowArray;

static void
add_row(const DlockLease *l, void *arg)
{
	RowArray   *a = arg;

	if (a->n == a->size)
	{
		a->size *= 2;
		a->ls = repalloc(a->ls, sizeof(DlockLease) * a->size);
	}
	a->ls[a->n++] = *dlock_lease_copy(l);
}

/*
 * Every committed row of key and every version another open transaction
 * is writing (dlock_lease_store_scan_pending), in *ls; their number in
 * *n.  Returns a row another open transaction is writing, if one is
 * (only among rows of slot, when slot >= 0), else NULL.
 */
static DlockLease *
fetch_key(DlockStore *s, text *key, int slot, DlockLease **ls, int *n)
{
	RowArray	a;

	a.size = 4;
	a.n = 0;
	a.ls = palloc(sizeof(DlockLease) * a.size);
	dlock_lease_store_scan_pending(s, key, add_row, &a);
	*ls = a.ls;
	*n = a.n;
	for (int i = 0; i < *n; i++)
		if (TransactionIdIsValid((*ls)[i].changing) &&
			(slot < 0 || (*ls)[i].slot == slot))
			return &(*ls)[i];
	return NULL;
}

/*
 * Read key's rows (fetch_key) under the lock kl (held in mode), once no
 * other transaction is writing them (those of slot only, when slot >= 0).
 * A bulk release gives each lock back as soon as it has written (see
 * dlock_lease_release_all), and a grant of a semaphore's slot gives the
 * key lock back at once (lease_grant.c), so a row can carry
 * another transaction's uncommitted write although the lock is free:
 * that transaction is waited for, without the lock (so that it can take
 * its next keys), as a holder of the lock would have been.
 */
static void
fetch_settled(DlockStore *s, text *key, int slot, const DlockKeyLock *kl,
			  LOCKMODE mode, DlockLease **ls, int *n)
{
	for (;;)
	{
		DlockLease *busy = fetch_key(s, key, slot, ls, n);

		if (busy == NULL)
			return;
		dlock_key_unlock(kl, mode);
		XactLockTableWait(busy->changing, s->rel, &busy->tid, XLTW_None);
		dlock_key_lock(kl, mode);
	}
}

/* What release, renew and validate look for among a key's rows. */
typedef struct HeldScan
{
	DlockLeaseKey k;			/* the key and its lock tag */
	text	   *holder;			/* the caller's holding: holder, role, */
	Oid			role;
	bool		has_token;		/* and token, if given */
	int64		token;
	TimestampTz now;
	int			slot;			/* writes in progress waited for: of this
								 * slot, or -1 none */
	DlockLease *held;			/* the holding found, or NULL */
	TransactionId busy;			/* a write in progress of slot */
	ItemPointerData busy_tid;
} HeldScan;

static void
held_scan_row(const DlockLease *l, void *arg)
{
	HeldScan   *h = arg;

	if (TransactionIdIsValid(l->changing) && l->slot == h->slot &&
		!TransactionIdIsValid(h->busy))
	{
		h->busy = l->changing;
		h->busy_tid = l->tid;
	}
	if (!l->uncommitted && h->held == NULL &&
		lease_held_by(l, h->holder, h->role, h->now, h->has_token, h->token))
		h->held = dlock_lease_copy(l);
}

/* one pass over the key's rows for *h (slot: see HeldScan) */
static void
held_scan(DlockStore *s, HeldScan *h, int slot)
{
	h->now = GetCurrentTimestamp();
	h->slot = slot;
	h->held = NULL;
	h->busy = InvalidTransactionId;
	dlock_lease_store_scan_pending(s, h->k.key, held_scan_row, h);
}

/*
 * The lock that guards a holding: a lease's is its key lock; a
 * semaphore's or shared leases' holder has its slot's own (so that one
 * holder's fence, renewal or release makes no other holder wait).
 */
static DlockKeyLock
holding_lock(const DlockLeaseKey *k, const DlockLease *l)
{
	if (l->slots == 1)
		return k->lock;
	return dlock_lease_slot_lock(k, l->slot);
}

/*
 * Release, renew and validate share one shape: the lock of the holding,
 * then the decision on the latest row of the holder.  The holder's row is
 * read first, without a lock, to know which lock guards it (the key's
 * for a lease, its slot's otherwise) and to say "no" without waiting;
 * only the holder waits for the lock (so that a fenced transaction
 * finishes first).  Under the lock the row is read again once no other
 * transaction is writing it: a bulk release gives each lock back as soon
 * as it has written (see dlock_lease_release_all), so a row can carry
 * another transaction's uncommitted write although the lock is free; that
 * transaction is waited for without the lock, as a holder of the lock
 * would have been.  Returns true with that lock held (in *kl) and *l
 * filled in when the holder holds the lease; false with the lock given
 * back otherwise.
 */
static bool
lock_held_lease(DlockStore *s, const DlockLeaseKey *k, text *holder, Oid role,
				bool has_token, int64 token, LOCKMODE mode, DlockLease *l,
				TimestampTz *now, DlockKeyLock *kl)
{
	HeldScan	h;

	h.k = *k;
	h.holder = holder;
	h.role = role;
	h.has_token = has_token;
	h.token = token;
	for (;;)
	{
		held_scan(s, &h, -1);
		if (h.held == NULL)
			return false;
		*l = *h.held;
		*kl = holding_lock(&h.k, l);
		if (!dlock_key_trylock(kl, mode))
			dlock_key_lock(kl, mode);
		for (;;)
		{
			held_scan(s, &h, l->slot);
			if (!TransactionIdIsValid(h.busy))
				break;
			dlock_key_unlock(kl, mode);
			XactLockTableWait(h.busy, s->rel, &h.busy_tid, XLTW_None);
			dlock_key_lock(kl, mode);
		}
		*now = h.now;
		if (h.held != NULL && h.held->slot == l->slot &&
			(h.held->slots == 1) == (l->slots == 1))
		{
			*l = *h.held;
			return true;
		}
		dlock_lease_give_back_key(kl, mode);
		/* taken over, and granted again in another slot meanwhile */
		if (h.held == NULL)
			return false;
	}
}

bool
dlock_lease_release(text *key, text *holder, bool has_token, int64 token)
{
	DlockLeaseKey k = dlock_lease_key(key);
	DlockStore	s;
	DlockLease	l;
	DlockKeyLock hl;
	TimestampTz now;
	bool		ok;

	dlock_release_async_begin();
	dlock_lease_store_open(&s);
	ok = lock_held_lease(&s, &k, holder, GetUserId(), has_token, token,
						 ExclusiveLock, &l, &now, &hl);
	if (ok)
		dlock_lease_free_or_hand_over(&s, &k, &l, now, DLOCK_END_RELEASED);
	dlock_store_close(&s);
	if (ok)
		dlock_release_async_end();
	return ok;
}

bool
dlock_lease_renew(text *key, text *holder, int64 ttl_us, bool has_token,
				  int64 token)
{
	DlockLeaseKey k = dlock_lease_key(key);
	DlockStore	s;
	DlockLease	l;
	DlockKeyLock hl;
	TimestampTz now;
	bool		ok;

	dlock_lease_store_open(&s);
	ok = lock_held_lease(&s, &k, holder, GetUserId(), has_token, token,
						 ExclusiveLock, &l, &now, &hl);
	if (ok)
	{
		if (ttl_us < 0)
			ttl_us = l.ttl_us;
		dlock_lease_store_extend(&s, key, &l, ttl_us, now + ttl_us);
		/* the lock is kept to the end: the key's waiters wake then */
		dlock_xact_note_key(&k.lock);
	}
	dlock_store_close(&s);
	return ok;
}

/*
 * True when holder holds key with exactly this token.  The share lock it
 * keeps to the end of the transaction is the fence: no release, renewal
 * or takeover of this holding can commit before this transaction ends.
 * Of a semaphore or shared leases, the lock is the holder's slot's: the
 * other holders renew, release and fence theirs meanwhile.
 */
bool
dlock_lease_validate(text *key, text *holder, int64 token)
{
	DlockLeaseKey k = dlock_lease_key(key);
	DlockStore	s;
	DlockLease	l;
	DlockKeyLock hl;
	TimestampTz now;
	bool		ok;

	dlock_lease_store_open(&s);
	ok = lock_held_lease(&s, &k, holder, GetUserId(), true, token, ShareLock,
						 &l, &now, &hl);
	if (ok)
	{
		dlock_xact_note_key(&k.lock);
		/* for the guard (src/guard/): this transaction fenced key */
		dlock_fence_note_key(key, token);
	}
	else
		dlock_count(DLOCK_STAT_VALIDATE_FAIL, 1);
	dlock_store_close(&s);
	return ok;
}

/*
 * Free every live lease of this holder and role; returns how many.
 *
 * However many: each key is locked, its lease freed (or handed over), and
 * its lock given back at once, rather than kept to the end of the
 * transaction as every other write keeps it.  Holding thousands of key
 * locks would fill the shared lock table (max_locks_per_transaction per
 * connection) and fail with "out of shared memory".  The freed row keeps
 * the key taken meanwhile: it carries this transaction's uncommitted
 * update, which every later reader under the key lock waits for, or
 * (an acquire) counts as the key being locked (fetch_settled, and
 * lease_grant.c).  The keys are read a chunk at a time, in key
 * order, so that two of these calls cannot deadlock and memory stays
 * bounded.
 */
#define RELEASE_ALL_CHUNK	1000

int64
dlock_lease_release_all(text *holder)
{
	DlockSpi	spi;
	DlockStore	s;
	MemoryContext chunk_cxt;
	MemoryContext old;
	text	   *after = cstring_to_text("");
	int64		freed = 0;

	dlock_release_async_begin();
	dlock_spi_begin(&spi);
	dlock_lease_store_open(&s);
	chunk_cxt = AllocSetContextCreate(CurrentMemoryContext,
									  "dlock_release_all chunk",
									  ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		uint64		n;
		text	  **keys;

		old = MemoryContextSwitchTo(chunk_cxt);
		keys = dlock_lease_store_holder_keys(holder, spi.caller, after,
											 RELEASE_ALL_CHUNK, &n);
		for (uint64 i = 0; i < n; i++)
		{
			DlockLeaseKey k = dlock_lease_key(keys[i]);
			DlockLease	l;
			TimestampTz now;
			DlockKeyLock hl;

			CHECK_FOR_INTERRUPTS();
			if (lock_held_lease(&s, &k, holder, spi.caller, false, 0,
								ExclusiveLock, &l, &now, &hl))
			{
				dlock_lease_free_or_hand_over(&s, &k, &l, now,
											  DLOCK_END_RELEASED_ALL);
				/* the uncommitted row keeps the key: see above */
				dlock_key_unlock(&hl, ExclusiveLock);
				freed++;
			}
		}
		MemoryContextSwitchTo(old);
		if (n < RELEASE_ALL_CHUNK)
			break;
		after = DatumGetTextPCopy(PointerGetDatum(keys[n - 1]));
		MemoryContextReset(chunk_cxt);
	}
	MemoryContextDelete(chunk_cxt);
	dlock_store_close(&s);
	dlock_spi_end(&spi);
	if (freed > 0)
		dlock_release_async_end();
	return freed;
}

/*
 * Take the slot locks of the live holders of a semaphore or shared leases
 * that are not taken yet (waiting for their fences, renewals and
 * releases); true when any was.  locked[]: the slots already taken.
 */
static bool
lock_live_slots(const DlockLeaseKey *k, const DlockLease *ls, int n,
				TimestampTz now, bool *locked)
{
	bool		took = false;

	for (int i = 0; i < n; i++)
	{
		DlockKeyLock sl;

		if (ls[i].slots == 1 || !dlock_lease_live(&ls[i], now) ||
			ls[i].slot < 0 || ls[i].slot >= DLOCK_MAX_SLOTS ||
			locked[ls[i].slot])
			continue;
		sl = dlock_lease_slot_lock(k, ls[i].slot);
		dlock_key_lock(&sl, ExclusiveLock);
		locked[ls[i].slot] = true;
		took = true;
	}
	return took;
}

/* Operators: free a live lease (every slot of a semaphore) whoever holds it. */
bool
dlock_lease_force_release(text *key)
{
	DlockLeaseKey k = dlock_lease_key(key);
	DlockStore	s;
	DlockLease *ls;
	int			n;
	TimestampTz now;
	bool		ok = false;
	bool	   *locked = palloc0(sizeof(bool) * DLOCK_MAX_SLOTS);

	dlock_lease_store_open(&s);
	dlock_key_lock(&k.lock, ExclusiveLock);
	/* no grant meanwhile (the key lock); the holders' own locks too */
	do
	{
		fetch_settled(&s, key, -1, &k.lock, ExclusiveLock, &ls, &n);
		now = GetCurrentTimestamp();
	} while (lock_live_slots(&k, ls, n, now, locked));
	/* a semaphore: all of its holders */
	for (int i = 0; i < n; i++)
	{
		if (!dlock_lease_live(&ls[i], now))
			continue;
		dlock_lease_free_or_hand_over(&s, &k, &ls[i], now,
									  DLOCK_END_FORCE_RELEASED);
		ok = true;
	}
	if (!ok)
		dlock_lease_give_back_key(&k.lock, ExclusiveLock);
	dlock_store_close(&s);
	return ok;
}
