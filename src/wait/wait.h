/*-------------------------------------------------------------------------
 *
 * wait/wait.h
 *		What the wait family offers the others: the FIFO queue in shared
 *		memory, sleeping on it, hand-over, abandoned grants and the client's
 *		connection check.  What only wait/ files share is in wait_int.h.
 *		The protocol is in wait/README.md.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WAIT_H
#define DLOCK_WAIT_H

#include "access/xlogdefs.h"
#include "datatype/timestamp.h"

#include "base/base.h"
#include "compat.h"

/* ----------------
 * wait_queue.c
 *		Blocking acquires: the FIFO queue of each key and sleeping (wait_queue.c).
 * ----------------
 */
/* one row of dlock_waiters: a copy of a waiting backend's slot */
typedef struct DlockWaiter
{
	int			pid;
	Oid			owner;			/* the waiting role */
	TimestampTz since;
	int			position;		/* in its key's queue; 1 is the head */
	char		key[DLOCK_MAX_KEY_BYTES + 1];
	char		holder[DLOCK_MAX_HOLDER_BYTES + 1];
} DlockWaiter;

/* the releaser's record of an offer, kept to the end of its transaction */
typedef struct DlockOffer
{
	int			slot;			/* the waiter's slot */
	uint64		ticket;			/* and its ticket: the slot may be reused */
	text	   *holder;			/* the waiter's holder, role and ttl */
	Oid			owner;
	int64		ttl_us;
	int64		token;			/* the grant written (filled in by lease_handover.c) */
	TimestampTz expires_at;
} DlockOffer;

/* what a waiter receives */
typedef struct DlockGrant
{
	int64		token;
	TimestampTz expires_at;
	XLogRecPtr	lsn;			/* end of the granting commit record */
	/* left for good (dlock_wait_leave): whose grant, to abandon it */
	Oid			owner;
	char		key[DLOCK_MAX_KEY_BYTES + 1];
	char		holder[DLOCK_MAX_HOLDER_BYTES + 1];
} DlockGrant;

extern bool dlock_wait_wake_key(uint64 hash);
extern void dlock_wait_wake_all_heads(void);
extern bool dlock_wait_queue_blocks(uint64 hash, int *slots);
extern int	dlock_wait_enqueue(uint64 hash, text *key, text *holder,
							   int64 ttl_us, int slots, bool takes_grant);
extern bool dlock_wait_leave(DlockGrant *g, bool for_good);
extern bool dlock_wait_granted(bool *pending);
extern bool dlock_wait_offer(uint64 hash, DlockOffer *o);
extern bool dlock_wait_offer_settle(const DlockOffer *o, bool stands);
extern bool dlock_wait_offer_end(const DlockOffer *o, bool committed,
								 XLogRecPtr lsn);
extern bool dlock_wait_sleep(int64 timeout_us);
extern void dlock_wait_join_claim(uint64 hash, text *label, text *holder);
extern bool dlock_wait_wake_claim(uint64 hash);
extern bool dlock_wait_take_wake(void);
extern bool dlock_wait_claim_woken(bool *head);
extern void dlock_wait_leave_claim(bool chain);
extern int	dlock_wait_list(DlockWaiter **out);
extern void dlock_wait_shmem_request(void);
extern void dlock_wait_shmem_startup(void);

/* ----------------
 * wait_abandon.c
 *		The list of hand-over grants that their waiter never took, in
 *		shared memory (wait_abandon.c).
 * ----------------
 */
/* one abandoned grant, as the worker that frees it reads it */
typedef struct DlockAbandoned
{
	int			slot;			/* its place in the list */
	Oid			owner;
	int64		token;
	TimestampTz expires_at;
	char		key[DLOCK_MAX_KEY_BYTES + 1];
	char		holder[DLOCK_MAX_HOLDER_BYTES + 1];
} DlockAbandoned;

extern bool dlock_abandoned_add(const char *key, const char *holder,
								Oid owner, int64 token,
								TimestampTz expires_at);
extern bool dlock_abandoned(int64 token);
extern bool dlock_abandoned_take(DlockAbandoned *a);
extern void dlock_abandoned_done(const DlockAbandoned *a, bool done);

extern void dlock_abandon_shmem_request(void);
extern void dlock_abandon_shmem_startup(void);

/* ----------------
 * wait_client.c
 *		The backend's client connection: is it still there? (wait_client.c)
 * ----------------
 */
extern bool dlock_client_gone(void);
DLOCK_NORETURN_BEFORE extern void dlock_client_lost(void) DLOCK_NORETURN_AFTER;

/* ----------------
 * wait_sleep.c
 *		How a waiting backend sleeps, and the waits around a hand-over
 *		(wait_sleep.c).
 * ----------------
 */
extern void dlock_wait_yield(void);
extern void dlock_wait_durable(XLogRecPtr lsn);

#endif							/* DLOCK_WAIT_H */
