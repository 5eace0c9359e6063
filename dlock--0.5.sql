/* dlock--0.5.sql: dlock 0.5 in one script, what CREATE EXTENSION dlock runs */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION dlock" to load this file. \quit

-- This script and the upgrade chain (dlock--0.1.sql, then dlock--0.1--0.2.sql
-- and on) must give the same objects: sql/upgrade.sql compares a fresh
-- install with an upgrade from every released version.  A change of 0.5
-- goes into both this file and dlock--0.4--0.5.sql.
--
-- Who may call what.  Every function is executable by PUBLIC (the default)
-- except the operators' dlock_force_release, dlock_cleanup and
-- dlock_reset_claims; the views are readable by PUBLIC and each shows a role
-- only what it may see (the functions behind them decide, views_sql.c).
--
-- search_path.  Every function is pinned to search_path = pg_catalog,
-- pg_temp except those that run no SQL and resolve no name through
-- search_path (listed, with the reason, in src/no_search_path.h: the lease
-- calls dlock_acquire, dlock_release, dlock_renew, dlock_validate, and the
-- per-row claim functions dlock_claimed and the ticketed
-- dlock_claim_unheld), and dlock_claim(anyelement, ...), whose filter and
-- order_by are the caller's SQL.  sql/security_pins.sql checks this.

-- =====================================================================
-- Schema: dlock's internal storage
-- =====================================================================

-- Nothing in schema dlock is granted to anyone: dlock's C code reads and
-- writes its tables as the owner of the extension (who owns them, whoever
-- schema dlock is given to later), and decides itself what a caller may do
-- and see.
CREATE SCHEMA dlock;
REVOKE ALL ON SCHEMA dlock FROM PUBLIC;
COMMENT ON SCHEMA dlock IS 'internal storage of the dlock extension; use the dlock_* functions and views';

-- =====================================================================
-- The lease table
-- =====================================================================

-- One row per key.  A released key keeps its row (holder NULL), so churn
-- on a fixed set of keys is a chain of HOT updates (hence fillfactor 50);
-- rows of keys idle for longer than dlock.idle_key_lifetime are deleted by
-- sweeps (maint_sweep.c).  Read and written only by lease_store.c, by column
-- number: the column order is part of the format.
-- A lease is the row of slot 0 with slots 1, read with one index probe; a
-- counting semaphore has a row per holder (slots 1 to 1000), shared leases
-- too (slots -1), all read with one range scan of the key (lease_grant.c).
CREATE TABLE dlock.lease (
    key         text COLLATE "C" NOT NULL,
    holder      text,               -- NULL: free
    owner       oid,                -- role that holds it
    token       bigint NOT NULL,    -- last fencing token granted
    ttl_us      bigint NOT NULL,    -- ttl it was granted with, in microseconds
    acquired_at timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    slot        smallint NOT NULL DEFAULT 0,
    slots       smallint NOT NULL DEFAULT 1,
    CONSTRAINT lease_pkey PRIMARY KEY (key, slot)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.05);
REVOKE ALL ON dlock.lease FROM PUBLIC;
COMMENT ON TABLE dlock.lease IS 'one row per key (per holder of a semaphore or of shared leases): its lease, or a free key kept for HOT reuse until cleanup';
COMMENT ON COLUMN dlock.lease.slot IS
'which of the key''s slots this row is (0 for a lease)';
COMMENT ON COLUMN dlock.lease.slots IS
'the slots of the key when this row was granted (1: a lease, -1: a shared lease)';

-- =====================================================================
-- The token sequence
-- =====================================================================

-- Fencing tokens are values of this sequence, kept at or above the
-- server's clock in microseconds since 1970 (token.c), so that a sequence
-- that lost values (a restore, a promoted standby behind its primary)
-- still never hands out a token lower than one given before.
CREATE SEQUENCE dlock.token_seq;
REVOKE ALL ON SEQUENCE dlock.token_seq FROM PUBLIC;
COMMENT ON SEQUENCE dlock.token_seq IS 'fencing tokens: kept at or above the clock in microseconds since 1970, see base_token.c';
-- leases and claims are not dumped (they belong to running processes); the
-- token sequence is, so that a restored database never hands out a lower
-- token
SELECT pg_catalog.pg_extension_config_dump('dlock.token_seq', '');

-- =====================================================================
-- Lease functions (lease_sql.c)
-- =====================================================================

