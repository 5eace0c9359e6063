/*-------------------------------------------------------------------------
 *
 * claim_sql.c
 *		SQL-callable entry points for claims.  Each checks and unpacks its
 *		arguments (the caller's filter and order_by in claim_filter.c) and
 *		calls claim_take.c, claim_manage.c, claim_unheld.c or claim_ddl*.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/supportnodes.h"
#include "parser/parse_func.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"

#include "base/base.h"
#include "claim/claim_int.h"
#include "claim/claim.h"

/*
 * The table argument.  fn, when given, is a function of the table's claim
 * holders, which needs what dlock_claim needs of the caller: USAGE on the
 * table's schema and UPDATE on the table.
 */
static const ClaimTarget *
arg_table(FunctionCallInfo fcinfo, int argno, const char *fn)
{
	const ClaimTarget *t;

	dlock_arg_not_null(fcinfo, argno, "table");
	t = dlock_claim_target_for_rel(PG_GETARG_OID(argno), fn);
	return t;
}

/*
 * The quoted schema of dlock_claim_unheld(tbl, key, ticket), the claim
 * query's per-row check: the schema of the calling dlock_claim.  NULL
 * while the extension is still at a version without it (0.1 to 0.3: the
 * library was updated, the extension not yet): claims then check rows
 * after fetching them.
 */
static const char *
unheld_check_schema(Oid claim_fn)
{
	char	   *nsp = get_namespace_name(get_func_namespace(claim_fn));
	Oid			argtypes[3] = {REGCLASSOID, ANYELEMENTOID, INT8OID};
	List	   *name = list_make2(makeString(nsp), makeString("dlock_claim_unheld"));

	if (!OidIsValid(LookupFuncName(name, 3, argtypes, true)))
		return NULL;
	return quote_identifier(nsp);
}

static char *
arg_sql_text(FunctionCallInfo fcinfo, int argno, const char *what)
{
	char	   *s;

	if (PG_ARGISNULL(argno))
		return NULL;
	s = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (s[strspn(s, " \t\r\n")] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what),
				 errhint("Pass NULL for no %s.", what)));
	return s;
}

/*
 * The key texts of the elements of an array argument; *elems_out (if
 * given) gets the elements themselves, and *exists_out (if given) whether
 * the table has a row with each key.
 */
static text **
arg_keys(FunctionCallInfo fcinfo, int argno, const ClaimTarget *t, int *n,
		 Datum **elems_out, bool **exists_out)
{
	ArrayType  *arr;
	Oid			elemtype;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	text	  **keys;
	int			io;

	dlock_arg_not_null(fcinfo, argno, "keys");
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	elemtype = ARR_ELEMTYPE(arr);
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(arr, elemtype, typlen, typbyval, typalign,
					  &elems, &nulls, n);
	keys = palloc(sizeof(text *) * Max(*n, 1));
	if (exists_out)
		*exists_out = palloc(sizeof(bool) * Max(*n, 1));
	io = dlock_claim_io_begin(t, elemtype);
	for (int i = 0; i < *n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("keys must not contain nulls")));
		keys[i] = dlock_claim_key_text_of_arg(t, elems[i], elemtype,
											  exists_out ? &(*exists_out)[i] : NULL);
	}
	dlock_claim_io_end(io);
	if (elems_out)
		*elems_out = elems;
	return keys;
}

/*
 * The arguments 0.5 added (wait, backoff, backoff_max, group_by,
 * per_group, fair), from argument 7 on; a call through an older
 * extension's dlock_claim has none of them, and gets their defaults.
 */
