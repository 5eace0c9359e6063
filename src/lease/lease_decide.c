/*-------------------------------------------------------------------------
 *
 * lease_decide.c
 *		The lease decisions: granting, extending, freeing and validating
 *		one key's lease, releasing a holder's leases, and cleanup.
 *
 * One row per key.  A free key keeps its row (holder NULL) so that steady
 * churn on a fixed set of keys is a chain of HOT updates: only "key" is
 * indexed, and no update touches it.  Rows idle for longer than
 * dlock.idle_key_lifetime are deleted by the sweeps of maint_sweep.c, which
 * grants also run now and then.
 *
 * Every read and write of dlock.lease goes through lease_store.c.
 *
 * Protocol: every write happens under the key's heavyweight lock
 * (base_keylock.c), and every decision is taken on the latest committed row
 * read after that lock was granted.  An acquire reads before taking the
 * lock, so that a failed acquire (someone else's live lease) answers at
 * once and takes no lock; release, renew and validate, which mostly come
 * from the holder, take the lock first and read once.
 *
 * Semaphores (issue 26; reading a key's rows: lease_read.c).  An acquire
 * with slots n > 1 admits up to n holders of the key at once, one row
 * each: (key, slot) is the primary key, a lease is slot 0 with slots 1.
 * Every live row of a key has the same slots (an acquire naming other
 * slots is an error).  Shared leases are rows of slots DLOCK_SLOTS_SHARED,
 * taken as a semaphore's (up to DLOCK_MAX_SLOTS of them): a key has live
 * shared rows or a live lease, never both; the queue keeps their turns
 * (lease_acquire.c).
 *
 * Locks (issue 35).  A lease's holding is guarded by its key's lock.  A
 * semaphore's or shared leases' holding is guarded by its slot's own lock
 * (dlock_key_for_slot): renewal and release take it in exclusive mode,
 * the fence in share mode, to the transaction's end, and none takes the
 * key's lock, so one holder's open fence makes no other holder wait.  A
 * grant of a slot takes the key's lock for its decision only: under it,
 * it reads every row of the key with the writes other open transactions
 * have in progress (a dirty read, which counts them as taken), takes the
 * free slot's lock without waiting (a slot whose lock is held, a fenced
 * holder that ran out, is stepped over), writes its row and gives the
 * key's lock back; its uncommitted row is what every later decision sees.
 * A lease grant keeps the key's lock to the end, as before, and first
 * takes the slot lock of every expired holder it takes over.
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

/* ---- decisions ---- */

/* ours, live, and (if a token is given) exactly that grant */
static bool
lease_held_by(const DlockLease *l, text *holder, Oid role, TimestampTz now,
			  bool has_token, int64 token)
{
	return dlock_lease_live(l, now) && dlock_lease_is_ours(l, holder, role) &&
		(!has_token || l->token == token);
}

static DlockKeyLock
lease_keylock(text *key)
{
	return dlock_key_for_text(DLOCK_CLASS_LEASE, VARDATA_ANY(key),
							  VARSIZE_ANY_EXHDR(key));
}

/*
 * Give back a key lock taken without writing anything.  A waiter at the
 * head of the key's queue may have found the lock taken at that moment
 * (DLOCK_ACQ_LOCKED); it is woken to try again rather than sleep until
 * its next timed wake-up, since no commit will wake it.
 */
static void
give_back_key(const DlockKeyLock *kl, LOCKMODE mode)
{
	dlock_key_unlock(kl, mode);
	(void) dlock_wait_wake_key(kl->hash);
}

/* the watch family's, set at load (lease.h) */
const DlockLeaseEvents *dlock_lease_events = NULL;

/*
 * Tell whoever listens (dlock_lease_events: the key's watchers) of a new
 * grant, and first of
 * what it replaced, the row read as *old: a lease still held there had run
 * out, and its expiry is reported (a takeover); a hand-over grant
 * abandoned there, that dlock's worker has not freed yet, is freed now,
 * a release.
 */
