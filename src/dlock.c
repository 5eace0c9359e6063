/*-------------------------------------------------------------------------
 *
 * dlock.c
 *		Module entry: _PG_init, dlock's settings (dlock.*) and, when the
 *		library is preloaded, the shared memory hooks.
 *
 * Each part of dlock that keeps something in shared memory declares,
 * sizes and initialises it itself (the wait queue in wait.c, the counters
 * in stats.c, the claims' give-back count in claim_query.c, the abandoned
 * hand-over grants in abandon.c); the hooks here
 * only ask each of them in turn.  Without preloading there is no shared
 * memory: leases, tokens and claims work all the same, waits poll instead
 * of being woken, and dlock_stats and dlock_waiters are empty; the first
 * of those in a backend gives a WARNING that says so (dlock_warn_not_preloaded).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "access/parallel.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "utils/guc.h"

#include "abandon.h"
#include "claim_query.h"
#include "dlock.h"
#include "stats.h"
#include "wait.h"
#include "watch.h"
#include "xact.h"

PG_MODULE_MAGIC;

int			dlock_poll_interval_ms = 10;
int			dlock_safety_wake_ms = 1000;
int			dlock_debug_queue_delay_ms = 0;
int			dlock_debug_sweep_every = 1024;
int			dlock_idle_key_lifetime_s = 3600;
bool		dlock_handoff_yield = true;

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
	dlock_claim_query_shmem_request();
	dlock_watch_shmem_request();	/* watch (issue 26) */
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
	dlock_claim_query_shmem_startup();
	dlock_watch_shmem_startup();	/* watch (issue 26) */
	dlock_abandon_shmem_startup();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Called where the library's shared memory is missing and it matters: a
 * waiting acquire that has to poll, dlock_waiters and dlock_stats() that
 * can only be empty.  Warns once per backend, with a hint naming the
 * setting (not in a parallel worker, whose leader was told).  Not at load
 * time: a backend that never waits nor reads those views loses nothing.
 */
void
dlock_warn_not_preloaded(void)
{
	static bool warned = false;

	if (warned || InitializingParallelWorker || IsParallelWorker())
		return;
	warned = true;
	ereport(WARNING,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("dlock is not in shared_preload_libraries"),
			 errdetail("Waiting acquires poll every dlock.poll_interval instead of "
					   "being woken in turn, and dlock_waiters and dlock_stats() are empty."),
			 errhint("Add dlock to shared_preload_libraries in postgresql.conf and "
					 "restart the server.")));
}

void
_PG_init(void)
{
	DefineCustomIntVariable("dlock.poll_interval",
							"How often a waiting acquire polls when dlock is not preloaded.",
							"With dlock in shared_preload_libraries, waiters are woken "
							"instead and this setting is not used.",
							&dlock_poll_interval_ms,
							10, 1, 10000,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.safety_wake",
							"Longest sleep of a waiting acquire between two checks of its key.",
							"Waiters are woken when their key is freed; this wake-up "
							"is only a safety net.",
							&dlock_safety_wake_ms,
							1000, 10, 3600 * 1000,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.debug_queue_delay",
							"Developer option: sleep this long between a waiting "
							"acquire's first attempt and joining the queue.",
							"Only for tests that a release in that window is not "
							"missed, as post_auth_delay is for authentication.",
							&dlock_debug_queue_delay_ms,
							0, 0, 60 * 1000,
							PGC_SUSET, GUC_UNIT_MS | GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.debug_sweep_every",
							"Developer option: one grant in this many sweeps idle keys at its commit.",
							"Only for tests that need a sweep at a given moment.",
							&dlock_debug_sweep_every,
							1024, 1, 1000000,
							PGC_SUSET, GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.idle_key_lifetime",
							"How long the row of a free or expired key is kept before cleanup deletes it.",
							NULL,
							&dlock_idle_key_lifetime_s,
							3600, 0, 365 * 24 * 3600,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("dlock.handoff_yield",
							 "Whether a transaction that wakes a waiter gives up the CPU to it at once.",
							 "The woken waiter is often queued on the same CPU as the "
							 "transaction that woke it; yielding lets it take the key "
							 "before that transaction has finished answering its client.",
							 &dlock_handoff_yield,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	dlock_watch_init();			/* watch (issue 26): its setting, callbacks */
	MarkGUCPrefixReserved("dlock");

	dlock_xact_init();

	if (process_shared_preload_libraries_in_progress)
	{
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = dlock_shmem_request;
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = dlock_shmem_startup;
	}
}
