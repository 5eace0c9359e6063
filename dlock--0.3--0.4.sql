/* dlock--0.3--0.4.sql: upgrade from 0.3 to 0.4 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION dlock UPDATE TO '0.4'" to load this file. \quit

-- ==== clear errors for newcomers (issue 23) ====
-- dlock_claim('jobs', ...) (a quoted table name where a row type is wanted)
-- reaches this overload instead of failing with "could not determine
-- polymorphic type"; it always raises an error whose hint shows the call
-- to write.  A row type argument (NULL::jobs) has no implicit cast to text,
-- so it still calls dlock_claim(anyelement, ...).
CREATE FUNCTION dlock_claim(rowtype text, holder text, n integer,
                            ttl interval DEFAULT '30 seconds',
                            filter text DEFAULT NULL,
                            order_by text DEFAULT NULL,
                            max_attempts integer DEFAULT NULL)
RETURNS SETOF text
AS 'MODULE_PATHNAME', 'dlock_claim_untyped_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claim(text, text, integer, interval, text, text, integer) IS
'never claims: catches a quoted table name as first argument, with an error whose hint shows the call to write, dlock_claim(NULL::table, ...)';
-- ==== Claims of long keys (issue 24) ====

-- A key text longer than 1,024 bytes (or beginning with the character
-- chr(127)) is kept in dlock.claim's primary key as chr(127) and the hex
-- SHA-256 of the text, and the text itself in long_key: every key the
-- user's primary key accepts can be claimed, whatever the size limit of an
-- index entry of dlock.claim (claim_key.c).  Existing rows are rewritten
-- that way (0.3 could hold texts up to about 2,700 bytes).
ALTER TABLE dlock.claim ADD COLUMN long_key text COLLATE "C";
COMMENT ON COLUMN dlock.claim.long_key IS
'the key text of a row whose key (column key) is the digest of a long text';
UPDATE dlock.claim
   SET long_key = key,
       key = pg_catalog.chr(127) OPERATOR(pg_catalog.||)
             pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(key,
                 pg_catalog.getdatabaseencoding())), 'hex')
 WHERE pg_catalog.octet_length(key) OPERATOR(pg_catalog.>) 1024
    OR pg_catalog.left(key, 1) OPERATOR(pg_catalog.=) pg_catalog.chr(127);

-- the dead claims show the key text
CREATE OR REPLACE VIEW dlock_dead_claims WITH (security_barrier = true) AS
    SELECT c.relid::pg_catalog.regclass AS table_name,
           COALESCE(c.long_key, c.key) AS key,
           c.attempts,
           c.holder AS last_holder,
           c.claimed_at AS last_claimed_at,
           c.poisoned_at
      FROM dlock.claim c
     WHERE c.poisoned_at IS NOT NULL
       AND (pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE')
            OR (EXISTS (SELECT 1 FROM pg_catalog.pg_authid a
                         WHERE a.oid OPERATOR(pg_catalog.=) c.owner
                           AND pg_catalog.pg_has_role(a.oid, 'USAGE'))
                AND pg_catalog.has_table_privilege(c.relid, 'SELECT')));

-- (end of claims of long keys)

-- ==== Claims through DDL (issue 24) ====

-- A row keeps one claim, and a claim names one row, whatever DDL does to
-- the row's table: claims follow partitions detached and attached and enum
-- labels renamed; a table whose primary key changes what it names (another
-- column or type, ALTER COLUMN ... TYPE ... USING) forgets its claims; a
-- dropped table's claims go with it (claim_ddl.c).  The triggers run as the
-- user who runs the DDL; dlock's own queries run as dlock's owner.  The end
-- trigger reads the claims while the statement holds its locks, so no claim
-- of the table escapes it.
CREATE FUNCTION dlock_claim_ddl_start()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'dlock_claim_ddl_start_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claim_ddl_start() IS
'event trigger (ddl_command_start of ALTER TABLE): notes what names the rows of every table with claims';

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

-- (end of claims through DDL)

-- ==== Claims and row-level security (issue 24) ====

-- No claim function tells a role anything about rows it cannot see.
-- dlock_claim's query passes its per-row check a ticket (a parameter that
-- SQL in a caller's filter cannot name; any other ticket is an error);
-- dlock_claim_unheld(tbl, key) is true only for a row the caller can see
-- (SELECT as the caller: row-level security and column privileges apply).
-- The ticketed check runs no SQL (src/no_search_path.h): no pinned
-- search_path.
CREATE FUNCTION dlock_claim_unheld(tbl pg_catalog.regclass, key anyelement, ticket bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_claim_unheld_ticket_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED COST 10;
COMMENT ON FUNCTION dlock_claim_unheld(pg_catalog.regclass, anyelement, bigint) IS
'the per-row check of dlock_claim''s query, with its ticket (any other ticket is an error): true when no live claim and no poison mark is on the row';
COMMENT ON FUNCTION dlock_claim_unheld(pg_catalog.regclass, anyelement) IS
'true when the caller can see the row of tbl with this primary key and no live claim and no poison mark is on it';

-- dlock_claims() and dlock_dead_claims() show claims only on rows the
-- caller can see where row-level security applies to it (views_sql.c);
-- the dead claims are read through a function, as the live ones are.
CREATE FUNCTION dlock_dead_claims(OUT table_name pg_catalog.regclass, OUT key text,
                                  OUT attempts integer, OUT last_holder text,
                                  OUT last_claimed_at timestamptz,
                                  OUT poisoned_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_dead_claims_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_dead_claims() IS
'claims set aside after max_attempts deliveries that the caller may see (the rows of the dlock_dead_claims view)';
CREATE OR REPLACE VIEW dlock_dead_claims WITH (security_barrier = true) AS
    SELECT d.table_name, d.key COLLATE "C" AS key, d.attempts, d.last_holder,
           d.last_claimed_at, d.poisoned_at
      FROM dlock_dead_claims() d;
COMMENT ON VIEW dlock_dead_claims IS 'rows no longer handed out because they were claimed max_attempts times (those of roles whose privileges you have, on tables you can read, on rows you can see)';
COMMENT ON VIEW dlock_claims IS 'one row per unexpired claim (of roles whose privileges you have, on tables you can read, on rows you can see)';

-- (end of claims and row-level security)

-- ==== search_path on functions that run no SQL (issue 25) ====
-- These C functions run no SQL and resolve no name through search_path, so
-- a pinned search_path protects nothing in them, and it cost every call a
-- save and restore of the settings.  src/no_search_path.h lists them with
-- the reason each is safe; sql/security_pins.sql checks that no other dlock
-- function goes without the pin, t/092_no_search_path.pl that none of them
-- reaches SPI or a name look-up through search_path.
ALTER FUNCTION dlock_acquire(text, text, interval, interval) RESET search_path;
ALTER FUNCTION dlock_release(text, text, bigint) RESET search_path;
ALTER FUNCTION dlock_renew(text, text, interval, bigint) RESET search_path;
ALTER FUNCTION dlock_validate(text, text, bigint) RESET search_path;
ALTER FUNCTION dlock_claimed(pg_catalog.regclass, anyelement, text) RESET search_path;
-- ==== watch (issue 26) ====

-- Watching keys: a session subscribes with dlock_watch and gets a
-- notification (on a channel of its own, with a random name) at the commit
-- of every grant, release and expiry of the key whose lease its role may
-- see (src/watch*.c).  Needs dlock in shared_preload_libraries.
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
LANGUAGE C VOLATILE PARALLEL RESTRICTED ROWS 1
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_leader(text) IS
'the live lease of key at the latest committed state (holder, owner, token, acquired_at, expires_at), if the caller may see it; no row otherwise';

-- (end of the watch section)
-- ==== semaphores and shared leases (issue 26) ====

-- Counting semaphores: dlock_acquire(key, holder, ttl, wait, slots) admits
-- up to slots holders of a key at once, one row each in dlock.lease.  A
-- lease is the row of slot 0 with slots 1, so the primary key becomes
-- (key, slot) and a lease is still read with one index probe (lease.c).
ALTER TABLE dlock.lease
    ADD COLUMN slot smallint NOT NULL DEFAULT 0,
    ADD COLUMN slots smallint NOT NULL DEFAULT 1;
COMMENT ON COLUMN dlock.lease.slot IS
'which of the key''s slots this row is (0 for a lease)';
COMMENT ON COLUMN dlock.lease.slots IS
'the slots of the key when this row was granted (1: a lease, -1: a shared lease)';
ALTER TABLE dlock.lease
    DROP CONSTRAINT lease_pkey,
    ADD CONSTRAINT lease_pkey PRIMARY KEY (key, slot);
COMMENT ON TABLE dlock.lease IS 'one row per key (per holder of a semaphore or of shared leases): its lease, or a free key kept for HOT reuse until cleanup';

-- a new function (a defaulted argument cannot be added to the old one, and
-- one with a default would make the old calls ambiguous); like the other
-- lease calls it runs no SQL, so it goes without a pinned search_path
-- (src/no_search_path.h)
CREATE FUNCTION dlock_acquire(key text, holder text, ttl interval,
                              wait interval, slots integer)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire_slots_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_acquire(text, text, interval, interval, integer) IS
'acquire one of slots places of the counting semaphore key for holder until now + ttl, waiting up to wait; returns the fencing token, or NULL when not acquired';

-- Shared leases: any number of shared holders of a key, or the one holder of
-- its lease (dlock_acquire), in the FIFO order of the key's queue, so that a
-- lease waiting behind shared holders is not starved by later ones.  Rows of
-- slots -1 (lease_read.c).
CREATE FUNCTION dlock_acquire_shared(key text, holder text,
                                     ttl interval DEFAULT '30 seconds',
                                     wait interval DEFAULT '0')
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire_shared_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_acquire_shared(text, text, interval, interval) IS
'acquire a shared lease on key for holder until now + ttl (any number of shared holders, or one holder of the lease), waiting up to wait; returns the fencing token, or NULL when not acquired';

-- (end of semaphores and shared leases)

-- ==== several keys at once (issue 26) ====

-- dlock_acquire_all: every key or none, one token per key in the order
-- given; keys are taken in byte order (no deadlock between calls) inside
-- an internal subtransaction (src/lease_multi.c).  Runs no SQL: no pinned
-- search_path (src/no_search_path.h).
CREATE FUNCTION dlock_acquire_all(keys text[], holder text,
                                  ttl interval DEFAULT '30 seconds',
                                  wait interval DEFAULT '0')
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'dlock_acquire_all_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_acquire_all(text[], text, interval, interval) IS
'acquire every key for holder until now + ttl, or none, waiting up to wait in all; returns one fencing token per key, in the order of keys, or NULL when not acquired';

-- (end of several keys at once)

-- ==== the shared plumbing's file names (issue 28) ====
-- src/token.c is now src/base_token.c: the sequence's comment names it.
COMMENT ON SEQUENCE dlock.token_seq IS 'fencing tokens: kept at or above the clock in microseconds since 1970, see base_token.c';
