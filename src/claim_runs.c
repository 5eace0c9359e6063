/*-------------------------------------------------------------------------
 *
 * claim_runs.c
 *		Runs of consecutive integer keys that a claim reads around.
 *
 * Claimers take rows in key order, so the claims of a busy table are
 * mostly long runs of consecutive keys: each worker's batch, next to the
 * batch of the worker before it.  Left out only by the claim query's
 * filter, each of those rows would still be fetched from the heap by
 * every claim (at 16 workers, 1,500 rows per claim of 100).  A run of
 * consecutive integers holds no other key, so for an integer primary key
 * in the default order a claim instead reads the key ranges between the
 * long runs, one after the other, with the bounds as index conditions
 * (claim.c, claim_query.c).  Shorter runs stay in the filter.
 *
 * The runs come from two places: the keys of live claims (committed),
 * and the runs other claims hold FOR UPDATE while their transactions are
 * open (claim_inflight.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"

#include "claim.h"

int64
dlock_int_key(Oid type, Datum d)
{
	switch (type)
	{
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		default:
			return DatumGetInt64(d);
	}
}

Datum
dlock_int_key_datum(Oid type, int64 v)
{
	switch (type)
	{
		case INT2OID:
			return Int16GetDatum((int16) v);
		case INT4OID:
			return Int32GetDatum((int32) v);
		default:
			return Int64GetDatum(v);
	}
}

static int
int64_cmp(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

static int
run_cmp(const void *a, const void *b)
{
	return int64_cmp(&((const DlockKeyRun *) a)->lo,
					 &((const DlockKeyRun *) b)->lo);
}

/*
 * Find the runs of at least DLOCK_MIN_SKIPPED_RUN consecutive keys among
 * the integer keys vals[0..*n-1] (of type), in key order, into a new
 * array *runs; the keys outside them are kept in vals, in key order, and
 * *n says how many.  Returns the number of runs.
 */
int
dlock_claim_long_runs(Oid type, Datum *vals, int *n, DlockKeyRun **runs)
{
	int64	   *k = palloc(sizeof(int64) * Max(*n, 1));
	int			nruns = 0;
	int			nkept = 0;

	*runs = palloc(sizeof(DlockKeyRun) * (*n / DLOCK_MIN_SKIPPED_RUN + 1));
	for (int i = 0; i < *n; i++)
		k[i] = dlock_int_key(type, vals[i]);
	qsort(k, *n, sizeof(int64), int64_cmp);
	for (int i = 0; i < *n;)
	{
		int			j = i;

		/* k[i..j] consecutive (a duplicate, live and poisoned, only splits a run) */
		while (j + 1 < *n && k[j] != PG_INT64_MAX && k[j + 1] == k[j] + 1)
			j++;
		if (j - i + 1 >= DLOCK_MIN_SKIPPED_RUN)
		{
			(*runs)[nruns].lo = k[i];
			(*runs)[nruns].hi = k[j];
			nruns++;
		}
		else
		{
			for (int m = i; m <= j; m++)
				vals[nkept++] = dlock_int_key_datum(type, k[m]);
		}
		i = j + 1;
	}
	pfree(k);
	*n = nkept;
	return nruns;
}

/*
 * Sort runs[0..n-1] by their first key and merge the ones that overlap or
 * touch; returns how many are left.
 */
int
dlock_claim_merge_runs(DlockKeyRun *runs, int n)
{
	int			m = 0;

	if (n <= 1)
		return n;
	qsort(runs, n, sizeof(DlockKeyRun), run_cmp);
	for (int i = 1; i < n; i++)
	{
		if (runs[m].hi == PG_INT64_MAX || runs[i].lo <= runs[m].hi + 1)
			runs[m].hi = Max(runs[m].hi, runs[i].hi);
		else
			runs[++m] = runs[i];
	}
	return m + 1;
}

/*
 * The next key range to read, lo < key < hi, given runs[0..n-1] (sorted
 * and merged) and where reading got to (*lo; none yet without *has_lo).
 * A run that starts right after *lo is stepped over (*lo moves to its
 * end); *has_hi says whether a run bounds the range, *hi is its first key
 * and *after_hi its last, where reading goes on once the range is done.
 */
void
dlock_claim_next_range(const DlockKeyRun *runs, int n, bool *has_lo,
					   int64 *lo, bool *has_hi, int64 *hi, int64 *after_hi)
{
	*has_hi = false;
	for (int i = 0; i < n; i++)
	{
		if (*has_lo && runs[i].hi <= *lo)
			continue;
		if (*has_lo && (*lo == PG_INT64_MAX || runs[i].lo <= *lo + 1))
		{
			*lo = runs[i].hi;
			continue;
		}
		*has_hi = true;
		*hi = runs[i].lo;
		*after_hi = runs[i].hi;
		return;
	}
}
