/*-------------------------------------------------------------------------
 *
 * base_spi.c
 *		How dlock's C code runs its internal queries: as the owner of
 *		dlock's tables, through SPI plans prepared once and kept, and always
 *		against the latest committed state.
 *
 * dlock's tables grant nothing to ordinary roles.  The SQL functions are
 * not SECURITY DEFINER (claims must read the user's table with the
 * caller's own privileges); instead the C code switches to the owner of
 * the dlock schema around its own queries, the way PostgreSQL's foreign
 * key triggers switch to a table's owner, and switches back afterwards.
 * As the owner, dlock runs only its own queries on its own tables, and in
 * a security-restricted operation; anything that could run code of the
 * caller's (the user's table, its types) runs as the caller.  An error
 * restores the caller's identity through transaction abort.
 *
 * Every internal query is run with a fresh snapshot (GetLatestSnapshot),
 * as the foreign key checks do: a lock service must judge a lease by what
 * is committed now, also inside a REPEATABLE READ or SERIALIZABLE
 * transaction whose own snapshot is older.  The per-key lock (base_keylock.c)
 * guarantees that nobody else changes the key between our read and write.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/genam.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "base/base.h"
#include "base/base_int.h"

static Oid	owner_kept = InvalidOid;	/* dlock_schema_owner(), or none */
static bool owner_callback_registered = false;

/* any change of a schema (schema dlock dropped, its owner changed) */
static void
owner_inval(Datum arg, int cacheid, uint32 hashvalue)
{
	owner_kept = InvalidOid;
}

/* the owner of extension dlock, InvalidOid if there is none */
static Oid
extension_owner(void)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			owner = InvalidOid;

	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum("dlock"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	if (HeapTupleIsValid(tup = systable_getnext(scan)))
		owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return owner;
}

/*
 * The owner of dlock's objects, whom its internal queries run as: the
 * owner of the extension (the superuser who created it, and its tables),
 * not the owner of schema dlock, which an administrator may change (ALTER
 * SCHEMA dlock OWNER TO a role with no right on dlock's tables would
 * otherwise make every claim call, and every other role's ALTER TABLE and
 * DROP TABLE, fail).  Kept until a schema changes.
 */
Oid
dlock_schema_owner(void)
{
	Oid			nsp;
	HeapTuple	tup;
	Oid			owner;

	if (OidIsValid(owner_kept))
		return owner_kept;
	nsp = get_namespace_oid(DLOCK_SCHEMA, true);
	owner = extension_owner();
	if (!OidIsValid(nsp))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("schema \"%s\" of extension dlock does not exist", DLOCK_SCHEMA),
				 OidIsValid(owner) ?
				 errhint("The extension is installed but its schema was renamed; rename it back to \"%s\".",
						 DLOCK_SCHEMA) :
				 errhint("Run CREATE EXTENSION dlock in this database.")));
	if (!OidIsValid(owner))
	{
		tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for namespace %u", nsp);
		owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
		ReleaseSysCache(tup);
	}
	if (!owner_callback_registered)
	{
		CacheRegisterSyscacheCallback(NAMESPACEOID, owner_inval, (Datum) 0);
		owner_callback_registered = true;
	}
	owner_kept = owner;
	return owner;
}

/*
 * Settings for dlock's own queries, in a GUC nest level of their own from
 * dlock_spi_begin (or dlock_spi_as_owner) to dlock_spi_end (or
 * dlock_spi_as_caller):
 *
 *  - search_path = pg_catalog, pg_temp, whatever the caller's is: the
 *    queries name every table, function and operator with its schema
 *    anyway, and nothing a role creates in public or pg_temp can stand in
 *    for them;
 *  - enable_seqscan = off: dlock's tables are read by key through their
 *    primary keys, and a plan made while a table was small (or analysed
 *    while empty) must not turn every lookup into a scan of the whole
 *    table once it has grown.  Sweeps that have no index still scan;
 *  - enable_bitmapscan = off: plain index scans mark index entries of dead
 *    rows (claims given back) as dead the first time they meet them, so
 *    later lookups skip them; bitmap scans never do, and would visit every
 *    dead claim row again on every call until vacuum;
 *  - jit = off: with sequential scans "off", a sweep that has to scan is
 *    costed far above jit_above_cost and would be compiled (tens of
 *    milliseconds) on every call.
 */
