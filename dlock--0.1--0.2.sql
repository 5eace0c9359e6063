/* dlock--0.1--0.2.sql: dlock_complete, completion and fence in one call */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION dlock UPDATE TO '0.2'" to load this file. \quit

CREATE FUNCTION dlock_complete(tbl regclass, holder text, keys anyarray)
RETURNS SETOF anyelement
AS 'MODULE_PATHNAME', 'dlock_complete_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 100
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_complete(regclass, text, anyarray) IS
'give back the holder''s live claims on the rows of tbl with these primary keys, fenced until the transaction ends; returns the keys given back';
