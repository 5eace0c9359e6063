/*-------------------------------------------------------------------------
 *
 * views_sql.c
 *		The functions behind dlock's views and counters: dlock_locks,
 *		dlock_claims, dlock_history, dlock_waiters and dlock_stats, and who
 *		may see which of their rows.
 *
 * The lease and claim rows are read at the latest committed state (by
 * lease_store.c and claim_store.c).  A plain view over dlock.lease would
 * read it with the caller's snapshot: inside a REPEATABLE READ transaction
 * that took over a key released after its snapshot, it would show the old
 * holder (and, next to it, the transaction's own new row version).  dlock
 * decides everything on the latest committed state, and so do its views.
 *
 * Visibility.  The rows are read as dlock's owner, so each function decides
 * what the caller may see, as pg_stat_activity does: a role sees the
 * leases, waits and claims of the roles whose privileges it has (its own,
 * and those of roles it is a member of), and claims only on tables it may
 * SELECT from, and, where row-level security applies, on rows it can see;
 * superusers and members of pg_read_all_stats see everything.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_constraint.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/rls.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "claim/claim.h"
#include "history/history.h"
#include "lease/lease.h"
#include "wait/wait.h"

/* May role see what owner holds or waits for? */
static bool
role_sees(Oid role, Oid owner)
{
	return superuser_arg(role) ||
		has_privs_of_role(role, ROLE_PG_READ_ALL_STATS) ||
		(OidIsValid(owner) && has_privs_of_role(role, owner));
}

/* May the current user see what owner holds or waits for? */
static bool
sees_role(Oid owner)
{
	return role_sees(GetUserId(), owner);
}

/*
 * Whether caller can see the row of table relid whose primary key's text
 * is key, when row-level security applies to it there: the row must pass
 * its policies (and its key column be readable).  Claims of a table
 * without a single-column primary key (claimed under another one) are
 * never shown then.  Runs as the caller; back as dlock's owner after.
 */
static bool
claim_row_visible(DlockSpi *spi, Oid relid, text *key)
{
	Oid			conoid;
	Bitmapset  *cols = get_primary_key_attnos(relid, false, &conoid);
	const ClaimTarget *t;
	Datum		value;
	int			io;
	bool		visible;

	if (bms_num_members(cols) != 1)
		return false;
	dlock_spi_as_caller(spi);
	t = dlock_claim_target_for_rel(relid, NULL);
	io = dlock_claim_io_begin(t, InvalidOid);
	value = dlock_claim_key_value(t, key);
	dlock_claim_io_end(io);
	visible = dlock_claim_row_visible(t, value, t->pk_type);
	dlock_spi_as_owner(spi);
	return visible;
}

/*
 * Return the n rows in SPI_tuptable that the role that called the function
 * (not dlock's owner that read the rows) may see: the role in column
 * owner_col must be one whose privileges the caller has; when relid_col >
 * 0, the caller must have SELECT on that table, and when key_col > 0 too
 * (a claim on the row with that key), see that row if row-level security
 * applies.  The first columns of the rows, as many as the result has, are
 * returned.
 */
static void
emit_visible(FunctionCallInfo fcinfo, DlockSpi *spi, uint64 n, int owner_col,
			 int relid_col, int key_col)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			caller = spi->caller;
	bool		sees_all = role_sees(caller, InvalidOid);
	SPITupleTable *tab = SPI_tuptable;
	int			natts = rsinfo->setDesc->natts;
	Datum	   *values = palloc(sizeof(Datum) * tab->tupdesc->natts);
	bool	   *nulls = palloc(sizeof(bool) * tab->tupdesc->natts);

	if (tab->tupdesc->natts < natts)
		elog(ERROR, "dlock view query returned %d columns, expected %d",
			 tab->tupdesc->natts, natts);
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = tab->vals[i];

		CHECK_FOR_INTERRUPTS();
		heap_deform_tuple(tup, tab->tupdesc, values, nulls);
		if (!sees_all)
		{
			Oid			owner = DatumGetObjectId(values[owner_col - 1]);

			if (nulls[owner_col - 1] || !role_sees(caller, owner))
				continue;
			/* a NULL table: not a claim (dlock_history's leases) */
			if (relid_col > 0 && !nulls[relid_col - 1])
			{
				Oid			relid = DatumGetObjectId(values[relid_col - 1]);
				bool		missing = false;

				if (pg_class_aclcheck_ext(relid, caller, ACL_SELECT, &missing) != ACLCHECK_OK ||
					missing)
					continue;
				if (key_col > 0 &&
					check_enable_rls(relid, caller, true) == RLS_ENABLED &&
					(nulls[key_col - 1] ||
					 !claim_row_visible(spi, relid,
										DatumGetTextPP(values[key_col - 1]))))
					continue;
			}
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
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
	DlockSpi	spi;

	InitMaterializedSRF(fcinfo, 0);
	dlock_spi_begin(&spi);
	emit_visible(fcinfo, &spi, dlock_lease_store_read_live(), 3, 0, 0);
	dlock_spi_end(&spi);
	PG_RETURN_VOID();
}

