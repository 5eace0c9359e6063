/*-------------------------------------------------------------------------
 *
 * guard_key.c
 *		A guarded row's key: the guard's key expression, an SQL expression
 *		over the row's columns, evaluated through SPI over the row.
 *
 * The expression is the select list of one query over the row passed as
 * its parameter:
 *
 *		SELECT (expr)::pg_catalog.text FROM (SELECT ($1).*) AS dlock_guard_row
 *
 * with $1 of the table's row type (a partition's own: the row trigger is
 * cloned onto partitions with its arguments).  Its plan is prepared once
 * per table in this backend and kept (SPI_keepplan), and prepared again
 * when the table changes (a relcache invalidation) or the expression does
 * (dlock_guard again).  It is prepared, and run, with search_path pinned
 * to pg_catalog, pg_temp (dlock_guard_trigger's SET clause; dlock_guard's
 * for the check): the writer's search_path cannot redirect a function or
 * an operator of the expression, so functions of the user's must be named
 * with their schema.  The expression runs as the writer, read-only.
 *
 * The expression must be one expression: dlock_guard_key_check parses
 * SELECT (expr) alone first and refuses anything else (a FROM, a second
 * column, ...) with 42601.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/spi.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "base/base.h"
#include "guard/guard.h"

/* a table's kept plan */
typedef struct KeyPlan
{
	Oid			relid;			/* hash key */
	char	   *expr;			/* the expression it was made of */
	Oid			rowtype;
	SPIPlanPtr	plan;
	bool		stale;			/* the table changed: prepare again */
} KeyPlan;

static HTAB *plans = NULL;

static void
plans_inval(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS seq;
	KeyPlan    *p;

	if (plans == NULL)
		return;
	hash_seq_init(&seq, plans);
	while ((p = hash_seq_search(&seq)) != NULL)
		if (!OidIsValid(relid) || p->relid == relid)
			p->stale = true;
}

static KeyPlan *
plan_entry(Oid relid)
{
	bool		found;
	KeyPlan    *p;

	if (plans == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(KeyPlan);
		ctl.hcxt = CacheMemoryContext;
		plans = hash_create("dlock guard key plans", 16, &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		CacheRegisterRelcacheCallback(plans_inval, (Datum) 0);
	}
	p = hash_search(plans, &relid, HASH_ENTER, &found);
	if (!found)
	{
		p->expr = NULL;
		p->plan = NULL;
		p->rowtype = InvalidOid;
		p->stale = false;
	}
	return p;
}

/* Refuse anything but one expression (42601), before it is prepared. */
static void
check_one_expression(const char *expr)
{
	char	   *sql = psprintf("SELECT (%s)", expr);
	List	   *raw = raw_parser(sql, RAW_PARSE_DEFAULT);
	SelectStmt *s;

	if (list_length(raw) == 1 &&
		IsA(((RawStmt *) linitial(raw))->stmt, SelectStmt))
	{
		s = (SelectStmt *) ((RawStmt *) linitial(raw))->stmt;
		if (s->op == SETOP_NONE && list_length(s->targetList) == 1 &&
			s->fromClause == NIL && s->whereClause == NULL &&
			s->groupClause == NIL && s->havingClause == NULL &&
			s->windowClause == NIL && s->sortClause == NIL &&
			s->limitCount == NULL && s->limitOffset == NULL &&
			s->lockingClause == NIL && s->withClause == NULL &&
			s->distinctClause == NIL && s->intoClause == NULL &&
			s->valuesLists == NIL)
			return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_SYNTAX_ERROR),
			 errmsg("the key of a guard must be one expression"),
			 errdetail("The key is an SQL expression over the row's columns, such as $$'report/' || id$$.")));
}

static SPIPlanPtr
prepare(Relation rel, const char *expr)
{
	char	   *sql;
	Oid			argtype = rel->rd_rel->reltype;
	SPIPlanPtr	plan;

	check_one_expression(expr);
	sql = psprintf("SELECT (%s)::pg_catalog.text"
				   " FROM (SELECT ($1).*) AS dlock_guard_row", expr);
	plan = SPI_prepare(sql, 1, &argtype);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for the key of a guard: %s",
			 SPI_result_code_string(SPI_result));
	return plan;
}

/*
 * Check expr as the key of rel's guard (dlock_guard): one expression that
 * can be prepared over rel's row.  Errors otherwise.
 */
void
dlock_guard_key_check(Relation rel, const char *expr)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	(void) prepare(rel, expr);
	SPI_finish();
}

/* rel's kept plan for expr, prepared if need be (in SPI) */
static SPIPlanPtr
kept_plan(Relation rel, const char *expr)
{
	KeyPlan    *p = plan_entry(RelationGetRelid(rel));
	SPIPlanPtr	plan;

	if (p->plan != NULL && !p->stale && p->rowtype == rel->rd_rel->reltype &&
		strcmp(p->expr, expr) == 0)
		return p->plan;
	if (p->plan != NULL)
		SPI_freeplan(p->plan);
	if (p->expr != NULL)
		pfree(p->expr);
	p->plan = NULL;
	p->expr = NULL;
	plan = prepare(rel, expr);
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	p->expr = MemoryContextStrdup(CacheMemoryContext, expr);
	p->rowtype = rel->rd_rel->reltype;
	p->stale = false;
	p->plan = plan;
	return plan;
}

/*
 * The key of row tup of rel under expr, in the caller's memory context;
 * NULL when the expression gives NULL.
 */
text *
dlock_guard_key_of(Relation rel, const char *expr, HeapTuple tup)
{
	MemoryContext cxt = CurrentMemoryContext;
	Datum		row;
	Datum		d;
	bool		isnull;
	text	   *key = NULL;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	row = heap_copy_tuple_as_datum(tup, RelationGetDescr(rel));
	if (SPI_execute_plan(kept_plan(rel, expr), &row, NULL, true, 2) !=
		SPI_OK_SELECT || SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("the key of the guard of table \"%s\" gave %llu rows",
						RelationGetRelationName(rel),
						(unsigned long long) SPI_processed),
				 errdetail("The key must be an expression giving one value per row.")));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
					  &isnull);
	if (!isnull)
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		key = DatumGetTextPCopy(d);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return key;
}
