/*-------------------------------------------------------------------------
 *
 * lease_grant.c
 *		The acquire decision, with one owner: what one attempt finds on a
 *		key (the one row of a lease, or the rows of a counting semaphore or
 *		of shared leases, issue 26), what it answers (granted, extended,
 *		busy, queued, locked, or an error), and the writes and lock
 *		releases that carry the answer out.  Waiting is the caller's
 *		(lease_acquire.c).
 *
 * An attempt goes in steps, each a function of its own:
 *	1. the key's queue (wait_queue.c): whether waiters queue for the key
 *	   and the attempt is not their head, and the slots they asked for;
 *	2. read_key: every version of the key's rows in one pass
 *	   (dlock_lease_store_scan_pending: the committed rows and the writes
 *	   other open transactions have in progress) into a KeyState: the
 *	   holder's own live row, how many are live or being written, the
 *	   slots they agree on, and the slots free to take;
 *	3. decide: the answer, on the KeyState alone (one function: granted,
 *	   extended, busy, queued, locked, or the error of another kind or of
 *	   other slots);
 *	4. lock_slots: under the key lock, the slot locks the answer rests on,
 *	   taken in one step without waiting (see "Locks" below): a lock held
 *	   by another transaction turns the answer into "locked", or moves a
 *	   semaphore's grant to the next free slot.  An answer that takes no
 *	   place (busy, queued, locked) takes no slot lock;
 *	5. carry_out: the row written (a grant or an extension), then the key
 *	   lock given back when nothing was written or a slot was granted.
 * Shared leases (slots DLOCK_SLOTS_SHARED) are read as a semaphore of
 * DLOCK_MAX_SLOTS slots; live shared leases and a live lease exclude each
 * other.  The key's lock tag is computed once, by the caller
 * (dlock_lease_key), and each slot's when it is first needed.
 *
 * Protocol: every write happens under the key's heavyweight lock
 * (base_keylock.c), and every decision is taken on the latest rows read
 * after that lock was granted.  An acquire of a lease reads its one row
 * before taking the lock, so that a failed acquire (someone else's live
 * lease) answers at once and takes no lock.
 *
 * Semaphores.  An acquire with slots n > 1 admits up to n holders of the
 * key at once, one row each: (key, slot) is the primary key, a lease is
 * slot 0 with slots 1.  Every live row of a key has the same slots (an
 * acquire naming other slots is an error).  Shared leases are rows of
 * slots DLOCK_SLOTS_SHARED, taken as a semaphore's (up to DLOCK_MAX_SLOTS
 * of them): a key has live shared rows or a live lease, never both; the
 * queue keeps their turns (lease_acquire.c).
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
 * A lease grant keeps the key's lock to the end, and first takes the slot
 * lock of every expired holder it takes over.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "lease/lease_int.h"
#include "wait/wait.h"
#include "lease/lease.h"

/* What one attempt asks for, and what it finds on the key (read_key). */
typedef struct KeyState
{
	/* the ask */
	DlockLeaseKey k;			/* the key and its lock tag */
	text	   *holder;			/* the caller, */
	Oid			role;
	int			slots;			/* the slots it asks for */
	int			cap;			/* the slots to take from */
	bool		queue_blocks;	/* waiters queue for the key, not behind it */
	/* the key's rows */
	TimestampTz now;
	TimestampTz busy_until;		/* the first live holder's expiry */
	int			live;			/* committed unexpired holders */
	int			key_slots;		/* the slots they were granted with */
	DlockLease *ours;			/* the caller's committed live row */
	bool		pending;		/* another transaction writes one of them */
	bool		pending_other;	/* ... and grants another kind than asked */
	int			occupied;		/* slots live or written by others */
	bool		used[DLOCK_MAX_SLOTS];	/* those slots */
	DlockLease *idle[DLOCK_MAX_SLOTS];	/* committed rows not live, by slot */
	/* the decision's row: the caller's own, or the place to grant */
	DlockLease	target;
} KeyState;

static char *
slots_text(int slots)
{
	if (slots == DLOCK_SLOTS_SHARED)
		return pstrdup("shared leases");
	return psprintf("slots = %d", slots);
}

/* An acquire naming other slots than the key's holders or waiters. */
void
dlock_slots_mismatch(int key_slots, int asked)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("slots does not match the key's"),
			 errdetail("The key is held or waited for with %s; this acquire asked for %s.",
					   slots_text(key_slots), slots_text(asked)),
			 errhint("Every acquire of a key must name the same slots while anyone holds it or waits for it.")));
}

/*
 * A holder asking for a key it holds itself in the other kind (a shared
 * lease and the lease, issue 35): an error at once, rather than a wait
 * for itself that can only run out while later arrivals queue behind it.
 */