static void
arg_claim_05(FunctionCallInfo fcinfo, ClaimRequest *req)
{
	req->wait_us = 0;
	req->backoff_us = 0;
	req->backoff_max_us = 0;
	req->group_by = NULL;
	req->per_group = 0;
	req->fair = false;
	req->groups = NULL;
	if (PG_NARGS() < 13)
		return;
	req->wait_us = dlock_arg_wait(fcinfo, 7);
	req->backoff_us = Max(dlock_arg_delay(fcinfo, 8, "backoff"), 0);
	req->backoff_max_us = dlock_arg_delay(fcinfo, 9, "backoff_max");
	if (req->backoff_max_us >= 0 && req->backoff_us == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("backoff_max needs backoff"),
				 errdetail("backoff_max caps a backoff that doubles per attempt, from backoff."),
				 errhint("Pass backoff too, or no backoff_max for a fixed delay.")));
	if (req->backoff_max_us >= 0 && req->backoff_max_us < req->backoff_us)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("backoff_max must not be less than backoff")));
	req->backoff_max_us = Max(req->backoff_max_us, 0);
	req->group_by = arg_sql_text(fcinfo, 10, "group_by");
	if (!PG_ARGISNULL(11))
	{
		req->per_group = PG_GETARG_INT32(11);
		if (req->per_group < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("per_group must be at least 1"),
					 errdetail("per_group was %d.", req->per_group)));
	}
	dlock_arg_not_null(fcinfo, 12, "fair");
	req->fair = PG_GETARG_BOOL(12);
	if ((req->per_group > 0 || req->fair) && req->group_by == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s needs group_by", req->fair ? "fair" : "per_group"),
				 errhint("Pass group_by, the expression whose values are the groups.")));
	if (req->group_by)
		dlock_check_group_by(req->group_by);
}

/*
 * dlock_claim(rowtype anyelement, holder text, n int,
 *			   ttl interval DEFAULT '30 seconds', filter text DEFAULT NULL,
 *			   order_by text DEFAULT NULL, max_attempts int DEFAULT NULL,
 *			   wait interval DEFAULT '0', backoff interval DEFAULT NULL,
 *			   backoff_max interval DEFAULT NULL, group_by text DEFAULT NULL,
 *			   per_group int DEFAULT NULL, fair boolean DEFAULT false)
 *		RETURNS SETOF anyelement
 *
 * Claims up to n rows of the table whose row type rowtype is, that match
 * filter, in order_by order (default: primary key), that no live claim
 * holds; returns them whole.  rowtype's value is ignored (NULL::tbl).
 * NULL holder, n, ttl, wait or fair is an error; NULL filter, order_by,
 * max_attempts, backoff, backoff_max, group_by and per_group mean none.
 */
PG_FUNCTION_INFO_V1(dlock_claim_sql);
Datum
dlock_claim_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ClaimRequest req;
	Oid			rowtype = get_fn_expr_argtype(fcinfo->flinfo, 0);

	req.target = dlock_claim_target_for_type(rowtype, "dlock_claim()");
	req.holder = dlock_arg_holder(fcinfo, 1);
	dlock_arg_not_null(fcinfo, 2, "n");
	req.n = PG_GETARG_INT32(2);
	if (req.n < 1 || req.n > DLOCK_MAX_CLAIM_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n must be between 1 and %d", DLOCK_MAX_CLAIM_BATCH),
				 errdetail("n was %d.", req.n)));
	req.ttl_us = dlock_arg_ttl(fcinfo, 3, false);
	req.filter = arg_sql_text(fcinfo, 4, "filter");
	req.order_by = arg_sql_text(fcinfo, 5, "order_by");
	req.max_attempts = 0;
	req.fn_schema = unheld_check_schema(fcinfo->flinfo->fn_oid);
	if (!PG_ARGISNULL(6))
	{
		req.max_attempts = PG_GETARG_INT32(6);
		if (req.max_attempts < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_attempts must be at least 1")));
	}
	if (req.filter)
		dlock_check_filter(req.filter);
	if (req.order_by)
		dlock_check_order_by(req.order_by);
	arg_claim_05(fcinfo, &req);
	/* stepping over held rows needs the per-row check: it learns the bound */
	req.step_dir = req.fn_schema ?
		dlock_claim_order_step(req.target, req.order_by) : 0;
	dlock_arg_writes_allowed("dlock_claim()");

	InitMaterializedSRF(fcinfo, 0);
	if (req.wait_us > 0)
		dlock_claim_wait(&req, rsinfo->setResult, rsinfo->setDesc);
	else
		(void) dlock_claim_rows(&req, rsinfo->setResult, rsinfo->setDesc);
	PG_RETURN_VOID();
}

