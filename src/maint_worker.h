/*-------------------------------------------------------------------------
 *
 * maint_worker.h
 *		dlock's background worker: work that must not run in a caller's
 *		transaction (maint_worker.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_MAINT_WORKER_H
#define DLOCK_MAINT_WORKER_H

#include "fmgr.h"

extern void dlock_worker_start_undo(void);
extern int64 dlock_worker_cleanup(int64 idle_us, int limit);

extern PGDLLEXPORT void dlock_worker_main(Datum arg);

#endif							/* DLOCK_MAINT_WORKER_H */
