/*-------------------------------------------------------------------------
 *
 * lease_internal.h
 *		Declarations shared by the lease files only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_LEASE_INTERNAL_H
#define DLOCK_LEASE_INTERNAL_H

#include "dlock.h"
#include "store.h"

/* xact.c */
extern void dlock_xact_note_key(const DlockKeyLock *key);
extern void dlock_release_async_begin(void);
extern void dlock_release_async_end(void);

/* lease_store.c: dlock.lease, opened for one call (store.h) */
extern void dlock_lease_store_open(DlockStore *s);
extern void dlock_lease_store_fetch(DlockStore *s, text *key, DlockLease *l);
extern void dlock_lease_store_write(DlockStore *s, text *key,
									const DlockLease *v);

/* lease.c */
extern int64 dlock_lease_cleanup_locked(int64 idle_us, int limit);

#endif							/* DLOCK_LEASE_INTERNAL_H */