/*
 * dlock_claims() RETURNS SETOF record (table_name regclass, key text,
 *		holder text, owner regrole, token bigint, claimed_at timestamptz,
 *		expires_at timestamptz, attempts integer, retry_at timestamptz)
 *
 * One row per unexpired claim the caller may see (also needs SELECT on the
 * table), and (0.5) per lapsed claim whose row is in its backoff, with
 * when the row is claimable again, at the latest committed state.
 */
PG_FUNCTION_INFO_V1(dlock_claims_sql);
Datum
dlock_claims_sql(PG_FUNCTION_ARGS)
{
	DlockSpi	spi;

	InitMaterializedSRF(fcinfo, 0);
	dlock_spi_begin(&spi);
	emit_visible(fcinfo, &spi, dlock_claim_store_read_live(), 4, 1, 2);
	dlock_spi_end(&spi);
	PG_RETURN_VOID();
}

/*
 * dlock_history(of_key text) RETURNS SETOF record (kind text, key text,
 *		table_name regclass, holder text, role regrole, token bigint,
 *		granted_at timestamptz, ended_at timestamptz, ended text,
 *		attempts integer)
 *
 * One row per ended tenure of a tracked lease key or claim table
 * (dlock.history) that the caller may see, as in dlock_locks and
 * dlock_claims: of roles whose privileges it has, and for claims on
 * tables it may SELECT from and rows it can see; of of_key only, unless it
 * is NULL (the view: every row).
 */
PG_FUNCTION_INFO_V1(dlock_history_sql);
Datum
dlock_history_sql(PG_FUNCTION_ARGS)
{
	DlockSpi	spi;
	text	   *key = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);

	InitMaterializedSRF(fcinfo, 0);
	dlock_spi_begin(&spi);
	emit_visible(fcinfo, &spi, dlock_history_store_read(key), 5, 3, 2);
	dlock_spi_end(&spi);
	PG_RETURN_VOID();
}

/*
 * dlock_dead_claims() RETURNS SETOF record (table_name regclass, key text,
 *		attempts integer, last_holder text, last_claimed_at timestamptz,
 *		poisoned_at timestamptz)
 *
 * One row per poisoned claim (claimed max_attempts times) the caller may
 * see, at the latest committed state: of roles whose privileges it has, on
 * tables it may SELECT from, on rows it can see.
 */
PG_FUNCTION_INFO_V1(dlock_dead_claims_sql);
Datum
dlock_dead_claims_sql(PG_FUNCTION_ARGS)
{
	DlockSpi	spi;

	InitMaterializedSRF(fcinfo, 0);
	dlock_spi_begin(&spi);
	emit_visible(fcinfo, &spi, dlock_claim_store_read_dead(), 7, 1, 2);
	dlock_spi_end(&spi);
	PG_RETURN_VOID();
}

/*
 * dlock_waiters() RETURNS SETOF record
 *		(pid int, key text, holder text, waiting_since timestamptz,
 *		 queue_position int)
 *
 * Backends waiting in dlock_acquire in the current database that the
 * caller may see; position 1 is the head of its key's queue.  Empty
 * without shared memory (and a WARNING, once per backend).
 */
PG_FUNCTION_INFO_V1(dlock_waiters);
Datum
dlock_waiters(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DlockWaiter *w;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	n = dlock_wait_list(&w);
	for (int i = 0; i < n; i++)
	{
		Datum		values[5];
		bool		nulls[5] = {0};

		if (!sees_role(w[i].owner))
			continue;
		values[0] = Int32GetDatum(w[i].pid);
		values[1] = CStringGetTextDatum(w[i].key);
		values[2] = CStringGetTextDatum(w[i].holder);
		values[3] = TimestampTzGetDatum(w[i].since);
		values[4] = Int32GetDatum(w[i].position);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	PG_RETURN_VOID();
}

/*
 * dlock_stats() RETURNS SETOF record (acquired bigint, ... see the install
 * script for the column list, in DlockCounter order)
 *
 * One row, or no row at all (and a WARNING, once per backend) when dlock
 * is not in shared_preload_libraries: there is nowhere to keep server-wide
 * counters then.
 */
PG_FUNCTION_INFO_V1(dlock_stats);
Datum
dlock_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	uint64		counts[DLOCK_NUM_COUNTERS];
	Datum		values[DLOCK_NUM_COUNTERS];
	bool		nulls[DLOCK_NUM_COUNTERS] = {0};

	InitMaterializedSRF(fcinfo, 0);
	/* an older extension's dlock_stats has fewer columns: the first ones */
	if (rsinfo->setDesc->natts > DLOCK_NUM_COUNTERS)
		elog(ERROR, "dlock_stats: expected %d columns, got %d",
			 DLOCK_NUM_COUNTERS, rsinfo->setDesc->natts);
	if (!dlock_stats_read(counts))
	{
		dlock_warn_not_preloaded();
		PG_RETURN_VOID();
	}
	for (int i = 0; i < rsinfo->setDesc->natts; i++)
		values[i] = Int64GetDatum((int64) counts[i]);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	PG_RETURN_VOID();
}
