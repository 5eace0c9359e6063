/*-------------------------------------------------------------------------
 *
 * watch_worker.c
 *		The expiry worker: one background worker per database in which
 *		sessions watch keys, which notices leases of watched keys running
 *		out, with nobody calling anything, and sends their "expired"
 *		notifications.
 *
 * dlock_watch starts the worker of its database when there is none (a
 * dynamic background worker, so dlock must be preloaded).  The worker
 * sleeps until the earliest expiry among the watched keys' live leases
 * (at most dlock.safety_wake), or until a transaction that granted a
 * watched key, or a watch or unwatch, wakes it.  Then, in a transaction of
 * its own, it reads each watched key's rows (every holder of a semaphore
 * or shared leases) at the latest committed state (through lease_store.c;
 * it never writes dlock.lease) and records an expiry for each holder that
 * has run out; watch_notify.c sends them at its commit, each once per
 * watcher.  A lease whose key another
 * transaction is writing (a renewal, a takeover) is looked at again 50 ms
 * later: the row is read only while the worker holds the key's lock in
 * share mode, so a renewal that has not committed yet is never taken for
 * an expiry, and a lease that has run out can no longer be renewed.
 *
 * The worker leaves when its database has no watcher left.  An error in a
 * round is logged and the round tried again a second later; if the worker
 * is terminated, the postmaster starts it again 5 s later, and it leaves
 * at once if nobody watches any more.  After a crash, shared memory (and
 * every watch) is new: a worker started again finds nothing to do.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "base_keylock.h"
#include "base_settings.h"
#include "base_store.h"
#include "compat.h"
#include "lease_store.h"
#include "wait.h"
#include "watch.h"

/* how soon a key another transaction is writing is looked at again */
#define BUSY_RETRY_MS		50
/* how soon a round that failed is tried again */
#define ERROR_RETRY_MS		1000
/* a worker asked for but not running after this long is asked for again */
#define LAUNCH_STALE_US		(60 * USECS_PER_SEC)

/* the worker of one database */
typedef struct WatchWorkerSlot
{
	Oid			dboid;			/* InvalidOid: free */
	int			pid;			/* 0 until it runs */
	int			procno;
	TimestampTz launched_at;
} WatchWorkerSlot;

typedef struct WatchWorkers
{
	LWLock	   *lock;
	int			nslots;
	WatchWorkerSlot slots[FLEXIBLE_ARRAY_MEMBER];
} WatchWorkers;

#define DLOCK_WATCH_WORKER_TRANCHE "dlock watch worker"

static WatchWorkers *workers = NULL;

/* database dboid's slot, or NULL; caller holds the lock */
static WatchWorkerSlot *
slot_of_locked(Oid dboid)
{
	for (int i = 0; i < workers->nslots; i++)
		if (workers->slots[i].dboid == dboid)
			return &workers->slots[i];
	return NULL;
}

static WatchWorkerSlot *
free_slot_locked(void)
{
	return slot_of_locked(InvalidOid);
}

/* give a slot back if it is still the one this backend asked for */
static void
forget_launch(Oid dboid, TimestampTz launched_at)
{
	WatchWorkerSlot *s;

	LWLockAcquire(workers->lock, LW_EXCLUSIVE);
	s = slot_of_locked(dboid);
	if (s != NULL && s->pid == 0 && s->launched_at == launched_at)
		s->dboid = InvalidOid;
	LWLockRelease(workers->lock);
}

/*
 * Make sure this database has a worker (dlock_watch, after putting its
 * entry in): start one and wait until it runs when there is none.
 */
