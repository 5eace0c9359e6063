/*-------------------------------------------------------------------------
 *
 * maint/maint_int.h
 *		What the files of maint/ share and no other family sees.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_MAINT_INT_H
#define DLOCK_MAINT_INT_H

#include "fmgr.h"

#include "maint/maint.h"

/* ----------------
 * maint_sweep.c
 *		Deleting the rows of keys idle for longer than
 *		dlock.idle_key_lifetime (maint_sweep.c), for the worker.
 * ----------------
 */
extern int64 dlock_lease_sweep(int64 idle_us, int limit, bool whole_table);
extern int64 dlock_claim_sweep(int64 idle_us, int limit);
extern int64 dlock_history_sweep(int64 retention_us, int limit);
extern bool dlock_lease_delete_abandoned(text *key, text *holder, Oid owner,
										 int64 token);

/* ----------------
 * maint_worker.c
 *		dlock_cleanup()'s deletes, run by dlock's background worker
 *		(maint_worker.c), for maint_sql.c.
 * ----------------
 */
extern int64 dlock_worker_cleanup(int64 idle_us, int64 retention_us,
								  int limit);

#endif							/* DLOCK_MAINT_INT_H */
