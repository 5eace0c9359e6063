/*-------------------------------------------------------------------------
 *
 * lease/lease_int.h
 *		What the files of lease/ share and no other family sees: the acquire
 *		decision's results and the several-key calls.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_LEASE_INT_H
#define DLOCK_LEASE_INT_H

#include "datatype/timestamp.h"
#include "fmgr.h"

#include "lease/lease.h"

/* ----------------
 * lease_decide.c
 *		Leases: the decisions (lease_decide.c) and acquiring with waits (lease_acquire.c).
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

/* What an acquire finds on a key (lease_read.c). */
typedef enum DlockKeyState
{
	DLOCK_KEY_OURS,				/* the holder's own live lease or slot */
	DLOCK_KEY_FULL,				/* no room: held by others */
	DLOCK_KEY_FREE				/* a slot to grant */
} DlockKeyState;

struct DlockStore;
struct DlockLease;
extern DlockKeyState dlock_lease_read_key(struct DlockStore *s, text *key,
										  text *holder, Oid role, int slots,
										  bool locked,
										  struct DlockLease *target,
										  TimestampTz *now,
										  TimestampTz *busy_until,
										  bool *changing);

extern DlockAcquireResult dlock_lease_try_acquire(text *key, text *holder,
												  int64 ttl_us, int slots,
												  bool queue_blocks,
												  bool woken,
												  int64 *token,
												  TimestampTz *expires_at);
extern bool dlock_lease_release(text *key, text *holder, bool has_token,
								int64 token);
extern bool dlock_lease_renew(text *key, text *holder, int64 ttl_us,
							  bool has_token, int64 token);
extern bool dlock_lease_validate(text *key, text *holder, int64 token);
extern int64 dlock_lease_release_all(text *holder);
extern bool dlock_lease_force_release(text *key);

/* lease_acquire.c: one attempt, or a wait in the key's queue */
extern bool dlock_acquire(text *key, text *holder, int64 ttl_us,
						  int64 wait_us, int slots, int64 *token);
extern void dlock_slots_mismatch(int key_slots, int asked);

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
extern void dlock_lease_free_or_hand_over(DlockStore *s, text *key,
										  const DlockLease *l,
										  TimestampTz now,
										  const DlockKeyLock *kl);

#endif							/* DLOCK_LEASE_INT_H */
