/*-------------------------------------------------------------------------
 *
 * wait_abandon.c
 *		The list of abandoned hand-over grants, in shared memory: grants
 *		committed for a waiter that never took them (its transaction rolled
 *		back, its backend exited, or it stopped waiting while the grant was
 *		committing).
 *
 * A release that hands a key over to its head waiter (lease_handover.c) commits
 * the waiter's grant in the releaser's own transaction.  That grant is the
 * waiter's only if the waiter's transaction commits too: a waiter whose
 * statement fails after the acquire returned (a later error, a cancel,
 * statement_timeout), whose backend is terminated or loses its client, or
 * which stops waiting while the releaser commits, never saw the token, and
 * its grant must go as a rolled-back acquire of its own would.  Such a
 * grant is "abandoned":
 *
 *  - at once, in this list (database, token), which every read of
 *    dlock.lease consults (lease_store.c), so that the abandoned grant reads
 *    as a free key;
 *  - and for good soon after: a background worker (maint_worker.c) takes
 *    each entry, deletes the row if it still holds that very grant
 *    (without a key lock, as sweeps do: maint_sweep.c), and the entry goes.
 *
 * This file is only the list: record, test, take, done.  It calls no other
 * file of dlock.  Who abandons a grant, and then wakes the key's head
 * waiter and starts the worker, is dlock_abandon (lease_xact.c): the
 * waiter's transaction when it rolls back (lease_xact.c keeps the grants a
 * transaction received until it ends), the waiter that leaves its queue
 * with a committed grant because of an error or its exit (lease_acquire.c),
 * and the releaser whose waiter left while the grant was committing
 * (lease_handover.c).
 *
 * An entry lasts until the worker has dealt with its row, or until the
 * grant expires (the row then reads as expired anyway) and its place is
 * needed.  The list lives in shared memory only: after a crash, a grant
 * abandoned just before it whose row the worker had not freed yet stays
 * until its ttl runs out.  Without shared_preload_libraries there are no
 * hand-overs, and nothing here is used.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "wait/wait.h"
#include "base/base.h"

typedef struct AbandonedGrant
{
	bool		in_use;
	bool		taken;			/* a worker is deleting its row */
	Oid			dboid;
	DlockAbandoned grant;		/* as the worker takes it (but its slot) */
} AbandonedGrant;

typedef struct AbandonedList
{
	LWLock	   *lock;
	pg_atomic_uint32 nused;		/* entries in use; read without the lock */
	int			nslots;
	AbandonedGrant slots[FLEXIBLE_ARRAY_MEMBER];
} AbandonedList;

#define DLOCK_ABANDON_TRANCHE "dlock_abandoned"

/* NULL without shared memory (dlock not preloaded) */
static AbandonedList *abandoned = NULL;

/*
 * Record a committed hand-over grant as abandoned: from now on it reads as
 * a free key.  False when it could not be recorded (no shared memory, or
 * the list is full: a WARNING says so); the caller then has nothing to
 * wake nor to free.  Safe in transaction callbacks, also while a
 * transaction aborts or the backend exits: it takes one LWLock and
 * allocates nothing.
 */
bool
dlock_abandoned_add(const char *key, const char *holder, Oid owner,
					int64 token, TimestampTz expires_at)
{
	TimestampTz now = GetCurrentTimestamp();
	AbandonedGrant *g = NULL;

	if (abandoned == NULL)
		return false;
	LWLockAcquire(abandoned->lock, LW_EXCLUSIVE);
	for (int i = 0; i < abandoned->nslots && g == NULL; i++)
	{
		AbandonedGrant *s = &abandoned->slots[i];

		/* a free place, or one whose grant has run out anyway */
		if (!s->in_use)
		{
			g = s;
			pg_atomic_fetch_add_u32(&abandoned->nused, 1);
		}
		else if (!s->taken && s->grant.expires_at <= now)
			g = s;
	}
	if (g != NULL)
	{
		g->in_use = true;
		g->taken = false;
		g->dboid = MyDatabaseId;
		g->grant.owner = owner;
		g->grant.token = token;
		g->grant.expires_at = expires_at;
		strlcpy(g->grant.key, key, sizeof(g->grant.key));
		strlcpy(g->grant.holder, holder, sizeof(g->grant.holder));
	}
	LWLockRelease(abandoned->lock);

	if (g == NULL)
	{
		ereport(WARNING,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("too many abandoned lease grants to track"),
				 errdetail("The lease of key \"%s\" handed over to holder \"%s\", whose transaction did not commit, stays until it expires.",
						   key, holder)));
		return false;
	}
	return true;
}

