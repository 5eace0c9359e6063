/*-------------------------------------------------------------------------
 *
 * worker.c
 *		dlock's background worker: work on dlock's tables that must not be
 *		part of a caller's transaction, each piece in a short transaction of
 *		its own.
 *
 * A dynamic background worker, started on demand for one database and
 * exiting when its work is done (nothing runs while there is nothing to
 * do).  Its tasks:
 *
 *  - undo: free the rows of abandoned hand-over grants (abandon.c).  The
 *    backend that abandons a grant cannot write any more (its transaction
 *    is aborting, or the backend exiting), so it starts a worker and goes
 *    on; the worker frees every abandoned grant of its database, one
 *    transaction each.
 *
 * The worker connects as the bootstrap superuser; dlock's own code then
 * runs its queries as the owner of dlock's schema, as in any backend.
 * Its commits do not wait for their WAL flush: what it writes only frees
 * keys, and a grant it hands over is flushed by the waiter that receives
 * it before its token is returned (wait.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"

#include "abandon.h"
#include "lease.h"
#include "worker.h"

typedef enum DlockWorkerTask
{
	DLOCK_TASK_UNDO = 1
} DlockWorkerTask;

/* what a worker is told, in bgw_extra */
typedef struct DlockWorkerArgs
{
	Oid			dboid;
} DlockWorkerArgs;

static bool
start_worker(DlockWorkerTask task, const char *name,
			 BackgroundWorkerHandle **handle)
{
	BackgroundWorker w;
	DlockWorkerArgs args;

	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_RecoveryFinished;
	w.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(w.bgw_library_name, "dlock", sizeof(w.bgw_library_name));
	strlcpy(w.bgw_function_name, "dlock_worker_main", sizeof(w.bgw_function_name));
	strlcpy(w.bgw_name, name, sizeof(w.bgw_name));
	strlcpy(w.bgw_type, "dlock worker", sizeof(w.bgw_type));
	w.bgw_main_arg = Int32GetDatum((int32) task);
	args.dboid = MyDatabaseId;
	memcpy(w.bgw_extra, &args, sizeof(args));
	w.bgw_notify_pid = handle != NULL ? MyProcPid : 0;
	return RegisterDynamicBackgroundWorker(&w, handle);
}

/*
 * Start a worker that frees the rows of this database's abandoned grants.
 * Safe while a transaction aborts or the backend exits.  When no worker
 * can start (max_worker_processes), the grants still read as free keys,
 * and the next worker frees their rows.
 */
void
dlock_worker_start_undo(void)
{
	if (!IsUnderPostmaster)
		return;
	if (!start_worker(DLOCK_TASK_UNDO, "dlock: free abandoned grants", NULL))
		ereport(LOG,
				(errmsg("dlock could not start a background worker to free abandoned lease grants"),
				 errhint("The grants read as free keys meanwhile; raise max_worker_processes.")));
}

/* one abandoned grant's row, freed in a transaction of its own */
static void
undo_one(const DlockAbandoned *a)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "dlock: freeing an abandoned grant");
	(void) dlock_lease_free_abandoned(cstring_to_text(a->key),
									  cstring_to_text(a->holder), a->owner,
									  a->token);
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* free the rows of every abandoned grant of this database, then exit */
static void
undo_all(void)
{
	DlockAbandoned a;

	while (dlock_abandoned_take(&a))
	{
		CHECK_FOR_INTERRUPTS();
		PG_TRY();
		{
			undo_one(&a);
		}
		PG_CATCH();
		{
			/* left for the next worker; the grant reads as free meanwhile */
			dlock_abandoned_done(&a, false);
			PG_RE_THROW();
		}
		PG_END_TRY();
		dlock_abandoned_done(&a, true);
	}
}

/* entry point of the worker (bgw_function_name) */
void
dlock_worker_main(Datum arg)
{
	DlockWorkerArgs args;

	memcpy(&args, MyBgworkerEntry->bgw_extra, sizeof(args));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(args.dboid, InvalidOid, 0);
	SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);

	switch ((DlockWorkerTask) DatumGetInt32(arg))
	{
		case DLOCK_TASK_UNDO:
			undo_all();
			break;
	}
	proc_exit(0);
}