/*
 * dlock_claim(rowtype text, holder text, n int,
 *			   ttl interval DEFAULT '30 seconds', filter text DEFAULT NULL,
 *			   order_by text DEFAULT NULL, max_attempts int DEFAULT NULL)
 *		RETURNS SETOF text
 *
 * Never claims.  This overload only catches a first argument without a
 * type, a quoted table name as in dlock_claim('jobs', ...), which
 * PostgreSQL would otherwise refuse with "could not determine polymorphic
 * type because input has type unknown" before dlock could say anything (a
 * row type argument, NULL::jobs, never matches text).  Always an error,
 * whose hint shows the call to write; any argument may be NULL.
 */
PG_FUNCTION_INFO_V1(dlock_claim_untyped_sql);
Datum
dlock_claim_untyped_sql(PG_FUNCTION_ARGS)
{
	const char *name = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));

	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("the first argument of dlock_claim must be a row type, not text"),
			 errdetail("dlock_claim finds its table by the type of its first "
					   "argument; a quoted name or a NULL has no row type."),
			 name ? errhint("Pass a NULL of the table's row type: dlock_claim(NULL::%s, ...).", name)
			 : errhint("Pass a NULL of the table's row type: dlock_claim(NULL::my_table, ...).")));
	PG_RETURN_NULL();
}

/*
 * dlock_claim_unheld(tbl regclass, key anyelement) RETURNS boolean
 *
 * True when the caller can see the row of tbl with that primary key and no
 * live claim, and no poison mark, is on it; a claim of that row being
 * written or given back by an open transaction counts as held.  Needs what
 * dlock_claim needs.  NULL table or key is an error.
 */
PG_FUNCTION_INFO_V1(dlock_claim_unheld_sql);
Datum
dlock_claim_unheld_sql(PG_FUNCTION_ARGS)
{
	dlock_arg_not_null(fcinfo, 0, "table");
	dlock_arg_not_null(fcinfo, 1, "key");
	PG_RETURN_BOOL(!dlock_claim_row_held(PG_GETARG_OID(0), PG_GETARG_DATUM(1),
										 get_fn_expr_argtype(fcinfo->flinfo, 1)));
}

/* the per-row checks' table, key and ticket: a NULL one is an error */
static void
unheld_args_not_null(FunctionCallInfo fcinfo)
{
	dlock_arg_not_null(fcinfo, 0, "table");
	dlock_arg_not_null(fcinfo, 1, "key");
	dlock_arg_not_null(fcinfo, 2, "ticket");
}

/*
 * dlock_claim_unheld(tbl regclass, key anyelement, ticket bigint)
 *		RETURNS boolean
 *
 * The check dlock_claim's query runs on each row its scan reaches, with
 * the claim's ticket: true when no live claim, and no poison mark, is on
 * the row.  Runs no SQL (src/no_search_path.h).  Any other ticket, or a
 * NULL argument, is an error.
 */
PG_FUNCTION_INFO_V1(dlock_claim_unheld_ticket_sql);
Datum
dlock_claim_unheld_ticket_sql(PG_FUNCTION_ARGS)
{
	unheld_args_not_null(fcinfo);
	PG_RETURN_BOOL(!dlock_claim_row_held_in_claim(PG_GETARG_OID(0), PG_GETARG_DATUM(1),
												  get_fn_expr_argtype(fcinfo->flinfo, 1),
												  PG_GETARG_INT64(2)));
}

