/*-------------------------------------------------------------------------
 *
 * lease/lease_int.h
 *		What the files of lease/ share and no other family sees: a key and
 *		its lock tags, the acquire decision's results, the holder's calls
 *		and the several-key calls.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_LEASE_INT_H
#define DLOCK_LEASE_INT_H

#include "datatype/timestamp.h"
#include "fmgr.h"

#include "history/history.h"
#include "lease/lease.h"
#include "wait/wait.h"

/* the lease in *l is holder's, taken as role */
static inline bool
dlock_lease_is_ours(const DlockLease *l, text *holder, Oid role)
{
	return l->held && l->owner == role &&
		VARSIZE_ANY_EXHDR(l->holder) == VARSIZE_ANY_EXHDR(holder) &&
		memcmp(VARDATA_ANY(l->holder), VARDATA_ANY(holder),
			   VARSIZE_ANY_EXHDR(holder)) == 0;
}

/* ----------------
 * lease_store.c
 *		The reads and writes of dlock.lease that only the lease decisions
 *		make (lease_store.c).
 * ----------------
 */
extern bool dlock_lease_store_has_slots(DlockStore *s);
extern void dlock_lease_store_fetch(DlockStore *s, text *key, DlockLease *l);
typedef void (*DlockRowFn) (const DlockLease *l, void *arg);
extern void dlock_lease_store_scan_pending(DlockStore *s, text *key,
										   DlockRowFn fn, void *arg);
extern DlockLease *dlock_lease_copy(const DlockLease *l);

extern bool dlock_lease_store_grant(DlockStore *s, text *key,
									const DlockLease *old, text *holder,
									Oid role, int64 token, int64 ttl_us,
									TimestampTz now, TimestampTz expires);
extern void dlock_lease_store_extend(DlockStore *s, text *key,
									 const DlockLease *old, int64 ttl_us,
									 TimestampTz expires);
extern void dlock_lease_store_free(DlockStore *s, text *key,
								   const DlockLease *old, TimestampTz now);
extern text **dlock_lease_store_holder_keys(text *holder, Oid owner,
											text *after, int limit,
											uint64 *n);

/* ----------------
 * lease_xact.c
 *		What dlock does when a transaction ends: wake the waiters of the keys
 *		it wrote, let a lone release commit without waiting for its flush,
 *		and abandon the hand-over grants nobody took (lease_xact.c).
 * ----------------
 */
extern bool dlock_xact_alone(void);
extern void dlock_xact_note_key(const DlockKeyLock *key);
extern void dlock_xact_note_new_token(void);
extern void dlock_release_async_begin(void);
extern void dlock_release_async_end(void);
extern void dlock_abandon(const char *key, const char *holder, Oid owner,
						  int64 token, TimestampTz expires_at);
extern void dlock_abandon_unless_committed(text *key, text *holder, Oid owner,
										   int64 token,
										   TimestampTz expires_at);

/* ----------------
 * A key of dlock.lease and its lock tags (base_keylock.c), computed once
 * by the call that takes the key and passed on to its callees.
 * ----------------
 */
typedef struct DlockLeaseKey
{
	text	   *key;
	DlockKeyLock lock;			/* the key's lock (DLOCK_CLASS_LEASE) */
} DlockLeaseKey;

static inline DlockLeaseKey
dlock_lease_key(text *key)
{
	DlockLeaseKey k;

	k.key = key;
	k.lock = dlock_key_for_text(DLOCK_CLASS_LEASE, VARDATA_ANY(key),
								VARSIZE_ANY_EXHDR(key));
	return k;
}

/* the lock of one slot of a semaphore's or shared leases' key */
static inline DlockKeyLock
dlock_lease_slot_lock(const DlockLeaseKey *k, int slot)
{
	return dlock_key_for_slot(VARDATA_ANY(k->key), VARSIZE_ANY_EXHDR(k->key),
							  slot);
}

/*
 * Give back a key lock taken without writing anything.  A waiter at the
 * head of the key's queue may have found the lock taken at that moment
 * (DLOCK_ACQ_LOCKED); it is woken to try again rather than sleep until
 * its next timed wake-up, since no commit will wake it.
 */
static inline void
dlock_lease_give_back_key(const DlockKeyLock *kl, LOCKMODE mode)
{
	dlock_key_unlock(kl, mode);
	(void) dlock_wait_wake_key(kl->hash);
}

/* ----------------
 * lease_grant.c
 *		The acquire decision: one attempt on a key (lease_grant.c).
 * ----------------
 */
/* Result of one acquire attempt. */
typedef enum DlockAcquireResult
{
	DLOCK_ACQ_GRANTED,			/* new grant, new token */
	DLOCK_ACQ_TAKEOVER,			/* new grant over an expired lease */
	DLOCK_ACQ_EXTENDED,			/* same holder already held it */
	DLOCK_ACQ_BUSY,				/* held by someone else until *expires_at */
	DLOCK_ACQ_LOCKED,			/* another open transaction touches the key */
	DLOCK_ACQ_QUEUED			/* free, but earlier waiters come first */
} DlockAcquireResult;

#define DLOCK_ACQ_OK(r) ((r) <= DLOCK_ACQ_EXTENDED)

extern DlockAcquireResult dlock_lease_attempt(const DlockLeaseKey *k,
											  text *holder, int64 ttl_us,
											  int slots, bool woken,
											  int64 *token,
											  TimestampTz *expires_at);
extern void dlock_slots_mismatch(int key_slots, int asked);

/* lease_acquire.c: one attempt, or a wait in the key's queue */
extern bool dlock_acquire(text *key, text *holder, int64 ttl_us,
						  int64 wait_us, int slots, int64 *token);

/* ----------------
 * lease_decide.c
 *		The holder's calls: release, renew, validate, release_all and
 *		force_release (lease_decide.c).
 * ----------------
 */
extern bool dlock_lease_release(text *key, text *holder, bool has_token,
								int64 token);
extern bool dlock_lease_renew(text *key, text *holder, int64 ttl_us,
							  bool has_token, int64 token);
extern bool dlock_lease_validate(text *key, text *holder, int64 token);
extern int64 dlock_lease_release_all(text *holder);
extern bool dlock_lease_force_release(text *key);

/* ----------------
 * lease_multi.c
 *		Several keys at once: dlock_acquire_all (lease_multi.c).
 * ----------------
 */
/*
 * Keys one dlock_acquire_all call takes at most (a documented limit).
 * Each key keeps its key lock, an entry in the shared lock table, to the
 * end of the transaction: a few thousand fit by default
 * (max_locks_per_transaction per connection), shared by everybody.
 */
#define DLOCK_MAX_ACQUIRE_ALL_KEYS	1000

extern bool dlock_acquire_all(text **keys, int nkeys, text *holder,
							  int64 ttl_us, int64 wait_us, int64 *tokens);

/* ----------------
 * lease_handover.c
 *		Freeing a lease, or handing it over to the head waiter of its key
 *		(lease_handover.c).
 * ----------------
 */
extern void dlock_lease_free_or_hand_over(DlockStore *s,
										  const DlockLeaseKey *k,
										  const DlockLease *l,
										  TimestampTz now,
										  DlockHistoryEnd how);

#endif							/* DLOCK_LEASE_INT_H */
