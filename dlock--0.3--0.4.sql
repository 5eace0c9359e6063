/* dlock--0.3--0.4.sql: upgrade from 0.3 to 0.4 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION dlock UPDATE TO '0.4'" to load this file. \quit

-- ==== watch (issue 26) ====

-- Watching keys: a session subscribes with dlock_watch and gets a
-- notification (on a channel of its own, with a random name) at the commit
-- of every grant, release and expiry of the key whose lease its role may
-- see (src/watch*.c).  Needs dlock in shared_preload_libraries.
CREATE FUNCTION dlock_watch(key text)
RETURNS text
AS 'MODULE_PATHNAME', 'dlock_watch_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_watch(text) IS
'subscribe this session to the changes of key (grants, releases, expiries); returns the channel, already listened on, that the notifications come on';

CREATE FUNCTION dlock_unwatch(key text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_unwatch_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_unwatch(text) IS
'end this session''s watch of key at commit; false when it did not watch it';

CREATE FUNCTION dlock_unwatch()
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_unwatch_all_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_unwatch() IS
'end every watch of this session in this database at commit; returns how many';

-- the leader of an election: the key's live lease, for those who may see it
CREATE FUNCTION dlock_leader(key text, OUT holder text,
                             OUT owner pg_catalog.regrole, OUT token bigint,
                             OUT acquired_at timestamptz,
                             OUT expires_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_leader_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED ROWS 1
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_leader(text) IS
'the live lease of key at the latest committed state (holder, owner, token, acquired_at, expires_at), if the caller may see it; no row otherwise';

-- (end of the watch section)
