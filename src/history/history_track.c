/*-------------------------------------------------------------------------
 *
 * history_track.c
 *		What dlock's history tracks: the tables dlock.history_keys (lease
 *		key prefixes; '' is every key) and dlock.history_tables (claim
 *		tables), their only reader and writer, and this backend's copy of
 *		them, which the lease and claim calls consult on every ending.
 *
 * The check must cost nothing when nothing is tracked, the common case:
 * the copy is read once per backend (by a plain heap scan, no SQL: the
 * lease calls that end tenures run none, src/no_search_path.h) and kept
 * until a change of either table.  A change (dlock_history_set_key,
 * dlock_history_set_table) sends a relcache invalidation of its table,
 * which PostgreSQL delivers to every backend when the change commits (to
 * this one at once, and again if it rolls back); the callback here marks
 * the copy stale, and the next check reads the tables again.  So a change
 * applies to the transactions that start after it commits.
 *
 * A database whose dlock predates 0.5 (no such tables) tracks nothing;
 * its copy is not kept, so that ALTER EXTENSION dlock UPDATE is seen.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "history/history.h"

/* this backend's copy of the two tables */
typedef struct TrackCopy
{
	bool		valid;
	Oid			keys_relid;		/* dlock.history_keys, when valid */
	Oid			tables_relid;	/* dlock.history_tables */
	int			nprefixes;
	text	  **prefixes;		/* in TopMemoryContext */
	int			ntables;
	Oid		   *tables;
} TrackCopy;

static TrackCopy copy;
static bool callback_registered = false;

static void
track_inval(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == copy.keys_relid ||
		relid == copy.tables_relid)
		copy.valid = false;
}

static Oid
track_relid(const char *name)
{
	Oid			nsp = get_namespace_oid(DLOCK_SCHEMA, true);

	return OidIsValid(nsp) ? get_relname_relid(name, nsp) : InvalidOid;
}

/* every row's first column of table relid, copied into TopMemoryContext */
static Datum *
read_column(Oid relid, int *n, bool byval)
{
	Relation	rel = table_open(relid, AccessShareLock);
	Snapshot	snap = RegisterSnapshot(GetLatestSnapshot());
	TableScanDesc scan = table_beginscan(rel, snap, 0, NULL);
	HeapTuple	tup;
	int			size = 8;
	Datum	   *vals = MemoryContextAlloc(TopMemoryContext, sizeof(Datum) * size);

	*n = 0;
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, 1, RelationGetDescr(rel), &isnull);

		if (isnull)
			continue;
		if (*n == size)
		{
			size *= 2;
			vals = repalloc(vals, sizeof(Datum) * size);
		}
		if (byval)
			vals[(*n)++] = d;
		else
		{
			MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

			vals[(*n)++] = PointerGetDatum(DatumGetTextPCopy(d));
			MemoryContextSwitchTo(old);
		}
	}
	table_endscan(scan);
	UnregisterSnapshot(snap);
	table_close(rel, AccessShareLock);
	return vals;
}

/* the copy, read again when stale */
static const TrackCopy *
track_copy(void)
{
	Datum	   *vals;

	if (copy.valid)
		return &copy;
	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(track_inval, (Datum) 0);
		callback_registered = true;
	}
	for (int i = 0; i < copy.nprefixes; i++)
		pfree(copy.prefixes[i]);
	if (copy.prefixes != NULL)
		pfree(copy.prefixes);
	if (copy.tables != NULL)
		pfree(copy.tables);
	memset(&copy, 0, sizeof(copy));
	copy.keys_relid = track_relid("history_keys");
	copy.tables_relid = track_relid("history_tables");
	if (!OidIsValid(copy.keys_relid) || !OidIsValid(copy.tables_relid))
		return &copy;			/* before 0.5: nothing, and not kept */
	copy.prefixes = (text **) read_column(copy.keys_relid, &copy.nprefixes,
										  false);
	vals = read_column(copy.tables_relid, &copy.ntables, true);
	copy.tables = MemoryContextAlloc(TopMemoryContext,
									 sizeof(Oid) * Max(copy.ntables, 1));
	for (int i = 0; i < copy.ntables; i++)
		copy.tables[i] = DatumGetObjectId(vals[i]);
	pfree(vals);
	copy.valid = true;
	return &copy;
}

/* Whether the lease key is tracked: one of the prefixes begins it. */
bool
dlock_history_tracks_key(text *key)
{
	const TrackCopy *c = track_copy();
	int			len = VARSIZE_ANY_EXHDR(key);

	for (int i = 0; i < c->nprefixes; i++)
	{
		int			plen = VARSIZE_ANY_EXHDR(c->prefixes[i]);

		if (plen <= len &&
			memcmp(VARDATA_ANY(c->prefixes[i]), VARDATA_ANY(key), plen) == 0)
			return true;
	}
	return false;
}

/* Whether claims on table relid are tracked. */
bool
dlock_history_tracks_table(Oid relid)
{
	const TrackCopy *c = track_copy();

	for (int i = 0; i < c->ntables; i++)
		if (c->tables[i] == relid)
			return true;
	return false;
}

/* Whether claims on any table are tracked. */
bool
dlock_history_tracks_any_table(void)
{
	return track_copy()->ntables > 0;
}

/*
 * Run q with the one argument value as dlock's owner, then have every
 * backend read the tracked sets again once this commits; true when a row
 * was inserted or deleted.
 */
static bool
track_change(DlockQuery *q, Datum value, const char *table)
{
	DlockSpi	spi;
	uint64		n;
	Oid			relid = track_relid(table);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s.%s of extension dlock does not exist",
						DLOCK_SCHEMA, table),
				 errhint("Run ALTER EXTENSION dlock UPDATE.")));
	dlock_spi_begin(&spi);
	n = dlock_spi_query(q, &value, NULL);
	dlock_spi_end(&spi);
	CacheInvalidateRelcacheByRelid(relid);
	return n > 0;
}

/* Track (or stop tracking) the lease keys that begin with prefix. */
bool
dlock_history_set_key(text *prefix, bool track)
{
	static DlockQuery add = {
		"INSERT INTO " DLOCK_SCHEMA ".history_keys (prefix) VALUES ($1)"
		" ON CONFLICT DO NOTHING",
		SPI_OK_INSERT, {TEXTOID}
	};
	static DlockQuery drop = {
		"DELETE FROM " DLOCK_SCHEMA ".history_keys WHERE prefix" EQ "$1",
		SPI_OK_DELETE, {TEXTOID}
	};

	return track_change(track ? &add : &drop, PointerGetDatum(prefix),
						"history_keys");
}

/* Track (or stop tracking) the claims on table relid. */
bool
dlock_history_set_table(Oid relid, bool track)
{
	static DlockQuery add = {
		"INSERT INTO " DLOCK_SCHEMA ".history_tables (relid) VALUES ($1)"
		" ON CONFLICT DO NOTHING",
		SPI_OK_INSERT, {REGCLASSOID}
	};
	static DlockQuery drop = {
		"DELETE FROM " DLOCK_SCHEMA ".history_tables WHERE relid" EQ "$1",
		SPI_OK_DELETE, {REGCLASSOID}
	};

	return track_change(track ? &add : &drop, ObjectIdGetDatum(relid),
						"history_tables");
}
