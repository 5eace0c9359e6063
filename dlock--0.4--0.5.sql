/* dlock--0.4--0.5.sql: upgrade from 0.4 to 0.5 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION dlock UPDATE TO '0.5'" to load this file. \quit

-- Each change below has a header line `-- ==== <topic> (issue NN) ====`;
-- the same definitions are in dlock--0.5.sql, in their topic's section
-- (sql/upgrade.sql compares the two).

-- ==== claims through DDL (issue 35) ====
-- The start trigger notes only the tables the statement can name, and the
-- end trigger reads only the claims of the tables it attached or detached
-- (0.4 read the claims of every table that has any, on every ALTER TABLE).
COMMENT ON FUNCTION dlock_claim_ddl_start() IS
'event trigger (ddl_command_start of ALTER TABLE): notes what names the rows of the tables the statement can name';

-- ==== dlock_acquire's defaults (issue 36) ====
-- slots named without a wait: one function with every default, instead of
-- 0.4's two (a defaulted slots beside the four-argument function would have
-- made every call ambiguous)
DROP FUNCTION dlock_acquire(text, text, interval, interval);
CREATE OR REPLACE FUNCTION dlock_acquire(key text, holder text,
                                         ttl interval DEFAULT '30 seconds',
                                         wait interval DEFAULT '0',
                                         slots integer DEFAULT 1)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire_slots_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_acquire(text, text, interval, interval, integer) IS
'acquire key for holder until now + ttl, waiting up to wait (slots > 1: one of slots places of a counting semaphore); returns the fencing token, or NULL when not acquired';

-- ==== claims that wait, back off and share by group (issue 38) ====
-- dlock.claim gains when a lapsed claim's row may be claimed again, and the
-- group the claim was counted in (columns last: claim_store.c reads them by
-- number).
ALTER TABLE dlock.claim ADD COLUMN retry_at timestamptz;
ALTER TABLE dlock.claim ADD COLUMN grp text COLLATE "C";
CREATE INDEX claim_group ON dlock.claim (relid, grp) WHERE grp IS NOT NULL;
COMMENT ON COLUMN dlock.claim.retry_at IS
'when the row may be claimed again after its claim lapses (expiry plus backoff, or a give-back''s retry_after); NULL: at expires_at';
COMMENT ON COLUMN dlock.claim.grp IS
'the value of the group_by expression of the claim that wrote the row, as text (NULL: no group)';

-- The per-row check of a claim with group_by: the row's group as text too
-- (claim_group.c).  Runs no SQL (src/no_search_path.h).
CREATE FUNCTION dlock_claim_unheld(tbl pg_catalog.regclass, key anyelement, ticket bigint, grp text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_claim_unheld_group_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED COST 10;
COMMENT ON FUNCTION dlock_claim_unheld(pg_catalog.regclass, anyelement, bigint, text) IS
'the per-row check of the query of dlock_claim with group_by, with its ticket (any other ticket is an error): true when no live claim and no poison mark is on the row and its group (grp) has room';

-- dlock_claim gains wait, backoff, backoff_max, group_by, per_group and fair
DROP FUNCTION dlock_claim(anyelement, text, integer, interval, text, text, integer);
DROP FUNCTION dlock_claim(text, text, integer, interval, text, text, integer);
CREATE FUNCTION dlock_claim(rowtype anyelement, holder text, n integer,
                            ttl interval DEFAULT '30 seconds',
                            filter text DEFAULT NULL,
                            order_by text DEFAULT NULL,
                            max_attempts integer DEFAULT NULL,
                            wait interval DEFAULT '0',
                            backoff interval DEFAULT NULL,
                            backoff_max interval DEFAULT NULL,
                            group_by text DEFAULT NULL,
                            per_group integer DEFAULT NULL,
                            fair boolean DEFAULT false)
RETURNS SETOF anyelement
AS 'MODULE_PATHNAME', 'dlock_claim_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
ROWS 100 SUPPORT dlock_claim_rows_support;
COMMENT ON FUNCTION dlock_claim(anyelement, text, integer, interval, text, text, integer, interval, interval, interval, text, integer, boolean) IS
'claim up to n rows of the table of rowtype matching filter, in order_by order, that no live claim holds (at most per_group live claims per value of group_by), waiting up to wait for one; returns them';
CREATE FUNCTION dlock_claim(rowtype text, holder text, n integer,
                            ttl interval DEFAULT '30 seconds',
                            filter text DEFAULT NULL,
                            order_by text DEFAULT NULL,
                            max_attempts integer DEFAULT NULL,
                            wait interval DEFAULT '0',
                            backoff interval DEFAULT NULL,
                            backoff_max interval DEFAULT NULL,
                            group_by text DEFAULT NULL,
                            per_group integer DEFAULT NULL,
                            fair boolean DEFAULT false)
RETURNS SETOF text
AS 'MODULE_PATHNAME', 'dlock_claim_untyped_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claim(text, text, integer, interval, text, text, integer, interval, interval, interval, text, integer, boolean) IS
'never claims: catches a quoted table name as first argument, with an error whose hint shows the call to write, dlock_claim(NULL::table, ...)';

CREATE FUNCTION dlock_unclaim(tbl regclass, holder text, keys anyarray,
                              retry_after interval)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_unclaim_retry_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_unclaim(regclass, text, anyarray, interval) IS
'give back the holder''s live claims on the rows of tbl with these primary keys as failed: not claimable again before now + retry_after (NULL: the backoff the claim asked for); returns how many';

-- a row in its backoff is held for claimers
COMMENT ON FUNCTION dlock_claim_unheld(pg_catalog.regclass, anyelement, bigint) IS
'the per-row check of dlock_claim''s query, with its ticket (any other ticket is an error): true when no live claim, no backoff and no poison mark is on the row';
COMMENT ON FUNCTION dlock_claim_unheld(pg_catalog.regclass, anyelement) IS
'true when the caller can see the row of tbl with this primary key and no live claim, no backoff and no poison mark is on it';

-- dlock_claims shows when a row is claimable again (retry_at), and the rows
-- in their backoff: a new column, so the view and its function are made anew
DROP VIEW dlock_claims;
DROP FUNCTION dlock_claims();
CREATE FUNCTION dlock_claims(OUT table_name pg_catalog.regclass, OUT key text,
                             OUT holder text, OUT owner pg_catalog.regrole,
                             OUT token bigint, OUT claimed_at timestamptz,
                             OUT expires_at timestamptz, OUT attempts integer,
                             OUT retry_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_claims_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claims() IS
'unexpired claims, and lapsed ones in their backoff, at the latest committed state that the caller may see (the rows of the dlock_claims view)';

CREATE VIEW dlock_claims AS SELECT * FROM dlock_claims();
GRANT SELECT ON dlock_claims TO PUBLIC;
COMMENT ON VIEW dlock_claims IS 'one row per unexpired claim, and per lapsed claim whose row is in its backoff (holder NULL once given back as failed), with retry_at, when the row is claimable again (of roles whose privileges you have, on tables you can read, on rows you can see)';

CREATE FUNCTION dlock_claim_wakeup_trigger()
RETURNS trigger
AS 'MODULE_PATHNAME', 'dlock_claim_wakeup_trigger'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claim_wakeup_trigger() IS
'statement trigger of dlock_claim_wakeup: wakes a claim waiting on the table when the statement''s transaction commits';

CREATE FUNCTION dlock_claim_wakeup(tbl regclass)
RETURNS void
AS 'MODULE_PATHNAME', 'dlock_claim_wakeup_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claim_wakeup(regclass) IS
'put the statement trigger on tbl that wakes claims waiting for its rows (dlock_claim''s wait) when inserts and updates commit';

-- claims that wait for rows: when a table's next claim lapses (claim_wait.c),
-- two counters, and dlock_waiters shows waiting claims
CREATE INDEX claim_lapse ON dlock.claim (relid, (coalesce(retry_at, expires_at)))
 WHERE poisoned_at IS NULL;
DROP FUNCTION dlock_stats();
CREATE FUNCTION dlock_stats(OUT acquired bigint, OUT extended bigint,
                            OUT contended bigint, OUT waits bigint,
                            OUT wait_time_us bigint, OUT wait_timeouts bigint,
                            OUT handoffs bigint, OUT takeovers bigint,
                            OUT releases bigint, OUT renewals bigint,
                            OUT validation_failures bigint,
                            OUT claims bigint, OUT redeliveries bigint,
                            OUT claim_waits bigint, OUT claim_wakeups bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_stats'
LANGUAGE C VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_stats() IS
'counters since server start (one row; no row unless dlock is in shared_preload_libraries)';
COMMENT ON FUNCTION dlock_waiters() IS
'backends waiting in dlock_acquire, and claims waiting for rows (key: claim:schema.table), in this database that the caller may see (needs dlock in shared_preload_libraries)';

-- the functions that read dlock's tables with a snapshot of their own
-- (GetLatestSnapshot) cannot run in a parallel plan, not even in its
-- leader: a query with a Gather anywhere failed with "cannot update
-- SecondarySnapshot during a parallel operation"
ALTER FUNCTION dlock_locks() PARALLEL UNSAFE;
ALTER FUNCTION dlock_dead_claims() PARALLEL UNSAFE;
ALTER FUNCTION dlock_leader(text) PARALLEL UNSAFE;

-- for monitoring (docs/monitoring.md): the number of watches, of every
-- role, so pg_monitor's alone
CREATE FUNCTION dlock_watch_count()
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_watch_count_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION dlock_watch_count() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dlock_watch_count() TO pg_monitor;
COMMENT ON FUNCTION dlock_watch_count() IS
'how many watches (a session and a key each) this database has, of every role, those of open transactions included (for pg_monitor; 0 unless dlock is in shared_preload_libraries)';

-- ==== history (issue 40) ====

-- What the history tracks: lease key prefixes ('' is every key) and claim
-- tables, read and written only by history_track.c; each backend keeps a
-- copy, read again when either table changes.  Dumped: they are settings
-- an operator or a table's owner made.
CREATE TABLE dlock.history_keys (
    prefix      text COLLATE "C" PRIMARY KEY
);
REVOKE ALL ON dlock.history_keys FROM PUBLIC;
COMMENT ON TABLE dlock.history_keys IS 'lease key prefixes whose tenures dlock.history records ('''' is every key): dlock_history_track';
SELECT pg_catalog.pg_extension_config_dump('dlock.history_keys', '');

CREATE TABLE dlock.history_tables (
    relid       pg_catalog.regclass PRIMARY KEY
);
REVOKE ALL ON dlock.history_tables FROM PUBLIC;
COMMENT ON TABLE dlock.history_tables IS 'claim tables whose claims dlock.history records: dlock_history_track_claims';
SELECT pg_catalog.pg_extension_config_dump('dlock.history_tables', '');

-- One row per ended tenure of a tracked key or table, written by the call
-- that ends it in its own transaction (history_store.c, its only writer,
-- by column number: the column order is part of the format), deleted
-- after dlock.history_retention by the sweeps (maint_sweep.c).
CREATE TABLE dlock.history (
    kind        text NOT NULL,      -- 'lease' or 'claim'
    key         text COLLATE "C" NOT NULL, -- the lease key, or the claimed row's key as text
    relid       oid,                -- claims: the table
    holder      text NOT NULL,
    owner       oid NOT NULL,       -- the role that held it
    token       bigint NOT NULL,
    granted_at  timestamptz NOT NULL,
    ended_at    timestamptz NOT NULL,
    ended       text NOT NULL,      -- how it ended (dlock_history_end_name)
    attempts    integer             -- claims: times claimed
);
CREATE INDEX history_key ON dlock.history (key, granted_at);
CREATE INDEX history_ended ON dlock.history (ended_at);
REVOKE ALL ON dlock.history FROM PUBLIC;
COMMENT ON TABLE dlock.history IS 'one row per ended lease or claim of a tracked key or table: who held it, with which token, from when to when, and how it ended';

CREATE FUNCTION dlock_history_track(prefix text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_history_track_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION dlock_history_track(text) FROM PUBLIC;
COMMENT ON FUNCTION dlock_history_track(text) IS
'for operators: record the tenures of lease keys beginning with prefix ('''' every key) in dlock_history; true when newly tracked';

CREATE FUNCTION dlock_history_untrack(prefix text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_history_untrack_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION dlock_history_untrack(text) FROM PUBLIC;
COMMENT ON FUNCTION dlock_history_untrack(text) IS
'for operators: stop recording the tenures of lease keys beginning with prefix; true when it was tracked';

CREATE FUNCTION dlock_history_track_claims(tbl pg_catalog.regclass)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_history_track_claims_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_history_track_claims(pg_catalog.regclass) IS
'the table''s owner: record the tenures of claims on tbl in dlock_history; true when newly tracked';

CREATE FUNCTION dlock_history_untrack_claims(tbl pg_catalog.regclass)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_history_untrack_claims_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_history_untrack_claims(pg_catalog.regclass) IS
'the table''s owner: stop recording the tenures of claims on tbl; true when it was tracked';

CREATE FUNCTION dlock_history(of_key text,
                              OUT kind text, OUT key text,
                              OUT table_name pg_catalog.regclass,
                              OUT holder text, OUT role pg_catalog.regrole,
                              OUT token bigint, OUT granted_at timestamptz,
                              OUT ended_at timestamptz, OUT ended text,
                              OUT attempts integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_history_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_history(text) IS
'ended tenures of key (NULL: of every key) that the caller may see (the rows of the dlock_history view)';

CREATE VIEW dlock_history AS SELECT * FROM dlock_history(NULL);
GRANT SELECT ON dlock_history TO PUBLIC;
COMMENT ON VIEW dlock_history IS 'one row per ended lease or claim of a tracked key or table (of roles whose privileges you have; claims on tables you can read, on rows you can see)';

-- who held a lease key at a time: the ended tenures that covered it, and
-- the lease still held if it was granted by then
CREATE FUNCTION dlock_held_at(key text, at timestamptz)
RETURNS TABLE (holder text, token bigint, granted_at timestamptz,
               ended_at timestamptz, ended text)
LANGUAGE sql STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT h.holder, h.token, h.granted_at, h.ended_at, h.ended
      FROM @extschema@.dlock_history($1) h
     WHERE h.kind OPERATOR(pg_catalog.=) 'lease'
       AND h.granted_at OPERATOR(pg_catalog.<=) $2
       AND h.ended_at OPERATOR(pg_catalog.>) $2
    UNION ALL
    SELECT l.holder, l.token, l.acquired_at, NULL::timestamptz, NULL::text
      FROM @extschema@.dlock_locks() l
     WHERE l.key OPERATOR(pg_catalog.=) $1
       AND l.acquired_at OPERATOR(pg_catalog.<=) $2
     ORDER BY 3
$$;
COMMENT ON FUNCTION dlock_held_at(text, timestamptz) IS
'who held the lease key at the time at (a tracked key): holder, token, when granted, when and how it ended (NULL: still held)';

-- ==== dlock_guard: fenced writes a table enforces (issue 40) ====
-- A guard is two triggers on the user's table, running dlock_guard_trigger
-- (guard_ddl.c): a BEFORE row trigger, whose arguments are the key
-- expression and the token column (the guard's whole configuration: cloned
-- onto partitions, dumped and restored with the trigger, so a guard needs no
-- table of dlock's), and a BEFORE TRUNCATE statement trigger that refuses
-- TRUNCATE.  The trigger's SET search_path pins the resolution of the key
-- expression (guard_key.c).
CREATE FUNCTION dlock_guard_trigger()
RETURNS trigger
AS 'MODULE_PATHNAME', 'dlock_guard_trigger'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_guard_trigger() IS
'the triggers of dlock_guard: a guarded row write is refused (SQLSTATE LK001) unless the transaction fenced the row''s key (dlock_validate) or claim (dlock_claimed); TRUNCATE is refused';

CREATE FUNCTION dlock_guard(tbl regclass, key text,
                            operations text[] DEFAULT '{insert,update,delete}',
                            token_column name DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dlock_guard_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_guard(regclass, text, text[], name) IS
'guard tbl (its owner or a superuser): its inserts, updates and deletes are refused unless the transaction fenced the row''s key, the expression key over the row''s columns (dlock_validate), or the row''s claim (dlock_claimed); TRUNCATE is refused; token_column is stamped with the fence''s token';

CREATE FUNCTION dlock_unguard(tbl regclass)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_unguard_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_unguard(regclass) IS
'take the guard off tbl (its owner or a superuser); false when it had none';

-- read from the triggers themselves (a partition's clone is not a guard of
-- its own); tables the caller may SELECT from or owns
CREATE VIEW dlock_guards WITH (security_barrier = true) AS
    SELECT c.oid::pg_catalog.regclass AS table_name,
           pg_catalog.convert_from(pg_catalog.substring(t.tgargs, 1, a.end1 - 1),
                                   pg_catalog.getdatabaseencoding()) AS key,
           ARRAY(SELECT o.op FROM (VALUES (1, 4, 'insert'), (2, 16, 'update'),
                                          (3, 8, 'delete')) AS o(n, bit, op)
                  WHERE t.tgtype::integer & o.bit <> 0 ORDER BY o.n)::text[] AS operations,
           NULLIF(pg_catalog.convert_from(
               pg_catalog.substring(a.rest, 1, pg_catalog.position(a.rest, '\x00'::pg_catalog.bytea) - 1),
               pg_catalog.getdatabaseencoding()), '')::pg_catalog.name AS token_column
      FROM pg_catalog.pg_trigger t
      JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
      JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
      CROSS JOIN LATERAL (
          SELECT pg_catalog.position(t.tgargs, '\x00'::pg_catalog.bytea) AS end1,
                 pg_catalog.substring(t.tgargs,
                     pg_catalog.position(t.tgargs, '\x00'::pg_catalog.bytea) + 1) AS rest) a
     WHERE p.proname = 'dlock_guard_trigger' AND t.tgname = 'zz_dlock_guard'
       AND t.tgparentid = 0 AND t.tgnargs = 2
       AND (pg_catalog.has_table_privilege(c.oid, 'SELECT')
            OR pg_catalog.pg_has_role(c.relowner, 'USAGE'));
GRANT SELECT ON dlock_guards TO PUBLIC;
COMMENT ON VIEW dlock_guards IS 'one row per guarded table (dlock_guard) that you can read or own: its key expression, guarded operations and token column';
