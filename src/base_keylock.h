/*-------------------------------------------------------------------------
 *
 * base_keylock.h
 *		The heavyweight locks of lease keys and claimed rows (base_keylock.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_BASE_KEYLOCK_H
#define DLOCK_BASE_KEYLOCK_H

#include "storage/lockdefs.h"

/* lock classes; they keep leases and claims apart in the lock table */
typedef enum DlockKeyClass
{
	DLOCK_CLASS_LEASE = 0x444c, /* "DL" */
	DLOCK_CLASS_CLAIM = 0x4443, /* "DC" */
	DLOCK_CLASS_TOKEN = 0x4454,	/* "DT" */
	DLOCK_CLASS_SLOT = 0x4453	/* "DS": one holder's slot of a semaphore
								 * or of shared leases */
} DlockKeyClass;

typedef struct DlockKeyLock
{
	uint64		hash;			/* 64-bit hash of the key */
	DlockKeyClass klass;
} DlockKeyLock;

extern DlockKeyLock dlock_key_for_text(DlockKeyClass klass, const char *data,
									   int len);
extern DlockKeyLock dlock_key_for_slot(const char *data, int len, int slot);
extern DlockKeyLock dlock_key_for_row(Oid relid, const char *data, int len);
extern bool dlock_key_trylock(const DlockKeyLock *key, LOCKMODE mode);
extern void dlock_key_lock(const DlockKeyLock *key, LOCKMODE mode);
extern void dlock_key_unlock(const DlockKeyLock *key, LOCKMODE mode);

#endif							/* DLOCK_BASE_KEYLOCK_H */
