/*-------------------------------------------------------------------------
 *
 * dlock.c
 *		Module entry: _PG_init, which defines dlock's settings
 *		(base_settings.c), and, when the library is preloaded, the shared
 *		memory hooks.
 *
 * Each part of dlock that keeps something in shared memory declares,
 * sizes and initialises it itself (the wait queue in wait_queue.c, the counters
 * in base_stats.c, the claims' step hints and give-back count in claim_hint.c, the abandoned
 * hand-over grants in wait_abandon.c, the watch registry, the watched
 * commits and the watch workers' slots in watch_registry.c, watch_join.c and
 * watch_worker.c); the hooks here
 * only ask each of them in turn.  Without preloading there is no shared
 * memory: leases, tokens and claims work all the same, waits poll instead
 * of being woken, and dlock_stats and dlock_waiters are empty; the first
 * of those in a backend gives a WARNING that says so (dlock_warn_not_preloaded,
 * base_settings.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "utils/guc.h"

#include "wait/wait.h"
#include "base/base.h"
#include "claim/claim.h"
#include "watch/watch.h"
#include "lease/lease.h"
#include "maint/maint.h"
#include "guard/guard.h"

PG_MODULE_MAGIC;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);

static void
dlock_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	dlock_wait_shmem_request();
	dlock_stats_shmem_request();
	dlock_claim_hint_shmem_request();
	dlock_watch_shmem_request();	/* watch (issue 26) */
	dlock_watch_join_shmem_request();
	dlock_watch_worker_shmem_request();
	dlock_abandon_shmem_request();
}

static void
dlock_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	dlock_wait_shmem_startup();
	dlock_stats_shmem_startup();
	dlock_claim_hint_shmem_startup();
	dlock_watch_shmem_startup();	/* watch (issue 26) */
	dlock_watch_join_shmem_startup();
	dlock_watch_worker_shmem_startup();
	dlock_abandon_shmem_startup();
	LWLockRelease(AddinShmemInitLock);
}

void
_PG_init(void)
{
	dlock_settings_define();
	dlock_watch_init();			/* watch (issue 26): its setting */
	dlock_watch_notify_init();	/* before dlock_xact_init: see there */
	dlock_watch_session_init();
	MarkGUCPrefixReserved("dlock");

	dlock_xact_init();
	dlock_sweep_init();
	dlock_guard_init();		/* guard (issue 40): TRUNCATE refused */

	if (process_shared_preload_libraries_in_progress)
	{
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = dlock_shmem_request;
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = dlock_shmem_startup;
	}
}
