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
#include "utils/memutils.h"

#include "claim.h"

#define MAX_CACHED_PLANS	64

typedef struct UserPlan
{
	char	   *sql;
	Oid			relid;			/* the table and key type it was planned for */
	Oid			pk_type;
	int			busy;			/* claims running it now (nested calls) */
	SPIPlanPtr	plan;
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
		pfree(up->sql);
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
 *	 ORDER BY order_by
 *	 LIMIT $2
 *	 FOR UPDATE OF tbl SKIP LOCKED
 *
 * $1 holds the keys to leave out (live claims, and rows already tried in
 * this call), so that claimers do not lock and re-check every row other
 * claimers hold: the cost of a claim grows with the live claims, not with
 * the table.  For an integer key in the default order the query also
 * takes the bounds of a key range, $3 < pk < $4 (dlock_claim_query_ranged).
 */
/*
 * Whether claims of this table in this order can skip runs of live
 * claims with key ranges (claim.c): the default order, on an integer
 * primary key compared with the built-in operators.  The query then has
 * two more parameters, $3 and $4, the bounds (exclusive, NULL: none) of
 * the key range to read.
 */
bool
dlock_claim_query_ranged(const ClaimTarget *t, const char *order_by)
{
	return order_by == NULL &&
		(t->pk_type == INT2OID || t->pk_type == INT4OID ||
		 t->pk_type == INT8OID) &&
		strcmp(t->pk_eq_op, "OPERATOR(pg_catalog.=)") == 0;
}

static char *
build_sql(const ClaimTarget *t, const char *filter, const char *order_by)
{
	StringInfoData sql;

	initStringInfo(&sql);
	/*
	 * The whole row as ROW(tbl.*)::type: a bare "tbl" would name a column
	 * if the table has one with its own name.
	 */
	appendStringInfo(&sql, "SELECT ROW(%s.*)::%s, %s.%s FROM %s%s",
					 t->relname, t->qualname, t->relname, t->pk_colname,
					 t->relkind == 'r' ? "ONLY " : "", t->qualname);
	appendStringInfo(&sql, " WHERE (\n%s\n)", filter ? filter : "true");
	appendStringInfo(&sql, " AND NOT (%s.%s %s ANY ($1))",
					 t->relname, t->pk_colname, t->pk_eq_op);
	/* planned as constants, so the bounds become index conditions */
	if (dlock_claim_query_ranged(t, order_by))
		appendStringInfo(&sql,
						 " AND ($3 IS NULL OR %s.%s OPERATOR(pg_catalog.>) $3)"
						 " AND ($4 IS NULL OR %s.%s OPERATOR(pg_catalog.<) $4)",
						 t->relname, t->pk_colname, t->relname, t->pk_colname);
	if (order_by)
		appendStringInfo(&sql, " ORDER BY\n%s\n", order_by);
	else
		appendStringInfo(&sql, " ORDER BY %s.%s", t->relname, t->pk_colname);
	appendStringInfo(&sql, " LIMIT $2 FOR UPDATE OF %s SKIP LOCKED", t->relname);
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
dlock_claim_query_rethrow(MemoryContext cxt, const ClaimTarget *t,
						  const char *filter, const char *order_by)
{
	char	   *sql = build_sql(t, filter, order_by);
	ErrorData  *edata;
	const char *arg = NULL;
	const char *argname = NULL;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();

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

/*
 * The kept plan of a claim query, marked busy until
 * dlock_claim_user_plan_done.  Prepared once per distinct query text, table
 * and key type in this backend (at most MAX_CACHED_PLANS idle ones are
 * kept) with custom plans, so that the list of keys to leave out is planned
 * as a constant and tested through a hash table.  A table dropped and
 * created again under the same name is another table (another relid), so
 * its plans are new ones, with its key type.
 */
SPIPlanPtr
dlock_claim_user_plan(const ClaimTarget *t, const char *filter,
					  const char *order_by)
{
	char	   *sql = build_sql(t, filter, order_by);
	Oid			types[4] = {t->pk_array_type, INT8OID, t->pk_type, t->pk_type};
	int			nargs = dlock_claim_query_ranged(t, order_by) ? 4 : 2;
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
		if (up->relid == t->relid && up->pk_type == t->pk_type &&
			strcmp(up->sql, sql) == 0)
		{
			if (foreach_current_index(lc) > 0)
			{
				user_plans = foreach_delete_current(user_plans, lc);
				user_plans = lcons(up, user_plans);
			}
			up->busy++;
			return up->plan;
		}
	}

	{
		MemoryContext cxt = CurrentMemoryContext;

		PG_TRY();
		{
			plan = SPI_prepare_cursor(sql, nargs, types, CURSOR_OPT_CUSTOM_PLAN);
		}
		PG_CATCH();
		{
			dlock_claim_query_rethrow(cxt, t, filter, order_by);
		}
		PG_END_TRY();
	}
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for claim query: %s",
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	up = MemoryContextAlloc(TopMemoryContext, sizeof(UserPlan));
	up->sql = MemoryContextStrdup(TopMemoryContext, sql);
	up->relid = t->relid;
	up->pk_type = t->pk_type;
	up->busy = 1;
	up->plan = plan;

	old = MemoryContextSwitchTo(TopMemoryContext);
	user_plans = lcons(up, user_plans);
	trim_user_plans();
	MemoryContextSwitchTo(old);
	return up->plan;
}

/* The claim that got plan from dlock_claim_user_plan is done with it. */
void
dlock_claim_user_plan_done(SPIPlanPtr plan)
{
	ListCell   *lc;

	foreach(lc, user_plans)
	{
		UserPlan   *up = lfirst(lc);

		if (up->plan == plan)
		{
			if (up->busy > 0)
				up->busy--;
			break;
		}
	}
}
