/* dlock--0.1.sql: lease locks with fencing tokens */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION dlock" to load this file. \quit

-- ---------------------------------------------------------------------
-- Internal storage.  Nothing here is granted to anyone: dlock's C code
-- switches to the owner of schema dlock for its own queries.
-- ---------------------------------------------------------------------
CREATE SCHEMA dlock;
REVOKE ALL ON SCHEMA dlock FROM PUBLIC;
COMMENT ON SCHEMA dlock IS 'internal storage of the dlock extension; use the dlock_* functions and views';

CREATE TABLE dlock.lease (
    key         text COLLATE "C" NOT NULL PRIMARY KEY,
    holder      text,               -- NULL: free
    owner       oid,                -- role that holds it
    token       bigint NOT NULL,    -- last fencing token granted
    ttl_us      bigint NOT NULL,    -- ttl it was granted with, in microseconds
    acquired_at timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.05);
REVOKE ALL ON dlock.lease FROM PUBLIC;
COMMENT ON TABLE dlock.lease IS 'one row per key: its lease, or a free key kept for HOT reuse until cleanup';

CREATE SEQUENCE dlock.token_seq;
REVOKE ALL ON SEQUENCE dlock.token_seq FROM PUBLIC;
COMMENT ON SEQUENCE dlock.token_seq IS 'fencing tokens: (timeline << 47) + n, see token.c';
-- leases are not dumped (they belong to running processes); the token
-- sequence is, so that a restored database never hands out a lower token
SELECT pg_catalog.pg_extension_config_dump('dlock.token_seq', '');

-- ---------------------------------------------------------------------
-- Lease locks
-- ---------------------------------------------------------------------
CREATE FUNCTION dlock_acquire(key text, holder text,
                              ttl interval DEFAULT '30 seconds',
                              wait interval DEFAULT '0')
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_acquire(text, text, interval, interval) IS
'acquire key for holder until now + ttl, waiting up to wait; returns the fencing token, or NULL when not acquired';

