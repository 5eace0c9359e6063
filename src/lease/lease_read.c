/*-------------------------------------------------------------------------
 *
 * lease_read.c
 *		What an acquire finds on a key: the one row of a lease, or the rows
 *		of a counting semaphore or of shared leases (issue 26), and the
 *		error of an acquire naming other slots than the key's.
 *
 * Every key is read whole, in one pass over its rows
 * (dlock_lease_store_scan_pending: the committed rows and the writes other
 * open transactions have in progress), and decided on them: the holder's
 * own live row, how many are live or being written, the slots they agree
 * on, and the lowest slot free to take.  Shared leases (slots
 * DLOCK_SLOTS_SHARED) are read as a semaphore of DLOCK_MAX_SLOTS slots;
 * live shared leases and a live lease exclude each other.  Under the key
 * lock (lease_decide.c) the decision also takes the lock of the slot it grants
 * or extends (see lease_decide.c, "Locks"); the writes are the caller's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "lease/lease_int.h"
#include "lease/lease.h"

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

/* What a decision reads of a key's rows (see read_rows). */
typedef struct KeyRows
{
	text	   *holder;			/* the caller, */
	Oid			role;
	int			slots;			/* the slots it asks for */
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
} KeyRows;

/* one version of the key's rows (dlock_lease_store_scan_pending) */
static void
read_row_into(const DlockLease *l, void *arg)
{
	KeyRows    *r = arg;
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
 * Read every version of key's rows (committed, and written by other open
 * transactions: dlock_lease_store_scan_pending) into *r, in one pass that
 * keeps only the caller's row and the rows a grant could take.
 */
static void
read_rows(DlockStore *s, text *key, text *holder, Oid role, int slots,
		  KeyRows *r, TimestampTz now)
{
	r->holder = holder;
	r->role = role;
	r->slots = slots;
	r->now = now;
	r->busy_until = 0;
	r->live = r->key_slots = r->occupied = 0;
	r->ours = NULL;
	r->pending = r->pending_other = false;
	memset(r->used, 0, sizeof(r->used));
	memset(r->idle, 0, sizeof(r->idle));
	dlock_lease_store_scan_pending(s, key, read_row_into, r);
}

/*
 * Under the key lock, a grant of the lease takes over the holders whose
 * slots ran out: each of their fences (a slot lock in share mode) must
 * have ended.  True when none is left; their slot locks are kept.
 */
static bool
fences_ended(text *key, const KeyRows *r)
{
	for (int i = 0; i < DLOCK_MAX_SLOTS; i++)
	{
		const DlockLease *l = r->idle[i];
		DlockKeyLock sl;

		if (l == NULL || !l->held || l->slots == 1)
			continue;
		sl = dlock_key_for_slot(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
								l->slot);
		if (!dlock_key_trylock(&sl, ExclusiveLock))
			return false;
	}
	return true;
}

/* the slot a grant takes: its committed row, or a new one */
static void
fill_target(const KeyRows *r, int slot, int slots, DlockLease *target)
{
	if (r->idle[slot] != NULL)
		*target = *r->idle[slot];
	else
	{
		memset(target, 0, sizeof(*target));
		target->slot = slot;
	}
	target->slots = slots;
}

/*
 * The lowest slot below cap that no holder uses and no other transaction
 * writes; locked: its slot lock taken (without waiting) too.  -1: none.
 */
static int
free_slot(text *key, const KeyRows *r, int cap, bool locked)
{
	for (int i = 0; i < cap; i++)
	{
		DlockKeyLock sl;

		if (r->used[i])
			continue;
		if (!locked)
			return i;
		sl = dlock_key_for_slot(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), i);
		if (dlock_key_trylock(&sl, ExclusiveLock))
			return i;
	}
	return -1;
}

/*
 * Read what an acquire of key with slots decides on: the holder's own
 * live lease or slot (DLOCK_KEY_OURS, in *target), no room
 * (DLOCK_KEY_FULL, until *busy_until at the earliest), or the row to
 * grant (DLOCK_KEY_FREE, in *target, with its slot and slots set; found
 * false for a new row).  *changing: the answer rests on what another open
 * transaction is writing (the caller answers DLOCK_ACQ_LOCKED).
 *
 * locked: the caller holds the key lock, and the decision is taken here:
 * for a semaphore or shared leases, the slot lock of the slot granted or
 * extended is taken too, without waiting (a slot whose lock is taken is
 * being written or fenced: the next free slot is tried); a lease grant
 * checks that the fences of the slots it takes over have ended.  The key's
 * rows are read with the writes in progress of other transactions, which
 * count as taken (their holders write them under their slot locks only).
 *
 * An acquire naming other slots than the key's live holders is an error,
 * and so is a holder asking for the lease of a key it holds shared, or
 * the other way round.
 */
DlockKeyState
dlock_lease_read_key(DlockStore *s, text *key, text *holder, Oid role,
					 int slots, bool locked, DlockLease *target,
					 TimestampTz *now, TimestampTz *busy_until,
					 bool *changing)
{
	KeyRows		r;
	int			cap = slots == DLOCK_SLOTS_SHARED ? DLOCK_MAX_SLOTS : slots;
	int			slot;

	if (slots != 1 && !dlock_lease_store_has_slots(s))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("semaphores and shared leases need dlock 0.4's tables"),
				 errhint("Run ALTER EXTENSION dlock UPDATE in this database.")));
	*now = GetCurrentTimestamp();
	*changing = false;
	read_rows(s, key, holder, role, slots, &r, *now);
	*busy_until = r.busy_until;
	if (r.live > 0 && !dlock_slots_compatible(r.key_slots, slots))
		dlock_slots_mismatch(r.key_slots, slots);
	if (r.ours != NULL && r.ours->slots != slots)
		holds_other_kind(key, holder, r.ours->slots, slots);
	/* shared leases and a lease take turns */
	if (r.live > 0 && r.key_slots != slots)
		return DLOCK_KEY_FULL;
	if (r.ours != NULL)
	{
		*target = *r.ours;
		if (TransactionIdIsValid(target->changing))
			*changing = true;
		else if (locked && slots != 1)
		{
			DlockKeyLock sl = dlock_key_for_slot(VARDATA_ANY(key),
												 VARSIZE_ANY_EXHDR(key),
												 target->slot);

			*changing = !dlock_key_trylock(&sl, ExclusiveLock);
		}
		return DLOCK_KEY_OURS;
	}
	if (r.pending_other || (slots == 1 && r.pending))
	{
		*changing = true;
		return DLOCK_KEY_FULL;
	}
	if (slots == 1)
	{
		if (r.live > 0)
			return DLOCK_KEY_FULL;
		if (locked && !fences_ended(key, &r))
		{
			*changing = true;
			return DLOCK_KEY_FULL;
		}
		fill_target(&r, 0, 1, target);
		return DLOCK_KEY_FREE;
	}
	slot = r.occupied < cap ? free_slot(key, &r, cap, locked) : -1;
	if (slot < 0)
	{
		*changing = r.pending || r.occupied < cap;
		return DLOCK_KEY_FULL;
	}
	fill_target(&r, slot, slots, target);
	return DLOCK_KEY_FREE;
}
