/* dlock--0.2--0.3.sql: upgrade from 0.2 to 0.3 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION dlock UPDATE TO '0.3'" to load this file. \quit

-- =====================================================================
-- Leases: tokens, wake-ups, views (issue 12)
-- =====================================================================

-- (end of the lease section)


-- =====================================================================
-- Claims: taking rows, give-back, privileges, partitions (issue 11)
-- =====================================================================

-- (end of the claims section)


-- =====================================================================
-- Other changes
-- =====================================================================

-- (end of the other changes)
