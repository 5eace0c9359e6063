/*-------------------------------------------------------------------------
 *
 * claim_plan.c
 *		The kept plans of claim queries (claim_query.c builds their text),
 *		and the step hints learned with them: where the held rows at the
 *		head of a plan's order end (claim.c).
 *
 * A plan is kept per backend for each distinct query text and build of the
 * table's claim target (claim_target.c rebuilds a target after any DDL
 * that changes what it knows: names, key type, partition root), at most
 * MAX_CACHED_PLANS idle ones, least recently used first out; a plan a
 * claim is running (an outer call of a nested claim) is never freed.  The
 * plans of an older build of a table's target are freed when a claim meets
 * the new one: their text names what may no longer exist (a renamed
 * schema) or is now another table, and their step hints are in the old
 * key type.
 *
 * The count of give-backs that end every backend's hints lives in shared
 * memory here (none without shared_preload_libraries: then no hints).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "port/atomics.h"
#include "storage/shmem.h"
#include "utils/datum.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "claim.h"

#define MAX_CACHED_PLANS	64

typedef struct UserPlan
{
	char	   *sql;
	Oid			relid;			/* the table it was planned for */
	uint64		generation;		/* and the build of its target */
	int			busy;			/* claims running it now (nested calls) */
	SPIPlanPtr	plan;

	/*
	 * Stepping over the held rows at the head of the order (claim.c): the
	 * same query with "pk > $3" (or < for a descending order), and the bound
	 * learned by an earlier claim, valid until hint_until and as long as no
	 * claim has been given back since (hint_returns).
	 */
	int			step_dir;		/* 1: pk ascending, -1: descending, 0: cannot */
	char	   *bounded_sql;
	SPIPlanPtr	bounded;		/* prepared on first use */
	bool		hint;
	Datum		hint_bound;
	TimestampTz hint_until;
	uint64		hint_returns;
	int16		typlen;
	bool		byval;
} UserPlan;

static List *user_plans = NIL;	/* most recently used first */
static bool xact_callback_registered = false;

static void
forget_hint(UserPlan *up)
{
	if (up->hint && !up->byval)
		pfree(DatumGetPointer(up->hint_bound));
	up->hint = false;
}

/*
 * No claim runs once the top-level transaction has ended: a plan marked
 * busy by a claim that failed (and whose error was caught below it) is
 * free again.  A transaction that rolls back may have learned step hints
 * from its own claims, which are gone now: forget them all.
 */
static void
user_plans_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PREPARE)
		return;
	foreach(lc, user_plans)
	{
		UserPlan   *up = lfirst(lc);

		up->busy = 0;
		if (event == XACT_EVENT_ABORT)
			forget_hint(up);
	}
}

/* a subtransaction rolled back: its claims are gone, and so are the hints */
static void
user_plans_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	foreach(lc, user_plans)
		forget_hint(lfirst(lc));
}

static void
free_user_plan(UserPlan *up)
{
	SPI_freeplan(up->plan);
	if (up->bounded)
		SPI_freeplan(up->bounded);
	forget_hint(up);
	pfree(up->sql);
	if (up->bounded_sql)
		pfree(up->bounded_sql);
	pfree(up);
}

/*
 * Forget the least recently used plans beyond MAX_CACHED_PLANS, and the
 * plans of table relid made for a build of its target before generation,
 * but never one that a claim is running right now (an outer call of a
 * nested claim): while many are busy, more are kept.
 */
static void
trim_user_plans(Oid relid, uint64 generation)
{
	int			n = list_length(user_plans);

	for (int i = n - 1; i >= 0; i--)
	{
		UserPlan   *up = list_nth(user_plans, i);
		bool		outdated = up->relid == relid && up->generation < generation;

		if (up->busy > 0 ||
			(!outdated && list_length(user_plans) <= MAX_CACHED_PLANS))
			continue;
		user_plans = list_delete_nth_cell(user_plans, i);
		free_user_plan(up);
	}
}

static SPIPlanPtr
prepare_plan(const ClaimRequest *req, const char *sql, int nargs)
{
	Oid			types[3] = {req->target->pk_array_type, INT8OID,
	req->target->pk_type};
	MemoryContext cxt = CurrentMemoryContext;
	SPIPlanPtr	plan = NULL;

	PG_TRY();
	{
		plan = SPI_prepare_cursor(sql, nargs, types, CURSOR_OPT_GENERIC_PLAN);
	}
	PG_CATCH();
	{
		dlock_claim_query_rethrow(cxt, req);
	}
	PG_END_TRY();
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for claim query: %s",
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	return plan;
}

/*
 * The kept plans of a claim query, marked busy until dlock_claim_plan_done.
 * Prepared once per distinct query text and build of the table's target in
 * this backend (at most MAX_CACHED_PLANS idle ones are kept) as generic
 * plans: the parameters, the rows already tried (nearly always none) and
 * the step bound, change nothing the planner should plan for.  A table
 * dropped and created again under the same name is another table (another
 * relid), so its plans are new ones, with its key type.
 */
