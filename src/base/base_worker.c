/*-------------------------------------------------------------------------
 *
 * base_worker.c
 *		What a backend asks of dlock's maintenance without calling up into
 *		it: starting dlock's background worker for a task, and drawing the
 *		sweep of idle rows that a grant's or a claim's transaction runs at
 *		its pre-commit.
 *
 * The families that ask (lease_xact.c, lease_decide.c, claim_take.c) sit
 * below the maintenance family, which sweeps their tables; they call down
 * only.  So this file starts the worker by the name of its entry point
 * (dlock_worker_main, maint_worker.c, which PostgreSQL looks up in the
 * library), and keeps the transaction's draw in two flags that the
 * pre-commit callback of maint_sweep.c takes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/pg_prng.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"

#include "base/base.h"
#include "base/base_int.h"

/* this transaction drew the sweep of leases, of claims */
static bool lease_sweep_drawn = false;
static bool claim_sweep_drawn = false;

/*
 * Start dlock's background worker for task, in this database, with seg
 * (a dynamic shared memory segment of the task's, or 0); handle, when not
 * NULL, is set for waiting on it.  False when no worker can start.
 */
bool
dlock_worker_launch(DlockWorkerTask task, const char *name, dsm_handle seg,
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
	args.seg = seg;
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
	if (!dlock_worker_launch(DLOCK_TASK_UNDO, "dlock: free abandoned grants", 0, NULL))
		ereport(LOG,
				(errmsg("dlock could not start a background worker to free abandoned lease grants"),
				 errhint("The grants read as free keys meanwhile; raise max_worker_processes.")));
}

/* one in every draws (a lottery) */
static bool
draw(uint64 every)
{
	return pg_prng_uint64_range(&pg_global_prng_state, 1, Max(every, 1)) == 1;
}

/*
 * After a grant: one in dlock.debug_sweep_every (1024) draws the sweep of
 * its transaction's pre-commit.
 */
void
dlock_sweep_maybe(void)
{
	if (draw((uint64) dlock_debug_sweep_every))
		lease_sweep_drawn = true;
}

/*
 * After a claim that took rows: one in dlock.debug_sweep_every / 16 (64)
 * draws the sweep of claim rows at its transaction's pre-commit.
 */
void
dlock_claim_sweep_maybe(void)
{
	if (draw((uint64) dlock_debug_sweep_every / 16))
		claim_sweep_drawn = true;
}

/*
 * The sweeps this transaction drew, which are forgotten here: at its
 * pre-commit, or at any other end of it (maint_sweep.c).
 */
void
dlock_sweeps_drawn(bool *leases, bool *claims)
{
	*leases = lease_sweep_drawn;
	*claims = claim_sweep_drawn;
	lease_sweep_drawn = claim_sweep_drawn = false;
}
