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
 * Visibility.  The rows are read as dlock's owner, so each view decides
 * what the caller may see, as pg_stat_activity does: a role sees the
 * leases, waits and claims of the roles whose privileges it has (its own,
 * and those of roles it is a member of), and claims only on tables it may
 * SELECT from; superusers and members of pg_read_all_stats see everything.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"

#include "dlock.h"

/* May role see what owner holds or waits for? */
static bool
role_sees(Oid role, Oid owner)
{
	return superuser_arg(role) ||
		has_privs_of_role(role, ROLE_PG_READ_ALL_STATS) ||
		(OidIsValid(owner) && has_privs_of_role(role, owner));
}

/* May the current user see what owner holds or waits for? */
bool
dlock_sees_role(Oid owner)
{
	return role_sees(GetUserId(), owner);
}

/*
 * Run sql (as dlock's owner; its kept plan in *plan) and return the rows the caller may see: the
 * role in column owner_col must be one whose privileges the caller has,
 * and, when relid_col > 0, the caller must have SELECT on that table.
 */
static Datum
emit_current(FunctionCallInfo fcinfo, SPIPlanPtr *plan, const char *sql,
			 int owner_col, int relid_col)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			caller = GetUserId();
	bool		sees_all;
	DlockSpi	spi;
	uint64		n;

	InitMaterializedSRF(fcinfo, 0);
	sees_all = role_sees(caller, InvalidOid);
	dlock_spi_begin(&spi);
	n = dlock_spi_run(dlock_spi_plan(plan, sql, 0, NULL), NULL, NULL, 0,
					  SPI_OK_SELECT);
	if (SPI_tuptable->tupdesc->natts != rsinfo->setDesc->natts)
		elog(ERROR, "dlock view query returned %d columns, expected %d",
			 SPI_tuptable->tupdesc->natts, rsinfo->setDesc->natts);
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		bool		isnull;

		CHECK_FOR_INTERRUPTS();
		if (!sees_all)
		{
			Oid			owner = DatumGetObjectId(SPI_getbinval(tup, SPI_tuptable->tupdesc,
															   owner_col, &isnull));

			if (isnull || !role_sees(caller, owner))
				continue;
			if (relid_col > 0)
			{
				Oid			relid = DatumGetObjectId(SPI_getbinval(tup, SPI_tuptable->tupdesc,
																   relid_col, &isnull));

				bool		missing = false;

				if (isnull ||
					pg_class_aclcheck_ext(relid, caller, ACL_SELECT, &missing) != ACLCHECK_OK ||
					missing)
					continue;
			}
		}
		tuplestore_puttuple(rsinfo->setResult, tup);
	}
	dlock_spi_end(&spi);
	return (Datum) 0;
}

/*
 * dlock_locks() RETURNS SETOF record (key text, holder text, owner regrole,
 *		token bigint, acquired_at timestamptz, expires_at timestamptz)
 *
 * One row per unexpired lease the caller may see, at the latest committed
 * state (and this transaction's own changes).
 */
PG_FUNCTION_INFO_V1(dlock_locks_sql);
Datum
dlock_locks_sql(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;

	return emit_current(fcinfo, &plan,
						"SELECT key, holder, owner::pg_catalog.regrole, token,"
						"       acquired_at, expires_at"
						"  FROM " DLOCK_SCHEMA ".lease"
						" WHERE holder IS NOT NULL"
						"   AND expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()",
						3, 0);
}

/*
 * dlock_claims() RETURNS SETOF record (table_name regclass, key text,
 *		holder text, owner regrole, token bigint, claimed_at timestamptz,
 *		expires_at timestamptz, attempts integer)
 *
 * One row per unexpired claim the caller may see (also needs SELECT on the
 * table), at the latest committed state.
 */
PG_FUNCTION_INFO_V1(dlock_claims_sql);
Datum
dlock_claims_sql(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;

	return emit_current(fcinfo, &plan,
						"SELECT relid::pg_catalog.regclass, key, holder,"
						"       owner::pg_catalog.regrole, token, claimed_at,"
						"       expires_at, attempts"
						"  FROM " DLOCK_SCHEMA ".claim"
						" WHERE holder IS NOT NULL"
						"   AND expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()",
						4, 1);
}
