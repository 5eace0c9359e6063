/*-------------------------------------------------------------------------
 *
 * claim_store_spi.c
 *		Every read and write of dlock.claim, with claim_store.c and
 *		claim_store_probe.c: the holders' writes and the sweeps of many
 *		rows, as SQL (a holder's keys, give-back, renewal, deletion, the
 *		moves of DDL, the sweep of idle rows, and the dlock_claims rows).
 *		No other file touches dlock.claim.
 *
 * Between dlock_spi_begin and dlock_spi_end; each query (a DlockQuery:
 * its plan is prepared once and kept) is next to the code that runs it.
 * The caller holds the key locks the protocol asks for (claim_manage.c,
 * claim_ddl.c, claim_ddl_type.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "claim/claim.h"
#include "claim/claim_int.h"
#include "history/history.h"

/*
 * Before the holder's live claims on these keys of table relid are given
 * back: their tenures end, as how says (given back, or by release_all),
 * when the table is tracked.
 */
static void
note_holder_claims(Oid relid, text **keys, int n, text *holder, Oid role,
				   DlockHistoryEnd how)
{
	static DlockQuery q = {
		"SELECT " DLOCK_CLAIM_ENDED_COLUMNS " FROM " DLOCK_SCHEMA ".claim"
		" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"
		"   AND holder" EQ "$3 AND owner" EQ "$4"
		"   AND expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()",
		SPI_OK_SELECT, {OIDOID, TEXTARRAYOID, TEXTOID, OIDOID}
	};
	Datum		values[4];

	if (n == 0 || !dlock_history_tracks_table(relid))
		return;
	values[2] = PointerGetDatum(holder);
	values[3] = ObjectIdGetDatum(role);
	dlock_claim_store_note_ended(dlock_claim_store_run_on_keys(&q, relid, keys, n, values),
								 how);
	SPI_freetuptable(SPI_tuptable);
}

/*
 * Run q, a read of keys (column 1, and their tables in column 2 if relids
 * is not NULL); returns the keys, and *n how many, copied into the current
 * memory context; the SPI result is freed.
 */
static text **
read_keys(DlockQuery *q, Datum *values, int *n, Oid **relids)
{
	MemoryContext cxt = CurrentMemoryContext;
	text	  **keys;

	*n = (int) dlock_spi_query(q, values, NULL);
	MemoryContextSwitchTo(cxt);
	keys = dlock_copy_key_column(*n);
	if (relids)
		*relids = dlock_copy_oid_column(*n, 2);
	SPI_freetuptable(SPI_tuptable);
	return keys;
}

/*
 * Keys of the holder's live claims on a table, sorted: all of them, or
 * those among keys (sorted and without duplicates).
 */
text	  **
dlock_claim_store_holder_keys(Oid relid, text *holder, Oid role,
							  text **among, int namong, int *n)
{
	static DlockQuery all = {
		"SELECT key FROM " DLOCK_SCHEMA ".claim"
		" WHERE relid" EQ "$1 AND holder" EQ "$2 AND owner" EQ "$3"
		"   AND expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()"
		" ORDER BY key",
		SPI_OK_SELECT, {OIDOID, TEXTOID, OIDOID}
	};
	static DlockQuery of_among = {
		"SELECT key FROM " DLOCK_SCHEMA ".claim"
		" WHERE relid" EQ "$1 AND key" EQ "ANY ($4)"
		"   AND holder" EQ "$2 AND owner" EQ "$3"
		"   AND expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()"
		" ORDER BY key",
		SPI_OK_SELECT, {OIDOID, TEXTOID, OIDOID, TEXTARRAYOID}
	};
	Datum		values[4] = {ObjectIdGetDatum(relid), PointerGetDatum(holder),
	ObjectIdGetDatum(role), 0};

	if (among == NULL)
		return read_keys(&all, values, n, NULL);
	values[3] = dlock_text_array(among, namong);
	return read_keys(&of_among, values, n, NULL);
}

