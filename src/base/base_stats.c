/*-------------------------------------------------------------------------
 *
 * base_stats.c
 *		Counters of what dlock did since the server started, in shared
 *		memory: one atomic per counter, no lock.
 *
 * Present only when dlock is in shared_preload_libraries; otherwise
 * counting does nothing and dlock_stats() has no row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "port/atomics.h"
#include "storage/shmem.h"

#include "base/base.h"

static pg_atomic_uint64 *counters = NULL;

/* Add n to counter c (nothing without shared memory). */
void
dlock_count(DlockCounter c, uint64 n)
{
	if (counters != NULL)
		pg_atomic_fetch_add_u64(&counters[c], n);
}

/* Read every counter into values[DLOCK_NUM_COUNTERS]; false without them. */
bool
dlock_stats_read(uint64 *values)
{
	if (counters == NULL)
		return false;
	for (int i = 0; i < DLOCK_NUM_COUNTERS; i++)
		values[i] = pg_atomic_read_u64(&counters[i]);
	return true;
}

/* shmem_request_hook (dlock.c) */
void
dlock_stats_shmem_request(void)
{
	RequestAddinShmemSpace(mul_size(DLOCK_NUM_COUNTERS, sizeof(pg_atomic_uint64)));
}

/* shmem_startup_hook (dlock.c), under AddinShmemInitLock */
void
dlock_stats_shmem_startup(void)
{
	bool		found;

	counters = ShmemInitStruct("dlock counters",
							   mul_size(DLOCK_NUM_COUNTERS, sizeof(pg_atomic_uint64)),
							   &found);
	if (!found)
		for (int i = 0; i < DLOCK_NUM_COUNTERS; i++)
			pg_atomic_init_u64(&counters[i], 0);
}