static void
holds_other_kind(text *key, text *holder, int held, int asked)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("holder \"%s\" holds key \"%s\" with %s",
					text_to_cstring(holder), text_to_cstring(key),
					held == DLOCK_SLOTS_SHARED ? "a shared lease" : "the lease"),
			 errdetail("This acquire asked for %s; a holder does not turn one kind into the other.",
					   asked == DLOCK_SLOTS_SHARED ? "a shared lease" : "the lease"),
			 errhint("Release it first, then acquire the key again.")));
}

/* ---- reading the key ---- */

/* one version of the key's rows (dlock_lease_store_scan_pending) */
static void
read_row_into(const DlockLease *l, void *arg)
{
	KeyState   *r = arg;
	int			slot = l->slot;
	bool		live = dlock_lease_live(l, r->now);
	bool		busy = TransactionIdIsValid(l->changing);

	if (slot < 0 || slot >= DLOCK_MAX_SLOTS)
		return;
	if (busy)
	{
		r->pending = true;
		if ((l->uncommitted ? l->held : live) && l->slots != r->slots)
			r->pending_other = true;
	}
	if (!r->used[slot] && (busy || (live && !l->uncommitted)))
	{
		r->used[slot] = true;
		r->occupied++;
	}
	if (l->uncommitted)
		return;
	if (!live)
	{
		r->idle[slot] = dlock_lease_copy(l);
		return;
	}
	r->live++;
	r->key_slots = l->slots;
	if (r->busy_until == 0 || l->expires_at < r->busy_until)
		r->busy_until = l->expires_at;
	if (dlock_lease_is_ours(l, r->holder, r->role))
		r->ours = dlock_lease_copy(l);
}

/*
 * Read every version of the key's rows (committed, and written by other
 * open transactions: dlock_lease_store_scan_pending) into *st, in one
 * pass that keeps only the caller's row and the rows a grant could take.
 */
static void
read_key(DlockStore *s, KeyState *st)
{
	if (st->slots != 1 && !dlock_lease_store_has_slots(s))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("semaphores and shared leases need dlock 0.4's tables"),
				 errhint("Run ALTER EXTENSION dlock UPDATE in this database.")));
	st->now = GetCurrentTimestamp();
	st->busy_until = 0;
	st->live = st->key_slots = st->occupied = 0;
	st->ours = NULL;
	st->pending = st->pending_other = false;
	memset(st->used, 0, sizeof(st->used));
	memset(st->idle, 0, sizeof(st->idle));
	dlock_lease_store_scan_pending(s, st->k.key, read_row_into, st);
}

/* the slot a grant takes: its committed row, or a new one */
static void
fill_target(KeyState *st, int slot)
{
	if (st->idle[slot] != NULL)
		st->target = *st->idle[slot];
	else
	{
		memset(&st->target, 0, sizeof(st->target));
		st->target.slot = slot;
	}
	st->target.slots = st->slots;
}

/* ---- the decision ---- */

/*
 * What an acquire answers on the key's rows in *st: DLOCK_ACQ_EXTENDED
 * (the holder's own live lease or slot, in st->target), DLOCK_ACQ_GRANTED
 * (st->target, with its slot and slots set; found false for a new row;
 * the lowest free slot of a semaphore, which lock_slots may move up),
 * DLOCK_ACQ_BUSY (no room, until st->busy_until at the earliest),
 * DLOCK_ACQ_QUEUED (room, but waiters come first), or DLOCK_ACQ_LOCKED
 * (the answer rests on what another open transaction is writing).
 *
 * An acquire naming other slots than the key's live holders is an error,
 * and so is a holder asking for the lease of a key it holds shared, or
 * the other way round.  While waiters queue for the key they come first,
 * also before the holder of a lease that ran out: only a live lease of
 * one's own may be extended past the queue.
 */