/*
 * A page of the keys of the holder's live claims on a table, in key order:
 * up to limit of them after key after (NULL: from the first).
 */
text	  **
dlock_claim_store_holder_page(Oid relid, text *holder, Oid role, text *after,
							  int limit, int *n)
{
	static DlockQuery first = {
		"SELECT key FROM " DLOCK_SCHEMA ".claim"
		" WHERE relid" EQ "$1 AND holder" EQ "$2 AND owner" EQ "$3"
		"   AND expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()"
		" ORDER BY key LIMIT $4",
		SPI_OK_SELECT, {OIDOID, TEXTOID, OIDOID, INT4OID}
	};
	static DlockQuery next = {
		"SELECT key FROM " DLOCK_SCHEMA ".claim"
		" WHERE relid" EQ "$1 AND key OPERATOR(pg_catalog.>) $5"
		"   AND holder" EQ "$2 AND owner" EQ "$3"
		"   AND expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()"
		" ORDER BY key LIMIT $4",
		SPI_OK_SELECT, {OIDOID, TEXTOID, OIDOID, INT4OID, TEXTOID}
	};
	Datum		values[5] = {ObjectIdGetDatum(relid), PointerGetDatum(holder),
	ObjectIdGetDatum(role), Int32GetDatum(limit), PointerGetDatum(after)};

	return read_keys(after == NULL ? &first : &next, values, n, NULL);
}

/* Of these keys, those that have a claim row, sorted. */
text	  **
dlock_claim_store_existing_keys(Oid relid, text **keys, int nkeys, int *n)
{
	static DlockQuery q = {
		"SELECT key FROM " DLOCK_SCHEMA ".claim"
		" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"
		" ORDER BY key",
		SPI_OK_SELECT, {OIDOID, TEXTARRAYOID}
	};
	Datum		values[2];

	values[0] = ObjectIdGetDatum(relid);
	values[1] = dlock_text_array(keys, nkeys);
	return read_keys(&q, values, n, NULL);
}

/*
 * A page of the live claims of holder and role, on any table, in table and
 * key order: up to limit of them after (after_relid, after_key) (0 and
 * NULL: from the first); returns how many, with the keys and tables in
 * *keys and *relids.
 */
int
dlock_claim_store_holder_all_page(text *holder, Oid role, Oid after_relid,
								  text *after_key, int limit, text ***keys,
								  Oid **relids)
{
	static DlockQuery q = {
		"SELECT key, relid FROM " DLOCK_SCHEMA ".claim"
		" WHERE (relid, key) OPERATOR(pg_catalog.>) ($3, $4)"
		"   AND holder" EQ "$1 AND owner" EQ "$2"
		"   AND expires_at OPERATOR(pg_catalog.>)"
		" pg_catalog.clock_timestamp()"
		" ORDER BY relid, key LIMIT $5",
		SPI_OK_SELECT, {TEXTOID, OIDOID, OIDOID, TEXTOID, INT4OID}
	};
	Datum		values[5];
	int			n;

	values[0] = PointerGetDatum(holder);
	values[1] = ObjectIdGetDatum(role);
	values[2] = ObjectIdGetDatum(after_relid);
	values[3] = after_key ? PointerGetDatum(after_key) : CStringGetTextDatum("");
	values[4] = Int32GetDatum(limit);
	*keys = read_keys(&q, values, &n, relids);
	return n;
}

/*
 * The holders' writes of their live claims on these keys of table relid:
 * $1 is the table, $2 the keys, $3 the holder, $4 its role, and $5 the
 * ttl_us of a renewal.
 */
static int64
write_holder_claims(DlockQuery *q, Oid relid, text **keys, int n,
					text *holder, Oid role, int64 ttl_us)
{
	Datum		values[5];

	values[2] = PointerGetDatum(holder);
	values[3] = ObjectIdGetDatum(role);
	values[4] = Int64GetDatum(ttl_us);
	return (int64) dlock_claim_store_run_on_keys(q, relid, keys, n, values);
}

