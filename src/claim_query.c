/*-------------------------------------------------------------------------
 *
 * claim_query.c
 *		The query a claim runs on the user's table: checking the caller's
 *		filter and order_by, building the query around them, and keeping
 *		its plan.
 *
 * filter and order_by are SQL text written by the caller and evaluated as
 * the caller.  They must stay what they claim to be: one expression, one
 * ORDER BY list.  Each is parsed on its own inside a wrapper with
 * PostgreSQL's raw parser, and the parse tree is checked to be that single
 * SELECT with nothing but the expression (or sort list) in it: text that
 * closes the parenthesis, adds a statement, a FROM, a LIMIT, a locking
 * clause, a set operation or a parameter reference is rejected before
 * anything runs; and its parentheses must balance on their own (see
 * check_balanced).  The text is later placed in the query inside the same
 * kind of wrapper (newlines included, so a trailing -- comment cannot
 * swallow the rest of the query).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "parser/scanner.h"
#include "utils/datum.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "claim.h"
#include "shmem.h"

#define MAX_CACHED_PLANS	64

typedef struct UserPlan
{
	char	   *sql;
	Oid			relid;			/* the table and key type it was planned for */
	Oid			pk_type;
	int			busy;			/* claims running it now (nested calls) */
	SPIPlanPtr	plan;

	/*
	 * Stepping over the held rows at the head of the order (claim.c): the
	 * same query with "pk > $2" (or < for a descending order), and the
	 * bound learned by an earlier claim, valid until hint_until and as long
	 * as no claim has been given back since (hint_returns).
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

/*
 * Forget the least recently used plans beyond MAX_CACHED_PLANS, but never
 * one that a claim is running right now (an outer call of a nested claim):
 * while many are busy, more are kept.
 */
static void
trim_user_plans(void)
{
	int			n = list_length(user_plans);

	for (int i = n - 1; i >= 0 && list_length(user_plans) > MAX_CACHED_PLANS; i--)
	{
		UserPlan   *up = list_nth(user_plans, i);

		if (up->busy > 0)
			continue;
		user_plans = list_delete_nth_cell(user_plans, i);
		SPI_freeplan(up->plan);
		if (up->bounded)
			SPI_freeplan(up->bounded);
		forget_hint(up);
		pfree(up->sql);
		if (up->bounded_sql)
			pfree(up->bounded_sql);
		pfree(up);
	}
}

static bool
contains_param_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, ParamRef))
		return true;
	return raw_expression_tree_walker(node, contains_param_walker, context);
}

static void
reject(const char *what, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_SYNTAX_ERROR),
			 errmsg("%s must be a single SQL %s", what,
					strcmp(what, "filter") == 0 ? "expression" : "ORDER BY list"),
			 errdetail("%s", why)));
}

/*
 * The caller's text must keep its parentheses and brackets balanced:
 * "true) OR (true" parses inside the wrapper, but in the real query it
 * would pull the conditions after it into an OR.  Scanned with
 * PostgreSQL's own lexer, so parentheses in strings and comments do not
 * count.
 */
static void
check_balanced(const char *what, const char *text)
{
	core_yy_extra_type extra;
	core_yyscan_t scanner;
	core_YYSTYPE yylval;
	YYLTYPE		yylloc;
	int			depth = 0;
	MemoryContext cxt = CurrentMemoryContext;
	bool		failed = false;

	PG_TRY();
	{
		scanner = scanner_init(text, &extra, &ScanKeywords, ScanKeywordTokens);
		for (;;)
		{
			int			tok = core_yylex(&yylval, &yylloc, scanner);

			if (tok == 0)
				break;
			if (tok == '(' || tok == '[')
				depth++;
			else if ((tok == ')' || tok == ']') && --depth < 0)
				break;
		}
		scanner_finish(scanner);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		failed = true;
	}
	PG_END_TRY();

	if (failed)
		reject(what, "It does not scan as SQL.");
	if (depth != 0)
		reject(what, "Its parentheses or brackets are not balanced.");
}

/*
 * Parse sql (the wrapper with the caller's text in it) and check that it
 * is one plain SELECT whose only parts are the expected ones.
 */