static DlockAcquireResult
decide(KeyState *st)
{
	int			slots = st->slots;
	int			slot = 0;

	if (st->live > 0 && !dlock_slots_compatible(st->key_slots, slots))
		dlock_slots_mismatch(st->key_slots, slots);
	if (st->ours != NULL && st->ours->slots != slots)
		holds_other_kind(st->k.key, st->holder, st->ours->slots, slots);
	/* shared leases and a lease take turns */
	if (st->live > 0 && st->key_slots != slots)
		return DLOCK_ACQ_BUSY;
	if (st->ours != NULL)
	{
		st->target = *st->ours;
		if (TransactionIdIsValid(st->target.changing))
			return DLOCK_ACQ_LOCKED;
		return DLOCK_ACQ_EXTENDED;
	}
	if (st->pending_other || (slots == 1 && st->pending))
		return DLOCK_ACQ_LOCKED;
	if (slots == 1 && st->live > 0)
		return DLOCK_ACQ_BUSY;
	if (slots != 1)
	{
		if (st->occupied >= st->cap)
			return st->pending ? DLOCK_ACQ_LOCKED : DLOCK_ACQ_BUSY;
		while (slot < st->cap && st->used[slot])
			slot++;
		/* taken below the cap, some by rows above it being written */
		if (slot == st->cap)
			return DLOCK_ACQ_LOCKED;
	}
	if (st->queue_blocks)
		return DLOCK_ACQ_QUEUED;
	fill_target(st, slot);
	return DLOCK_ACQ_GRANTED;
}

/* ---- the slot locks it rests on ---- */

/*
 * A grant of the lease takes over the holders whose slots ran out: each
 * of their fences (a slot lock in share mode) must have ended.  True when
 * none is left; their slot locks are kept.
 */
static bool
fences_ended(const KeyState *st)
{
	for (int i = 0; i < DLOCK_MAX_SLOTS; i++)
	{
		const DlockLease *l = st->idle[i];
		DlockKeyLock sl;

		if (l == NULL || !l->held || l->slots == 1)
			continue;
		sl = dlock_lease_slot_lock(&st->k, l->slot);
		if (!dlock_key_trylock(&sl, ExclusiveLock))
			return false;
	}
	return true;
}

/*
 * The lowest slot from first up, below the cap, that no holder uses and
 * no other transaction writes, whose slot lock is taken here without
 * waiting (a slot whose lock is taken is being written or fenced: the
 * next one is tried).  -1: none.
 */
static int
free_slot(const KeyState *st, int first)
{
	for (int i = first; i < st->cap; i++)
	{
		DlockKeyLock sl;

		if (st->used[i])
			continue;
		sl = dlock_lease_slot_lock(&st->k, i);
		if (dlock_key_trylock(&sl, ExclusiveLock))
			return i;
	}
	return -1;
}

/*
 * Under the key lock, the slot locks that the answer res rests on, taken
 * without waiting: the holder's own slot of a semaphore or shared leases
 * that it extends, the slot it is granted, or, for a lease granted, the
 * slots of the expired holders it takes over (fences_ended).  Returns res,
 * or DLOCK_ACQ_LOCKED when a lock it needs is held: the rows carry no
 * write of that holder yet, but it is renewing, releasing or fencing.
 */
static DlockAcquireResult
lock_slots(KeyState *st, DlockAcquireResult res)
{
	int			slot;

	if (res == DLOCK_ACQ_EXTENDED && st->slots != 1)
	{
		DlockKeyLock sl = dlock_lease_slot_lock(&st->k, st->target.slot);

		return dlock_key_trylock(&sl, ExclusiveLock) ? res : DLOCK_ACQ_LOCKED;
	}
	if (res != DLOCK_ACQ_GRANTED)
		return res;
	if (st->slots == 1)
		return fences_ended(st) ? res : DLOCK_ACQ_LOCKED;
	slot = free_slot(st, st->target.slot);
	if (slot < 0)
		return DLOCK_ACQ_LOCKED;
	fill_target(st, slot);
	return res;
}

/* ---- carrying it out ---- */

/*
 * Tell whoever listens (dlock_lease_events: the key's watchers) of a new
 * grant, and first of what it replaced, the row read as *old: a lease
 * still held there had run out, and its expiry is reported (a takeover);
 * a hand-over grant abandoned there, that dlock's worker has not freed
 * yet, is freed now, a release.
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
 * Grant the place read as *l (free, or run out) to the caller with a new
 * token: the row written, the key's watchers told (watch_grant).
 */
static DlockAcquireResult
grant(DlockStore *s, const KeyState *st, const DlockLease *l, int64 ttl_us,
	  TimestampTz expires_at, int64 *token)
{
	*token = dlock_next_token();
	/* the expired holding it replaces ends here, unless a sweep ended it */
	if (dlock_lease_store_grant(s, st->k.key, l, st->holder, st->role, *token,
								ttl_us, st->now, expires_at) && l->held)
		dlock_history_lease_ended(st->k.key, l->holder, l->owner, l->token,
								  l->acquired_at, l->expires_at,
								  DLOCK_END_TAKEN_OVER);
	watch_grant(st->k.key, l, st->holder, st->role, *token, expires_at);
	return l->held ? DLOCK_ACQ_TAKEOVER : DLOCK_ACQ_GRANTED;
}