/*
 * Give back the holder's live claims on these keys: the claim rows stay,
 * free, with their attempt counts (a row given back after a failed attempt
 * still counts towards max_attempts), claimable at once (no backoff);
 * returns how many.
 */
int64
dlock_claim_store_give_back(Oid relid, text **keys, int n, text *holder, Oid role,
							DlockHistoryEnd how)
{
#define GIVE_BACK(retry) \
	"UPDATE " DLOCK_SCHEMA ".claim" \
	"   SET holder = NULL, owner = NULL," retry \
	"       expires_at = pg_catalog.clock_timestamp()" \
	" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)" \
	"   AND holder" EQ "$3 AND owner" EQ "$4" \
	"   AND expires_at OPERATOR(pg_catalog.>)" \
	" pg_catalog.clock_timestamp()"
	static DlockQuery q = {
		GIVE_BACK(" retry_at = NULL,"),
		SPI_OK_UPDATE, {OIDOID, TEXTARRAYOID, TEXTOID, OIDOID}
	};
	static DlockQuery q_04 = {
		GIVE_BACK(""),
		SPI_OK_UPDATE, {OIDOID, TEXTARRAYOID, TEXTOID, OIDOID}
	};
#undef GIVE_BACK

	if (n == 0)
		return 0;
	note_holder_claims(relid, keys, n, holder, role, how);
	return write_holder_claims(dlock_claim_store_has_05() ? &q : &q_04,
							   relid, keys, n, holder, role, 0);
}

/*
 * Give back the holder's live claims on these keys as failed (dlock 0.5):
 * free from now, with their attempt counts, but not claimable before now
 * + retry_us (retry_us < 0: each claim's own backoff, its retry_at -
 * expires_at, none if it asked for none).  The owner stays, so that its
 * role sees the row in its backoff (dlock_claims); returns how many.
 */
int64
dlock_claim_store_give_back_failed(Oid relid, text **keys, int n,
								   text *holder, Oid role, int64 retry_us)
{
	static DlockQuery q = {
		"UPDATE " DLOCK_SCHEMA ".claim"
		"   SET holder = NULL, expires_at = $6,"
		"       retry_at = $6 OPERATOR(pg_catalog.+)"
		"         CASE WHEN $5 OPERATOR(pg_catalog.<) 0"
		"         THEN COALESCE(retry_at OPERATOR(pg_catalog.-) expires_at,"
		"                       '0'::pg_catalog.interval)"
		"         ELSE pg_catalog.make_interval(secs =>"
		"           $5::pg_catalog.float8 OPERATOR(pg_catalog./) 1000000) END"
		" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"
		"   AND holder" EQ "$3 AND owner" EQ "$4"
		"   AND expires_at OPERATOR(pg_catalog.>) $6",
		SPI_OK_UPDATE,
		{OIDOID, TEXTARRAYOID, TEXTOID, OIDOID, INT8OID, TIMESTAMPTZOID}
	};
	Datum		values[6];

	if (n == 0)
		return 0;
	if (!dlock_claim_store_has_05())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("giving claims back as failed needs dlock 0.5"),
				 errhint("Run ALTER EXTENSION dlock UPDATE.")));
	note_holder_claims(relid, keys, n, holder, role, DLOCK_END_GIVEN_BACK);
	values[2] = PointerGetDatum(holder);
	values[3] = ObjectIdGetDatum(role);
	values[4] = Int64GetDatum(retry_us);
	values[5] = TimestampTzGetDatum(GetCurrentTimestamp());
	return (int64) dlock_claim_store_run_on_keys(&q, relid, keys, n, values);
}

/*
 * Extend the holder's live claims on these keys to now + ttl_us (ttl_us <
 * 0: each claim's own ttl), and the end of their backoff by as much (the
 * delay after the expiry stays); returns how many.
 */
