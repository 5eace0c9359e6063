/*-------------------------------------------------------------------------
 *
 * base_keylock.c
 *		Per-key heavyweight locks: dlock's mutual exclusion between the
 *		transactions that touch one key.
 *
 * Every function that writes a lease (or a claim) first takes a
 * transaction-level lock on the key in PostgreSQL's lock manager, under an
 * advisory-class lock tag of its own (field4 is a dlock class, so user
 * advisory locks, which use 1 and 2, never collide with these).  The lock
 * lives in shared memory only: taking it writes no WAL, and a failed try
 * costs no transaction id.  It gives dlock three things at once:
 *
 *  - an acquire with wait = 0 returns at once when another open
 *    transaction touches the key (a conditional lock), instead of waiting
 *    on a row lock or a unique-index insertion;
 *  - dlock_validate takes the lock in share mode and keeps it to the end
 *    of the transaction: the fence that keeps the lease from changing
 *    hands while the guarded write commits;
 *  - the holders of a semaphore or of shared leases each have a lock of
 *    their own slot (class DLOCK_CLASS_SLOT): a holder's renewal, release
 *    and fence take only that one, so that one holder's open fence holds
 *    off changes to its own holding and to no other (see lease_decide.c);
 *  - waits for it are seen by the deadlock detector, lock_timeout,
 *    statement_timeout and the isolation tester like any lock wait.
 *
 * Keys are hashed to 64 bits; a collision can only make a try report
 * "busy" for an unrelated key, never grant anything.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lock.h"

#include "base/base.h"

/*
 * The lock of a key: a hash of its text, seeded with its class and, for a
 * claimed row, the table it belongs to.
 */
static DlockKeyLock
key_for(DlockKeyClass klass, uint64 seed, const char *data, int len)
{
	DlockKeyLock k;

	k.hash = hash_bytes_extended((const unsigned char *) data, len, seed);
	k.klass = klass;
	return k;
}

DlockKeyLock
dlock_key_for_text(DlockKeyClass klass, const char *data, int len)
{
	return key_for(klass, (uint64) klass, data, len);
}

/*
 * The lock of one slot of a semaphore's or shared leases' key: the key's
 * text seeded with the slot.
 */
DlockKeyLock
dlock_key_for_slot(const char *data, int len, int slot)
{
	return key_for(DLOCK_CLASS_SLOT, ((uint64) (uint32) slot << 16) | DLOCK_CLASS_SLOT,
				   data, len);
}

/* the lock of a claimed row: table relid, primary key as text */
DlockKeyLock
dlock_key_for_row(Oid relid, const char *data, int len)
{
	return key_for(DLOCK_CLASS_CLAIM, ((uint64) relid << 16) | DLOCK_CLASS_CLAIM,
				   data, len);
}

/* the lock of one group of table relid's claims: the group's text */
DlockKeyLock
dlock_key_for_group(Oid relid, const char *data, int len)
{
	return key_for(DLOCK_CLASS_GROUP, ((uint64) relid << 16) | DLOCK_CLASS_GROUP,
				   data, len);
}

static void
make_tag(const DlockKeyLock *key, LOCKTAG *tag)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId,
						 (uint32) (key->hash >> 32),
						 (uint32) key->hash,
						 (uint16) key->klass);
}

/* Take the key's lock if nobody else holds a conflicting one; never waits. */
bool
dlock_key_trylock(const DlockKeyLock *key, LOCKMODE mode)
{
	LOCKTAG		tag;

	make_tag(key, &tag);
	return LockAcquire(&tag, mode, false, true) != LOCKACQUIRE_NOT_AVAIL;
}

/* Take the key's lock, waiting like any lock wait (interruptible). */
void
dlock_key_lock(const DlockKeyLock *key, LOCKMODE mode)
{
	LOCKTAG		tag;

	make_tag(key, &tag);
	(void) LockAcquire(&tag, mode, false, false);
}

/*
 * Give the lock back before the transaction ends, for a caller that
 * changed nothing under it.  A lock taken more than once in this
 * transaction stays held until the last reference goes.
 */
void
dlock_key_unlock(const DlockKeyLock *key, LOCKMODE mode)
{
	LOCKTAG		tag;

	make_tag(key, &tag);
	LockRelease(&tag, mode, false);
}
