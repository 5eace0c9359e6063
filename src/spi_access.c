/*-------------------------------------------------------------------------
 *
 * spi_access.c
 *		How dlock's C code runs its internal queries: as the owner of
 *		dlock's tables, through SPI plans prepared once and kept, and always
 *		against the latest committed state.
 *
 * dlock's tables grant nothing to ordinary roles.  The SQL functions are
 * not SECURITY DEFINER (claims must read the user's table with the
 * caller's own privileges); instead the C code switches to the owner of
 * the dlock schema around its own queries, the way PostgreSQL's foreign
 * key triggers switch to a table's owner, and switches back afterwards.
 * An error restores the caller's identity through transaction abort.
 *
 * Every internal query is run with a fresh snapshot (GetLatestSnapshot),
 * as the foreign key checks do: a lock service must judge a lease by what
 * is committed now, also inside a REPEATABLE READ or SERIALIZABLE
 * transaction whose own snapshot is older.  The per-key lock (keylock.c)
 * guarantees that nobody else changes the key between our read and write.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "dlock.h"

static SPIPlanPtr plans[DLOCK_NUM_QUERIES];

/* owner of dlock's internal schema */
static Oid
dlock_schema_owner(void)
{
	Oid			nsp = get_namespace_oid(DLOCK_SCHEMA, true);
	HeapTuple	tup;
	Oid			owner;

	if (!OidIsValid(nsp))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("schema \"%s\" of extension dlock does not exist", DLOCK_SCHEMA),
				 errhint("Run CREATE EXTENSION dlock in this database.")));
	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for namespace %u", nsp);
	owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	ReleaseSysCache(tup);
	return owner;
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
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	SetUserIdAndSecContext(owner,
						   ctx->sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

void
dlock_spi_end(DlockSpi *ctx)
{
	SetUserIdAndSecContext(ctx->caller, ctx->sec_context);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
}

/*
 * The kept plan for one of dlock's queries, prepared on first use in this
 * backend.  Plans keep their raw parse trees, so they survive a DROP and
 * CREATE EXTENSION (they are re-analysed against the new tables).
 */
SPIPlanPtr
dlock_spi_plan(DlockQuery q, const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan;

	Assert(q >= 0 && q < DLOCK_NUM_QUERIES);
	if (plans[q] != NULL)
		return plans[q];
	plan = SPI_prepare(sql, nargs, argtypes);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for dlock query %d: %s",
			 (int) q, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	plans[q] = plan;
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