int64
dlock_claim_store_renew(Oid relid, text **keys, int n, text *holder, Oid role,
						int64 ttl_us)
{
#define NEW_TTL "(CASE WHEN $5 OPERATOR(pg_catalog.<) 0 THEN ttl_us ELSE $5 END)"
#define NEW_EXPIRY(now) \
	now " OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => " \
	NEW_TTL "::pg_catalog.float8 OPERATOR(pg_catalog./) 1000000)"
	static DlockQuery q_04 = {
		"UPDATE " DLOCK_SCHEMA ".claim"
		"   SET ttl_us = " NEW_TTL ","
		"       expires_at = " NEW_EXPIRY("pg_catalog.clock_timestamp()")
		" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"
		"   AND holder" EQ "$3 AND owner" EQ "$4"
		"   AND expires_at OPERATOR(pg_catalog.>)"
		" pg_catalog.clock_timestamp()",
		SPI_OK_UPDATE, {OIDOID, TEXTARRAYOID, TEXTOID, OIDOID, INT8OID}
	};
	/* now is $6, read once, so that the delay is kept exactly */
	static DlockQuery q = {
		"UPDATE " DLOCK_SCHEMA ".claim"
		"   SET ttl_us = " NEW_TTL ","
		"       retry_at = retry_at OPERATOR(pg_catalog.-) expires_at"
		"         OPERATOR(pg_catalog.+) " NEW_EXPIRY("$6") ","
		"       expires_at = " NEW_EXPIRY("$6")
		" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)"
		"   AND holder" EQ "$3 AND owner" EQ "$4"
		"   AND expires_at OPERATOR(pg_catalog.>) $6",
		SPI_OK_UPDATE,
		{OIDOID, TEXTARRAYOID, TEXTOID, OIDOID, INT8OID, TIMESTAMPTZOID}
	};
#undef NEW_EXPIRY
#undef NEW_TTL
	Datum		values[6];

	if (!dlock_claim_store_has_05())
		return write_holder_claims(&q_04, relid, keys, n, holder, role,
								   ttl_us);
	values[2] = PointerGetDatum(holder);
	values[3] = ObjectIdGetDatum(role);
	values[4] = Int64GetDatum(ttl_us);
	values[5] = TimestampTzGetDatum(GetCurrentTimestamp());
	return (int64) dlock_claim_store_run_on_keys(&q, relid, keys, n, values);
}

/* the claim rows of keys $2 of table $1 */
static DlockQuery delete_keys = {
	"DELETE FROM " DLOCK_SCHEMA ".claim"
	" WHERE relid" EQ "$1 AND key" EQ "ANY ($2)",
	SPI_OK_DELETE, {OIDOID, TEXTARRAYOID}
};

/* Delete the claim rows of these keys, whoever holds them; returns how many. */
int64
dlock_claim_store_delete(Oid relid, text **keys, int n)
{
	Datum		values[2];

	return (int64) dlock_claim_store_run_on_keys(&delete_keys, relid, keys, n,
												 values);
}

/*
 * Delete up to limit claim rows that are free or expired since before and
 * not poisoned, or of tables that no longer exist; returns how many.
 *
 * Without key locks, and without waiting for anybody: one statement locks
 * those rows FOR UPDATE SKIP LOCKED (a row another transaction is
 * changing is skipped) and deletes them.  A claimer that decided on such
 * a row under its key lock meanwhile decided on an idle row, which it
 * still is once gone; its write waits for the sweep's end (sweeps commit
 * at once: maint_sweep.c) and writes the claim row anew (claim_take.c).
 *
 * Claims draw this now and then, so its cost must not grow with the
 * number of claim rows: it walks the tables that have claim rows (a
 * loose index scan, one probe per table) and, for each, reads only the
 * rows it deletes, through claim_live (relid, expires_at), or all rows of
 * a table that no longer exists through the primary key.  A scan of the
 * whole table here cost 78 ms with 400,000 live claims, every 64th claim.
 */
