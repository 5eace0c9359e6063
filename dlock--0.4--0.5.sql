/* dlock--0.4--0.5.sql: upgrade from 0.4 to 0.5 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION dlock UPDATE TO '0.5'" to load this file. \quit

-- Each change below has a header line `-- ==== <topic> (issue NN) ====`;
-- the same definitions are in dlock--0.5.sql, in their topic's section
-- (sql/upgrade.sql compares the two).
