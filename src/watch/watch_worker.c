/*-------------------------------------------------------------------------
 *
 * watch_worker.c
 *		The expiry workers' slots in shared memory: one background worker
 *		per database in which sessions watch keys (its rounds are in
 *		watch_expiry.c).  Starting a database's worker, waking it, and the
 *		worker taking its slot and giving it back.
 *
 * dlock_watch starts the worker of its database when there is none (a
 * dynamic background worker, so dlock must be preloaded), and waits until
 * it runs.  A transaction that granted a watched key, and every watch and
 * unwatch, wakes it (dlock_watch_poke_worker sets its latch).  The worker
 * takes its database's slot as it starts, and leaves, giving the slot
 * back, when its database has no watcher left.  If the worker is
 * terminated, the postmaster starts it again 5 s later, and it leaves at
 * once if nobody watches any more.  After a crash, shared memory (and
 * every watch) is new: a worker started again finds nothing to do.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "watch/watch_int.h"

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
bool
dlock_watch_worker_attach(Oid dboid)
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
bool
dlock_watch_worker_may_exit(Oid dboid)
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

/* ---- shared memory (dlock.c asks) ---- */

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