-- The lease calls run no SQL (src/no_search_path.h): no pinned
-- search_path.
-- one function for the lease and the counting semaphore (issue 36): slots
-- named without a wait works (dlock_acquire(k, h, ttl, slots => 3)); 0.4's
-- four-argument function, whose defaults made a defaulted slots ambiguous,
-- is this one with slots 1
CREATE FUNCTION dlock_acquire(key text, holder text,
                              ttl interval DEFAULT '30 seconds',
                              wait interval DEFAULT '0',
                              slots integer DEFAULT 1)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire_slots_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_acquire(text, text, interval, interval, integer) IS
'acquire key for holder until now + ttl, waiting up to wait (slots > 1: one of slots places of a counting semaphore); returns the fencing token, or NULL when not acquired';

-- any number of shared holders of a key, or the one holder of its lease, in
-- the FIFO order of the key's queue
CREATE FUNCTION dlock_acquire_shared(key text, holder text,
                                     ttl interval DEFAULT '30 seconds',
                                     wait interval DEFAULT '0')
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire_shared_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_acquire_shared(text, text, interval, interval) IS
'acquire a shared lease on key for holder until now + ttl (any number of shared holders, or one holder of the lease), waiting up to wait; returns the fencing token, or NULL when not acquired';

-- every key or none, one token per key in the order given; keys are taken
-- in byte order (no deadlock between calls) inside an internal
-- subtransaction (lease_multi.c)
CREATE FUNCTION dlock_acquire_all(keys text[], holder text,
                                  ttl interval DEFAULT '30 seconds',
                                  wait interval DEFAULT '0')
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'dlock_acquire_all_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_acquire_all(text[], text, interval, interval) IS
'acquire every key for holder until now + ttl, or none, waiting up to wait in all; returns one fencing token per key, in the order of keys, or NULL when not acquired';