static const char *const internal_settings[][2] = {
	{"search_path", "pg_catalog, pg_temp"},
	{"enable_seqscan", "off"},
	{"enable_bitmapscan", "off"},
	{"jit", "off"},
};

static int
pin_internal_settings(void)
{
	int			nestlevel = NewGUCNestLevel();

	for (int i = 0; i < lengthof(internal_settings); i++)
		(void) set_config_option(internal_settings[i][0],
								 internal_settings[i][1],
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
								 true, 0, false);
	return nestlevel;
}

/*
 * Connect to SPI and become the owner of dlock's objects.  The caller's
 * role is returned in ctx->caller: that is whose lease it is.
 */
void
dlock_spi_begin(DlockSpi *ctx)
{
	Oid			owner = dlock_schema_owner();

	GetUserIdAndSecContext(&ctx->caller, &ctx->sec_context);
	ctx->owner = owner;
	ctx->nestlevel = 0;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	dlock_spi_as_owner(ctx);
}

/* Run the next queries as the caller (claims read the user's table so). */
void
dlock_spi_as_caller(DlockSpi *ctx)
{
	if (ctx->nestlevel > 0)
		AtEOXact_GUC(true, ctx->nestlevel);
	ctx->nestlevel = 0;
	SetUserIdAndSecContext(ctx->caller, ctx->sec_context);
}

/* Run the next queries as dlock's owner, with dlock's own settings. */
void
dlock_spi_as_owner(DlockSpi *ctx)
{
	SetUserIdAndSecContext(ctx->owner,
						   ctx->sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (ctx->nestlevel == 0)
		ctx->nestlevel = pin_internal_settings();
}

void
dlock_spi_end(DlockSpi *ctx)
{
	dlock_spi_as_caller(ctx);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
}

/*
 * The kept plan of one of dlock's queries: *cache, a static next to the
 * query's text at its call site, prepared on first use in this backend.
 * Plans keep their raw parse trees, so they survive a DROP and CREATE
 * EXTENSION (they are re-analysed against the new tables).
 */
SPIPlanPtr
dlock_spi_plan(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan;

	if (*cache != NULL)
		return *cache;
	plan = SPI_prepare(sql, nargs, argtypes);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for dlock query \"%s\": %s",
			 sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	*cache = plan;
	return plan;
}

/*
 * Run a kept plan against the latest committed state; checks that SPI
 * answered with expect_rc and returns the number of rows processed.
 */
uint64
dlock_spi_run(SPIPlanPtr plan, Datum *values, const char *nulls,
			  long tcount, int expect_rc)
{
	int			rc;

	rc = SPI_execute_snapshot(plan, values, nulls,
							  GetLatestSnapshot(), InvalidSnapshot,
							  false, false, tcount);
	if (rc != expect_rc)
		elog(ERROR, "dlock internal query failed: %s",
			 SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * Run one of dlock's queries (its kept plan, prepared on first use) with
 * these arguments against the latest committed state; checks its result
 * and returns the number of rows processed.
 */
uint64
dlock_spi_query(DlockQuery *q, Datum *values, const char *nulls)
{
	int			nargs = 0;

	while (nargs < DLOCK_QUERY_MAX_ARGS && OidIsValid(q->argtypes[nargs]))
		nargs++;
	return dlock_spi_run(dlock_spi_plan(&q->plan, q->sql, nargs, q->argtypes),
						 values, nulls, 0, q->expect_rc);
}