int64
dlock_claim_store_delete_idle(TimestampTz before, int limit)
{
#define DELETE_IDLE(backoff, returning) \
	"DELETE FROM " DLOCK_SCHEMA ".claim" \
	" WHERE ctid" EQ "ANY (ARRAY(" \
	"WITH RECURSIVE t(relid) AS (" \
	"  SELECT pg_catalog.min(relid) FROM " DLOCK_SCHEMA ".claim" \
	"  UNION ALL" \
	"  SELECT (SELECT pg_catalog.min(c.relid)" \
	"            FROM " DLOCK_SCHEMA ".claim c" \
	"           WHERE c.relid OPERATOR(pg_catalog.>) t.relid)" \
	"    FROM t WHERE t.relid IS NOT NULL)" \
	"SELECT c.ctid FROM t CROSS JOIN LATERAL (" \
	"  SELECT * FROM (SELECT c.ctid FROM " DLOCK_SCHEMA ".claim c" \
	"    WHERE c.relid" EQ "t.relid" \
	"      AND c.expires_at OPERATOR(pg_catalog.<) $1" \
	backoff \
	"      AND c.poisoned_at IS NULL" \
	"      AND EXISTS (SELECT FROM pg_catalog.pg_class r" \
	"                   WHERE r.oid" EQ "t.relid)" \
	"    LIMIT $2 FOR UPDATE OF c SKIP LOCKED) idle" \
	"  UNION ALL" \
	"  SELECT * FROM (SELECT c.ctid FROM " DLOCK_SCHEMA ".claim c" \
	"    WHERE c.relid" EQ "t.relid" \
	"      AND NOT EXISTS (SELECT FROM pg_catalog.pg_class r" \
	"                       WHERE r.oid" EQ "t.relid)" \
	"    LIMIT $2 FOR UPDATE OF c SKIP LOCKED) gone) c" \
	" WHERE t.relid IS NOT NULL" \
	" LIMIT $2))" \
	" RETURNING " returning
	/* a row in its backoff is not idle: it keeps its attempts and backoff */
	static DlockQuery q = {
		DELETE_IDLE("      AND (c.retry_at IS NULL"
					"           OR c.retry_at OPERATOR(pg_catalog.<) $1)",
					DLOCK_CLAIM_ENDED_COLUMNS),
		SPI_OK_DELETE_RETURNING, {TIMESTAMPTZOID, INT4OID}
	};
	static DlockQuery q_04 = {
		/* before 0.5 nothing is tracked: no history, and maybe no long_key */
		DELETE_IDLE("", "relid"),
		SPI_OK_DELETE_RETURNING, {TIMESTAMPTZOID, INT4OID}
	};
#undef DELETE_IDLE
	Datum		values[2];

	uint64		n;

	values[0] = TimestampTzGetDatum(before);
	values[1] = Int32GetDatum(limit);
	n = dlock_spi_query(dlock_claim_store_has_05() ? &q : &q_04, values, NULL);
	/* a claim still held when deleted had run out: its tenure ends */
	if (dlock_claim_store_has_05() && dlock_history_tracks_any_table())
		dlock_claim_store_note_ended(n, DLOCK_END_EXPIRED);
	return (int64) n;
}

/*
 * The unexpired claims, and (dlock 0.5) the lapsed ones still in their
 * backoff, with the columns of the dlock_claims view, into SPI_tuptable;
 * returns how many.  Column 1 is the table, 4 the owning role; column 2
 * is the key text (the text itself of a digest key, when dlock.claim keeps
 * it); column 9 (0.5) when the row is claimable again.
 */
