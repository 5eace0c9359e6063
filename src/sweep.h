/*-------------------------------------------------------------------------
 *
 * sweep.h
 *		Deleting the rows of keys idle for longer than
 *		dlock.idle_key_lifetime (sweep.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_SWEEP_H
#define DLOCK_SWEEP_H

#include "postgres.h"

/* rows the sweep of a grant deletes at most */
#define DLOCK_SWEEP_ROWS	64

extern void dlock_sweep_maybe(void);
extern int64 dlock_lease_sweep(int64 idle_us, int limit, bool whole_table);
extern bool dlock_lease_delete_abandoned(text *key, text *holder, Oid owner,
										 int64 token);

#endif							/* DLOCK_SWEEP_H */
