/*-------------------------------------------------------------------------
 *
 * base_xact.c
 *		Transaction plumbing the families share: running a function in an
 *		internal subtransaction whose error the caller handles, and dlock's
 *		one ProcessUtility hook, which runs the families' checks around a
 *		utility statement.
 *
 * The subtransaction is the one PL/pgSQL's exception blocks use: begun
 * with BeginInternalSubTransaction, the function run in the caller's
 * memory context, the error copied out and the subtransaction rolled back
 * on an error; the caller then throws it again (lease_multi.c) or logs it
 * (maint_sweep.c).
 *
 * The ProcessUtility hook is installed once, when the first family adds
 * its check (from _PG_init); each check says, before the statement runs,
 * whether its family acts after it (lease_xact.c, watch_session.c).  The
 * families register their functions here; base calls no higher layer
 * directly.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "tcop/utility.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "base/base.h"

/* the checks around utility statements: one per family at the most */
#define DLOCK_UTILITY_HOOKS		4

typedef struct UtilityHook
{
	DlockUtilityBefore before;
	DlockUtilityAfter after;
} UtilityHook;

static UtilityHook utility_hooks[DLOCK_UTILITY_HOOKS];
static int	n_utility_hooks = 0;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/*
 * Run fn(arg) in an internal subtransaction, in the caller's memory
 * context: kept when fn returns true, rolled back when it returns false or
 * throws.  An error comes back (copied into the caller's memory context,
 * the error state flushed) for the caller to throw again with
 * ReThrowError, or to log; NULL when fn returned.  *kept: the
 * subtransaction was kept.  The caller's resource owner is current again
 * on return.
 */
ErrorData *
dlock_subxact_run(DlockSubxactFn fn, void *arg, bool *kept)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = false;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		ok = fn(arg);
		if (ok)
			ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();

	if (!ok && edata == NULL)
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	*kept = ok && edata == NULL;
	return edata;
}

/*
 * ProcessUtility_hook: the statement runs between the checks (before) and
 * the actions (after) of the families whose check said so.
 */
static void
dlock_process_utility(PlannedStmt *pstmt, const char *queryString,
					  bool readOnlyTree, ProcessUtilityContext context,
					  ParamListInfo params, QueryEnvironment *queryEnv,
					  DestReceiver *dest, QueryCompletion *qc)
{
	bool		act[DLOCK_UTILITY_HOOKS];
	int			i;

	for (i = 0; i < n_utility_hooks; i++)
		act[i] = utility_hooks[i].before(pstmt->utilityStmt);
	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
	for (i = 0; i < n_utility_hooks; i++)
	{
		if (act[i])
			utility_hooks[i].after();
	}
}

/*
 * Called from _PG_init (through a family's init): before(stmt), for every
 * utility statement before it runs, says whether after() runs once the
 * statement has run without error.  The first call installs the hook.
 */
void
dlock_utility_hook_add(DlockUtilityBefore before, DlockUtilityAfter after)
{
	if (n_utility_hooks >= DLOCK_UTILITY_HOOKS)
		elog(ERROR, "too many dlock utility hooks");
	if (n_utility_hooks == 0)
	{
		prev_ProcessUtility = ProcessUtility_hook;
		ProcessUtility_hook = dlock_process_utility;
	}
	utility_hooks[n_utility_hooks].before = before;
	utility_hooks[n_utility_hooks].after = after;
	n_utility_hooks++;
}