void
dlock_watch_ensure_worker(void)
{
	BackgroundWorker bgw;
	BackgroundWorkerHandle *handle;
	WatchWorkerSlot *s;
	TimestampTz now = GetCurrentTimestamp();
	pid_t		pid;

	LWLockAcquire(workers->lock, LW_EXCLUSIVE);
	s = slot_of_locked(MyDatabaseId);
	if (s != NULL && (s->pid != 0 || now - s->launched_at < LAUNCH_STALE_US))
	{
		LWLockRelease(workers->lock);
		return;
	}
	if (s == NULL && (s = free_slot_locked()) == NULL)
	{
		LWLockRelease(workers->lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many databases with watched keys"),
				 errdetail("Each database with watchers has a worker; there are %d already.",
						   workers->nslots),
				 errhint("Raise max_worker_processes (needs a restart).")));
	}
	s->dboid = MyDatabaseId;
	s->pid = 0;
	s->launched_at = now;
	LWLockRelease(workers->lock);

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = 5;
	snprintf(bgw.bgw_library_name, sizeof(bgw.bgw_library_name), "dlock");
	snprintf(bgw.bgw_function_name, sizeof(bgw.bgw_function_name),
			 "dlock_watch_worker_main");
	snprintf(bgw.bgw_name, sizeof(bgw.bgw_name),
			 "dlock watch worker for database %u", MyDatabaseId);
	snprintf(bgw.bgw_type, sizeof(bgw.bgw_type), "dlock watch worker");
	bgw.bgw_main_arg = ObjectIdGetDatum(MyDatabaseId);
	bgw.bgw_notify_pid = MyProcPid;
	if (!RegisterDynamicBackgroundWorker(&bgw, &handle))
	{
		forget_launch(MyDatabaseId, now);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start the watch worker of this database"),
				 errdetail("All background worker slots are in use."),
				 errhint("Raise max_worker_processes (needs a restart).")));
	}
	if (WaitForBackgroundWorkerStartup(handle, &pid) != BGWH_STARTED)
	{
		forget_launch(MyDatabaseId, now);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not start the watch worker of this database"),
				 errhint("More details may be in the server log.")));
	}
}

/* Wake the worker of database dboid, if it runs.  Never fails. */
void
dlock_watch_poke_worker(Oid dboid)
{
	WatchWorkerSlot *s;

	if (workers == NULL)
		return;
	LWLockAcquire(workers->lock, LW_SHARED);
	s = slot_of_locked(dboid);
	if (s != NULL && s->pid != 0)
		SetLatch(&GetPGProcByNumber(s->procno)->procLatch);
	LWLockRelease(workers->lock);
}

/* before_shmem_exit of the worker: its slot is free again */
static void
worker_exit_callback(int code, Datum arg)
{
	WatchWorkerSlot *s;

	LWLockAcquire(workers->lock, LW_EXCLUSIVE);
	s = slot_of_locked(DatumGetObjectId(arg));
	if (s != NULL && s->pid == MyProcPid)
		s->dboid = InvalidOid;
	LWLockRelease(workers->lock);
}

/*
 * The worker takes database dboid's slot: false (it should leave) when
 * another worker has it, or nobody watches a key there.
 */
static bool
worker_attach(Oid dboid)
{
	WatchWorkerSlot *s;
	bool		ok = false;

	LWLockAcquire(workers->lock, LW_EXCLUSIVE);
	s = slot_of_locked(dboid);
	if (s != NULL && s->pid != 0 && s->pid != MyProcPid)
		s = NULL;				/* another worker runs: leave */
	else if (s == NULL && dlock_watch_db_count(dboid) > 0)
	{
		s = free_slot_locked();
		if (s != NULL)
			s->dboid = dboid;
	}
	else if (s != NULL && dlock_watch_db_count(dboid) == 0)
	{
		s->dboid = InvalidOid;
		s = NULL;
	}
	if (s != NULL)
	{
		s->pid = MyProcPid;
		s->procno = dlock_my_procno();
		ok = true;
	}
	LWLockRelease(workers->lock);
	if (ok)
		before_shmem_exit(worker_exit_callback, ObjectIdGetDatum(dboid));
	return ok;
}

/* True, with the slot given back, when nobody watches in dboid any more. */
static bool
worker_may_exit(Oid dboid)
{
	WatchWorkerSlot *s;
	bool		leave;

	LWLockAcquire(workers->lock, LW_EXCLUSIVE);
	leave = dlock_watch_db_count(dboid) == 0;
	s = slot_of_locked(dboid);
	if (leave && s != NULL && s->pid == MyProcPid)
		s->dboid = InvalidOid;
	LWLockRelease(workers->lock);
	return leave;
}

/* ---- the rounds ---- */

/*
 * Look at one watched key: record the expiry of each of its holders (a
 * lease, a semaphore's slots, shared holders) that has run out, else lower
 * *next to when the first will.
 */
