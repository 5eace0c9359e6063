/*-------------------------------------------------------------------------
 *
 * history_store.c
 *		The table dlock.history, one row per ended tenure of a tracked
 *		lease key or claim table: its only writer, its reads for the view,
 *		and the retention sweep.
 *
 * A row is written by the call that ends the tenure, in its transaction
 * (a release, a takeover, a completion, a sweep that deletes an expired
 * row, ...): it commits with the ending or not at all, so a rolled-back
 * ending (or one lost in a crash before its commit) leaves no row.  Each
 * ending is decided under the lock of its key or row, on the latest
 * committed row, and only one transaction can end one tenure, so each
 * gets one row.  The write is a heap insert and an index insert, as
 * lease_store.c writes dlock.lease, not SQL: the lease calls that end
 * tenures run no SQL (src/no_search_path.h).
 *
 * The reads and the sweep run as SQL between dlock_spi_begin and _end.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "compat.h"
#include "history/history.h"

/* the columns of dlock.history, in order (the column order is the format) */
#define Natts_history				10
#define Anum_history_kind			1
#define Anum_history_key			2
#define Anum_history_relid			3
#define Anum_history_holder			4
#define Anum_history_owner			5
#define Anum_history_token			6
#define Anum_history_granted_at		7
#define Anum_history_ended_at		8
#define Anum_history_ended			9
#define Anum_history_attempts		10

static const char *const end_names[] = {
	"released", "expired", "taken_over", "force_released", "released_all",
	"completed", "given_back", "dead_lettered"
};

const char *
dlock_history_end_name(DlockHistoryEnd ended)
{
	return end_names[ended];
}

static HeapTuple
form_row(Relation rel, const DlockTenure *t)
{
	Datum		values[Natts_history];
	bool		nulls[Natts_history] = {0};

	values[Anum_history_kind - 1] =
		CStringGetTextDatum(t->claim ? "claim" : "lease");
	values[Anum_history_key - 1] = PointerGetDatum(t->key);
	values[Anum_history_relid - 1] = ObjectIdGetDatum(t->relid);
	nulls[Anum_history_relid - 1] = !t->claim;
	values[Anum_history_holder - 1] = PointerGetDatum(t->holder);
	values[Anum_history_owner - 1] = ObjectIdGetDatum(t->owner);
	values[Anum_history_token - 1] = Int64GetDatum(t->token);
	values[Anum_history_granted_at - 1] = TimestampTzGetDatum(t->granted_at);
	values[Anum_history_ended_at - 1] = TimestampTzGetDatum(t->ended_at);
	values[Anum_history_ended - 1] =
		CStringGetTextDatum(dlock_history_end_name(t->ended));
	values[Anum_history_attempts - 1] = Int32GetDatum(t->attempts);
	nulls[Anum_history_attempts - 1] = !t->claim;
	return heap_form_tuple(RelationGetDescr(rel), values, nulls);
}

/*
 * Insert the row of the ended tenure *t into dlock.history (and its
 * indexes), in this transaction.  The caller has checked that its key or
 * table is tracked.
 */
void
dlock_history_write(const DlockTenure *t)
{
	Oid			nsp = get_namespace_oid(DLOCK_SCHEMA, true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid("history", nsp) : InvalidOid;
	Relation	rel;
	HeapTuple	tup;
	List	   *indexes;
	ListCell   *lc;

	if (!OidIsValid(relid))
		return;					/* before 0.5: nothing is tracked anyway */
	rel = table_open(relid, RowExclusiveLock);
	if (RelationGetDescr(rel)->natts != Natts_history)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s.history of extension dlock has been altered",
						DLOCK_SCHEMA),
				 errhint("Drop and re-create the extension dlock.")));
	tup = form_row(rel, t);
	simple_heap_insert(rel, tup);
	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		Relation	idx = index_open(lfirst_oid(lc), RowExclusiveLock);
		IndexInfo  *ii = BuildIndexInfo(idx);
		Datum		vals[INDEX_MAX_KEYS];
		bool		isnull[INDEX_MAX_KEYS];

		for (int i = 0; i < ii->ii_NumIndexAttrs; i++)
			vals[i] = heap_getattr(tup, ii->ii_IndexAttrNumbers[i],
								   RelationGetDescr(rel), &isnull[i]);
		(void) index_insert(idx, vals, isnull, &tup->t_self, rel,
							UNIQUE_CHECK_NO, false, ii);
		index_close(idx, NoLock);
	}
	list_free(indexes);
	heap_freetuple(tup);
	table_close(rel, NoLock);
	CommandCounterIncrement();
}

/*
 * A lease's tenure ended: its row, when its key is tracked (else nothing,
 * at the cost of a look at this backend's copy of the tracked prefixes).
 */
void
dlock_history_lease_ended(text *key, text *holder, Oid owner, int64 token,
						  TimestampTz granted_at, TimestampTz ended_at,
						  DlockHistoryEnd ended)
{
	DlockTenure t;

	if (!dlock_history_tracks_key(key))
		return;
	memset(&t, 0, sizeof(t));
	t.claim = false;
	t.key = key;
	t.holder = holder;
	t.owner = owner;
	t.token = token;
	t.granted_at = granted_at;
	t.ended_at = ended_at;
	t.ended = ended;
	dlock_history_write(&t);
}

/*
 * The rows of the dlock_history view (of key only, when not NULL) into
 * SPI_tuptable, oldest first; returns how many.  Columns: kind, key,
 * table_name (regclass), holder, role (regrole: column 5), token,
 * granted_at, ended_at, ended, attempts; the caller decides which the
 * calling role may see.
 */
uint64
dlock_history_store_read(text *key)
{
#define READ(where) \
	"SELECT kind, key, relid::pg_catalog.regclass, holder," \
	"       owner::pg_catalog.regrole, token, granted_at, ended_at, ended," \
	"       attempts" \
	"  FROM " DLOCK_SCHEMA ".history" where \
	" ORDER BY granted_at, ended_at, token"
	static DlockQuery all = {READ(""), SPI_OK_SELECT, {InvalidOid}};
	static DlockQuery of_key = {READ(" WHERE key" EQ "$1"), SPI_OK_SELECT,
	{TEXTOID}};
#undef READ
	Datum		value = PointerGetDatum(key);

	if (key == NULL)
		return dlock_spi_query(&all, NULL, NULL);
	return dlock_spi_query(&of_key, &value, NULL);
}

/*
 * Delete up to limit rows of tenures that ended before before, the oldest
 * first; returns how many.  Rows another transaction is deleting are
 * skipped.
 */
int64
dlock_history_store_sweep(TimestampTz before, int limit)
{
	static DlockQuery q = {
		"DELETE FROM " DLOCK_SCHEMA ".history"
		" WHERE ctid" EQ "ANY (ARRAY("
		"   SELECT ctid FROM " DLOCK_SCHEMA ".history"
		"    WHERE ended_at OPERATOR(pg_catalog.<) $1"
		"    ORDER BY ended_at"
		"    LIMIT $2 FOR UPDATE SKIP LOCKED))",
		SPI_OK_DELETE, {TIMESTAMPTZOID, INT4OID}
	};
	Datum		values[2];
	Oid			nsp = get_namespace_oid(DLOCK_SCHEMA, true);

	/* before 0.5 (ALTER EXTENSION dlock UPDATE not run yet): no history */
	if (!OidIsValid(nsp) || !OidIsValid(get_relname_relid("history", nsp)))
		return 0;
	values[0] = TimestampTzGetDatum(before);
	values[1] = Int32GetDatum(limit);
	return (int64) dlock_spi_query(&q, values, NULL);
}
