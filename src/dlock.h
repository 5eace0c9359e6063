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
#define DLOCK_MAX_CLAIM_BATCH	1000

/*
 * Rows one dlock_cleanup() call deletes at most, of leases and of claims
 * each, so that one call stays short: its deletes keep writers of those
 * keys waiting until they commit.
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
