/*-------------------------------------------------------------------------
 *
 * lease_multi.h
 *		Several keys at once: dlock_acquire_all (lease_multi.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_LEASE_MULTI_H
#define DLOCK_LEASE_MULTI_H

#include "fmgr.h"

/*
 * Keys one dlock_acquire_all call takes at most (a documented limit).
 * Each key keeps its key lock, an entry in the shared lock table, to the
 * end of the transaction: a few thousand fit by default
 * (max_locks_per_transaction per connection), shared by everybody.
 */
#define DLOCK_MAX_ACQUIRE_ALL_KEYS	1000

extern bool dlock_acquire_all(text **keys, int nkeys, text *holder,
							  int64 ttl_us, int64 wait_us, int64 *tokens);

#endif							/* DLOCK_LEASE_MULTI_H */
