/*-------------------------------------------------------------------------
 *
 * dlock.h
 *		The limits and the schema name of dlock (its settings are in
 *		base_settings.h).
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

#endif							/* DLOCK_H */
