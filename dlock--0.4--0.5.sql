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
