/*-------------------------------------------------------------------------
 *
 * base_stats.h
 *		Counters of what dlock did since the server started (base_stats.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_BASE_STATS_H
#define DLOCK_BASE_STATS_H

/* the columns of dlock_stats(), in order */
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

extern void dlock_count(DlockCounter c, uint64 n);
extern bool dlock_stats_read(uint64 *values);
extern void dlock_stats_shmem_request(void);
extern void dlock_stats_shmem_startup(void);

#endif							/* DLOCK_BASE_STATS_H */
