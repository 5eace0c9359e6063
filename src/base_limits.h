/*-------------------------------------------------------------------------
 *
 * base_limits.h
 *		The limits of dlock, the rules of slots, and its schema name (its settings are in
 *		base_settings.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_BASE_LIMITS_H
#define DLOCK_BASE_LIMITS_H

#include "datatype/timestamp.h"

/* ---- documented limits ---- */
#define DLOCK_MAX_KEY_BYTES		1024
#define DLOCK_MAX_HOLDER_BYTES	256
#define DLOCK_MAX_TTL_US		(30 * USECS_PER_DAY)
#define DLOCK_MAX_WAIT_US		USECS_PER_DAY
#define DLOCK_MAX_CLAIM_BATCH	1000
#define DLOCK_MAX_SLOTS			1000	/* holders of one semaphore */

/*
 * The slots of shared leases (dlock_acquire_shared): up to DLOCK_MAX_SLOTS
 * shared holders at once, or one holder of the lease (slots 1).
 */
#define DLOCK_SLOTS_SHARED		(-1)

/*
 * Whether acquires asking for slots a and b may hold or wait for one key:
 * the same slots, or a lease and shared leases (which exclude each other
 * by taking turns, not by an error).
 */
static inline bool
dlock_slots_compatible(int a, int b)
{
	return a == b || (a <= 1 && b <= 1);
}

/*
 * Rows one dlock_cleanup() call deletes at most, of leases and of claims
 * each, so that one call stays short: its deletes keep writers of those
 * keys waiting until they commit.
 */
#define DLOCK_CLEANUP_MAX_ROWS	1000

/* Name of dlock's internal schema; every internal query names it. */
#define DLOCK_SCHEMA			"dlock"

#endif							/* DLOCK_BASE_LIMITS_H */
