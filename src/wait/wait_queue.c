/*-------------------------------------------------------------------------
 *
 * wait_queue.c
 *		Blocking acquires: a FIFO queue per key in shared memory, and
 *		sleeping on the backend's latch (wait_sleep.c) until a release
 *		commits, the lease runs out, or the wait does.
 *
 * Each waiting backend has a slot with the key's hash and a ticket drawn
 * in arrival order.  Only the waiter with the lowest ticket for a key (the
 * head) may take the key; every other acquire of that key, waiting or not,
 * finds it taken while the queue is not empty, so a new arrival never
 * jumps the queue.  The head is woken by setting its latch:
 *
 *  - when a transaction that wrote or validated the key ends (lease_xact.c calls
 *    dlock_wait_wake_key after the transaction's locks are gone), so a
 *    release wakes the head when it commits, and a rolled-back release
 *    wakes it only to find the lease still held;
 *  - by the head that leaves the queue without the key (wait ran out,
 *    query cancelled), for the next one.
 *  - by COMMIT PREPARED and ROLLBACK PREPARED (lease_xact.c), which wake the head
 *    of every queue in the database: the prepared transaction's keys are
 *    not known there;
 *  - by the rollback of a subtransaction that locked a key (lease_xact.c).
 * A waiter also wakes by itself when the lease it waits on expires, and
 * at the latest every dlock.safety_wake (default one second) as a safety
 * net; the tests run with that set very long, so nothing depends on it.
 *
 * Hand-off.  A release that finds a head waiter which can take a grant
 * (one waiting in a single-statement transaction) grants the lease to it
 * in its own transaction, rather than freeing the key and letting the
 * woken waiter write a grant of its own: one commit per hand-off instead
 * of two.  The offer goes through the waiter's slot:
 *
 *	NONE ----(release offers: lease_handover.c writes the grant)----> OFFERED
 *	OFFERED --(the releaser's pre-commit: waiter still here)--> COMMITTING
 *	COMMITTING --(the releaser's commit)--> GRANTED (token, commit LSN)
 *	OFFERED / COMMITTING --(the releaser's abort)--> NONE
 *
 * Every change wakes the waiter.  A GRANTED waiter flushes the WAL up to
 * the releaser's commit (a no-op when the releaser flushed it) and
 * returns the token; it never writes.  A waiter that leaves while OFFERED
 * (its wait ran out, or it was cancelled) withdraws: the releaser finds
 * its slot gone at pre-commit and frees the key instead.  COMMITTING lasts
 * while the releaser writes its commit record (and waits for synchronous
 * standbys, if it does); a waiter whose wait runs out then waits for the
 * outcome, one that leaves on an error or its exit does not (see
 * dlock_wait_leave): its caller abandons a grant that committed
 * (lease_acquire.c; lease_xact.c, dlock_abandon).
 *
 * Without shared memory (dlock not preloaded), waits poll every
 * dlock.poll_interval milliseconds instead; there is no queue.
 *
 * A backend that dies while waiting: a FATAL exit clears its slot in a
 * before_shmem_exit callback (lease_acquire.c's, which abandons a grant
 * that came meanwhile); a crash resets all of shared memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/proc.h"
#include "utils/builtins.h"

#include "base/base.h"
#include "compat.h"
#include "wait/wait.h"
#include "wait/wait_int.h"

/* a hand-off offered to a waiter (see "Hand-off" above) */
typedef enum DlockOfferState
{
	DLOCK_OFFER_NONE = 0,
	DLOCK_OFFER_OFFERED,
	DLOCK_OFFER_COMMITTING,
	DLOCK_OFFER_GRANTED
} DlockOfferState;

/* one waiting backend */
typedef struct DlockWaitSlot
{
	bool		in_use;
	int			pid;
	int			procno;			/* pgprocno, for its latch */
	uint64		key_hash;
	uint64		ticket;			/* arrival order */
	TimestampTz since;
	Oid			dboid;
	Oid			owner;			/* the waiting role */
	int64		ttl_us;			/* the ttl it asked for */
	int			slots;			/* and the slots (1: a lease) */
	bool		takes_grant;	/* a release may grant the lease to it */
	bool		claim;			/* a waiting claim (see "Claim waiters") */
	bool		woken;			/* claim: woken, its attempt still to come */
	DlockOfferState offer;		/* see "Hand-off" above */
	int64		grant_token;	/* GRANTED: the lease's token, */
	TimestampTz grant_expires;	/* its expiry */
	XLogRecPtr	grant_lsn;		/* and the end of the granting commit */
	char		key[DLOCK_MAX_KEY_BYTES + 1];
	char		holder[DLOCK_MAX_HOLDER_BYTES + 1];
} DlockWaitSlot;