/*
 * Carry out the answer res, under the key lock: the row written (a grant,
 * or an extension of the holder's own), then the key lock given back
 * when nothing was written, or when a slot was granted or extended.  A
 * semaphore's or shared leases' holding is its slot's: the key lock was
 * only for this decision, which the rows now carry (an uncommitted write
 * that every later decision counts, read_key).  Given back at once, so
 * that the other slots stay free to take while this transaction goes on.
 * A lease keeps it to the end.
 */
static DlockAcquireResult
carry_out(DlockStore *s, KeyState *st, DlockAcquireResult res, int64 ttl_us,
		  int64 *token, TimestampTz *expires_at)
{
	*expires_at = st->now + ttl_us;
	if (res == DLOCK_ACQ_BUSY)
		*expires_at = st->busy_until;
	else if (res == DLOCK_ACQ_EXTENDED)
	{
		dlock_lease_store_extend(s, st->k.key, &st->target, ttl_us,
								 *expires_at);
		*token = st->target.token;
	}
	else if (res == DLOCK_ACQ_GRANTED)
		res = grant(s, st, &st->target, ttl_us, *expires_at, token);
	if (DLOCK_ACQ_OK(res))
		dlock_xact_note_key(&st->k.lock);

	/*
	 * A key lock given back without a write: a waiter at the head of the
	 * key's queue may have found it taken meanwhile (DLOCK_ACQ_LOCKED), and
	 * is woken to try again rather than sleep until its next timed
	 * wake-up, since no commit will wake it.
	 */
	if (!DLOCK_ACQ_OK(res) || st->slots != 1)
		dlock_lease_give_back_key(&st->k.lock, ExclusiveLock);
	return res;
}

/*
 * One attempt of holder to acquire the key k, one of slots holders at
 * most (1: a lease); never waits.  See DlockAcquireResult; *token is set
 * when acquired, *expires_at to the new expiry, or (busy) to the first
 * live holder's.
 *
 * Waiters of the key asked for the same slots as this acquire, or it is
 * an error (as it is when its holders did); a lease and shared leases
 * queue together, in one FIFO order, so that shared leases arriving after
 * a waiting lease wait behind it.
 *
 * A lease's one row is read first without the key lock: a busy key, or
 * one whose queue comes first, answers at once, taking nothing.  A
 * semaphore's or shared leases' rows, which can be many, are read once,
 * under the key lock, which their grants keep only for the decision.
 *
 * woken: the caller is a waiter just woken at the head of the key's
 * queue, most likely because the lease was freed; it skips the unlocked
 * read and goes straight for the key lock.  A waiter never holds the key
 * it waits for, so a queue ahead of it always means DLOCK_ACQ_QUEUED.
 */
DlockAcquireResult
dlock_lease_attempt(const DlockLeaseKey *k, text *holder, int64 ttl_us,
					int slots, bool woken, int64 *token,
					TimestampTz *expires_at)
{
	KeyState	st;
	DlockStore	s;
	int			queue_slots;
	DlockAcquireResult res;

	st.k = *k;
	st.queue_blocks = dlock_wait_queue_blocks(st.k.lock.hash, &queue_slots);
	if (queue_slots != 0 && !dlock_slots_compatible(queue_slots, slots))
		dlock_slots_mismatch(queue_slots, slots);
	if (woken && st.queue_blocks)
		return DLOCK_ACQ_QUEUED;
	st.holder = holder;
	st.role = GetUserId();
	st.slots = slots;
	st.cap = slots == DLOCK_SLOTS_SHARED ? DLOCK_MAX_SLOTS : slots;

	dlock_lease_store_open(&s);
	if (!woken && slots == 1)
	{
		read_key(&s, &st);
		res = decide(&st);
		/* not the holder's own, and nothing to grant: answered */
		if (st.ours == NULL && res != DLOCK_ACQ_GRANTED)
		{
			*expires_at = st.busy_until;
			dlock_store_close(&s);
			return res == DLOCK_ACQ_QUEUED ? res : DLOCK_ACQ_BUSY;
		}
	}

	/* another open transaction decides on this key: do not wait for it */
	if (!dlock_key_trylock(&st.k.lock, ExclusiveLock))
	{
		dlock_store_close(&s);
		return DLOCK_ACQ_LOCKED;
	}
	read_key(&s, &st);
	res = lock_slots(&st, decide(&st));
	res = carry_out(&s, &st, res, ttl_us, token, expires_at);
	dlock_store_close(&s);
	/* now and then, a grant sweeps idle keys (at its commit: maint_sweep.c) */
	if (DLOCK_ACQ_OK(res) && res != DLOCK_ACQ_EXTENDED)
		dlock_sweep_maybe();
	return res;
}
