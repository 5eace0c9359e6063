-- dlock_proxy 0.3: dlock's lease functions on a proxy database, each call
-- routed by a hash of its key to one server of a PL/Proxy cluster of dlock
-- servers (docs/sharding.md).
--
-- The cluster is the PL/Proxy foreign server named dlock, which the
-- administrator creates (any number of servers, with modular_mapping '1'):
--
--   CREATE SERVER dlock FOREIGN DATA WRAPPER plproxy
--     OPTIONS (modular_mapping '1', p0 'host=db1 dbname=app', p1 '...', p2 '...');
--   CREATE USER MAPPING FOR PUBLIC SERVER dlock;
--   GRANT USAGE ON FOREIGN SERVER dlock TO ...;
--
-- Every server has dlock installed, on the connecting role's search_path.
-- PL/Proxy connects to a server as the calling role, so leases belong to
-- the same role name there and dlock's role checks hold.  A key always goes
-- to server abs(hashtext(key) % N): adding or removing a server moves keys.

\echo Use "CREATE EXTENSION dlock_proxy" to load this file. \quit

-- the hash that routes a key (PL/Proxy maps it to a server with modulo)
CREATE FUNCTION dlock_shard_hash(key text)
RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN pg_catalog.hashtext(key);
COMMENT ON FUNCTION dlock_shard_hash(text) IS
'the hash that routes a key to a dlock server: server abs(hash % number of servers)';

CREATE FUNCTION dlock_acquire(key text, holder text, ttl interval DEFAULT '30 s',
                              wait interval DEFAULT '0')
RETURNS bigint
LANGUAGE plproxy VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    CLUSTER 'dlock';
    RUN ON @extschema@.dlock_shard_hash(key);
$$;
COMMENT ON FUNCTION dlock_acquire(text, text, interval, interval) IS
'dlock_acquire on the dlock server of this key';

CREATE FUNCTION dlock_release(key text, holder text, token bigint DEFAULT NULL)
RETURNS boolean
LANGUAGE plproxy VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    CLUSTER 'dlock';
    RUN ON @extschema@.dlock_shard_hash(key);
$$;
COMMENT ON FUNCTION dlock_release(text, text, bigint) IS
'dlock_release on the dlock server of this key';

CREATE FUNCTION dlock_renew(key text, holder text, ttl interval DEFAULT NULL,
                            token bigint DEFAULT NULL)
RETURNS boolean
LANGUAGE plproxy VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    CLUSTER 'dlock';
    RUN ON @extschema@.dlock_shard_hash(key);
$$;
COMMENT ON FUNCTION dlock_renew(text, text, interval, bigint) IS
'dlock_renew on the dlock server of this key';

CREATE FUNCTION dlock_force_release(key text)
RETURNS boolean
LANGUAGE plproxy VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    CLUSTER 'dlock';
    RUN ON @extschema@.dlock_shard_hash(key);
$$;
COMMENT ON FUNCTION dlock_force_release(text) IS
'operators: dlock_force_release on the dlock server of this key';
REVOKE ALL ON FUNCTION dlock_force_release(text) FROM PUBLIC;

-- one row per server: how many leases the holder freed there
CREATE FUNCTION dlock_release_all_servers(holder text)
RETURNS SETOF bigint
LANGUAGE plproxy VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    CLUSTER 'dlock';
    RUN ON ALL;
    TARGET dlock_release_all;
$$;
COMMENT ON FUNCTION dlock_release_all_servers(text) IS
'dlock_release_all on every dlock server, one row each';

CREATE FUNCTION dlock_release_all(holder text)
RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce(sum(n), 0)::bigint FROM @extschema@.dlock_release_all_servers(holder) AS n $$;
COMMENT ON FUNCTION dlock_release_all(text) IS
'frees the holder''s leases on every dlock server; returns how many';

-- the leases and waits of every server (owner is the role's name there)
CREATE FUNCTION dlock_locks(OUT key text, OUT holder text, OUT owner text, OUT token bigint,
                            OUT acquired_at timestamptz, OUT expires_at timestamptz)
RETURNS SETOF record
LANGUAGE plproxy VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    CLUSTER 'dlock';
    RUN ON ALL;
    SELECT l.key, l.holder, l.owner::text AS owner, l.token, l.acquired_at, l.expires_at
      FROM dlock_locks AS l;
$$;
COMMENT ON FUNCTION dlock_locks() IS
'the rows of dlock_locks of every dlock server (what the calling role may see there)';
CREATE VIEW dlock_locks AS SELECT * FROM @extschema@.dlock_locks();
COMMENT ON VIEW dlock_locks IS 'unexpired leases on all dlock servers';

CREATE FUNCTION dlock_waiters(OUT pid integer, OUT key text, OUT holder text,
                              OUT waiting_since timestamptz, OUT queue_position integer)
RETURNS SETOF record
LANGUAGE plproxy VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    CLUSTER 'dlock';
    RUN ON ALL;
    SELECT w.pid, w.key, w.holder, w.waiting_since, w.queue_position FROM dlock_waiters AS w;
$$;
COMMENT ON FUNCTION dlock_waiters() IS
'the rows of dlock_waiters of every dlock server (pid is a backend of that server)';
CREATE VIEW dlock_waiters AS SELECT * FROM @extschema@.dlock_waiters();
COMMENT ON VIEW dlock_waiters IS 'backends waiting in dlock_acquire on all dlock servers';
