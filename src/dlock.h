/*-------------------------------------------------------------------------
 *
 * dlock.h
 *		The limits, the schema name and the settings of dlock.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_H
#define DLOCK_H

#include "datatype/timestamp.h"

/* ---- documented limits ---- */
#define DLOCK_MAX_KEY_BYTES		1024
#define DLOCK_MAX_HOLDER_BYTES	256
#define DLOCK_MAX_TTL_US		(30 * USECS_PER_DAY)
#define DLOCK_MAX_WAIT_US		USECS_PER_DAY
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
 * keys waiting until they commit, and the key lock of every claim row it
 * deletes is held until then (the shared lock table must keep room for
 * everybody else).
 */
#define DLOCK_CLEANUP_MAX_ROWS	1000

/* Name of dlock's internal schema; every internal query names it. */
#define DLOCK_SCHEMA			"dlock"

/* ---- dlock.c: settings ---- */
extern int	dlock_poll_interval_ms;
extern int	dlock_safety_wake_ms;
extern int	dlock_debug_queue_delay_ms;
extern int	dlock_debug_sweep_every;
extern int	dlock_idle_key_lifetime_s;
extern bool dlock_handoff_yield;

/* ---- dlock.c: the WARNING of a backend that finds dlock not preloaded ---- */
extern void dlock_warn_not_preloaded(void);

#endif							/* DLOCK_H */
