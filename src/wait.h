/*-------------------------------------------------------------------------
 *
 * wait.h
 *		Blocking acquires: the FIFO queue of each key and sleeping (wait.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WAIT_H
#define DLOCK_WAIT_H

#include "access/xlogdefs.h"
#include "datatype/timestamp.h"

#include "base_limits.h"

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

/* a hand-off offered to a waiter (see wait.c, "Hand-off") */
typedef enum DlockOfferState
{
	DLOCK_OFFER_NONE = 0,
	DLOCK_OFFER_OFFERED,
	DLOCK_OFFER_COMMITTING,
	DLOCK_OFFER_GRANTED
} DlockOfferState;

/* the releaser's record of an offer, kept to the end of its transaction */
typedef struct DlockOffer
{
	int			slot;			/* the waiter's slot */
	uint64		ticket;			/* and its ticket: the slot may be reused */
	text	   *holder;			/* the waiter's holder, role and ttl */
	Oid			owner;
	int64		ttl_us;
	int64		token;			/* the grant written (filled in by lease.c) */
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
extern int	dlock_wait_list(DlockWaiter **out);
extern void dlock_wait_shmem_request(void);
extern void dlock_wait_shmem_startup(void);

#endif							/* DLOCK_WAIT_H */
