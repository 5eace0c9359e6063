/*-------------------------------------------------------------------------
 *
 * lease_internal.h
 *		Declarations shared by the lease files only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_LEASE_INTERNAL_H
#define DLOCK_LEASE_INTERNAL_H

#include "utils/relcache.h"

#include "dlock.h"

/* xact.c */
extern void dlock_xact_note_key(const DlockKeyLock *key);
extern void dlock_release_async_begin(void);
extern void dlock_release_async_end(void);

/* lease_store.c: dlock.lease opened for one call */
typedef struct LeaseStore
{
	Relation	rel;
	Relation	idx;			/* its primary key, its only index */
	struct IndexInfo *index_info;	/* built on first index insert */
} LeaseStore;

extern void dlock_lease_store_open(LeaseStore *s);
extern void dlock_lease_store_close(LeaseStore *s);
extern void dlock_lease_store_fetch(LeaseStore *s, text *key, DlockLease *l);
extern void dlock_lease_store_write(LeaseStore *s, text *key,
									const DlockLease *v);

/* lease.c */
extern int64 dlock_lease_cleanup_locked(int64 idle_us, int limit);

#endif							/* DLOCK_LEASE_INTERNAL_H */
