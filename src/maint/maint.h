/*-------------------------------------------------------------------------
 *
 * maint/maint.h
 *		What the maintenance family offers the higher layers and the worker
 *		machinery: its transaction callback (dlock.c) and its background
 *		worker's entry point.  What only the maint files share is in
 *		maint_int.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_MAINT_H
#define DLOCK_MAINT_H

#include "fmgr.h"

/* ----------------
 * maint_sweep.c
 *		The pre-commit callback that runs the sweeps a transaction drew
 *		(dlock.c).
 * ----------------
 */
extern void dlock_sweep_init(void);

/* ----------------
 * maint_worker.c
 *		dlock's background worker's entry point: base_worker.c starts it by
 *		this name, a lower layer that cannot call it.
 * ----------------
 */
extern PGDLLEXPORT void dlock_worker_main(Datum arg);

#endif							/* DLOCK_MAINT_H */