static void
check_wrapped(const char *what, const char *sql, bool is_order_by)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *stmts = NIL;
	SelectStmt *sel;
	char	   *parse_error = NULL;

	PG_TRY();
	{
		stmts = raw_parser(sql, RAW_PARSE_DEFAULT);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		parse_error = edata->message;
	}
	PG_END_TRY();

	if (parse_error != NULL)
		reject(what, psprintf("It does not parse on its own: %s.", parse_error));
	if (list_length(stmts) != 1)
		reject(what, "It contains more than one statement.");
	sel = (SelectStmt *) linitial_node(RawStmt, stmts)->stmt;
	if (!IsA(sel, SelectStmt) || sel->op != SETOP_NONE)
		reject(what, "It changes the structure of the query.");
	if (sel->fromClause != NIL || sel->whereClause != NULL ||
		sel->groupClause != NIL || sel->havingClause != NULL ||
		sel->windowClause != NIL || sel->valuesLists != NIL ||
		sel->limitCount != NULL || sel->limitOffset != NULL ||
		sel->lockingClause != NIL || sel->withClause != NULL ||
		sel->intoClause != NULL || sel->distinctClause != NIL ||
		list_length(sel->targetList) != 1 ||
		(sel->sortClause != NIL) != is_order_by)
		reject(what, "It adds clauses of its own to the query.");
	if (contains_param_walker((Node *) sel->targetList, NULL) ||
		contains_param_walker((Node *) sel->sortClause, NULL))
		reject(what, "It refers to query parameters ($n).");
}

void
dlock_check_filter(const char *filter)
{
	check_balanced("filter", filter);
	check_wrapped("filter", psprintf("SELECT (\n%s\n)", filter), false);
}

void
dlock_check_order_by(const char *order_by)
{
	check_balanced("order_by", order_by);
	check_wrapped("order_by", psprintf("SELECT 1 ORDER BY\n%s\n", order_by), true);
}

/*
 *	SELECT ROW(tbl.*)::schema.tbl, tbl.pk FROM [ONLY] schema.tbl
 *	 WHERE (filter) AND NOT (tbl.pk OPERATOR(s.=) ANY ($1))
 *	   AND ext.dlock_claim_unheld(claim_relid, tbl.pk)
 *	 ORDER BY order_by
 *	 LIMIT n
 *	 FOR UPDATE OF tbl SKIP LOCKED
 *
 * dlock_claim_unheld (claim.c) looks each row the scan reaches up in
 * dlock.claim's primary key, after the filter and before the row lock,
 * the way a hand-written NOT EXISTS would: the cost of a claim grows with
 * the rows its scan reaches, not with the live claims of the table (until
 * ALTER EXTENSION ... UPDATE adds the function, fn_schema is NULL and
 * held rows are dropped after fetching them, in claim.c).  $1
 * holds the rows already tried in this call (usually none).  LIMIT is the
 * batch size, a constant, so that the plan is made for it; a second run
 * for the rest of a batch asks SPI for fewer rows.
 */