/*
 * dlock_claim_unheld(tbl regclass, key anyelement, ticket bigint, grp text)
 *		RETURNS boolean
 *
 * The check the query of a dlock_claim with group_by runs on each row its
 * scan reaches, with the claim's ticket and the text of the row's group_by
 * value: true when no live claim and no poison mark is on the row, and its
 * group may have another row (per_group, fair).  Runs no SQL but one scan
 * of dlock.claim's claim_group index per group and scan
 * (src/no_search_path.h).  A NULL grp is the group of NULL values; any
 * other ticket, or a NULL table, key or ticket, is an error.
 */
PG_FUNCTION_INFO_V1(dlock_claim_unheld_group_sql);
Datum
dlock_claim_unheld_group_sql(PG_FUNCTION_ARGS)
{
	unheld_args_not_null(fcinfo);
	PG_RETURN_BOOL(!dlock_claim_row_held_in_group(PG_GETARG_OID(0), PG_GETARG_DATUM(1),
												  get_fn_expr_argtype(fcinfo->flinfo, 1),
												  PG_GETARG_INT64(2),
												  PG_ARGISNULL(3) ? NULL : PG_GETARG_TEXT_PP(3)));
}

/*
 * dlock_claimed(tbl regclass, key anyelement, holder text) RETURNS boolean
 *
 * The fence for claims: true when holder (and the calling role) holds an
 * unexpired claim on the row of tbl with that primary key; the claim then
 * cannot be taken over until the calling transaction ends.  NULL
 * arguments are errors.
 */
PG_FUNCTION_INFO_V1(dlock_claimed_sql);
Datum
dlock_claimed_sql(PG_FUNCTION_ARGS)
{
	const ClaimTarget *t = arg_table(fcinfo, 0, "dlock_claimed()");
	text	   *key;
	text	   *holder;
	Oid			keytype;
	int			io;

	bool		exists;

	dlock_arg_not_null(fcinfo, 1, "key");
	keytype = get_fn_expr_argtype(fcinfo->flinfo, 1);
	io = dlock_claim_io_begin(t, keytype);
	key = dlock_claim_key_text_of_arg(t, PG_GETARG_DATUM(1), keytype, &exists);
	dlock_claim_io_end(io);
	holder = dlock_arg_holder(fcinfo, 2);
	/* a standby cannot hold off a takeover on the primary: no fence there */
	dlock_arg_writes_allowed("dlock_claimed()");
	/* a key that names no row: the row may be another key's now */
	if (!exists)
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(dlock_claim_check(t, key, holder));
}

/*
 * dlock_unclaim(tbl regclass, holder text) RETURNS bigint
 * dlock_unclaim(tbl regclass, holder text, keys anyarray) RETURNS bigint
 *
 * Gives back the holder's live claims on tbl (all, or the rows with those
 * primary keys) at once; returns how many.  NULL arguments are errors.
 */
PG_FUNCTION_INFO_V1(dlock_unclaim_sql);
Datum
dlock_unclaim_sql(PG_FUNCTION_ARGS)
{
	const ClaimTarget *t = arg_table(fcinfo, 0, "dlock_unclaim()");
	text	   *holder = dlock_arg_holder(fcinfo, 1);
	text	  **keys = NULL;
	int			nkeys = 0;

	if (PG_NARGS() > 2)
		keys = arg_keys(fcinfo, 2, t, &nkeys, NULL, NULL);
	dlock_arg_writes_allowed("dlock_unclaim()");
	PG_RETURN_INT64(dlock_claim_unclaim(t, holder, keys, nkeys));
}

/*
 * dlock_unclaim(tbl regclass, holder text, keys anyarray,
 *				 retry_after interval) RETURNS bigint
 *
 * Gives back the holder's live claims on the rows of tbl with those
 * primary keys as failed: free at once, but not claimable again before
 * now + retry_after (NULL: each claim's own backoff, none if it asked for
 * none); returns how many.  NULL tbl, holder or keys, and a negative
 * retry_after, are errors.
 */
