/*-------------------------------------------------------------------------
 *
 * views.c
 *		The rows behind the dlock_locks and dlock_claims views, read at the
 *		latest committed state.
 *
 * A plain view over dlock.lease would read it with the caller's snapshot:
 * inside a REPEATABLE READ transaction that took over a key released after
 * its snapshot, it would show the old holder (and, next to it, the
 * transaction's own new row version).  dlock decides everything on the
 * latest committed state, and so do its views.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"

#include "dlock.h"

static Datum
emit_current(FunctionCallInfo fcinfo, DlockQuery q, const char *sql)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DlockSpi	spi;
	uint64		n;

	InitMaterializedSRF(fcinfo, 0);
	dlock_spi_begin(&spi);
	n = dlock_spi_run(dlock_spi_plan(q, sql, 0, NULL), NULL, NULL, 0,
					  SPI_OK_SELECT);
	if (SPI_tuptable->tupdesc->natts != rsinfo->setDesc->natts)
		elog(ERROR, "dlock view query returned %d columns, expected %d",
			 SPI_tuptable->tupdesc->natts, rsinfo->setDesc->natts);
	for (uint64 i = 0; i < n; i++)
		tuplestore_puttuple(rsinfo->setResult, SPI_tuptable->vals[i]);
	dlock_spi_end(&spi);
	return (Datum) 0;
}

/*
 * dlock_locks() RETURNS SETOF record (key text, holder text, owner regrole,
 *		token bigint, acquired_at timestamptz, expires_at timestamptz)
 *
 * One row per unexpired lease, at the latest committed state (and this
 * transaction's own changes).
 */
PG_FUNCTION_INFO_V1(dlock_locks_sql);
Datum
dlock_locks_sql(PG_FUNCTION_ARGS)
{
	return emit_current(fcinfo, Q_VIEW_LOCKS,
						"SELECT key, holder, owner::pg_catalog.regrole, token,"
						"       acquired_at, expires_at"
						"  FROM " DLOCK_SCHEMA ".lease"
						" WHERE holder IS NOT NULL"
						"   AND expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()");
}

/*
 * dlock_claims() RETURNS SETOF record (table_name regclass, key text,
 *		holder text, owner regrole, token bigint, claimed_at timestamptz,
 *		expires_at timestamptz, attempts integer)
 *
 * One row per unexpired claim, at the latest committed state.
 */
PG_FUNCTION_INFO_V1(dlock_claims_sql);
Datum
dlock_claims_sql(PG_FUNCTION_ARGS)
{
	return emit_current(fcinfo, Q_VIEW_CLAIMS,
						"SELECT relid::pg_catalog.regclass, key, holder,"
						"       owner::pg_catalog.regrole, token, claimed_at,"
						"       expires_at, attempts"
						"  FROM " DLOCK_SCHEMA ".claim"
						" WHERE holder IS NOT NULL"
						"   AND expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()");
}
