--
-- hostile_extension: objects planted to derail CREATE EXTENSION dlock.  The
-- extension is dropped (after saving its leases, claims and token
-- sequence), each plant must make CREATE EXTENSION fail cleanly with
-- nothing half-made, or be ignored; then the extension is created again and
-- every lease, claim and the token sequence is put back as it was.
--
-- The roles, tables and helpers are the hostile_input_* tests' (include/); roles are
-- regress_dlock_hostile_*, and everything created is dropped at the end.
--
\i sql/include/hostile_setup.sql
--
-- Objects planted to derail CREATE EXTENSION.  The extension is dropped
-- (after saving its leases, claims and token sequence), each plant must make
-- CREATE EXTENSION fail cleanly with nothing half-made, or be ignored; then
-- the extension is created again and everything is put back as it was.
--
CREATE FUNCTION pg_temp.ext_shape() RETURNS text LANGUAGE sql
SET search_path = pg_catalog, pg_temp AS $$
SELECT md5(string_agg(x, '|' ORDER BY x)) FROM (
    SELECT concat_ws(' ', pg_describe_object(d.classid, d.objid, d.objsubid),
        (SELECT concat_ws(' ', p.proacl::text, p.proconfig::text, p.prosecdef, p.provolatile,
                          p.proisstrict, p.prosrc, p.probin,
                          pg_get_function_identity_arguments(p.oid), p.prorettype::regtype,
                          pg_get_function_arguments(p.oid))
           FROM pg_proc p WHERE d.classid = 'pg_proc'::regclass AND p.oid = d.objid),
        (SELECT concat_ws(' ', c.relkind, c.relacl::text, c.reloptions::text, pg_get_userbyid(c.relowner),
                          CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid) END,
                          (SELECT string_agg(a.attname || ':' || format_type(a.atttypid, a.atttypmod)
                                             || ':' || a.attnotnull || ':' || a.attcollation::regcollation,
                                             ',' ORDER BY a.attnum)
                             FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0))
           FROM pg_class c WHERE d.classid = 'pg_class'::regclass AND c.oid = d.objid),
        (SELECT concat_ws(' ', n.nspacl::text, pg_get_userbyid(n.nspowner))
           FROM pg_namespace n WHERE d.classid = 'pg_namespace'::regclass AND n.oid = d.objid)) AS x
      FROM pg_depend d JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
     WHERE e.extname = 'dlock' AND d.deptype = 'e'
    UNION ALL
    SELECT concat_ws(' ', e.extversion, e.extrelocatable, e.extnamespace::regnamespace,
                     pg_get_userbyid(e.extowner), e.extconfig::regclass[]::text, e.extcondition::text)
      FROM pg_extension e WHERE e.extname = 'dlock') s