PG_FUNCTION_INFO_V1(dlock_unclaim_retry_sql);
Datum
dlock_unclaim_retry_sql(PG_FUNCTION_ARGS)
{
	const ClaimTarget *t = arg_table(fcinfo, 0, "dlock_unclaim()");
	text	   *holder = dlock_arg_holder(fcinfo, 1);
	int			nkeys = 0;
	text	  **keys = arg_keys(fcinfo, 2, t, &nkeys, NULL, NULL);
	int64		retry_us = dlock_arg_delay(fcinfo, 3, "retry_after");

	dlock_arg_writes_allowed("dlock_unclaim()");
	PG_RETURN_INT64(dlock_claim_unclaim_failed(t, holder, keys, nkeys,
											   retry_us));
}

/*
 * dlock_claim_wakeup(tbl regclass) RETURNS void
 *
 * Puts dlock's statement trigger on tbl (AFTER INSERT OR UPDATE, FOR EACH
 * STATEMENT), unless it is there already: the commits of its inserts and
 * updates then wake a claim waiting for its rows.  Runs as the caller, who
 * needs the right to create a trigger on tbl; the table must be one rows
 * can be claimed from, with what dlock_claim needs.  NULL is an error.
 */
PG_FUNCTION_INFO_V1(dlock_claim_wakeup_sql);
Datum
dlock_claim_wakeup_sql(PG_FUNCTION_ARGS)
{
	(void) arg_table(fcinfo, 0, "dlock_claim_wakeup()");
	dlock_claim_wakeup_install(PG_GETARG_OID(0),
							   get_func_namespace(fcinfo->flinfo->fn_oid));
	PG_RETURN_VOID();
}

/*
 * dlock_claim_wakeup_trigger() RETURNS trigger
 *
 * dlock_claim_wakeup's trigger, after a statement's inserts or updates:
 * notes that this transaction changed the table (claim_wait.c), so that a
 * claim waiting for its rows is woken when it commits.  Anything but an
 * AFTER ... FOR EACH STATEMENT trigger call is an error.
 */
PG_FUNCTION_INFO_V1(dlock_claim_wakeup_trigger);
Datum
dlock_claim_wakeup_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_AFTER(td->tg_event) ||
		!TRIGGER_FIRED_FOR_STATEMENT(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("dlock_claim_wakeup_trigger() must run as an AFTER ... FOR EACH STATEMENT trigger"),
				 errhint("Put it on a table with dlock_claim_wakeup(table).")));
	dlock_claim_wait_note_change(RelationGetRelid(td->tg_relation));
	PG_RETURN_POINTER(NULL);
}

/*
 * dlock_complete(tbl regclass, holder text, keys anyarray)
 *		RETURNS SETOF anyelement
 *
 * Completion and its fence in one call: gives back the holder's (and the
 * calling role's) live claims on the rows of tbl with these primary keys,
 * and returns those keys, in the order given, each once.  Keys whose
 * claim the holder no longer holds (expired, taken over, never claimed)
 * are left out.  Nobody can claim the returned rows again before the
 * calling transaction ends; if it rolls back, the claims are the holder's
 * again.  NULL arguments and more than DLOCK_MAX_CLAIM_BATCH keys are
 * errors.
 */