/* True when this database's grant with this token was abandoned. */
bool
dlock_abandoned(int64 token)
{
	bool		found = false;

	if (abandoned == NULL || pg_atomic_read_u32(&abandoned->nused) == 0)
		return false;
	LWLockAcquire(abandoned->lock, LW_SHARED);
	for (int i = 0; i < abandoned->nslots && !found; i++)
	{
		AbandonedGrant *s = &abandoned->slots[i];

		found = s->in_use && s->grant.token == token && s->dboid == MyDatabaseId;
	}
	LWLockRelease(abandoned->lock);
	return found;
}

/*
 * For the worker: take the next abandoned grant of this database whose
 * row is to be deleted; false when there is none.
 */
bool
dlock_abandoned_take(DlockAbandoned *a)
{
	bool		found = false;

	if (abandoned == NULL)
		return false;
	LWLockAcquire(abandoned->lock, LW_EXCLUSIVE);
	for (int i = 0; i < abandoned->nslots && !found; i++)
	{
		AbandonedGrant *s = &abandoned->slots[i];

		if (s->in_use && !s->taken && s->dboid == MyDatabaseId)
		{
			s->taken = true;
			*a = s->grant;
			a->slot = i;
			found = true;
		}
	}
	LWLockRelease(abandoned->lock);
	return found;
}

/*
 * For the worker, after its transaction: done (the row no longer holds the
 * grant: deleted now, or written over by someone else) forgets the entry;
 * otherwise (an error) it is left for another worker, and reads as free
 * meanwhile.
 */
void
dlock_abandoned_done(const DlockAbandoned *a, bool done)
{
	AbandonedGrant *s;

	LWLockAcquire(abandoned->lock, LW_EXCLUSIVE);
	s = &abandoned->slots[a->slot];
	if (s->in_use && s->grant.token == a->token && s->dboid == MyDatabaseId)
	{
		if (done)
		{
			s->in_use = false;
			pg_atomic_fetch_sub_u32(&abandoned->nused, 1);
		}
		s->taken = false;
	}
	LWLockRelease(abandoned->lock);
}

/* ---- shared memory (dlock.c's hooks) ---- */

static int
abandon_nslots(void)
{
	/* a transaction can abandon several grants; and entries outlive it */
	return Max(2 * MaxBackends, 64);
}

static Size
abandon_size(void)
{
	return add_size(offsetof(AbandonedList, slots),
					mul_size(abandon_nslots(), sizeof(AbandonedGrant)));
}

/* shmem_request_hook */
void
dlock_abandon_shmem_request(void)
{
	RequestAddinShmemSpace(abandon_size());
	RequestNamedLWLockTranche(DLOCK_ABANDON_TRANCHE, 1);
}

/* shmem_startup_hook, under AddinShmemInitLock */
void
dlock_abandon_shmem_startup(void)
{
	bool		found;

	abandoned = ShmemInitStruct("dlock abandoned grants", abandon_size(), &found);
	if (!found)
	{
		memset(abandoned, 0, abandon_size());
		abandoned->lock = &(GetNamedLWLockTranche(DLOCK_ABANDON_TRANCHE))->lock;
		pg_atomic_init_u32(&abandoned->nused, 0);
		abandoned->nslots = abandon_nslots();
	}
}
