/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		dlock's shared memory: the wait queue slots and the counters.
 *		Present only when dlock is in shared_preload_libraries.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_SHMEM_H
#define DLOCK_SHMEM_H

#include "port/atomics.h"
#include "storage/lwlock.h"

#include "dlock.h"

/* counters shown by dlock_stats(); order is the view's column order */
typedef enum DlockCounter
{
	DLOCK_STAT_ACQUIRED,		/* new grants (not extensions) */
	DLOCK_STAT_EXTENDED,		/* re-acquires by the holder */
	DLOCK_STAT_CONTENDED,		/* attempts that found the key taken */
	DLOCK_STAT_WAITS,			/* acquires that had to wait */
	DLOCK_STAT_WAIT_US,			/* total time spent waiting */
	DLOCK_STAT_WAIT_TIMEOUTS,	/* waits that ran out */
	DLOCK_STAT_HANDOFFS,		/* grants to a waiter */
	DLOCK_STAT_TAKEOVERS,		/* grants over an expired lease */
	DLOCK_STAT_RELEASES,
	DLOCK_STAT_RENEWALS,
	DLOCK_STAT_VALIDATE_FAIL,	/* fenced-off writes */
	DLOCK_STAT_CLAIMS,			/* rows claimed */
	DLOCK_STAT_REDELIVERIES,	/* rows claimed again after a claim expired */
	DLOCK_NUM_COUNTERS
} DlockCounter;

/* one backend waiting in dlock_acquire */
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
	char		key[DLOCK_MAX_KEY_BYTES + 1];
	char		holder[DLOCK_MAX_HOLDER_BYTES + 1];
} DlockWaitSlot;

typedef struct DlockShared
{
	LWLock	   *lock;			/* protects the slots and next_ticket */
	uint64		next_ticket;
	pg_atomic_uint32 nwaiters;	/* slots in use; read without the lock */
	pg_atomic_uint64 counters[DLOCK_NUM_COUNTERS];
	pg_atomic_uint64 claim_returns; /* give-backs of claims on rows that may
									 * still match: unclaim, reset,
									 * release_all (claim.c's step hints) */
	int			nslots;
	DlockWaitSlot slots[FLEXIBLE_ARRAY_MEMBER];
} DlockShared;

/* NULL unless dlock was preloaded */
extern DlockShared *dlock_shared;

extern void dlock_shmem_init(void);

static inline void
dlock_count(DlockCounter c, uint64 n)
{
	if (dlock_shared != NULL)
		pg_atomic_fetch_add_u64(&dlock_shared->counters[c], n);
}

/*
 * Claims were given back (or are about to be, by this transaction): step
 * hints learned before are void (claim_query.c).
 */
static inline void
dlock_claim_returns_bump(void)
{
	if (dlock_shared != NULL)
		pg_atomic_fetch_add_u64(&dlock_shared->claim_returns, 1);
}

/* false without shared memory (dlock not preloaded): no step hints */
static inline bool
dlock_claim_returns_read(uint64 *n)
{
	if (dlock_shared == NULL)
		return false;
	*n = pg_atomic_read_u64(&dlock_shared->claim_returns);
	return true;
}

#endif							/* DLOCK_SHMEM_H */