static void
check_key(DlockStore *s, text *key, TimestampTz *next)
{
	DlockKeyLock kl = dlock_key_for_text(DLOCK_CLASS_LEASE, VARDATA_ANY(key),
										 VARSIZE_ANY_EXHDR(key));
	DlockLease *ls;
	int			n;
	TimestampTz now;

	if (!dlock_key_trylock(&kl, ShareLock))
	{
		/* being written: a renewal, takeover or release is committing */
		*next = Min(*next, GetCurrentTimestamp() + BUSY_RETRY_MS * 1000);
		return;
	}
	ls = dlock_lease_store_fetch_all(s, key, &n);
	now = GetCurrentTimestamp();
	/* before an acquire may take one of them over */
	dlock_watch_read_through(key, now);
	dlock_key_unlock(&kl, ShareLock);
	/* a head waiter that found the key locked just now tries again */
	(void) dlock_wait_wake_key(kl.hash);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (ls[i].held && ls[i].expires_at <= now)
			dlock_watch_expired(key, &ls[i]);
		else if (ls[i].held)
			*next = Min(*next, ls[i].expires_at);
	}
}

/* One round; returns when to start the next one. */
static TimestampTz
round_once(Oid dboid)
{
	TimestampTz next = GetCurrentTimestamp() +
		(int64) dlock_safety_wake_ms * 1000;
	int			n;
	text	  **keys = dlock_watch_db_keys(dboid, &n);

	if (n == 0)
		return next;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "checking watched keys for expiry");
	/* the extension may have been dropped under its watchers */
	if (OidIsValid(get_extension_oid("dlock", true)))
	{
		DlockStore	s;

		dlock_lease_store_open(&s);
		for (int i = 0; i < n; i++)
		{
			CHECK_FOR_INTERRUPTS();
			check_key(&s, keys[i], &next);
		}
		dlock_store_close(&s);
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	return next;
}

/* a round, with its errors logged rather than ending the worker */
static TimestampTz
round_safely(Oid dboid, MemoryContext cxt)
{
	volatile TimestampTz next = 0;

	PG_TRY();
	{
		next = round_once(dboid);
	}
	PG_CATCH();
	{
		HOLD_INTERRUPTS();
		EmitErrorReport();
		AbortCurrentTransaction();
		FlushErrorState();
		RESUME_INTERRUPTS();
		next = GetCurrentTimestamp() + ERROR_RETRY_MS * 1000;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	MemoryContextReset(cxt);
	return next;
}

/*
 * The worker's entry point (bgw_function_name); bgw_main_arg is the
 * database's oid.
 */
void
dlock_watch_worker_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	MemoryContext cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* before connecting: the database may be gone with its watchers */
	if (!worker_attach(dboid))
		proc_exit(0);
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	cxt = AllocSetContextCreate(TopMemoryContext, "dlock watch worker",
								ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(cxt);

	for (;;)
	{
		TimestampTz next;
		long		sleep_ms;

		/* reset first: a wake-up during the round starts another one */
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (worker_may_exit(dboid))
			proc_exit(0);
		next = round_safely(dboid, cxt);
		sleep_ms = (long) ((next - GetCurrentTimestamp() + 999) / 1000);
		if (sleep_ms > 0)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 sleep_ms, PG_WAIT_EXTENSION);
	}
}

/* ---- shared memory (watch.c asks) ---- */

static Size
workers_size(void)
{
	return add_size(offsetof(WatchWorkers, slots),
					mul_size(max_worker_processes, sizeof(WatchWorkerSlot)));
}

void
dlock_watch_worker_shmem_request(void)
{
	RequestAddinShmemSpace(workers_size());
	RequestNamedLWLockTranche(DLOCK_WATCH_WORKER_TRANCHE, 1);
}

void
dlock_watch_worker_shmem_startup(void)
{
	bool		found;

	workers = ShmemInitStruct("dlock watch workers", workers_size(), &found);
	if (!found)
	{
		memset(workers, 0, workers_size());
		workers->lock = &(GetNamedLWLockTranche(DLOCK_WATCH_WORKER_TRANCHE))->lock;
		workers->nslots = max_worker_processes;
	}
}
