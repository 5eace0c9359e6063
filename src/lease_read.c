/*-------------------------------------------------------------------------
 *
 * lease_read.c
 *		What an acquire finds on a key: the one row of a lease, or the rows
 *		of a counting semaphore or of shared leases (issue 26), and the
 *		error of an acquire naming other slots than the key's.
 *
 * A lease is the row of slot 0 with slots 1, read with one index probe.
 * Any other key (slot 0 missing, or saying slots > 1 or shared) is read
 * whole, and decided on its live rows: the holder's own, how many, and
 * the slots they agree on.  Shared leases (slots DLOCK_SLOTS_SHARED) are
 * read as a semaphore of DLOCK_MAX_SLOTS slots; live shared leases and a
 * live lease exclude each other.  The decisions themselves (grant,
 * extend, refuse) are the caller's, under the key lock (lease.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "utils/timestamp.h"

#include "base_limits.h"
#include "lease.h"
#include "lease_store.h"

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
 * A semaphore, or a key without a slot 0 row: all of its rows.  Fills in
 * what dlock_lease_read_key says (see there).
 */
static DlockKeyState
read_slots(DlockStore *s, text *key, text *holder, Oid role, int slots,
		   DlockLease *target, TimestampTz *now, TimestampTz *busy_until,
		   bool *changing)
{
	int			n;
	DlockLease *ls = dlock_lease_store_fetch_all(s, key, &n);
	bool		used[DLOCK_MAX_SLOTS] = {0};
	int			cap = slots == DLOCK_SLOTS_SHARED ? DLOCK_MAX_SLOTS : slots;
	int			live = 0;
	int			key_slots = 0;
	int			ours = -1;
	int			free_slot;

	*now = GetCurrentTimestamp();
	*busy_until = 0;
	for (int i = 0; i < n; i++)
	{
		if (TransactionIdIsValid(ls[i].changing))
			*changing = true;
		if (!dlock_lease_live(&ls[i], *now))
			continue;
		live++;
		key_slots = ls[i].slots;
		if (ls[i].slot >= 0 && ls[i].slot < DLOCK_MAX_SLOTS)
			used[ls[i].slot] = true;
		if (*busy_until == 0 || ls[i].expires_at < *busy_until)
			*busy_until = ls[i].expires_at;
		if (dlock_lease_is_ours(&ls[i], holder, role))
			ours = i;
	}
	if (live > 0 && !dlock_slots_compatible(key_slots, slots))
		dlock_slots_mismatch(key_slots, slots);
	/* shared leases and a lease take turns (also for the same holder) */
	if (live > 0 && key_slots != slots)
		return DLOCK_KEY_FULL;
	if (ours >= 0)
	{
		*target = ls[ours];
		return DLOCK_KEY_OURS;
	}
	if (live >= cap)
		return DLOCK_KEY_FULL;
	for (free_slot = 0; free_slot < cap - 1 && used[free_slot]; free_slot++)
		;
	memset(target, 0, sizeof(*target));
	target->slot = free_slot;
	for (int i = 0; i < n; i++)
		if (ls[i].slot == free_slot)
			*target = ls[i];
	target->slots = slots;
	return DLOCK_KEY_FREE;
}

/*
 * Read what an acquire of key with slots decides on: the holder's own
 * live lease or slot (DLOCK_KEY_OURS, in *target), no room
 * (DLOCK_KEY_FULL, until *busy_until at the earliest), or the row to
 * grant (DLOCK_KEY_FREE, in *target, with its slot and slots set; found
 * false for a new row).  *changing: another open transaction is changing
 * a row of the key (a bulk release).  An acquire naming other slots than
 * the key's live holders is an error.  A lease (slot 0 with slots 1) is
 * one row: read with one index probe, as before semaphores.
 */
DlockKeyState
dlock_lease_read_key(DlockStore *s, text *key, text *holder, Oid role,
					 int slots, DlockLease *target, TimestampTz *now,
					 TimestampTz *busy_until, bool *changing)
{
	if (slots != 1 && !dlock_lease_store_has_slots(s))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("semaphores and shared leases need dlock 0.4's tables"),
				 errhint("Run ALTER EXTENSION dlock UPDATE in this database.")));
	dlock_lease_store_fetch(s, key, target);
	*changing = TransactionIdIsValid(target->changing);
	if (!target->found || target->slots != 1)
		return read_slots(s, key, holder, role, slots, target, now,
						  busy_until, changing);
	/* a lease, or a free key whose last holder held a lease */
	*now = GetCurrentTimestamp();
	*busy_until = target->expires_at;
	if (!dlock_lease_live(target, *now))
	{
		target->slots = slots;
		return DLOCK_KEY_FREE;
	}
	if (slots == DLOCK_SLOTS_SHARED)
		return DLOCK_KEY_FULL;		/* a live lease excludes shared leases */
	if (slots != 1)
		dlock_slots_mismatch(1, slots);
	return dlock_lease_is_ours(target, holder, role) ?
		DLOCK_KEY_OURS : DLOCK_KEY_FULL;
}