CREATE FUNCTION dlock_release(key text, holder text, token bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_release_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_release(text, text, bigint) IS
'free key if holder (and the calling role) holds it, with that token if given; true when it was freed';

CREATE FUNCTION dlock_renew(key text, holder text, ttl interval DEFAULT NULL,
                            token bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_renew_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_renew(text, text, interval, bigint) IS
'extend the holder''s unexpired lease to now + ttl (NULL: its granted ttl); false when the lease is lost';

CREATE FUNCTION dlock_validate(key text, holder text, token bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_validate_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_validate(text, text, bigint) IS
'fence: true when holder holds key with exactly this token; the lease then cannot change hands until this transaction ends';

CREATE FUNCTION dlock_release_all(holder text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_release_all_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_release_all(text) IS
'free every unexpired lease of holder taken by the calling role; returns how many';

CREATE FUNCTION dlock_force_release(key text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_force_release_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION dlock_force_release(text) FROM PUBLIC;
COMMENT ON FUNCTION dlock_force_release(text) IS
'for operators: free the unexpired lease on key, whoever holds it';

CREATE FUNCTION dlock_cleanup(idle interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_cleanup_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION dlock_cleanup(interval) FROM PUBLIC;
COMMENT ON FUNCTION dlock_cleanup(interval) IS
'for operators: delete rows of keys free or expired for longer than idle (NULL: dlock.idle_key_lifetime)';

CREATE FUNCTION dlock_locks(OUT key text, OUT holder text,
                            OUT owner pg_catalog.regrole, OUT token bigint,
                            OUT acquired_at timestamptz,
                            OUT expires_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_locks_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_locks() IS
'unexpired leases at the latest committed state (the rows of the dlock_locks view)';

-- read through a function so that the view shows the latest committed
-- state, as dlock's decisions do, also inside REPEATABLE READ transactions
CREATE VIEW dlock_locks AS SELECT * FROM dlock_locks();
GRANT SELECT ON dlock_locks TO PUBLIC;
COMMENT ON VIEW dlock_locks IS 'one row per unexpired lease';

-- ---------------------------------------------------------------------
-- Claims: leases on rows of the user's own tables
-- ---------------------------------------------------------------------
CREATE TABLE dlock.claim (
    relid       oid NOT NULL,       -- the user's table
    key         text COLLATE "C" NOT NULL, -- its primary key, as text
    holder      text,
    owner       oid,
    token       bigint NOT NULL,    -- shared by the rows of one dlock_claim call
    ttl_us      bigint NOT NULL,
    claimed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    attempts    integer NOT NULL,   -- times claimed; survives expiry
    poisoned_at timestamptz,        -- set when max_attempts was reached
    PRIMARY KEY (relid, key)
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.05);
-- live claims of a table are found through this index, so that a claim
-- reads the live claims, not every claim row kept for its attempts
CREATE INDEX claim_live ON dlock.claim (relid, expires_at);
CREATE INDEX claim_poisoned ON dlock.claim (relid) WHERE poisoned_at IS NOT NULL;
REVOKE ALL ON dlock.claim FROM PUBLIC;
COMMENT ON TABLE dlock.claim IS 'one row per claimed row of a user table, kept after expiry for its attempt count';

CREATE FUNCTION dlock_claim(rowtype anyelement, holder text, n integer,
                            ttl interval DEFAULT '30 seconds',
                            filter text DEFAULT NULL,
                            order_by text DEFAULT NULL,
                            max_attempts integer DEFAULT NULL)
RETURNS SETOF anyelement
AS 'MODULE_PATHNAME', 'dlock_claim_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
-- The one dlock function without a pinned search_path, on purpose: filter
-- and order_by are the caller's SQL and resolve names as the caller's own
-- queries do.  dlock's internal queries pin search_path = pg_catalog,
-- pg_temp for themselves (spi_access.c), and the parts of the claim query
-- dlock writes name the table and its operator with their schemas.
COMMENT ON FUNCTION dlock_claim(anyelement, text, integer, interval, text, text, integer) IS
'claim up to n rows of the table of rowtype matching filter, in order_by order, that no live claim holds; returns them';

CREATE FUNCTION dlock_claimed(tbl regclass, key anyelement, holder text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_claimed_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claimed(regclass, anyelement, text) IS
'fence for claims: true when holder holds a live claim on that row; it then cannot be taken over until this transaction ends';

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

CREATE FUNCTION dlock_claims(OUT table_name pg_catalog.regclass, OUT key text,
                             OUT holder text, OUT owner pg_catalog.regrole,
                             OUT token bigint, OUT claimed_at timestamptz,
                             OUT expires_at timestamptz, OUT attempts integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_claims_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claims() IS
'unexpired claims at the latest committed state (the rows of the dlock_claims view)';

CREATE VIEW dlock_claims AS SELECT * FROM dlock_claims();
GRANT SELECT ON dlock_claims TO PUBLIC;
COMMENT ON VIEW dlock_claims IS 'one row per unexpired claim';

CREATE VIEW dlock_dead_claims AS
    SELECT c.relid::pg_catalog.regclass AS table_name,
           c.key,
           c.attempts,
           c.holder AS last_holder,
           c.claimed_at AS last_claimed_at,
           c.poisoned_at
      FROM dlock.claim c
     WHERE c.poisoned_at IS NOT NULL;
GRANT SELECT ON dlock_dead_claims TO PUBLIC;
COMMENT ON VIEW dlock_dead_claims IS 'rows no longer handed out because they were claimed max_attempts times';

-- ---------------------------------------------------------------------
-- Observability
-- ---------------------------------------------------------------------
CREATE FUNCTION dlock_waiters(OUT pid integer, OUT key text, OUT holder text,
                              OUT waiting_since timestamptz,
                              OUT queue_position integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_waiters'
LANGUAGE C VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_waiters() IS
'backends waiting in dlock_acquire in this database (needs dlock in shared_preload_libraries)';

CREATE VIEW dlock_waiters AS SELECT * FROM dlock_waiters();
GRANT SELECT ON dlock_waiters TO PUBLIC;
COMMENT ON VIEW dlock_waiters IS 'backends waiting in dlock_acquire; queue_position 1 is next in line';

CREATE FUNCTION dlock_stats(OUT acquired bigint, OUT extended bigint,
                            OUT contended bigint, OUT waits bigint,
                            OUT wait_time_us bigint, OUT wait_timeouts bigint,
                            OUT handoffs bigint, OUT takeovers bigint,
                            OUT releases bigint, OUT renewals bigint,
                            OUT validation_failures bigint,
                            OUT claims bigint, OUT redeliveries bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_stats'
LANGUAGE C VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_stats() IS
'counters since server start (one row; no row unless dlock is in shared_preload_libraries)';