static char *
build_sql(const ClaimRequest *req, int bound_dir)
{
	const ClaimTarget *t = req->target;
	StringInfoData sql;

	initStringInfo(&sql);
	/*
	 * The whole row as ROW(tbl.*)::type: a bare "tbl" would name a column
	 * if the table has one with its own name.
	 */
	appendStringInfo(&sql, "SELECT ROW(%s.*)::%s, %s.%s FROM %s%s",
					 t->relname, t->qualname, t->relname, t->pk_colname,
					 t->relkind == 'r' ? "ONLY " : "", t->qualname);
	appendStringInfo(&sql, " WHERE (\n%s\n)", req->filter ? req->filter : "true");
	appendStringInfo(&sql, " AND NOT (%s.%s %s ANY ($1))",
					 t->relname, t->pk_colname, t->pk_eq_op);
	if (req->fn_schema)
		appendStringInfo(&sql, " AND %s.dlock_claim_unheld('%u'::pg_catalog.oid, %s.%s)",
						 req->fn_schema, t->claim_relid, t->relname, t->pk_colname);
	/* stepping over the held rows at the head of the order: after $2 */
	if (bound_dir != 0)
		appendStringInfo(&sql, " AND %s.%s %s $2", t->relname, t->pk_colname,
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
 * Whether claims in this order can step over held rows at its head with a
 * bound on the primary key: 1 when the order is the primary key ascending
 * (order_by NULL, or naming just that column), -1 descending, else 0.
 * Needs the per-row check installed (claim.c learns the bound from it).
 */
static int
step_direction(const ClaimRequest *req)
{
	const ClaimTarget *t = req->target;
	List	   *stmts;
	SelectStmt *sel;
	SortBy	   *sb;
	ColumnRef  *cr;
	int			dir;

	if (req->fn_schema == NULL)
		return 0;
	if (req->order_by == NULL)
		return t->pk_gt_op ? 1 : 0;
	/* order_by has passed dlock_check_order_by: it parses */
	stmts = raw_parser(psprintf("SELECT 1 ORDER BY\n%s\n", req->order_by),
					   RAW_PARSE_DEFAULT);
	sel = (SelectStmt *) linitial_node(RawStmt, stmts)->stmt;
	if (list_length(sel->sortClause) != 1)
		return 0;
	sb = linitial(sel->sortClause);
	if (!IsA(sb->node, ColumnRef) || sb->sortby_nulls != SORTBY_NULLS_DEFAULT)
		return 0;
	cr = (ColumnRef *) sb->node;
	if (list_length(cr->fields) > 2 || !IsA(llast(cr->fields), String) ||
		strcmp(strVal(llast(cr->fields)), t->pk_attname) != 0)
		return 0;
	if (list_length(cr->fields) == 2 &&
		(!IsA(linitial(cr->fields), String) ||
		 strcmp(strVal(linitial(cr->fields)), t->plain_relname) != 0))
		return 0;
	if (sb->sortby_dir == SORTBY_DEFAULT || sb->sortby_dir == SORTBY_ASC)
		dir = 1;
	else if (sb->sortby_dir == SORTBY_DESC)
		dir = -1;
	else
		return 0;
	if ((dir > 0 && t->pk_gt_op == NULL) || (dir < 0 && t->pk_lt_op == NULL))
		return 0;
	return dir;
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
	int			from;

	if (at == NULL)
		return false;
	from = pg_mbstrlen_with_len(sql, at + strlen(marker) - sql);
	if (pos <= from || pos > from + pg_mbstrlen(arg))
		return false;
	*argpos = pos - from;
	return true;
}

/*
 * An error raised while the claim query is planned or run (an unknown
 * column in the caller's filter, a missing privilege, an error in a
 * function the filter calls) is reported against the caller's own text:
 * a position in the filter or order_by is moved into that argument, and
 * dlock's query text, which SPI adds to the error, is taken out again.
 * Called in a PG_CATCH block with the error still current; rethrows it.
 */
void
dlock_claim_query_rethrow(MemoryContext cxt, const ClaimRequest *req)
{
	const ClaimTarget *t = req->target;
	const char *filter = req->filter;
	const char *order_by = req->order_by;
	char	   *sql = build_sql(req, 0);
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
			char	   *b = build_sql(req, dir);

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
			psprintf("claim query of dlock_claim on table %s (filter %s, order_by %s)",
					 t->qualname, filter ? filter : "NULL",
					 order_by ? order_by : "NULL");

		edata->context = edata->context ?
			psprintf("%s\n%s", edata->context, mine) : mine;
	}
	ReThrowError(edata);
}

static SPIPlanPtr
prepare_plan(const ClaimRequest *req, const char *sql, int nargs)
{
	Oid			types[2] = {req->target->pk_array_type, req->target->pk_type};
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
 * Prepared once per distinct query text, table and key type in this
 * backend (at most MAX_CACHED_PLANS idle ones are kept) as generic plans:
 * the parameters, the rows already tried (nearly always none) and the step
 * bound, change nothing the planner should plan for.  A table dropped and
 * created again under the same name is another table (another relid), so
 * its plans are new ones, with its key type.
 */
ClaimPlan *
dlock_claim_plan(const ClaimRequest *req)
{
	const ClaimTarget *t = req->target;
	char	   *sql = build_sql(req, 0);
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
		if (up->relid == t->relid && up->pk_type == t->pk_type &&
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

	plan = prepare_plan(req, sql, 1);
	up = MemoryContextAllocZero(TopMemoryContext, sizeof(UserPlan));
	up->sql = MemoryContextStrdup(TopMemoryContext, sql);
	up->relid = t->relid;
	up->pk_type = t->pk_type;
	up->busy = 1;
	up->plan = plan;
	up->step_dir = step_direction(req);
	if (up->step_dir != 0)
		up->bounded_sql = MemoryContextStrdup(TopMemoryContext,
											  build_sql(req, up->step_dir));
	up->typlen = t->pk_typlen;
	up->byval = t->pk_byval;

	old = MemoryContextSwitchTo(TopMemoryContext);
	user_plans = lcons(up, user_plans);
	trim_user_plans();
	MemoryContextSwitchTo(old);
	return (ClaimPlan *) up;
}

/* whether claims run through cp can step over held rows */
bool
dlock_claim_plan_steps(ClaimPlan *cp)
{
	return ((UserPlan *) cp)->step_dir != 0;
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
	bool		have = dlock_claim_returns_read(returns);

	if (!have)
		*returns = PG_UINT64_MAX;
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
		up->bounded = prepare_plan(req, up->bounded_sql, 2);
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
