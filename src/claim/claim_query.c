/*-------------------------------------------------------------------------
 *
 * claim_query.c
 *		The query a claim runs on the user's table, from its text to its
 *		rethrown error: building it around the caller's filter and order_by
 *		(checked, and order_by's step direction read, in claim_filter.c),
 *		keeping its plans, choosing the plan
 *		with a step bound while a step hint holds, running it as the
 *		caller, learning new hints from its scan, and reporting its errors
 *		against the caller's text.  claim_take.c calls dlock_claim_query_run.
 *
 * A plan is kept per backend for each distinct query text and build of the
 * table's claim target (claim_target.c rebuilds a target after any DDL
 * that changes what it knows: names, key type, partition root), at most
 * MAX_CACHED_PLANS idle ones, least recently used first out; a plan a
 * claim is running (an outer call of a nested claim) is never freed.  The
 * plans of an older build of a table's target are freed when a claim meets
 * the new one: their text names what may no longer exist (a renamed
 * schema) or is now another table.
 *
 * Stepping over held rows.  Claims in the primary key's order (the
 * default, or order_by naming just that column) keep a second plan, the
 * same query with a bound on the primary key ("pk > $3"), which they run
 * while the step hint of their query text holds (claim_hint.c: where the
 * held rows at the head of the order end, learned by any backend's claim).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "port/atomics.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "claim/claim.h"
#include "claim/claim_int.h"

/* what precedes the caller's group_by in the claim query */
#define GROUP_MARK "/*group_by*/(\n"

/*
 *	SELECT ROW(tbl.*)::schema.tbl, tbl.pk [, (group_by)::text]
 *	  FROM [ONLY] schema.tbl
 *	 WHERE (filter) AND NOT (tbl.pk OPERATOR(s.=) ANY ($1))
 *	   AND ext.dlock_claim_unheld(claim_relid, tbl.pk, $2 [, (group_by)::text])
 *	 ORDER BY order_by
 *	 LIMIT n
 *	 FOR UPDATE OF tbl SKIP LOCKED
 *
 * dlock_claim_unheld (claim_unheld.c) looks each row the scan reaches up in
 * dlock.claim's primary key, after the filter and before the row lock,
 * the way a hand-written NOT EXISTS would: the cost of a claim grows with
 * the rows its scan reaches, not with the live claims of the table (until
 * ALTER EXTENSION ... UPDATE adds the function, fn_schema is NULL and
 * held rows are dropped after fetching them, in claim_take.c).  $1
 * holds the rows already tried in this call (usually none).  $2 is the
 * claim's ticket (claim_unheld.c): a call of dlock_claim_unheld in the caller's
 * filter cannot name it, so it is answered as any direct call is, never
 * for rows the caller cannot see.  LIMIT is the
 * batch size, a constant, so that the plan is made for it; a second run
 * for the rest of a batch asks SPI for fewer rows.  With group_by, the
 * caller's group expression is evaluated as the caller too, as text: the
 * per-row check counts the rows of each group (claim_group.c), and the
 * third column gives each candidate's group to the batch.
 */
static char *
query_sql(const ClaimRequest *req, int bound_dir)
{
	const ClaimTarget *t = req->target;
	StringInfoData sql;

	initStringInfo(&sql);

	/*
	 * The whole row as ROW(tbl.*)::type: a bare "tbl" would name a column if
	 * the table has one with its own name.
	 */
	appendStringInfo(&sql, "SELECT ROW(%s.*)::%s, %s.%s",
					 t->relname, t->qualname, t->relname, t->pk_colname);
	if (req->group_by)
		appendStringInfo(&sql, ", " GROUP_MARK "%s\n)::pg_catalog.text",
						 req->group_by);
	appendStringInfo(&sql, " FROM %s%s", t->relkind == 'r' ? "ONLY " : "",
					 t->qualname);
	appendStringInfo(&sql, " WHERE (\n%s\n)", req->filter ? req->filter : "true");
	appendStringInfo(&sql, " AND NOT (%s.%s %s ANY ($1))",
					 t->relname, t->pk_colname, t->pk_eq_op);
	if (req->fn_schema && req->group_by)
		appendStringInfo(&sql, " AND %s.dlock_claim_unheld('%u'::pg_catalog.oid, %s.%s, $2, "
						 GROUP_MARK "%s\n)::pg_catalog.text)",
						 req->fn_schema, t->claim_relid, t->relname,
						 t->pk_colname, req->group_by);
	else if (req->fn_schema)
		appendStringInfo(&sql, " AND %s.dlock_claim_unheld('%u'::pg_catalog.oid, %s.%s, $2)",
						 req->fn_schema, t->claim_relid, t->relname, t->pk_colname);
	/* stepping over the held rows at the head of the order: after $3 */
	if (bound_dir != 0)
		appendStringInfo(&sql, " AND %s.%s %s $3", t->relname, t->pk_colname,
						 bound_dir > 0 ? t->pk_gt_op : t->pk_lt_op);
	if (req->order_by)
		appendStringInfo(&sql, " ORDER BY\n%s\n", req->order_by);
	else
		appendStringInfo(&sql, " ORDER BY %s.%s", t->relname, t->pk_colname);
	appendStringInfo(&sql, " LIMIT %d FOR UPDATE OF %s SKIP LOCKED", req->n,
					 t->relname);
	return sql.data;
}

