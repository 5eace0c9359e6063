/*-------------------------------------------------------------------------
 *
 * base_settings.c
 *		dlock's settings (dlock.*), and the WARNING of a backend that finds
 *		dlock not preloaded.
 *
 * The settings' variables are read where they are used (base/base.h);
 * _PG_init (dlock.c) defines them once, through dlock_settings_define.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "base/base.h"
#include "base/base_int.h"

int			dlock_poll_interval_ms = 10;
int			dlock_safety_wake_ms = 1000;
int			dlock_debug_queue_delay_ms = 0;
int			dlock_debug_sweep_every = 1024;
int			dlock_idle_key_lifetime_s = 3600;
int			dlock_history_retention_s = 30 * 24 * 3600;
bool		dlock_handoff_yield = true;

/* _PG_init: define the settings dlock.* */
void
dlock_settings_define(void)
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
							"acquire's first attempt and joining the queue, and "
							"between a waiting claim's wake and its attempt.",
							"Only for tests that a release in that window is not "
							"missed, and that a woken claim that leaves passes its "
							"wake on, as post_auth_delay is for authentication.",
							&dlock_debug_queue_delay_ms,
							0, 0, 60 * 1000,
							PGC_SUSET, GUC_UNIT_MS | GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.debug_sweep_every",
							"Developer option: one grant in this many, and one claim in a sixteenth of it, sweeps idle keys at its commit.",
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
	DefineCustomIntVariable("dlock.history_retention",
							"How long the rows of dlock.history are kept before the sweeps delete them.",
							"0 keeps them forever.",
							&dlock_history_retention_s,
							30 * 24 * 3600, 0, 10 * 365 * 24 * 3600,
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