CREATE FUNCTION dlock_release(key text, holder text, token bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_release_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_release(text, text, bigint) IS
'free key if holder (and the calling role) holds it, with that token if given; true when it was freed';

CREATE FUNCTION dlock_renew(key text, holder text, ttl interval DEFAULT NULL,
                            token bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_renew_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_renew(text, text, interval, bigint) IS
'extend the holder''s unexpired lease to now + ttl (NULL: its granted ttl); false when the lease is lost';

CREATE FUNCTION dlock_validate(key text, holder text, token bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_validate_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_validate(text, text, bigint) IS
'fence: true when holder holds key with exactly this token; the lease then cannot change hands until this transaction ends';

-- frees the holder's claims too (claim_manage.c)
CREATE FUNCTION dlock_release_all(holder text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_release_all_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_release_all(text) IS
'free every unexpired lease and claim of holder taken by the calling role; returns how many';

CREATE FUNCTION dlock_force_release(key text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_force_release_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION dlock_force_release(text) FROM PUBLIC;
COMMENT ON FUNCTION dlock_force_release(text) IS
'for operators: free the unexpired lease on key, whoever holds it';

-- deletes in transactions of dlock's background worker (maint_worker.c, maint_sweep.c)
CREATE FUNCTION dlock_cleanup(idle interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_cleanup_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION dlock_cleanup(interval) FROM PUBLIC;
COMMENT ON FUNCTION dlock_cleanup(interval) IS
'for operators: delete rows of keys free or expired for longer than idle (NULL: dlock.idle_key_lifetime)';

-- =====================================================================
-- Claims: leases on rows of the user's own tables
-- =====================================================================

-- One row per claimed row of a user table, kept after expiry for its
-- attempt count and poison mark.  A key text longer than 1,024 bytes (or
-- beginning with the character chr(127)) is kept in the primary key as
-- chr(127) and the hex SHA-256 of the text, and the text itself in
-- long_key (claim_key.c), so that every key the user's primary key accepts
-- can be claimed.  Read and written by claim_store.c (by column number:
-- the column order is part of the format, long_key is last) and
-- claim_store_spi.c.
CREATE TABLE dlock.claim (
    relid       oid NOT NULL,       -- the user's table
    key         text COLLATE "C" NOT NULL, -- its primary key, as text (or its digest)
    holder      text,
    owner       oid,
    token       bigint NOT NULL,    -- shared by the rows of one dlock_claim call
    ttl_us      bigint NOT NULL,
    claimed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    attempts    integer NOT NULL,   -- times claimed; survives expiry
    poisoned_at timestamptz,        -- set when max_attempts was reached
    long_key    text COLLATE "C",   -- the key text when key is its digest
    retry_at    timestamptz,        -- 0.5: not claimable again before (NULL: expires_at)
    grp         text COLLATE "C",   -- 0.5: the value of the claim's group_by, as text
    PRIMARY KEY (relid, key)
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.05);
-- live claims of a table are found through this index, so that a claim
-- reads the live claims, not every claim row kept for its attempts
CREATE INDEX claim_live ON dlock.claim (relid, expires_at);
CREATE INDEX claim_poisoned ON dlock.claim (relid) WHERE poisoned_at IS NOT NULL;
-- the claims of one group of a table (per_group counts them)
CREATE INDEX claim_group ON dlock.claim (relid, grp) WHERE grp IS NOT NULL;
-- 0.5: when a table's next claim lapses, for claims waiting for rows
CREATE INDEX claim_lapse ON dlock.claim (relid, (coalesce(retry_at, expires_at)))
 WHERE poisoned_at IS NULL;
REVOKE ALL ON dlock.claim FROM PUBLIC;
COMMENT ON TABLE dlock.claim IS 'one row per claimed row of a user table, kept after expiry for its attempt count';
COMMENT ON COLUMN dlock.claim.long_key IS
'the key text of a row whose key (column key) is the digest of a long text';
COMMENT ON COLUMN dlock.claim.retry_at IS
'when the row may be claimed again after its claim lapses (expiry plus backoff, or a give-back''s retry_after); NULL: at expires_at';
COMMENT ON COLUMN dlock.claim.grp IS
'the value of the group_by expression of the claim that wrote the row, as text (NULL: no group)';

-- Row estimates for the planner: a claim returns at most n rows, a
-- completion at most its keys, not the 1,000 assumed of a set-returning
-- function (with that, "UPDATE t ... FROM dlock_complete(...)" could scan
-- t).  Created first: dlock_claim and dlock_complete name it.
CREATE FUNCTION dlock_claim_rows_support(internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'dlock_claim_rows_support'
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claim_rows_support(internal) IS
'planner support: the row estimates of dlock_claim and dlock_complete';

-- No pinned search_path, on purpose: filter and order_by are the caller's
-- SQL and resolve names as the caller's own queries do.  dlock's internal
-- queries pin search_path = pg_catalog, pg_temp for themselves
-- (base_spi.c), and the parts of the claim query dlock writes name the
-- table, its operators and dlock's functions with their schemas
-- (claim_query.c).
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

-- dlock_claim('jobs', ...) (a quoted table name where a row type is wanted)
-- reaches this overload instead of failing with "could not determine
-- polymorphic type"; it always raises an error whose hint shows the call
-- to write.  A row type argument (NULL::jobs) has no implicit cast to text,
-- so it still calls dlock_claim(anyelement, ...).
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

-- The check dlock_claim's query runs on every row its scan reaches, before
-- the row lock: one index probe of dlock.claim (claim_take.c), so that a claim
-- costs what its scan costs, whatever the number of live claims.  The
-- query passes it a ticket (a parameter that SQL in a caller's filter
-- cannot name; any other ticket is an error).  It runs no SQL
-- (src/no_search_path.h): no pinned search_path.
CREATE FUNCTION dlock_claim_unheld(tbl pg_catalog.regclass, key anyelement, ticket bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_claim_unheld_ticket_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED COST 10;
COMMENT ON FUNCTION dlock_claim_unheld(pg_catalog.regclass, anyelement, bigint) IS
'the per-row check of dlock_claim''s query, with its ticket (any other ticket is an error): true when no live claim, no backoff and no poison mark is on the row';

-- The per-row check of a claim with group_by: the row's group as text too
-- (claim_group.c).  Runs no SQL (src/no_search_path.h).
CREATE FUNCTION dlock_claim_unheld(tbl pg_catalog.regclass, key anyelement, ticket bigint, grp text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_claim_unheld_group_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED COST 10;
COMMENT ON FUNCTION dlock_claim_unheld(pg_catalog.regclass, anyelement, bigint, text) IS
'the per-row check of the query of dlock_claim with group_by, with its ticket (any other ticket is an error): true when no live claim and no poison mark is on the row and its group (grp) has room';

-- The same check for callers: true only for a row the caller can see
-- (it reads the row as the caller: row-level security and column
-- privileges apply), so that it tells a role nothing about other rows.
CREATE FUNCTION dlock_claim_unheld(tbl pg_catalog.regclass, key anyelement)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_claim_unheld_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED COST 10
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claim_unheld(pg_catalog.regclass, anyelement) IS
'true when the caller can see the row of tbl with this primary key and no live claim, no backoff and no poison mark is on it';

-- The fence, completion, give-back, heartbeat and reset of claims
-- (claim_sql.c, claim_manage.c).  dlock_claimed runs no SQL
-- (src/no_search_path.h): no pinned search_path.
CREATE FUNCTION dlock_claimed(tbl regclass, key anyelement, holder text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_claimed_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_claimed(regclass, anyelement, text) IS
'fence for claims: true when holder holds a live claim on that row; it then cannot be taken over until this transaction ends';

CREATE FUNCTION dlock_complete(tbl regclass, holder text, keys anyarray)
RETURNS SETOF anyelement
AS 'MODULE_PATHNAME', 'dlock_complete_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
ROWS 100 SUPPORT dlock_claim_rows_support
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_complete(regclass, text, anyarray) IS
'give back the holder''s live claims on the rows of tbl with these primary keys, fenced until the transaction ends; returns the keys given back';

CREATE FUNCTION dlock_unclaim(tbl regclass, holder text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_unclaim_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_unclaim(regclass, text) IS
'give back all of the holder''s live claims on tbl; returns how many';

CREATE FUNCTION dlock_unclaim(tbl regclass, holder text, keys anyarray)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_unclaim_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_unclaim(regclass, text, anyarray) IS
'give back the holder''s live claims on the rows of tbl with these primary keys; returns how many';

CREATE FUNCTION dlock_unclaim(tbl regclass, holder text, keys anyarray,
                              retry_after interval)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_unclaim_retry_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_unclaim(regclass, text, anyarray, interval) IS
'give back the holder''s live claims on the rows of tbl with these primary keys as failed: not claimable again before now + retry_after (NULL: the backoff the claim asked for); returns how many';

-- Waiting claims (dlock_claim's wait) are woken when a statement that
-- inserted or updated rows of the table commits: dlock_claim_wakeup(tbl)
-- puts a statement trigger on the table that tells dlock so.
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

CREATE FUNCTION dlock_renew_claims(tbl regclass, holder text, ttl interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_renew_claims_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_renew_claims(regclass, text, interval) IS
'heartbeat: extend all of the holder''s live claims on tbl to now + ttl (NULL: their own ttl); returns how many';

CREATE FUNCTION dlock_reset_claims(tbl regclass, keys anyarray)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_reset_claims_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION dlock_reset_claims(regclass, anyarray) FROM PUBLIC;
COMMENT ON FUNCTION dlock_reset_claims(regclass, anyarray) IS
'for operators: forget the claims, attempt counts and poison marks of these rows';

-- =====================================================================
-- Event triggers: claims follow their rows through DDL
-- =====================================================================

-- A row keeps one claim, and a claim names one row, whatever DDL does to
-- the row's table: claims follow partitions detached and attached and enum
-- labels renamed; a table whose primary key changes what it names (another
-- column or type, ALTER COLUMN ... TYPE ... USING) forgets its claims; a
-- dropped table's claims go with it (claim_ddl.c, claim_ddl_type.c).  The
-- triggers run as the user who runs the DDL; dlock's own queries (and its
-- reads of pg_event_trigger_ddl_commands()) run as dlock's owner, so they
-- need no privilege of that user.  The start trigger, which runs before
-- PostgreSQL checks the user's rights, only reads catalogs.  The end
-- trigger reads the claims while the statement holds its locks, so no
-- claim of the table escapes it, and only those of the tables the
-- statement attached or detached.
CREATE FUNCTION dlock_claim_ddl_start()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'dlock_claim_ddl_start_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claim_ddl_start() IS
'event trigger (ddl_command_start of ALTER TABLE): notes what names the rows of the tables the statement can name';

CREATE FUNCTION dlock_claim_ddl_end()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'dlock_claim_ddl_end_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claim_ddl_end() IS
'event trigger (ddl_command_end of ALTER TABLE and ALTER TYPE): claims follow their rows through DDL';

CREATE FUNCTION dlock_claim_ddl_drop()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'dlock_claim_ddl_drop_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claim_ddl_drop() IS
'event trigger (sql_drop): the claims of dropped tables go with them';

CREATE EVENT TRIGGER dlock_claim_ddl_start ON ddl_command_start
  WHEN TAG IN ('ALTER TABLE')
  EXECUTE FUNCTION dlock_claim_ddl_start();
CREATE EVENT TRIGGER dlock_claim_ddl_end ON ddl_command_end
  WHEN TAG IN ('ALTER TABLE', 'ALTER TYPE')
  EXECUTE FUNCTION dlock_claim_ddl_end();
CREATE EVENT TRIGGER dlock_claim_ddl_drop ON sql_drop
  EXECUTE FUNCTION dlock_claim_ddl_drop();

-- =====================================================================
-- Views and counters (views_sql.c)
-- =====================================================================

-- Each view reads through a function, so that it shows the latest
-- committed state, as dlock's decisions do, also inside REPEATABLE READ
-- transactions; and the function decides what the caller may see: the
-- leases, waits and claims of roles whose privileges it has, claims only
-- on tables it may SELECT from and on rows it can see where row-level
-- security applies to it; everything for superusers and members of
-- pg_read_all_stats.  dlock_dead_claims is also a security barrier (as it
-- was when it read dlock.claim itself, before 0.4).
CREATE FUNCTION dlock_locks(OUT key text, OUT holder text,
                            OUT owner pg_catalog.regrole, OUT token bigint,
                            OUT acquired_at timestamptz,
                            OUT expires_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_locks_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_locks() IS
'unexpired leases at the latest committed state that the caller may see (the rows of the dlock_locks view)';

CREATE VIEW dlock_locks AS SELECT * FROM dlock_locks();
GRANT SELECT ON dlock_locks TO PUBLIC;
COMMENT ON VIEW dlock_locks IS 'one row per unexpired lease';

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

CREATE FUNCTION dlock_dead_claims(OUT table_name pg_catalog.regclass, OUT key text,
                                  OUT attempts integer, OUT last_holder text,
                                  OUT last_claimed_at timestamptz,
                                  OUT poisoned_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_dead_claims_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_dead_claims() IS
'claims set aside after max_attempts deliveries that the caller may see (the rows of the dlock_dead_claims view)';

-- key in collation "C", as dlock.claim.key (the view of dlock 0.1 read
-- that column directly)
CREATE VIEW dlock_dead_claims WITH (security_barrier = true) AS
    SELECT d.table_name, d.key COLLATE "C" AS key, d.attempts, d.last_holder,
           d.last_claimed_at, d.poisoned_at
      FROM dlock_dead_claims() d;
GRANT SELECT ON dlock_dead_claims TO PUBLIC;
COMMENT ON VIEW dlock_dead_claims IS 'rows no longer handed out because they were claimed max_attempts times (those of roles whose privileges you have, on tables you can read, on rows you can see)';

-- the wait queue lives in shared memory (wait_queue.c)
CREATE FUNCTION dlock_waiters(OUT pid integer, OUT key text, OUT holder text,
                              OUT waiting_since timestamptz,
                              OUT queue_position integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_waiters'
LANGUAGE C VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_waiters() IS
'backends waiting in dlock_acquire, and claims waiting for rows (key: claim:schema.table), in this database that the caller may see (needs dlock in shared_preload_libraries)';

CREATE VIEW dlock_waiters AS SELECT * FROM dlock_waiters();
GRANT SELECT ON dlock_waiters TO PUBLIC;
COMMENT ON VIEW dlock_waiters IS 'backends waiting in dlock_acquire; queue_position 1 is next in line';

-- the counters live in shared memory (base_stats.c)
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

-- =====================================================================
-- Watching keys and elections (watch_sql.c)
-- =====================================================================

-- A session subscribes with dlock_watch and gets a notification (on a
-- channel of its own, with a random name) at the commit of every grant,
-- release and expiry of the key whose lease its role may see: the registry
-- in watch_registry.c, sending in watch_notify.c, the session's side in
-- watch_session.c, expiries in watch_worker.c.  Needs dlock in
-- shared_preload_libraries.
CREATE FUNCTION dlock_watch(key text)
RETURNS text
AS 'MODULE_PATHNAME', 'dlock_watch_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_watch(text) IS
'subscribe this session to the changes of key (grants, releases, expiries); returns the channel, already listened on, that the notifications come on';

CREATE FUNCTION dlock_unwatch(key text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_unwatch_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_unwatch(text) IS
'end this session''s watch of key at commit; false when it did not watch it';

CREATE FUNCTION dlock_unwatch()
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_unwatch_all_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_unwatch() IS
'end every watch of this session in this database at commit; returns how many';

-- the leader of an election: the key's live lease, for those who may see it
CREATE FUNCTION dlock_leader(key text, OUT holder text,
                             OUT owner pg_catalog.regrole, OUT token bigint,
                             OUT acquired_at timestamptz,
                             OUT expires_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_leader_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_leader(text) IS
'the live lease of key at the latest committed state (holder, owner, token, acquired_at, expires_at), if the caller may see it; no row otherwise';

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

-- =====================================================================
-- History: one row per ended tenure of tracked keys and claim tables
-- (history_track.c, history_store.c; the view in views_sql.c)
-- ==============================================================

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

-- =====================================================================
-- Guarded tables (guard_sql.c)
-- =====================================================================

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