$$;
-- what a failed CREATE EXTENSION could leave behind (anything not a's)
CREATE FUNCTION pg_temp.leftovers() RETURNS bigint LANGUAGE sql
SET search_path = pg_catalog, pg_temp AS $$
SELECT (SELECT count(*) FROM pg_extension WHERE extname = 'dlock')
     + (SELECT count(*) FROM pg_proc WHERE proname LIKE 'dlock\_%'
          AND proowner <> 'regress_dlock_hostile_a'::regrole)
     + (SELECT count(*) FROM pg_class WHERE relname LIKE 'dlock\_%'
          AND relowner <> 'regress_dlock_hostile_a'::regrole)
     + (SELECT count(*) FROM pg_namespace WHERE nspname = 'dlock'
          AND nspowner <> 'regress_dlock_hostile_a'::regrole)
     + (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'dlock')
$$;
SELECT pg_temp.ext_shape() AS shape0, pg_temp.fingerprint() AS fp2 \gset
CREATE TEMP TABLE saved_lease AS SELECT * FROM dlock.lease;
CREATE TEMP TABLE saved_claim AS SELECT * FROM dlock.claim;
SELECT last_value AS saved_seq, is_called AS saved_seq_called FROM dlock.token_seq \gset
SELECT max(token) AS saved_max_token
  FROM (SELECT token FROM saved_lease UNION ALL SELECT token FROM saved_claim) t \gset
DROP EXTENSION dlock;
SELECT pg_temp.leftovers() AS leftovers_after_drop;
SELECT current_database() AS dbname \gset
GRANT CREATE ON DATABASE :"dbname" TO regress_dlock_hostile_a;

-- a schema named dlock, owned by a
SET ROLE regress_dlock_hostile_a;
CREATE SCHEMA dlock;
RESET ROLE;
\i sql/include/hostile_create_fails.sql
DROP SCHEMA dlock;

-- a function with the signature of one of dlock's, owned by a
SET ROLE regress_dlock_hostile_a;
CREATE FUNCTION public.dlock_acquire(key text, holder text, ttl interval DEFAULT '30 s',
                                     wait interval DEFAULT '0', slots integer DEFAULT 1)
  RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
RESET ROLE;
\i sql/include/hostile_create_fails.sql
DROP FUNCTION public.dlock_acquire(text, text, interval, interval, integer);

-- a view with the name of one of dlock's, owned by a
SET ROLE regress_dlock_hostile_a;
CREATE VIEW public.dlock_claims AS SELECT 1 AS x;
RESET ROLE;
\i sql/include/hostile_create_fails.sql
DROP VIEW public.dlock_claims;

-- an overload that would make the script's own call ambiguous
SET ROLE regress_dlock_hostile_a;
CREATE FUNCTION public.dlock_waiters(x int DEFAULT 0, OUT pid integer, OUT key text,
                                     OUT holder text, OUT waiting_since timestamptz,
                                     OUT queue_position integer)
  RETURNS SETOF record LANGUAGE sql AS 'SELECT 0, ''''::text, ''''::text, now(), 0';
RESET ROLE;
\i sql/include/hostile_create_fails.sql
DROP FUNCTION public.dlock_waiters(int);

-- look-alikes in pg_temp (types, tables, a sequence) and in public (types,
-- functions and operators the script could call): CREATE EXTENSION
-- succeeds and uses none of them
SET ROLE regress_dlock_hostile_a;
CREATE TYPE pg_temp.text AS ENUM ('hijacked');
CREATE TYPE pg_temp.regclass AS ENUM ('hijacked');
CREATE TYPE pg_temp.timestamptz AS ENUM ('hijacked');
CREATE TYPE pg_temp.anyelement AS ENUM ('hijacked');
CREATE TABLE pg_temp.lease (key pg_catalog.int4);
CREATE TABLE pg_temp.claim (key pg_catalog.int4);
CREATE SEQUENCE pg_temp.token_seq;
CREATE TYPE public.text AS ENUM ('hijacked');
CREATE TYPE public.regrole AS ENUM ('hijacked');
CREATE FUNCTION public.clock_timestamp() RETURNS pg_catalog.timestamptz LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.hostile_log VALUES ('clock_timestamp'); RETURN 'epoch'; END $$;
CREATE FUNCTION public.pg_extension_config_dump(pg_catalog.regclass, pg_catalog.text) RETURNS void
  LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.hostile_log VALUES ('config_dump'); END $$;
CREATE FUNCTION public.hostile_gt(pg_catalog.timestamptz, pg_catalog.timestamptz) RETURNS boolean
  LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.hostile_log VALUES ('>'); RETURN true; END $$;
CREATE OPERATOR public.> (LEFTARG = pg_catalog.timestamptz, RIGHTARG = pg_catalog.timestamptz,
                          FUNCTION = public.hostile_gt);
RESET ROLE;
CREATE EXTENSION dlock;
-- every function, table and view of the extension uses pg_catalog's types
-- and depends on nothing of a's; no planted function ran
SELECT count(*) AS foreign_types_in_functions
  FROM pg_depend d
  JOIN pg_proc p ON d.classid = 'pg_proc'::pg_catalog.regclass AND p.oid = d.objid
  JOIN pg_extension e ON d.refclassid = 'pg_extension'::pg_catalog.regclass AND d.refobjid = e.oid
  CROSS JOIN LATERAL unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]) || p.prorettype) t(typ)
  JOIN pg_type ty ON ty.oid = t.typ
 WHERE e.extname = 'dlock' AND ty.typnamespace <> 'pg_catalog'::pg_catalog.regnamespace;
SELECT count(*) AS foreign_types_in_relations
  FROM pg_depend d
  JOIN pg_extension e ON d.refclassid = 'pg_extension'::pg_catalog.regclass AND d.refobjid = e.oid
  JOIN pg_attribute a ON d.classid = 'pg_class'::pg_catalog.regclass AND a.attrelid = d.objid AND a.attnum > 0
  JOIN pg_type ty ON ty.oid = a.atttypid
 WHERE e.extname = 'dlock' AND ty.typnamespace <> 'pg_catalog'::pg_catalog.regnamespace;