uint64
dlock_claim_store_read_live(void)
{
#define READ_LIVE(key_text) \
	"SELECT relid::pg_catalog.regclass, " key_text ", holder," \
	"       owner::pg_catalog.regrole, token, claimed_at," \
	"       expires_at, attempts" \
	"  FROM " DLOCK_SCHEMA ".claim" \
	" WHERE holder IS NOT NULL" \
	"   AND expires_at OPERATOR(pg_catalog.>)" \
	" pg_catalog.clock_timestamp()"
	/* 0.5: and the rows in their backoff, with when they are claimable */
	static DlockQuery q_05 = {
		"SELECT relid::pg_catalog.regclass, COALESCE(long_key, key), holder,"
		"       owner::pg_catalog.regrole, token, claimed_at,"
		"       expires_at, attempts,"
		"       GREATEST(retry_at, expires_at) AS retry_at"
		"  FROM " DLOCK_SCHEMA ".claim"
		" WHERE (holder IS NOT NULL"
		"        AND expires_at OPERATOR(pg_catalog.>)"
		"            pg_catalog.clock_timestamp())"
		"    OR (retry_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()"
		"        AND poisoned_at IS NULL)",
		SPI_OK_SELECT
	};
	static DlockQuery q = {READ_LIVE("COALESCE(long_key, key)"), SPI_OK_SELECT};
	static DlockQuery q_03 = {READ_LIVE("key"), SPI_OK_SELECT};
#undef READ_LIVE

	if (dlock_claim_store_has_05())
		return dlock_spi_query(&q_05, NULL, NULL);
	return dlock_spi_query(dlock_claim_store_has_long_key() ? &q : &q_03,
						   NULL, NULL);
}

/*
 * The poisoned claim rows, with the columns of the dlock_dead_claims view
 * and the owning role as column 7, into SPI_tuptable; returns how many.
 */
uint64
dlock_claim_store_read_dead(void)
{
	static DlockQuery q = {
		"SELECT relid::pg_catalog.regclass,"
		"       COALESCE(long_key, key), attempts, holder,"
		"       claimed_at, poisoned_at, owner"
		"  FROM " DLOCK_SCHEMA ".claim"
		" WHERE poisoned_at IS NOT NULL",
		SPI_OK_SELECT
	};

	return dlock_spi_query(&q, NULL, NULL);
}

/*
 * Every claim row of table relid, sorted by key: its key in *keys, and the
 * key's text in *fulls (the same text, unless the key is a digest; NULL
 * for a digest whose text was not kept: made before dlock 0.4's schema);
 * returns how many.
 */
uint64
dlock_claim_store_keys_of(Oid relid, text ***keys, text ***fulls)
{
	static DlockQuery q = {
		"SELECT key, COALESCE(long_key,"
		"  CASE WHEN pg_catalog.left(key, 1)"
		"        OPERATOR(pg_catalog.<>) pg_catalog.chr(127) THEN key END)"
		"  FROM " DLOCK_SCHEMA ".claim"
		" WHERE relid" EQ "$1 ORDER BY key",
		SPI_OK_SELECT, {OIDOID}
	};
	static DlockQuery q_03 = {
		"SELECT key, CASE WHEN pg_catalog.left(key, 1)"
		"        OPERATOR(pg_catalog.<>) pg_catalog.chr(127) THEN key END"
		"  FROM " DLOCK_SCHEMA ".claim"
		" WHERE relid" EQ "$1 ORDER BY key",
		SPI_OK_SELECT, {OIDOID}
	};
	Datum		values[1];
	uint64		n;

	values[0] = ObjectIdGetDatum(relid);
	n = dlock_spi_query(dlock_claim_store_has_long_key() ? &q : &q_03,
						values, NULL);
	*keys = dlock_copy_key_column(n);
	*fulls = palloc(sizeof(text *) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[i],
									  SPI_tuptable->tupdesc, 2, &isnull);

		(*fulls)[i] = isnull ? NULL : DatumGetTextPCopy(d);
	}
	return n;
}

/*
 * Move the claim rows of these keys from table from to table to, in
 * place of any claim rows to has for them (a row's claim follows it when
 * it moves to another partition tree); returns how many moved.  The
 * caller holds the key locks of both.
 */