/* the queues of all keys: one slot per backend, in shared memory */
typedef struct DlockWaitQueue
{
	LWLock	   *lock;			/* protects the slots and next_ticket */
	uint64		next_ticket;
	pg_atomic_uint32 nwaiters;	/* slots in use; read without the lock */
	int			nslots;
	DlockWaitSlot slots[FLEXIBLE_ARRAY_MEMBER];
} DlockWaitQueue;

#define DLOCK_WAIT_TRANCHE "dlock"

/* NULL without shared memory (dlock not preloaded): waits poll */
static DlockWaitQueue *waitq = NULL;

static int	my_slot = -1;

static void
leave_slot_locked(void)
{
	waitq->slots[my_slot].in_use = false;
	pg_atomic_fetch_sub_u32(&waitq->nwaiters, 1);
	my_slot = -1;
}

/* copy out this waiter's committed grant, if it has one; under the lock */
static bool
take_grant_locked(DlockGrant *g)
{
	DlockWaitSlot *s = &waitq->slots[my_slot];

	if (s->offer != DLOCK_OFFER_GRANTED)
		return false;
	g->token = s->grant_token;
	g->expires_at = s->grant_expires;
	g->lsn = s->grant_lsn;
	s->offer = DLOCK_OFFER_NONE;
	return true;
}

/* the head waiter's slot for a key, or -1; caller holds the LWLock */
static int
queue_head_locked(uint64 hash)
{
	int			head = -1;

	for (int i = 0; i < waitq->nslots; i++)
	{
		DlockWaitSlot *s = &waitq->slots[i];

		if (s->in_use && s->key_hash == hash && s->dboid == MyDatabaseId &&
			(head < 0 || s->ticket < waitq->slots[head].ticket))
			head = i;
	}
	return head;
}

static bool
wake_head_locked(uint64 hash)
{
	int			head = queue_head_locked(hash);

	/* a waiter giving back a key lock of its own need not wake itself */
	if (head < 0 || head == my_slot)
		return false;
	SetLatch(&ProcGlobal->allProcs[waitq->slots[head].procno].procLatch);
	return true;
}

/*
 * Wake the first waiting claim of a claim queue that is not woken yet
 * (see "Claim waiters"); true if one was.  Caller holds the LWLock in
 * exclusive mode.
 */
static bool
wake_first_locked(uint64 hash)
{
	int			first = -1;

	for (int i = 0; i < waitq->nslots; i++)
	{
		DlockWaitSlot *s = &waitq->slots[i];

		if (s->in_use && s->claim && !s->woken && s->key_hash == hash &&
			s->dboid == MyDatabaseId &&
			(first < 0 || s->ticket < waitq->slots[first].ticket))
			first = i;
	}
	if (first < 0)
		return false;
	waitq->slots[first].woken = true;
	SetLatch(&ProcGlobal->allProcs[waitq->slots[first].procno].procLatch);
	return true;
}

/*
 * Run wake (wake_head_locked or wake_first_locked) for the queue of hash
 * under the queue's lock in mode, unless nobody waits at all; true if it
 * woke a waiter.
 */
static bool
wake_under_lock(uint64 hash, LWLockMode mode, bool (*wake) (uint64 hash))
{
	bool		woke;

	if (waitq == NULL || pg_atomic_read_u32(&waitq->nwaiters) == 0)
		return false;
	LWLockAcquire(waitq->lock, mode);
	woke = wake(hash);
	LWLockRelease(waitq->lock);
	return woke;
}

/* Wake the head waiter of a key, if anyone waits for it; true if woken. */
bool
dlock_wait_wake_key(uint64 hash)
{
	return wake_under_lock(hash, LW_SHARED, wake_head_locked);
}

/*
 * Wake the head of every queue in this database.  For the ends of prepared
 * transactions, whose keys are not known to the backend that finishes
 * them; a head woken for nothing tries once and sleeps again.
 */