PG_FUNCTION_INFO_V1(dlock_complete_sql);
Datum
dlock_complete_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const ClaimTarget *t = arg_table(fcinfo, 0, "dlock_complete()");
	text	   *holder = dlock_arg_holder(fcinfo, 1);
	Datum	   *elems;
	bool	   *exists;
	int			nkeys;
	text	  **keys = arg_keys(fcinfo, 2, t, &nkeys, &elems, &exists);
	text	  **sorted;
	int			nsorted;
	bool	   *done;

	if (nkeys > DLOCK_MAX_CLAIM_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("dlock_complete() takes at most %d keys", DLOCK_MAX_CLAIM_BATCH),
				 errdetail("%d keys were given.", nkeys),
				 errhint("Complete the rows in batches, or give claims back without a fence with dlock_unclaim().")));
	dlock_arg_writes_allowed("dlock_complete()");
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	sorted = palloc(sizeof(text *) * Max(nkeys, 1));
	memcpy(sorted, keys, sizeof(text *) * nkeys);
	nsorted = dlock_sort_unique_keys(sorted, nkeys);
	done = palloc(sizeof(bool) * Max(nsorted, 1));
	(void) dlock_claim_complete(t, holder, sorted, nsorted, done);

	for (int i = 0; i < nkeys; i++)
	{
		text	  **hit = bsearch(&keys[i], sorted, nsorted, sizeof(text *),
								  dlock_text_cmp);
		bool		isnull = false;

		/* a key that names no row is given back, but fences nothing */
		if (hit != NULL && done[hit - sorted] && exists[i])
		{
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
								 &elems[i], &isnull);
			done[hit - sorted] = false; /* each key once */
		}
	}
	return (Datum) 0;
}

/*
 * dlock_renew_claims(tbl regclass, holder text, ttl interval DEFAULT NULL)
 *		RETURNS bigint
 *
 * Heartbeat: extends every live claim of holder on tbl to now + ttl
 * (NULL: the ttl each was claimed with); returns how many.
 */
PG_FUNCTION_INFO_V1(dlock_renew_claims_sql);
Datum
dlock_renew_claims_sql(PG_FUNCTION_ARGS)
{
	const ClaimTarget *t = arg_table(fcinfo, 0, "dlock_renew_claims()");
	text	   *holder = dlock_arg_holder(fcinfo, 1);
	int64		ttl_us = dlock_arg_ttl(fcinfo, 2, true);

	dlock_arg_writes_allowed("dlock_renew_claims()");
	PG_RETURN_INT64(dlock_claim_renew(t, holder, ttl_us));
}

/*
 * dlock_reset_claims(tbl regclass, keys anyarray) RETURNS bigint
 *
 * For operators (EXECUTE revoked from PUBLIC), with what dlock_claim needs
 * on the table: forgets the claims, attempt counts and poison marks of
 * those rows, of the rows among them the caller can see if row-level
 * security applies to it; returns how many claim rows were deleted.
 */
PG_FUNCTION_INFO_V1(dlock_reset_claims_sql);
Datum
dlock_reset_claims_sql(PG_FUNCTION_ARGS)
{
	const ClaimTarget *t = arg_table(fcinfo, 0, "dlock_reset_claims()");
	int			nkeys;
	Datum	   *elems;
	text	  **keys = arg_keys(fcinfo, 1, t, &nkeys, &elems, NULL);

	/* the count must not tell of rows the caller cannot see */
	if (check_enable_rls(t->relid, InvalidOid, true) == RLS_ENABLED)
	{
		Oid			elemtype = ARR_ELEMTYPE(PG_GETARG_ARRAYTYPE_P(1));
		int			m = 0;

		for (int i = 0; i < nkeys; i++)
			if (dlock_claim_row_visible(t, elems[i], elemtype))
				keys[m++] = keys[i];
		nkeys = m;
	}
	dlock_arg_writes_allowed("dlock_reset_claims()");
	PG_RETURN_INT64(dlock_claim_reset(t, keys, nkeys));
}

/*
 * dlock_claim_ddl_start() RETURNS event_trigger
 *
 * The ddl_command_start event trigger of ALTER TABLE: notes, for the
 * tables the statement's names can mean, what names their rows (reading
 * catalogs only: it runs before PostgreSQL has checked the caller's
 * rights; claim_ddl.c).
 */
PG_FUNCTION_INFO_V1(dlock_claim_ddl_start_sql);
Datum
dlock_claim_ddl_start_sql(PG_FUNCTION_ARGS)
{
	EventTriggerData *d = dlock_arg_event_trigger(fcinfo, "dlock_claim_ddl_start()");

	/* extension scripts (dlock's own upgrades too) change extension objects */
	if (!creating_extension)
		dlock_claim_ddl_start(d->parsetree);
	PG_RETURN_NULL();
}