int64
dlock_claim_store_move(Oid from, Oid to, text **keys, int n)
{
	static DlockQuery q = {
		"UPDATE " DLOCK_SCHEMA ".claim SET relid = $1"
		" WHERE relid" EQ "$3 AND key" EQ "ANY ($2)",
		SPI_OK_UPDATE, {OIDOID, TEXTARRAYOID, OIDOID}
	};
	Datum		values[3];

	(void) dlock_claim_store_delete(to, keys, n);
	values[2] = ObjectIdGetDatum(from);
	return (int64) dlock_claim_store_run_on_keys(&q, to, keys, n, values);
}

/*
 * Forget every claim row of these tables: live claims, attempts and poison
 * marks; returns how many rows were deleted.
 */
int64
dlock_claim_store_forget(Oid *relids, int n)
{
	static DlockQuery q = {
		"DELETE FROM " DLOCK_SCHEMA ".claim"
		" WHERE relid" EQ "ANY ($1)",
		SPI_OK_DELETE, {OIDARRAYOID}
	};
	Datum		values[1];
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		elems[i] = ObjectIdGetDatum(relids[i]);
	values[0] = PointerGetDatum(construct_array(elems, n, OIDOID,
												sizeof(Oid), true,
												TYPALIGN_INT));
	return (int64) dlock_spi_query(&q, values, NULL);
}

/*
 * The claim row of key from on table relid is now the claim row of key to
 * (to_full: its text, when to is a digest, else NULL), in place of any
 * claim row of to (its row's key was renamed: an enum label); returns
 * whether a row was renamed.  The caller holds the key locks of both.
 */
bool
dlock_claim_store_rekey(Oid relid, text *from, text *to, text *to_full)
{
	static DlockQuery delete_to = {
		"DELETE FROM " DLOCK_SCHEMA ".claim"
		" WHERE relid" EQ "$1 AND key" EQ "$3"
		"   AND $2 IS NOT NULL",
		SPI_OK_DELETE, {OIDOID, TEXTOID, TEXTOID}
	};
	static DlockQuery q = {
		"UPDATE " DLOCK_SCHEMA ".claim SET key = $3, long_key = $4"
		" WHERE relid" EQ "$1 AND key" EQ "$2",
		SPI_OK_UPDATE, {OIDOID, TEXTOID, TEXTOID, TEXTOID}
	};
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', to_full ? ' ' : 'n'};

	values[0] = ObjectIdGetDatum(relid);
	values[1] = PointerGetDatum(from);
	values[2] = PointerGetDatum(to);
	values[3] = PointerGetDatum(to_full);
	(void) dlock_spi_query(&delete_to, values, NULL);
	return dlock_spi_query(&q, values, nulls) > 0;
}

/*
 * When the next claim on table relid lapses: the earliest time after now
 * at which a claim row that is not poisoned becomes claimable again
 * (coalesce(retry_at, expires_at)), or 0 if none will.  Index-backed
 * (claim_lapse): one index descent, whatever the number of claims.  For
 * claims waiting for rows (claim_wait.c).
 */
TimestampTz
dlock_claim_store_next_lapse(Oid relid)
{
	static DlockQuery q = {
		"SELECT COALESCE(retry_at, expires_at) FROM " DLOCK_SCHEMA ".claim"
		" WHERE relid" EQ "$1 AND poisoned_at IS NULL"
		"   AND COALESCE(retry_at, expires_at)"
		"       OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()"
		" ORDER BY COALESCE(retry_at, expires_at) LIMIT 1",
		SPI_OK_SELECT, {OIDOID}
	};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	TimestampTz at = 0;
	bool		isnull;

	if (dlock_spi_query(&q, values, NULL) == 1)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0],
									  SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			at = DatumGetTimestampTz(d);
	}
	SPI_freetuptable(SPI_tuptable);
	return at;
}