void
dlock_wait_wake_all_heads(void)
{
	if (waitq == NULL || pg_atomic_read_u32(&waitq->nwaiters) == 0)
		return;
	LWLockAcquire(waitq->lock, LW_EXCLUSIVE);
	for (int i = 0; i < waitq->nslots; i++)
	{
		DlockWaitSlot *s = &waitq->slots[i];

		if (s->in_use && s->dboid == MyDatabaseId &&
			queue_head_locked(s->key_hash) == i)
		{
			if (s->claim)
				wake_first_locked(s->key_hash);
			else
				SetLatch(&ProcGlobal->allProcs[s->procno].procLatch);
		}
	}
	LWLockRelease(waitq->lock);
}

/*
 * True when waiters queue for this key and this backend is not their head.
 * *slots: the slots the key's waiters asked for (they all agree: see
 * dlock_wait_enqueue), or 0 when nobody waits for it.
 */
bool
dlock_wait_queue_blocks(uint64 hash, int *slots)
{
	int			head;

	*slots = 0;
	if (waitq == NULL || pg_atomic_read_u32(&waitq->nwaiters) == 0)
		return false;
	LWLockAcquire(waitq->lock, LW_SHARED);
	head = queue_head_locked(hash);
	if (head >= 0)
		*slots = waitq->slots[head].slots;
	LWLockRelease(waitq->lock);
	return head >= 0 && head != my_slot;
}

/*
 * Join the queue for a key.  takes_grant: a release may grant the lease
 * to this waiter in the release's own transaction (see "Hand-off").
 * Without shared memory there is no queue.  Every waiter of a key asks for
 * the same slots (or for a lease and shared leases): when another waiter
 * of the key asked for other slots, this one does not join, and their
 * number comes back (else 0).  The caller leaves the queue on every path,
 * an error or the backend's exit too (dlock_wait_leave).
 */
int
dlock_wait_enqueue(uint64 hash, text *key, text *holder, int64 ttl_us,
				   int slots, bool takes_grant)
{
	DlockWaitSlot *s = NULL;
	int			other = 0;

	if (waitq == NULL)
		return 0;
	Assert(my_slot < 0);

	LWLockAcquire(waitq->lock, LW_EXCLUSIVE);
	for (int i = 0; i < waitq->nslots; i++)
	{
		DlockWaitSlot *w = &waitq->slots[i];

		if (w->in_use && w->key_hash == hash && w->dboid == MyDatabaseId &&
			!dlock_slots_compatible(w->slots, slots))
		{
			other = w->slots;
			s = NULL;
			break;
		}
		if (!w->in_use && s == NULL)
			s = w;
	}
	if (s != NULL)
	{
		my_slot = s - waitq->slots;
		s->in_use = true;
		s->pid = MyProcPid;
		s->procno = dlock_my_procno();
		s->key_hash = hash;
		s->ticket = waitq->next_ticket++;
		s->since = GetCurrentTimestamp();
		s->dboid = MyDatabaseId;
		s->owner = GetUserId();
		s->ttl_us = ttl_us;
		s->slots = slots;
		s->takes_grant = takes_grant;
		s->claim = false;
		s->woken = false;
		s->offer = DLOCK_OFFER_NONE;
		text_to_cstring_buffer(key, s->key, sizeof(s->key));
		text_to_cstring_buffer(holder, s->holder, sizeof(s->holder));
		pg_atomic_fetch_add_u32(&waitq->nwaiters, 1);
	}
	LWLockRelease(waitq->lock);
	/* no free slot cannot happen (one per backend); then we just poll */
	return other;
}

/* the state of this waiter's offer, read under the lock */
static DlockOfferState
my_offer_state(void)
{
	DlockOfferState st;

	LWLockAcquire(waitq->lock, LW_SHARED);
	st = waitq->slots[my_slot].offer;
	LWLockRelease(waitq->lock);
	return st;
}

/*
 * Wait while a releaser writes the commit record of the grant it offered
 * this waiter; it wakes this backend as soon as it knows the outcome.
 * That takes a WAL flush, or as long as the releaser's commit waits for
 * synchronous standbys.  Interrupts are not taken here, but a cancel or
 * termination request pending ends the wait: the waiter then leaves, and
 * a grant that still commits is abandoned by the releaser (lease_handover.c).
 */
static void
wait_for_commit_outcome(void)
{
	while (my_offer_state() == DLOCK_OFFER_COMMITTING)
	{
		if (QueryCancelPending || ProcDiePending)
			break;
		dlock_sleep_briefly(10L);
	}
}

