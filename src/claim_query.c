/*-------------------------------------------------------------------------
 *
 * claim_query.c
 *		The query a claim runs on the user's table: checking the caller's
 *		filter and order_by, building the query around them, and reporting
 *		its errors against the caller's text.  Its plans are kept in
 *		claim_plan.c.
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
 *	   AND ext.dlock_claim_unheld(claim_relid, tbl.pk, $2)
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
 * holds the rows already tried in this call (usually none).  $2 is the
 * claim's ticket (claim.c): a call of dlock_claim_unheld in the caller's
 * filter cannot name it, so it is answered as any direct call is, never
 * for rows the caller cannot see.  LIMIT is the
 * batch size, a constant, so that the plan is made for it; a second run
 * for the rest of a batch asks SPI for fewer rows.
 */
char *
dlock_claim_query_sql(const ClaimRequest *req, int bound_dir)
{
	const ClaimTarget *t = req->target;
	StringInfoData sql;

	initStringInfo(&sql);

	/*
	 * The whole row as ROW(tbl.*)::type: a bare "tbl" would name a column if
	 * the table has one with its own name.
	 */
	appendStringInfo(&sql, "SELECT ROW(%s.*)::%s, %s.%s FROM %s%s",
					 t->relname, t->qualname, t->relname, t->pk_colname,
					 t->relkind == 'r' ? "ONLY " : "", t->qualname);
	appendStringInfo(&sql, " WHERE (\n%s\n)", req->filter ? req->filter : "true");
	appendStringInfo(&sql, " AND NOT (%s.%s %s ANY ($1))",
					 t->relname, t->pk_colname, t->pk_eq_op);
	if (req->fn_schema)
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
 * Whether claims in this order can step over held rows at its head with a
 * bound on the primary key: 1 when the order is the primary key ascending
 * (order_by NULL, or naming just that column), -1 descending, else 0.
 * Needs the per-row check installed (claim.c learns the bound from it).
 */
int
dlock_claim_query_step(const ClaimRequest *req)
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
	char	   *sql = dlock_claim_query_sql(req, 0);
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
			char	   *b = dlock_claim_query_sql(req, dir);

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
