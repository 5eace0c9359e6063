/* dlock--0.3--0.4.sql: upgrade from 0.3 to 0.4 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION dlock UPDATE TO '0.4'" to load this file. \quit

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
ALTER FUNCTION dlock_claim_unheld(pg_catalog.regclass, anyelement) RESET search_path;
ALTER FUNCTION dlock_claimed(pg_catalog.regclass, anyelement, text) RESET search_path;