/*
 * Leave the queue, if in it.  If this backend was the head, the next
 * waiter becomes head and is woken: the key may be free now.
 *
 * Returns true, with the grant in *g, when a release granted the lease to
 * this waiter and committed: the lease is this waiter's now.  An offer not
 * yet committing is withdrawn; one committing is waited for.  for_good: an
 * error or exit, no token will be returned: no wait (the error may be the
 * cancel of that wait; the releaser abandons a grant that commits after
 * the waiter left); a committed grant comes back with its key, holder and
 * role in *g, and the caller abandons it (dlock_abandon, lease_xact.c).
 * Safe while a transaction aborts or the backend exits.
 */
bool
dlock_wait_leave(DlockGrant *g, bool for_good)
{
	DlockWaitSlot *s;
	uint64		hash;
	bool		granted;

	if (waitq == NULL || my_slot < 0)
		return false;
	if (!for_good)
		wait_for_commit_outcome();
	LWLockAcquire(waitq->lock, LW_EXCLUSIVE);
	s = &waitq->slots[my_slot];
	hash = s->key_hash;
	granted = take_grant_locked(g);
	if (granted && for_good)
	{
		strlcpy(g->key, s->key, sizeof(g->key));
		strlcpy(g->holder, s->holder, sizeof(g->holder));
		g->owner = s->owner;
	}
	if (s->claim)
	{
		/* a waiting claim passes on a wake it did not use */
		bool		woken = s->woken;

		leave_slot_locked();
		if (woken)
			wake_first_locked(hash);
	}
	else
	{
		leave_slot_locked();
		if (!granted)
			wake_head_locked(hash);
	}
	LWLockRelease(waitq->lock);
	return granted;
}

/*
 * Whether a release has granted the lease to this waiter and committed
 * (then it leaves with dlock_wait_leave, which hands over the grant).
 * *pending is set while an offer awaits its releaser's commit: the waiter
 * must not try the key itself meanwhile, nor give up.
 */
bool
dlock_wait_granted(bool *pending)
{
	DlockOfferState st;

	*pending = false;
	if (waitq == NULL || my_slot < 0)
		return false;
	st = my_offer_state();
	*pending = (st == DLOCK_OFFER_OFFERED || st == DLOCK_OFFER_COMMITTING);
	return st == DLOCK_OFFER_GRANTED;
}

/* ---- the releaser's side of a hand-off ---- */

/* the offered slot, if its waiter is still the one offered to */
static DlockWaitSlot *
offered_slot_locked(const DlockOffer *o)
{
	DlockWaitSlot *s = &waitq->slots[o->slot];

	return (s->in_use && s->ticket == o->ticket) ? s : NULL;
}

/*
 * Offer the lease of a key this transaction frees to the head of its
 * queue.  True, with the waiter's holder, role and ttl in *o, when the
 * head takes grants and has no offer yet; the caller then writes the
 * grant, fills in o->token and o->expires_at, and keeps *o to the end of
 * its transaction.
 */
bool
dlock_wait_offer(uint64 hash, DlockOffer *o)
{
	int			head;
	bool		ok = false;

	if (waitq == NULL || pg_atomic_read_u32(&waitq->nwaiters) == 0)
		return false;
	LWLockAcquire(waitq->lock, LW_EXCLUSIVE);
	head = queue_head_locked(hash);
	if (head >= 0 && head != my_slot)
	{
		DlockWaitSlot *s = &waitq->slots[head];

		if (s->takes_grant && s->offer == DLOCK_OFFER_NONE)
		{
			s->offer = DLOCK_OFFER_OFFERED;
			o->slot = head;
			o->ticket = s->ticket;
			o->owner = s->owner;
			o->ttl_us = s->ttl_us;
			o->holder = cstring_to_text(s->holder);
			ok = true;
		}
	}
	LWLockRelease(waitq->lock);
	return ok;
}

/*
 * At the releaser's pre-commit.  stands: the grant row is still as it
 * was written.  Returns true when the offer goes on to commit (the waiter
 * is still there and the grant stands); false when the waiter withdrew,
 * or the grant does not stand and the waiter is told so.
 */
