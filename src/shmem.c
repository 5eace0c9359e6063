/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		Shared memory for dlock: allocated through shmem_request_hook and
 *		shmem_startup_hook when dlock is in shared_preload_libraries.
 *
 * Without preloading, dlock_shared stays NULL: leases, tokens and claims
 * work all the same, waits poll instead of being woken, and dlock_stats
 * and dlock_waiters are empty.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"

#include "shmem.h"

#define DLOCK_TRANCHE "dlock"

DlockShared *dlock_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static Size
dlock_shmem_size(void)
{
	return add_size(offsetof(DlockShared, slots),
					mul_size(MaxBackends, sizeof(DlockWaitSlot)));
}

static void
dlock_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(dlock_shmem_size());
	RequestNamedLWLockTranche(DLOCK_TRANCHE, 1);
}

static void
dlock_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	dlock_shared = ShmemInitStruct("dlock", dlock_shmem_size(), &found);
	if (!found)
	{
		memset(dlock_shared, 0, dlock_shmem_size());
		dlock_shared->lock = &(GetNamedLWLockTranche(DLOCK_TRANCHE))->lock;
		dlock_shared->next_ticket = 1;
		pg_atomic_init_u32(&dlock_shared->nwaiters, 0);
		pg_atomic_init_u64(&dlock_shared->claim_returns, 0);
		for (int i = 0; i < DLOCK_NUM_COUNTERS; i++)
			pg_atomic_init_u64(&dlock_shared->counters[i], 0);
		dlock_shared->nslots = MaxBackends;
	}
	LWLockRelease(AddinShmemInitLock);
}

/* called from _PG_init while the postmaster loads preloaded libraries */
void
dlock_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = dlock_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = dlock_shmem_startup;
}