/*
 * Whether the character position pos of sql falls in arg, which sql holds
 * right after marker; if so, *argpos is the position in arg.
 */
static bool
position_in_arg(const char *sql, const char *marker, const char *arg, int pos,
				int *argpos)
{
	const char *at = arg ? strstr(sql, marker) : NULL;

	/* group_by is in the query twice */
	for (; at != NULL; at = strstr(at + 1, marker))
	{
		int			from = pg_mbstrlen_with_len(sql, at + strlen(marker) - sql);

		if (pos <= from || pos > from + pg_mbstrlen(arg))
			continue;
		*argpos = pos - from;
		return true;
	}
	return false;
}

/*
 * An error raised while the claim query is planned or run (an unknown
 * column in the caller's filter, a missing privilege, an error in a
 * function the filter calls) is reported against the caller's own text:
 * a position in the filter or order_by is moved into that argument, and
 * dlock's query text, which SPI adds to the error, is taken out again.
 * Called in a PG_CATCH block with the error still current; rethrows it.
 */
static void
rethrow(MemoryContext cxt, const ClaimRequest *req)
{
	const ClaimTarget *t = req->target;
	const char *filter = req->filter;
	const char *order_by = req->order_by;
	char	   *sql = query_sql(req, 0);
	ErrorData  *edata;
	const char *arg = NULL;
	const char *argname = NULL;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();

	/* the query may have been the one with a bound (step_direction) */
	for (int dir = 1; dir >= -1 && edata->internalquery; dir -= 2)
	{
		if (strcmp(edata->internalquery, sql) == 0)
			break;
		if ((dir > 0 && t->pk_gt_op) || (dir < 0 && t->pk_lt_op))
		{
			char	   *b = query_sql(req, dir);

			if (strcmp(edata->internalquery, b) == 0)
				sql = b;
		}
	}
	if (edata->internalquery && strcmp(edata->internalquery, sql) == 0)
	{
		int			pos = edata->internalpos;

		edata->internalquery = NULL;
		edata->internalpos = 0;
		if (position_in_arg(sql, " WHERE (\n", filter, pos, &edata->internalpos))
		{
			arg = filter;
			argname = "filter";
		}
		else if (position_in_arg(sql, " ORDER BY\n", order_by, pos,
								 &edata->internalpos))
		{
			arg = order_by;
			argname = "order_by";
		}
		else if (position_in_arg(sql, GROUP_MARK, req->group_by, pos,
								 &edata->internalpos))
		{
			arg = req->group_by;
			argname = "group_by";
		}
		if (arg)
			edata->internalquery = pstrdup(arg);
	}

	/* SPI's context line quotes dlock's query: take it out */
	if (edata->context)
	{
		char	   *quoted = psprintf("SQL statement \"%s\"", sql);
		char	   *at = strstr(edata->context, quoted);

		if (at)
		{
			StringInfoData ctx;
			const char *rest = at + strlen(quoted);

			if (*rest == '\n')
				rest++;
			initStringInfo(&ctx);
			appendBinaryStringInfo(&ctx, edata->context, at - edata->context);
			appendStringInfoString(&ctx, rest);
			while (ctx.len > 0 && ctx.data[ctx.len - 1] == '\n')
				ctx.data[--ctx.len] = '\0';
			edata->context = ctx.len > 0 ? ctx.data : NULL;
		}
	}
	{
		char	   *mine = argname ?
		psprintf("%s of dlock_claim on table %s", argname, t->qualname) :
		psprintf("claim query of dlock_claim on table %s (filter %s, order_by %s%s%s)",
				 t->qualname, filter ? filter : "NULL",
				 order_by ? order_by : "NULL",
				 req->group_by ? ", group_by " : "",
				 req->group_by ? req->group_by : "");

		edata->context = edata->context ?
			psprintf("%s\n%s", edata->context, mine) : mine;
	}
	ReThrowError(edata);
}

#define MAX_CACHED_PLANS	64

typedef struct UserPlan
{
	char	   *sql;
	Oid			relid;			/* the table it was planned for */
	uint64		generation;		/* and the build of its target */
	int			busy;			/* claims running it now (nested calls) */
	SPIPlanPtr	plan;

	/*
	 * Stepping over the held rows at the head of the order: the same query
	 * with "pk > $3" (or < for a descending order), run while the hint of
	 * this query text holds.
	 */
	int			step_dir;		/* 1: pk ascending, -1: descending, 0: cannot */
	char	   *bounded_sql;
	SPIPlanPtr	bounded;		/* prepared on first use */
	ClaimHint	hint;			/* its hint's key (claim_hint.c), made once */
} UserPlan;