static void
watch_grant(text *key, const DlockLease *old, text *holder, Oid role,
			int64 token, TimestampTz expires_at)
{
	const DlockLeaseEvents *ev = dlock_lease_events;
	DlockGrantCause cause = DLOCK_CAUSE_ACQUIRE;

	if (ev == NULL)
		return;
	if (old->held)
	{
		ev->expired(key, old->holder, old->owner, old->token,
					old->expires_at);
		cause = DLOCK_CAUSE_TAKEOVER;
	}
	if (old->abandoned_by != NULL)
		ev->abandoned(key, old->abandoned_by, old->abandoned_owner,
					  old->token, old->expires_at);
	ev->granted(key, cause, holder, role, token, expires_at);
}

/*
 * The end of an acquire that decided nothing: give the key lock back (and
 * wake the key's head, give_back_key), close the store, and answer res.
 */
static DlockAcquireResult
decline(DlockStore *s, DlockKeyLock *kl, DlockAcquireResult res)
{
	give_back_key(kl, ExclusiveLock);
	dlock_store_close(s);
	return res;
}

/* Give back the lock of key's slot, taken by the read that found it free. */
static void
unlock_slot(text *key, int slot)
{
	DlockKeyLock sl = dlock_key_for_slot(VARDATA_ANY(key),
										 VARSIZE_ANY_EXHDR(key), slot);

	dlock_key_unlock(&sl, ExclusiveLock);
}

/*
 * Grant the place read as *l (free, or run out) to holder with a new
 * token: the row written, the key's watchers told (watch_grant).
 */
static DlockAcquireResult
grant(DlockStore *s, text *key, DlockLease *l, text *holder, Oid role,
	  int64 ttl_us, TimestampTz now, TimestampTz expires_at, int64 *token)
{
	*token = dlock_next_token();
	dlock_lease_store_grant(s, key, l, holder, role, *token, ttl_us,
							now, expires_at);
	watch_grant(key, l, holder, role, *token, expires_at);
	return l->held ? DLOCK_ACQ_TAKEOVER : DLOCK_ACQ_GRANTED;
}

/*
 * A lease's one row read first without the key lock: a busy key, or one
 * whose queue comes first, answers at once, taking nothing (true, with
 * *res and *expires_at set and the store closed).
 */
static bool
answer_unlocked(DlockStore *s, text *key, text *holder, Oid role,
				bool queue_blocks, TimestampTz *expires_at,
				DlockAcquireResult *res)
{
	DlockLease	l;
	TimestampTz now;
	TimestampTz busy_until;
	bool		changing;
	DlockKeyState st;

	st = dlock_lease_read_key(s, key, holder, role, 1, false, &l,
							  &now, &busy_until, &changing);
	if (st != DLOCK_KEY_FULL && !(queue_blocks && st != DLOCK_KEY_OURS))
		return false;
	*expires_at = busy_until;
	dlock_store_close(s);
	*res = st == DLOCK_KEY_FULL ? DLOCK_ACQ_BUSY : DLOCK_ACQ_QUEUED;
	return true;
}

/*
 * One attempt to acquire; never waits.  See DlockAcquireResult.
 *
 * An acquire first reads without the key lock, so that a failed acquire
 * (someone else's live lease, or no free slot) answers at once and takes
 * no lock.  While waiters queue for the key they come first, also before
 * the holder of a lease that ran out (only a live lease of one's own may
 * be extended past the queue).
 *
 * woken: the caller is a waiter just woken at the head of the key's queue,
 * most likely because the lease was freed; it skips the unlocked read
 * and goes straight for the key lock.  A waiter never holds the key it
 * waits for, so a queue ahead of it always means DLOCK_ACQ_QUEUED.
 */
