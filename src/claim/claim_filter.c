/*-------------------------------------------------------------------------
 *
 * claim_filter.c
 *		The caller's SQL text in a claim: checking that filter and order_by
 *		are what they claim to be, and reading order_by's direction.
 *		claim_query.c places them in the claim query.
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

#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "parser/scanner.h"

#include "claim/claim_int.h"

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
					strcmp(what, "order_by") != 0 ? "expression" : "ORDER BY list"),
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

/* group_by: one expression, checked as filter is */
void
dlock_check_group_by(const char *group_by)
{
	check_balanced("group_by", group_by);
	check_wrapped("group_by", psprintf("SELECT (\n%s\n)", group_by), false);
}

void
dlock_check_order_by(const char *order_by)
{
	check_balanced("order_by", order_by);
	check_wrapped("order_by", psprintf("SELECT 1 ORDER BY\n%s\n", order_by), true);
}

/*
 * Whether claims in order_by (checked by dlock_check_order_by; NULL: the
 * primary key's order) on table t can step over held rows at the head of
 * the order with a bound on the primary key: 1 when the order is the
 * primary key ascending (order_by NULL, or naming just that column), -1
 * descending, else 0.
 */
int
dlock_claim_order_step(const ClaimTarget *t, const char *order_by)
{
	List	   *stmts;
	SelectStmt *sel;
	SortBy	   *sb;
	ColumnRef  *cr;
	int			dir;

	if (order_by == NULL)
		return t->pk_gt_op ? 1 : 0;
	/* order_by has passed dlock_check_order_by: it parses */
	stmts = raw_parser(psprintf("SELECT 1 ORDER BY\n%s\n", order_by),
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