/*
 * dlock_claim_ddl_end() RETURNS event_trigger
 *
 * The ddl_command_end event trigger of ALTER TABLE and ALTER TYPE: claims
 * follow partitions detached and attached and enum labels renamed, and a
 * table whose primary key changed what it names forgets its claims
 * (claim_ddl.c).
 */
PG_FUNCTION_INFO_V1(dlock_claim_ddl_end_sql);
Datum
dlock_claim_ddl_end_sql(PG_FUNCTION_ARGS)
{
	EventTriggerData *d = dlock_arg_event_trigger(fcinfo, "dlock_claim_ddl_end()");

	if (creating_extension)
		PG_RETURN_NULL();
	if (IsA(d->parsetree, AlterEnumStmt))
	{
		AlterEnumStmt *stmt = (AlterEnumStmt *) d->parsetree;

		if (stmt->oldVal != NULL)
			dlock_claim_ddl_enum_renamed(stmt->oldVal, stmt->newVal);
	}
	else if (IsA(d->parsetree, AlterTableStmt))
		dlock_claim_ddl_end(d->parsetree);
	PG_RETURN_NULL();
}

/*
 * dlock_claim_ddl_drop() RETURNS event_trigger
 *
 * The sql_drop event trigger: dropped tables forget their claims.
 */
PG_FUNCTION_INFO_V1(dlock_claim_ddl_drop_sql);
Datum
dlock_claim_ddl_drop_sql(PG_FUNCTION_ARGS)
{
	(void) dlock_arg_event_trigger(fcinfo, "dlock_claim_ddl_drop()");
	if (!creating_extension)
		dlock_claim_ddl_dropped();
	PG_RETURN_NULL();
}

/*
 * dlock_claim_rows_support(internal) RETURNS internal
 *
 * Planner support for dlock_claim and dlock_complete: how many rows a call
 * returns.  With constant arguments that is known (at most n for
 * dlock_claim; at most the number of keys for dlock_complete), so that the
 * usual "UPDATE t ... FROM dlock_complete(...) AS d(id) WHERE t.id = d.id"
 * joins through t's primary key instead of scanning t for the 1,000 rows
 * a set-returning function is otherwise assumed to return.  Otherwise the
 * functions' ROWS estimate (100) stands.
 */
PG_FUNCTION_INFO_V1(dlock_claim_rows_support);
Datum
dlock_claim_rows_support(PG_FUNCTION_ARGS)
{
	Node	   *rawreq = (Node *) PG_GETARG_POINTER(0);
	SupportRequestRows *req;
	FuncExpr   *fe;
	char	   *name;
	Node	   *arg;

	if (!IsA(rawreq, SupportRequestRows))
		PG_RETURN_POINTER(NULL);
	req = (SupportRequestRows *) rawreq;
	if (!is_funcclause(req->node))
		PG_RETURN_POINTER(NULL);
	fe = (FuncExpr *) req->node;
	if (list_length(fe->args) < 3)
		PG_RETURN_POINTER(NULL);
	name = get_func_name(fe->funcid);
	arg = (Node *) lthird(fe->args);
	if (name == NULL || !IsA(arg, Const) || ((Const *) arg)->constisnull)
		PG_RETURN_POINTER(NULL);

	if (strcmp(name, "dlock_claim") == 0 && ((Const *) arg)->consttype == INT4OID)
		req->rows = Max(1, DatumGetInt32(((Const *) arg)->constvalue));
	else if (strcmp(name, "dlock_complete") == 0)
	{
		ArrayType  *keys = DatumGetArrayTypeP(((Const *) arg)->constvalue);

		req->rows = Max(1, ArrayGetNItems(ARR_NDIM(keys), ARR_DIMS(keys)));
	}
	else
		PG_RETURN_POINTER(NULL);
	PG_RETURN_POINTER(req);
}
