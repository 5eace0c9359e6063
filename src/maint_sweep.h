/*-------------------------------------------------------------------------
 *
 * maint_sweep.h
 *		Deleting the rows of keys idle for longer than
 *		dlock.idle_key_lifetime (maint_sweep.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_MAINT_SWEEP_H
#define DLOCK_MAINT_SWEEP_H

#include "postgres.h"

/* rows the sweep of a grant deletes at most */
#define DLOCK_SWEEP_ROWS	64
/* claim rows the sweep of a claim deletes at most */
#define DLOCK_CLAIM_SWEEP_ROWS	256

extern void dlock_sweep_maybe(void);
extern void dlock_claim_sweep_maybe(void);
extern int64 dlock_lease_sweep(int64 idle_us, int limit, bool whole_table);
extern int64 dlock_claim_sweep(int64 idle_us, int limit);
extern bool dlock_lease_delete_abandoned(text *key, text *holder, Oid owner,
										 int64 token);

#endif							/* DLOCK_MAINT_SWEEP_H */
