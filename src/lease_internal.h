/*-------------------------------------------------------------------------
 *
 * lease_internal.h
 *		What lease.c needs from the transaction hooks (xact.c) and from
 *		itself across files.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_LEASE_INTERNAL_H
#define DLOCK_LEASE_INTERNAL_H

#include "dlock.h"

/* xact.c */
extern void dlock_xact_note_key(const DlockKeyLock *key);
extern void dlock_release_async_begin(void);
extern void dlock_release_async_end(void);

/* lease.c */
extern int64 dlock_lease_cleanup_locked(int64 idle_us, int limit);

#endif							/* DLOCK_LEASE_INTERNAL_H */
