/*-------------------------------------------------------------------------
 *
 * maint/maint.h
 *		What the maintenance family offers the others: sweeps and the
 *		background worker.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_MAINT_H
#define DLOCK_MAINT_H

#include "postgres.h"
#include "fmgr.h"

/* ----------------
 * maint_sweep.c
 *		Deleting the rows of keys idle for longer than
 *		dlock.idle_key_lifetime (maint_sweep.c).
 * ----------------
 */
/* rows the sweep of a grant deletes at most */
#define DLOCK_SWEEP_ROWS	64
/* claim rows the sweep of a claim deletes at most */
#define DLOCK_CLAIM_SWEEP_ROWS	256

extern void dlock_sweep_init(void);
extern int64 dlock_lease_sweep(int64 idle_us, int limit, bool whole_table);
extern int64 dlock_claim_sweep(int64 idle_us, int limit);
extern bool dlock_lease_delete_abandoned(text *key, text *holder, Oid owner,
										 int64 token);

/* ----------------
 * maint_worker.c
 *		dlock's background worker: work that must not run in a caller's
 *		transaction (maint_worker.c).
 * ----------------
 */
extern int64 dlock_worker_cleanup(int64 idle_us, int limit);

extern PGDLLEXPORT void dlock_worker_main(Datum arg);

#endif							/* DLOCK_MAINT_H */