bool
dlock_wait_offer_settle(const DlockOffer *o, bool stands)
{
	DlockWaitSlot *s;
	bool		goes_on = false;

	LWLockAcquire(waitq->lock, LW_EXCLUSIVE);
	s = offered_slot_locked(o);
	if (s != NULL && s->offer == DLOCK_OFFER_OFFERED)
	{
		if (stands)
		{
			s->offer = DLOCK_OFFER_COMMITTING;
			goes_on = true;
		}
		else
		{
			s->offer = DLOCK_OFFER_NONE;
			SetLatch(&ProcGlobal->allProcs[s->procno].procLatch);
		}
	}
	LWLockRelease(waitq->lock);
	return goes_on;
}

/*
 * At the releaser's commit or abort: tell the waiter the outcome and wake
 * it.  lsn: the end of the commit record.  Returns true when a committed
 * grant reached its waiter; false when the waiter had left meanwhile (the
 * caller then abandons the grant) or nothing committed.
 */
bool
dlock_wait_offer_end(const DlockOffer *o, bool committed, XLogRecPtr lsn)
{
	DlockWaitSlot *s;
	bool		delivered = false;

	LWLockAcquire(waitq->lock, LW_EXCLUSIVE);
	s = offered_slot_locked(o);
	if (s != NULL && s->offer != DLOCK_OFFER_NONE &&
		s->offer != DLOCK_OFFER_GRANTED)
	{
		if (committed && s->offer == DLOCK_OFFER_COMMITTING)
		{
			s->offer = DLOCK_OFFER_GRANTED;
			s->grant_token = o->token;
			s->grant_expires = o->expires_at;
			s->grant_lsn = lsn;
			delivered = true;
		}
		else
			s->offer = DLOCK_OFFER_NONE;
		SetLatch(&ProcGlobal->allProcs[s->procno].procLatch);
	}
	LWLockRelease(waitq->lock);
	return delivered;
}

/* ---- claim waiters (see "Claim waiters" in wait/README.md) ---- */

/*
 * Join the queue of a claim table (hash: its key lock's hash, class DW)
 * as a waiting claim; label and holder are what dlock_waiters shows.
 * Without shared memory there is no queue.  The caller leaves on every
 * path with dlock_wait_leave_claim (or dlock_wait_leave, on an exit).
 */
void
dlock_wait_join_claim(uint64 hash, text *label, text *holder)
{
	DlockWaitSlot *s = NULL;

	if (waitq == NULL)
		return;
	Assert(my_slot < 0);
	LWLockAcquire(waitq->lock, LW_EXCLUSIVE);
	for (int i = 0; i < waitq->nslots && s == NULL; i++)
		if (!waitq->slots[i].in_use)
			s = &waitq->slots[i];
	if (s != NULL)
	{
		memset(s, 0, offsetof(DlockWaitSlot, key));
		my_slot = s - waitq->slots;
		s->in_use = true;
		s->pid = MyProcPid;
		s->procno = dlock_my_procno();
		s->key_hash = hash;
		s->ticket = waitq->next_ticket++;
		s->since = GetCurrentTimestamp();
		s->dboid = MyDatabaseId;
		s->owner = GetUserId();
		s->slots = 1;
		s->claim = true;
		text_to_cstring_buffer(label, s->key, sizeof(s->key));
		text_to_cstring_buffer(holder, s->holder, sizeof(s->holder));
		pg_atomic_fetch_add_u32(&waitq->nwaiters, 1);
	}
	LWLockRelease(waitq->lock);
}

/*
 * Wake the first waiting claim of a table's queue that is not woken yet;
 * true if one was.  One committed change wakes one waiter: a waiter
 * already woken will make its attempt after this call anyway.
 */
bool
dlock_wait_wake_claim(uint64 hash)
{
	/* exclusive: it marks the waiter woken */
	return wake_under_lock(hash, LW_EXCLUSIVE, wake_first_locked);
}

/*
 * Take this waiting claim's wake, just before an attempt: true when it was
 * woken.  A commit after this call wakes this waiter again.
 */
bool
dlock_wait_take_wake(void)
{
	bool		woken;

	if (waitq == NULL || my_slot < 0)
		return false;
	LWLockAcquire(waitq->lock, LW_EXCLUSIVE);
	woken = waitq->slots[my_slot].woken;
	waitq->slots[my_slot].woken = false;
	LWLockRelease(waitq->lock);
	return woken;
}

/*
 * Whether this waiting claim was woken since its last attempt (its wake
 * stays until it takes it); *head: it is the first of its queue (also
 * without shared memory: then every waiter polls).
 */
