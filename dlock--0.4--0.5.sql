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