DlockAcquireResult
dlock_lease_try_acquire(text *key, text *holder, int64 ttl_us, int slots,
						bool queue_blocks, bool woken, int64 *token,
						TimestampTz *expires_at)
{
	DlockKeyLock kl = lease_keylock(key);
	Oid			role = GetUserId();
	DlockStore	s;
	DlockLease	l;
	TimestampTz now;
	TimestampTz busy_until;
	bool		changing;
	DlockKeyState st;
	DlockAcquireResult res;

	if (woken && queue_blocks)
		return DLOCK_ACQ_QUEUED;

	dlock_lease_store_open(&s);
	/*
	 * A lease's one row is read first without the lock (a busy key answers
	 * at once, taking nothing); a semaphore's or shared leases' rows, which
	 * can be many, are read once, under the key lock, which their grants
	 * keep only for the decision.
	 */
	if (!woken && slots == 1 &&
		answer_unlocked(&s, key, holder, role, queue_blocks, expires_at, &res))
		return res;

	/* another open transaction decides on this key: do not wait for it */
	if (!dlock_key_trylock(&kl, ExclusiveLock))
	{
		dlock_store_close(&s);
		return DLOCK_ACQ_LOCKED;
	}

	st = dlock_lease_read_key(&s, key, holder, role, slots, true, &l, &now,
							  &busy_until, &changing);
	if (changing)				/* another transaction writes a row this
								 * decision rests on */
		return decline(&s, &kl, DLOCK_ACQ_LOCKED);
	*expires_at = now + ttl_us;
	if (st == DLOCK_KEY_FULL)
	{
		*expires_at = busy_until;
		return decline(&s, &kl, DLOCK_ACQ_BUSY);
	}
	else if (st == DLOCK_KEY_OURS)
	{
		dlock_lease_store_extend(&s, key, &l, ttl_us, *expires_at);
		*token = l.token;
		res = DLOCK_ACQ_EXTENDED;
		dlock_xact_note_key(&kl);
	}
	else if (queue_blocks)
	{
		/* it ran out between the two reads: the queue still comes first */
		if (slots != 1)
			unlock_slot(key, l.slot);
		return decline(&s, &kl, DLOCK_ACQ_QUEUED);
	}
	else
	{
		res = grant(&s, key, &l, holder, role, ttl_us, now, *expires_at,
					token);
		dlock_xact_note_key(&kl);
	}

	/*
	 * A semaphore's or shared leases' holding is its slot's: the key lock
	 * was only for this decision, which the rows now carry (an uncommitted
	 * write that every later decision counts: lease_read.c).  Given back
	 * at once, so that the other slots stay free to take while this
	 * transaction goes on.  A lease keeps it to the end, as before.
	 */
	if (slots != 1)
		give_back_key(&kl, ExclusiveLock);
	dlock_store_close(&s);
	/* now and then, a grant sweeps idle keys (at its commit: maint_sweep.c) */
	if (res != DLOCK_ACQ_EXTENDED)
		dlock_sweep_maybe();
	return res;
}

/*
 * Every committed row of key and every version another open transaction
 * is writing (dlock_lease_store_fetch_pending), in *ls; their number in
 * *n.  Returns a row another open transaction is writing, if one is
 * (only among rows of slot, when slot >= 0), else NULL.
 */
