/* dlock--0.3--0.4.sql: upgrade from 0.3 to 0.4 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION dlock UPDATE TO '0.4'" to load this file. \quit

-- ==== Claims through DDL (issue 24) ====

-- A row keeps one claim, and a claim names one row, whatever DDL does to
-- the row's table: claims follow partitions detached and attached and enum
-- labels renamed; a table whose primary key changes what it names (another
-- column or type, ALTER COLUMN ... TYPE ... USING) forgets its claims; a
-- dropped table's claims go with it (claim_ddl.c).  The triggers run as the
-- user who runs the DDL; dlock's own queries run as dlock's owner.  The
-- start trigger takes the locks the ALTER TABLE will take before it reads
-- the table's facts, so no claim of that table is in flight meanwhile.
-- dlock_claim_ddl_start resolves the statement's table names as the
-- statement does, with the session's search_path (it runs no SQL).
CREATE FUNCTION dlock_claim_ddl_start()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'dlock_claim_ddl_start_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
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
