/* dlock--0.2--0.3.sql: upgrade from 0.2 to 0.3 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION dlock UPDATE TO '0.3'" to load this file. \quit

-- =====================================================================
-- Leases: tokens, wake-ups, views (issue 12)
-- =====================================================================

-- The views show a role only what it may see: the leases, waits and claims
-- of roles whose privileges it has, claims only on tables it may SELECT
-- from; everything for superusers and members of pg_read_all_stats.
-- dlock_locks, dlock_waiters and dlock_claims filter in their functions
-- (views.c, wait.c); dlock_dead_claims, a plain view, filters here, as a
-- security barrier so that no function of the caller's sees other rows.
CREATE OR REPLACE VIEW dlock_dead_claims WITH (security_barrier = true) AS
    SELECT c.relid::pg_catalog.regclass AS table_name,
           c.key,
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
COMMENT ON VIEW dlock_dead_claims IS 'rows no longer handed out because they were claimed max_attempts times (those of roles whose privileges you have, on tables you can read)';

COMMENT ON FUNCTION dlock_locks() IS
'unexpired leases at the latest committed state that the caller may see (the rows of the dlock_locks view)';
COMMENT ON FUNCTION dlock_claims() IS
'unexpired claims at the latest committed state that the caller may see (the rows of the dlock_claims view)';
COMMENT ON FUNCTION dlock_waiters() IS
'backends waiting in dlock_acquire in this database that the caller may see (needs dlock in shared_preload_libraries)';
COMMENT ON FUNCTION dlock_release_all(text) IS
'free every unexpired lease and claim of holder taken by the calling role; returns how many';

COMMENT ON SEQUENCE dlock.token_seq IS 'fencing tokens: kept at or above the clock in microseconds since 1970, see token.c';

-- (end of the lease section)


-- =====================================================================
-- Claims: taking rows, give-back, privileges, partitions (issue 11)
-- =====================================================================

-- The check a claim's query runs on every row it reaches, before the row
-- lock: one index probe of dlock.claim (claim.c), so that a claim costs
-- what its scan costs, whatever the number of live claims.
CREATE FUNCTION dlock_claim_unheld(tbl pg_catalog.regclass, key anyelement)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_claim_unheld_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED COST 10
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claim_unheld(pg_catalog.regclass, anyelement) IS
'true when no live claim and no poison mark is on the row of tbl with this primary key (the per-row check of dlock_claim)';

-- Row estimates for the planner: a claim returns at most n rows, a
-- completion at most its keys, not the 1,000 assumed of a set-returning
-- function (with that, "UPDATE t ... FROM dlock_complete(...)" could scan t).
CREATE FUNCTION dlock_claim_rows_support(internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'dlock_claim_rows_support'
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_claim_rows_support(internal) IS
'planner support: the row estimates of dlock_claim and dlock_complete';
ALTER FUNCTION dlock_claim(anyelement, text, integer, interval, text, text, integer)
  ROWS 100 SUPPORT dlock_claim_rows_support;
ALTER FUNCTION dlock_complete(pg_catalog.regclass, text, anyarray)
  ROWS 100 SUPPORT dlock_claim_rows_support;

-- (end of the claims section)


-- =====================================================================
-- Other changes
-- =====================================================================

-- (end of the other changes)
