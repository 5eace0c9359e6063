/*-------------------------------------------------------------------------
 *
 * maint_worker.c
 *		dlock's background worker: work on dlock's tables that must not be
 *		part of a caller's transaction, each piece in a short transaction of
 *		its own.
 *
 * A dynamic background worker, started on demand for one database and
 * exiting when its work is done (nothing runs while there is nothing to
 * do).  Its tasks:
 *
 *  - undo: delete the rows of abandoned hand-over grants (wait_abandon.c).  The
 *    backend that abandons a grant cannot write any more (its transaction
 *    is aborting, or the backend exiting), so it starts a worker and goes
 *    on (dlock_abandon, lease_xact.c); the worker deletes the row of every abandoned grant of its
 *    database that still holds it, one transaction each, without key locks
 *    (maint_sweep.c): the key reads as free all along.  Each deletion is a
 *    release to the key's watchers (watch_notify.c).
 *  - cleanup: dlock_cleanup() deletes idle lease and claim rows through a
 *    worker and waits for it (request and answer in a dynamic shared
 *    memory segment).  Its deletes keep writers of those keys waiting
 *    until they commit (maint_sweep.c), so they are committed at once, whatever
 *    the calling transaction does next; like VACUUM's, they are not part
 *    of the caller's transaction.
 *
 * The worker connects as the bootstrap superuser; dlock's own code then
 * runs its queries as the owner of dlock's schema, as in any backend.
 * Its commits do not wait for their WAL flush: what it writes only frees
 * keys, and a grant it hands over is flushed by the waiter that receives
 * it before its token is returned (wait_queue.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "base/base.h"
#include "maint/maint_int.h"
#include "wait/wait.h"
#include "watch/watch.h"

/* what dlock_cleanup() asks of its worker, and the answer */
typedef struct CleanupRequest
{
	int64		idle_us;
	int64		retention_us;	/* the caller's dlock.history_retention */
	int			limit;
	bool		done;			/* the worker did it all */
	int64		leases;			/* rows deleted */
	int64		claims;
	int64		history;
	int			sqlerrcode;		/* else its error, if it got one */
	char		message[256];
} CleanupRequest;

/*
 * dlock_cleanup(): have a worker delete up to limit lease and limit claim
 * rows idle for longer than idle_us, and up to limit rows of dlock.history
 * older than retention_us (0: none), and wait for it; returns how many it
 * deleted.  An error of the worker is raised here.
 */
int64
dlock_worker_cleanup(int64 idle_us, int64 retention_us, int limit)
{
	dsm_segment *seg = dsm_create(sizeof(CleanupRequest), 0);
	CleanupRequest *req = dsm_segment_address(seg);
	BackgroundWorkerHandle *handle;
	BgwHandleStatus status;
	int64		n;

	memset(req, 0, sizeof(*req));
	req->idle_us = idle_us;
	req->retention_us = retention_us;
	req->limit = limit;
	if (!dlock_worker_launch(DLOCK_TASK_CLEANUP, "dlock: cleanup",
					  dsm_segment_handle(seg), &handle))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start a background worker for dlock_cleanup()"),
				 errdetail("dlock_cleanup() deletes in a background worker's transactions, never in the caller's."),
				 errhint("Raise max_worker_processes, or call it again when a background worker slot is free.")));
	PG_TRY();
	{
		status = WaitForBackgroundWorkerShutdown(handle);
	}
	PG_CATCH();
	{
		/* cancelled: the worker stops too */
		TerminateBackgroundWorker(handle);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (status == BGWH_POSTMASTER_DIED)
		ereport(FATAL,
				(errcode(ERRCODE_ADMIN_SHUTDOWN),
				 errmsg("postmaster exited during dlock_cleanup()")));
	if (!req->done)
		ereport(ERROR,
				(errcode(req->sqlerrcode != 0 ? req->sqlerrcode : ERRCODE_INTERNAL_ERROR),
				 errmsg("dlock_cleanup() failed in its background worker: %s",
						req->message[0] != '\0' ? req->message : "it ended early")));
	n = req->leases + req->claims + req->history;
	dsm_detach(seg);
	return n;
}

/* ---- in the worker ---- */

static void
begin_work(const char *what)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, what);
}

static void
end_work(void)
{
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* one abandoned grant's row, deleted in a transaction of its own */
static void
undo_one(const DlockAbandoned *a)
{
	text	   *key = cstring_to_text(a->key);
	text	   *holder = cstring_to_text(a->holder);

	begin_work("dlock: deleting the row of an abandoned grant");
	/* its watchers were told of the grant: now of the free key */
	if (dlock_lease_delete_abandoned(key, holder, a->owner, a->token))
		dlock_watch_abandoned(key, holder, a->owner, a->token, a->expires_at);
	end_work();
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

/* dlock_cleanup()'s deletes, a transaction for leases, claims and history */
static void
cleanup_task(dsm_handle h)
{
	dsm_segment *seg = dsm_attach(h);
	CleanupRequest *req;

	if (seg == NULL)
		return;					/* the caller gave up already */
	req = dsm_segment_address(seg);
	PG_TRY();
	{
		begin_work("dlock: deleting idle lease rows");
		req->leases = dlock_lease_sweep(req->idle_us, req->limit, true);
		end_work();
		begin_work("dlock: deleting idle claim rows");
		req->claims = dlock_claim_sweep(req->idle_us, req->limit);
		end_work();
		begin_work("dlock: deleting old history rows");
		req->history = dlock_history_sweep(req->retention_us, req->limit);
		end_work();
		req->done = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(TopMemoryContext);
		edata = CopyErrorData();
		req->sqlerrcode = edata->sqlerrcode;
		strlcpy(req->message, edata->message, sizeof(req->message));
		PG_RE_THROW();
	}
	PG_END_TRY();
	dsm_detach(seg);
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
		case DLOCK_TASK_CLEANUP:
			cleanup_task(args.seg);
			/* and the rows of grants no earlier worker could free */
			undo_all();
			break;
	}
	proc_exit(0);
}