bool
dlock_wait_claim_woken(bool *head)
{
	bool		woken;

	*head = true;
	if (waitq == NULL || my_slot < 0)
		return false;
	LWLockAcquire(waitq->lock, LW_SHARED);
	woken = waitq->slots[my_slot].woken;
	*head = queue_head_locked(waitq->slots[my_slot].key_hash) == my_slot;
	LWLockRelease(waitq->lock);
	return woken;
}

/*
 * Leave a claim table's queue, if in it.  A wake not used by an attempt is
 * passed on to the next waiter not woken; chain: wake one more (this
 * waiter claimed a full batch: there may be more rows).  Safe while a
 * transaction aborts or the backend exits.
 */
void
dlock_wait_leave_claim(bool chain)
{
	DlockWaitSlot *s;
	uint64		hash;
	int			wakes;

	if (waitq == NULL || my_slot < 0)
		return;
	LWLockAcquire(waitq->lock, LW_EXCLUSIVE);
	s = &waitq->slots[my_slot];
	hash = s->key_hash;
	wakes = (s->woken ? 1 : 0) + (chain ? 1 : 0);
	leave_slot_locked();
	while (wakes-- > 0)
		wake_first_locked(hash);
	LWLockRelease(waitq->lock);
}

/*
 * Sleep up to timeout_us, or until woken (wait_sleep.c): at most
 * dlock.safety_wake, or without shared memory dlock.poll_interval, since
 * then nobody wakes this waiter; true when woken rather than timed out.
 */
bool
dlock_wait_sleep(int64 timeout_us)
{
	if (waitq == NULL)
	{
		dlock_warn_not_preloaded();
		timeout_us = Min(timeout_us, (int64) dlock_poll_interval_ms * 1000);
	}
	else
		timeout_us = Min(timeout_us, (int64) dlock_safety_wake_ms * 1000);
	return dlock_sleep(timeout_us);
}

/*
 * The waiters of this database, copied out of the queue, with their place
 * in their key's queue (1: the head); returns how many, and none without
 * shared memory.
 */
int
dlock_wait_list(DlockWaiter **out)
{
	int			n = 0;

	*out = NULL;
	if (waitq == NULL)
	{
		dlock_warn_not_preloaded();
		return 0;
	}
	*out = palloc(sizeof(DlockWaiter) * waitq->nslots);
	LWLockAcquire(waitq->lock, LW_SHARED);
	for (int i = 0; i < waitq->nslots; i++)
	{
		DlockWaitSlot *s = &waitq->slots[i];
		DlockWaiter *w = &(*out)[n];

		if (!s->in_use || s->dboid != MyDatabaseId)
			continue;
		w->pid = s->pid;
		w->owner = s->owner;
		w->since = s->since;
		w->position = 1;
		for (int j = 0; j < waitq->nslots; j++)
		{
			DlockWaitSlot *o = &waitq->slots[j];

			if (o->in_use && o->dboid == s->dboid && o->key_hash == s->key_hash &&
				o->ticket < s->ticket)
				w->position++;
		}
		strlcpy(w->key, s->key, sizeof(w->key));
		strlcpy(w->holder, s->holder, sizeof(w->holder));
		n++;
	}
	LWLockRelease(waitq->lock);
	return n;
}

/* ---- shared memory (dlock.c's hooks) ---- */

static Size
waitq_size(void)
{
	return add_size(offsetof(DlockWaitQueue, slots),
					mul_size(MaxBackends, sizeof(DlockWaitSlot)));
}

/* shmem_request_hook */
void
dlock_wait_shmem_request(void)
{
	RequestAddinShmemSpace(waitq_size());
	RequestNamedLWLockTranche(DLOCK_WAIT_TRANCHE, 1);
}

/* shmem_startup_hook, under AddinShmemInitLock */
void
dlock_wait_shmem_startup(void)
{
	bool		found;

	waitq = ShmemInitStruct("dlock wait queue", waitq_size(), &found);
	if (!found)
	{
		memset(waitq, 0, waitq_size());
		waitq->lock = &(GetNamedLWLockTranche(DLOCK_WAIT_TRANCHE))->lock;
		waitq->next_ticket = 1;
		pg_atomic_init_u32(&waitq->nwaiters, 0);
		waitq->nslots = MaxBackends;
	}
}