static List *user_plans = NIL;	/* most recently used first */
static bool xact_callback_registered = false;

/*
 * No claim runs once the top-level transaction has ended: a plan marked
 * busy by a claim that failed (and whose error was caught below it) is
 * free again.
 */
static void
user_plans_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PREPARE)
		return;
	foreach(lc, user_plans)
		((UserPlan *) lfirst(lc))->busy = 0;
}

static void
free_user_plan(UserPlan *up)
{
	SPI_freeplan(up->plan);
	if (up->bounded)
		SPI_freeplan(up->bounded);
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
		rethrow(cxt, req);
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
 * The kept plans of a claim query, marked busy while it runs.
 * Prepared once per distinct query text and build of the table's target in
 * this backend (at most MAX_CACHED_PLANS idle ones are kept) as generic
 * plans: the parameters, the rows already tried (nearly always none) and
 * the step bound, change nothing the planner should plan for.  A table
 * dropped and created again under the same name is another table (another
 * relid), so its plans are new ones, with its key type.
 */
static UserPlan *
user_plan(const ClaimRequest *req)
{
	const ClaimTarget *t = req->target;
	char	   *sql = query_sql(req, 0);
	ListCell   *lc;
	UserPlan   *up;
	SPIPlanPtr	plan;
	MemoryContext old;

	if (!xact_callback_registered)
	{
		RegisterXactCallback(user_plans_xact_callback, NULL);
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
			return up;
		}
	}

	plan = prepare_plan(req, sql, 2);
	up = MemoryContextAllocZero(TopMemoryContext, sizeof(UserPlan));
	up->sql = MemoryContextStrdup(TopMemoryContext, sql);
	up->relid = t->relid;
	up->generation = t->generation;
	up->busy = 1;
	up->plan = plan;
	up->step_dir = req->step_dir;
	if (up->step_dir != 0)
		up->bounded_sql = MemoryContextStrdup(TopMemoryContext,
											  query_sql(req, up->step_dir));

	old = MemoryContextSwitchTo(TopMemoryContext);
	user_plans = lcons(up, user_plans);
	trim_user_plans(t->relid, t->generation);
	MemoryContextSwitchTo(old);
	return up;
}

/* The plan with a bound on the primary key, prepared on first use. */
static SPIPlanPtr
bounded_plan(UserPlan *up, const ClaimRequest *req)
{
	if (up->bounded == NULL)
		up->bounded = prepare_plan(req, up->bounded_sql, 3);
	return up->bounded;
}

/*
 * Run the claim query of req (as the caller, in SPI) for up to need rows,
 * leaving out tried (an array of the primary keys of rows tried before in
 * this call); returns how many rows it locked FOR UPDATE, which are in
 * SPI_tuptable: the whole row and its primary key.
 */
uint64
dlock_claim_query_run(const ClaimRequest *req, Datum tried, int need)
{
	const ClaimTarget *t = req->target;
	MemoryContext cxt = CurrentMemoryContext;
	UserPlan   *up = user_plan(req);
	ClaimScan	scan;
	Datum		values[3];
	SPIPlanPtr	plan;
	int			rc = 0;

	values[0] = tried;
	values[1] = Int64GetDatum(dlock_claim_ticket());
	/* while the step hint of this query holds, the plan with its bound */
	if (dlock_claim_scan_begin(&scan, t, &up->hint, up->step_dir, up->sql))
	{
		plan = bounded_plan(up, req);
		values[2] = scan.hint.bound;
	}
	else
		plan = up->plan;
	scan.groups = req->groups;
	if (req->groups)
		dlock_claim_groups_scan_begin(req->groups);

	/* errors in the caller's filter or order_by name the caller's text */
	PG_TRY();
	{
		rc = SPI_execute_plan(plan, values, NULL, false, need);
	}
	PG_CATCH();
	{
		dlock_claim_scan_end(&scan, true);
		rethrow(cxt, req);
	}
	PG_END_TRY();
	dlock_claim_scan_end(&scan, false);

	if (up->busy > 0)
		up->busy--;

	if (rc != SPI_OK_SELECT)
		elog(ERROR, "claim query failed: %s", SPI_result_code_string(rc));
	if (SPI_processed > 0 && SPI_gettypeid(SPI_tuptable->tupdesc, 1) != t->rowtype)
		elog(ERROR, "claim query returned %s, not the row type of \"%s\"",
			 format_type_be(SPI_gettypeid(SPI_tuptable->tupdesc, 1)), t->relname);
	return SPI_processed;
}