WITH members AS (
    SELECT d.classid, d.objid
      FROM pg_depend d JOIN pg_extension e
        ON d.refclassid = 'pg_extension'::pg_catalog.regclass AND d.refobjid = e.oid
     WHERE e.extname = 'dlock' AND d.deptype = 'e'
    UNION ALL
    SELECT 'pg_rewrite'::pg_catalog.regclass, r.oid
      FROM pg_rewrite r JOIN pg_depend d
        ON d.classid = 'pg_class'::pg_catalog.regclass AND d.objid = r.ev_class
      JOIN pg_extension e ON d.refclassid = 'pg_extension'::pg_catalog.regclass AND d.refobjid = e.oid
     WHERE e.extname = 'dlock' AND d.deptype = 'e'
), a_objects AS (
    SELECT 'pg_proc'::pg_catalog.regclass AS classid, oid FROM pg_proc
     WHERE proowner = 'regress_dlock_hostile_a'::regrole
    UNION ALL
    SELECT 'pg_operator'::pg_catalog.regclass, oid FROM pg_operator
     WHERE oprowner = 'regress_dlock_hostile_a'::regrole
    UNION ALL
    SELECT 'pg_type'::pg_catalog.regclass, oid FROM pg_type
     WHERE typowner = 'regress_dlock_hostile_a'::regrole
    UNION ALL
    SELECT 'pg_class'::pg_catalog.regclass, oid FROM pg_class
     WHERE relowner = 'regress_dlock_hostile_a'::regrole
)
SELECT count(*) AS extension_objects_using_a_objects
  FROM pg_depend d
  JOIN members m ON d.classid = m.classid AND d.objid = m.objid
  JOIN a_objects a ON d.refclassid = a.classid AND d.refobjid = a.oid;
SELECT count(*) AS planted_calls_logged FROM public.hostile_log;
SELECT pg_temp.ext_shape() = :'shape0' AS extension_as_before;
DROP OPERATOR public.> (pg_catalog.timestamptz, pg_catalog.timestamptz);
DROP FUNCTION public.hostile_gt(pg_catalog.timestamptz, pg_catalog.timestamptz);
DROP FUNCTION public.clock_timestamp();
DROP FUNCTION public.pg_extension_config_dump(pg_catalog.regclass, pg_catalog.text);
DROP TYPE public.text, public.regrole, pg_temp.text, pg_temp.regclass, pg_temp.timestamptz,
          pg_temp.anyelement;
DROP TABLE pg_temp.lease, pg_temp.claim;
DROP SEQUENCE pg_temp.token_seq;
REVOKE CREATE ON DATABASE :"dbname" FROM regress_dlock_hostile_a;

-- put back what the other tests left: leases, claims, the token sequence
INSERT INTO dlock.lease SELECT * FROM pg_temp.saved_lease;
INSERT INTO dlock.claim SELECT * FROM pg_temp.saved_claim;
SELECT setval('dlock.token_seq', :saved_seq, :'saved_seq_called') IS NOT NULL AS sequence_restored;
SELECT pg_temp.fingerprint() = :'fp2' AS state_as_before,
       pg_temp.ext_shape() = :'shape0' AS extension_as_before;
-- and it works, in this session too (its kept plans were made before the drop)
SET ROLE regress_dlock_hostile_a;
SELECT dlock_validate('hostile:held', 'a', :held_token) AS a_still_valid,
       dlock_claimed('public.hostile_keep', 1, 'keep') AS a_still_claimed;
SELECT dlock_acquire('hostile:after', 'a', '1 hour') > :saved_max_token AS new_token_greater;
SELECT dlock_release('hostile:after', 'a') AS released;
SELECT count(*) AS claimed_after FROM dlock_claim(NULL::public.hostile_keep, 'after', 1, '1 hour');
SELECT dlock_release_all('after') AS released_after;
RESET ROLE;


--
-- clean up
--
DROP TABLE pg_temp.saved_lease, pg_temp.saved_claim;
DROP FUNCTION pg_temp.ext_shape(), pg_temp.leftovers();
\i sql/include/hostile_cleanup.sql
