/*-------------------------------------------------------------------------
 *
 * stats.c
 *		dlock_stats(): counters of what dlock did since the server started.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"

#include "shmem.h"

/*
 * dlock_stats() RETURNS SETOF record (acquired bigint, ... see the install
 * script for the column list, in DlockCounter order)
 *
 * One row, or no row at all when dlock is not in shared_preload_libraries
 * (there is nowhere to keep server-wide counters then).
 */
PG_FUNCTION_INFO_V1(dlock_stats);
Datum
dlock_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[DLOCK_NUM_COUNTERS];
	bool		nulls[DLOCK_NUM_COUNTERS] = {0};

	InitMaterializedSRF(fcinfo, 0);
	if (dlock_shared == NULL)
		PG_RETURN_VOID();
	if (rsinfo->setDesc->natts != DLOCK_NUM_COUNTERS)
		elog(ERROR, "dlock_stats: expected %d columns, got %d",
			 DLOCK_NUM_COUNTERS, rsinfo->setDesc->natts);
	for (int i = 0; i < DLOCK_NUM_COUNTERS; i++)
		values[i] = Int64GetDatum((int64) pg_atomic_read_u64(&dlock_shared->counters[i]));
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	PG_RETURN_VOID();
}