static DlockLease *
fetch_key(DlockStore *s, text *key, int slot, DlockLease **ls, int *n)
{
	*ls = dlock_lease_store_fetch_pending(s, key, n);
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
 * key lock back at once (dlock_lease_try_acquire), so a row can carry
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

/* one pass over key's rows for *h (slot: see HeldScan) */
static void
held_scan(DlockStore *s, text *key, HeldScan *h, int slot)
{
	h->now = GetCurrentTimestamp();
	h->slot = slot;
	h->held = NULL;
	h->busy = InvalidTransactionId;
	dlock_lease_store_scan_pending(s, key, held_scan_row, h);
}

/*
 * The lock that guards a holding: a lease's is its key lock; a
 * semaphore's or shared leases' holder has its slot's own (so that one
 * holder's fence, renewal or release makes no other holder wait).
 */
static DlockKeyLock
holding_lock(text *key, const DlockLease *l)
{
	if (l->slots == 1)
		return lease_keylock(key);
	return dlock_key_for_slot(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
							  l->slot);
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
lock_held_lease(DlockStore *s, text *key, text *holder, Oid role,
				bool has_token, int64 token, LOCKMODE mode, DlockLease *l,
				TimestampTz *now, DlockKeyLock *kl)
{
	HeldScan	h;

	h.holder = holder;
	h.role = role;
	h.has_token = has_token;
	h.token = token;
	for (;;)
	{
		held_scan(s, key, &h, -1);
		if (h.held == NULL)
			return false;
		*l = *h.held;
		*kl = holding_lock(key, l);
		if (!dlock_key_trylock(kl, mode))
			dlock_key_lock(kl, mode);
		for (;;)
		{
			held_scan(s, key, &h, l->slot);
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
		give_back_key(kl, mode);
		/* taken over, and granted again in another slot meanwhile */
		if (h.held == NULL)
			return false;
	}
}

bool
dlock_lease_release(text *key, text *holder, bool has_token, int64 token)
{
	DlockStore	s;
	DlockLease	l;
	DlockKeyLock hl;
	TimestampTz now;
	bool		ok;

	dlock_release_async_begin();
	dlock_lease_store_open(&s);
	ok = lock_held_lease(&s, key, holder, GetUserId(), has_token, token,
						 ExclusiveLock, &l, &now, &hl);
	if (ok)
	{
		DlockKeyLock kl = lease_keylock(key);

		dlock_lease_free_or_hand_over(&s, key, &l, now, &kl);
	}
	dlock_store_close(&s);
	if (ok)
		dlock_release_async_end();
	return ok;
}

bool
dlock_lease_renew(text *key, text *holder, int64 ttl_us, bool has_token,
				  int64 token)
{
	DlockStore	s;
	DlockLease	l;
	DlockKeyLock hl;
	TimestampTz now;
	bool		ok;

	dlock_lease_store_open(&s);
	ok = lock_held_lease(&s, key, holder, GetUserId(), has_token, token,
						 ExclusiveLock, &l, &now, &hl);
	if (ok)
	{
		DlockKeyLock kl = lease_keylock(key);

		if (ttl_us < 0)
			ttl_us = l.ttl_us;
		dlock_lease_store_extend(&s, key, &l, ttl_us, now + ttl_us);
		/* the lock is kept to the end: the key's waiters wake then */
		dlock_xact_note_key(&kl);
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
	DlockStore	s;
	DlockLease	l;
	DlockKeyLock hl;
	TimestampTz now;
	bool		ok;

	dlock_lease_store_open(&s);
	ok = lock_held_lease(&s, key, holder, GetUserId(), true, token, ShareLock,
						 &l, &now, &hl);
	if (ok)
	{
		DlockKeyLock kl = lease_keylock(key);

		dlock_xact_note_key(&kl);
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
 * dlock_lease_try_acquire).  The keys are read a chunk at a time, in key
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
			DlockLease	l;
			TimestampTz now;
			DlockKeyLock hl;

			CHECK_FOR_INTERRUPTS();
			if (lock_held_lease(&s, keys[i], holder, spi.caller, false, 0,
								ExclusiveLock, &l, &now, &hl))
			{
				DlockKeyLock kl = lease_keylock(keys[i]);

				dlock_lease_free_or_hand_over(&s, keys[i], &l, now, &kl);
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
lock_live_slots(text *key, const DlockLease *ls, int n, TimestampTz now,
				bool *locked)
{
	bool		took = false;

	for (int i = 0; i < n; i++)
	{
		DlockKeyLock sl;

		if (ls[i].slots == 1 || !dlock_lease_live(&ls[i], now) ||
			ls[i].slot < 0 || ls[i].slot >= DLOCK_MAX_SLOTS ||
			locked[ls[i].slot])
			continue;
		sl = dlock_key_for_slot(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
								ls[i].slot);
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
	DlockKeyLock kl = lease_keylock(key);
	DlockStore	s;
	DlockLease *ls;
	int			n;
	TimestampTz now;
	bool		ok = false;
	bool	   *locked = palloc0(sizeof(bool) * DLOCK_MAX_SLOTS);

	dlock_lease_store_open(&s);
	dlock_key_lock(&kl, ExclusiveLock);
	/* no grant meanwhile (the key lock); the holders' own locks too */
	do
	{
		fetch_settled(&s, key, -1, &kl, ExclusiveLock, &ls, &n);
		now = GetCurrentTimestamp();
	} while (lock_live_slots(key, ls, n, now, locked));
	/* a semaphore: all of its holders */
	for (int i = 0; i < n; i++)
	{
		if (!dlock_lease_live(&ls[i], now))
			continue;
		dlock_lease_free_or_hand_over(&s, key, &ls[i], now, &kl);
		ok = true;
	}
	if (!ok)
		give_back_key(&kl, ExclusiveLock);
	dlock_store_close(&s);
	return ok;
}
