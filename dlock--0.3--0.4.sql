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