ClaimPlan *
dlock_claim_plan(const ClaimRequest *req)
{
	const ClaimTarget *t = req->target;
	char	   *sql = dlock_claim_query_sql(req, 0);
	ListCell   *lc;
	UserPlan   *up;
	SPIPlanPtr	plan;
	MemoryContext old;

	if (!xact_callback_registered)
	{
		RegisterXactCallback(user_plans_xact_callback, NULL);
		RegisterSubXactCallback(user_plans_subxact_callback, NULL);
		xact_callback_registered = true;
	}
	foreach(lc, user_plans)
	{
		up = lfirst(lc);
		if (up->relid == t->relid && up->generation == t->generation &&
			strcmp(up->sql, sql) == 0)
		{
			if (foreach_current_index(lc) > 0)
			{
				user_plans = foreach_delete_current(user_plans, lc);
				user_plans = lcons(up, user_plans);
			}
			up->busy++;
			return (ClaimPlan *) up;
		}
	}

	plan = prepare_plan(req, sql, 2);
	up = MemoryContextAllocZero(TopMemoryContext, sizeof(UserPlan));
	up->sql = MemoryContextStrdup(TopMemoryContext, sql);
	up->relid = t->relid;
	up->generation = t->generation;
	up->busy = 1;
	up->plan = plan;
	up->step_dir = dlock_claim_query_step(req);
	if (up->step_dir != 0)
		up->bounded_sql = MemoryContextStrdup(TopMemoryContext,
											  dlock_claim_query_sql(req, up->step_dir));
	up->typlen = t->pk_typlen;
	up->byval = t->pk_byval;

	old = MemoryContextSwitchTo(TopMemoryContext);
	user_plans = lcons(up, user_plans);
	trim_user_plans(t->relid, t->generation);
	MemoryContextSwitchTo(old);
	return (ClaimPlan *) up;
}

/* whether claims run through cp can step over held rows */
bool
dlock_claim_plan_steps(ClaimPlan *cp)
{
	return ((UserPlan *) cp)->step_dir != 0;
}

/* give-backs of claims on rows that may still match (unclaim, reset,
 * release_all), in shared memory: NULL without it */
static pg_atomic_uint64 *claim_returns = NULL;

/* A claim was given back: every backend's hints lapse. */
void
dlock_claim_returns_bump(void)
{
	if (claim_returns != NULL)
		pg_atomic_fetch_add_u64(claim_returns, 1);
}

/* shmem_request_hook (dlock.c) */
void
dlock_claim_plan_shmem_request(void)
{
	RequestAddinShmemSpace(sizeof(pg_atomic_uint64));
}

/* shmem_startup_hook (dlock.c), under AddinShmemInitLock */
void
dlock_claim_plan_shmem_startup(void)
{
	bool		found;

	claim_returns = ShmemInitStruct("dlock claim returns", sizeof(pg_atomic_uint64),
									&found);
	if (!found)
		pg_atomic_init_u64(claim_returns, 0);
}

/*
 * The plan to run for the next query of a claim: the one with a bound
 * (*bound set, *bounded true) while a step hint holds, else the plain
 * one.  *returns is the count of give-backs read now (before the query
 * runs), to learn a new hint with; without shared memory, *bounded is
 * false and *returns PG_UINT64_MAX (no hints).
 */
SPIPlanPtr
dlock_claim_plan_choose(ClaimPlan *cp, const ClaimRequest *req, Datum *bound,
						bool *bounded, uint64 *returns)
{
	UserPlan   *up = (UserPlan *) cp;
	bool		have = claim_returns != NULL;

	*returns = have ? pg_atomic_read_u64(claim_returns) : PG_UINT64_MAX;
	*bounded = false;
	if (!up->hint)
		return up->plan;
	if (!have || *returns != up->hint_returns ||
		GetCurrentTimestamp() >= up->hint_until)
	{
		forget_hint(up);
		return up->plan;
	}
	if (up->bounded == NULL)
		up->bounded = prepare_plan(req, up->bounded_sql, 3);
	*bound = up->hint_bound;
	*bounded = true;
	return up->bounded;
}

/*
 * A claim's query found a long stretch of held rows at the head of its
 * order (after the bound, if it ran with one), the last of them with
 * primary key last, all held until at least until: later claims start
 * after it, as long as no claim is given back (returns, read before the
 * query ran) and until that time.
 */
void
dlock_claim_plan_learn(ClaimPlan *cp, bool bounded, uint64 returns,
					   Datum last, TimestampTz until)
{
	UserPlan   *up = (UserPlan *) cp;
	Datum		copy;

	if (up->step_dir == 0)
		return;
	if (bounded && up->hint)
		until = Min(until, up->hint_until);
	copy = up->byval ? last :
		datumCopy(last, false, up->typlen);
	if (!up->byval)
	{
		/* datumCopy allocates where we are: move it where it can stay */
		Size		len = datumGetSize(last, false, up->typlen);
		void	   *kept = MemoryContextAlloc(TopMemoryContext, len);

		memcpy(kept, DatumGetPointer(copy), len);
		pfree(DatumGetPointer(copy));
		copy = PointerGetDatum(kept);
	}
	forget_hint(up);
	up->hint = true;
	up->hint_bound = copy;
	up->hint_until = until;
	up->hint_returns = returns;
}

/* The claim that got cp from dlock_claim_plan is done with it. */
void
dlock_claim_plan_done(ClaimPlan *cp)
{
	UserPlan   *up = (UserPlan *) cp;

	if (up->busy > 0)
		up->busy--;
}
