--
-- include/hostile_setup.sql: the roles, tables, live leases and claims and
-- the helper functions that the hostile_input_* tests and hostile_extension
-- share (read with \i).  See hostile_input_args.sql for what they are.
--
\set VERBOSITY terse
\set SHOW_CONTEXT never

CREATE ROLE regress_dlock_hostile_a NOLOGIN;   -- owns the tables, plants objects
CREATE ROLE regress_dlock_hostile_b NOLOGIN;   -- another role
CREATE ROLE regress_dlock_hostile_m NOLOGIN IN ROLE regress_dlock_hostile_a;  -- a member of a
-- PostgreSQL 15 no longer lets everybody create in public; a database
-- upgraded from an older release still does, which this grant simulates.
GRANT CREATE ON SCHEMA public TO regress_dlock_hostile_a, regress_dlock_hostile_b;

SET ROLE regress_dlock_hostile_a;
CREATE TABLE public.hostile_big (id bigint PRIMARY KEY, status int NOT NULL DEFAULT 0);
INSERT INTO public.hostile_big (id) SELECT g FROM generate_series(1, 6) g;
CREATE TABLE public.hostile_text (id text PRIMARY KEY, status int NOT NULL DEFAULT 0);
INSERT INTO public.hostile_text (id) VALUES ('a'), ('b'), ('c'), ('d'), ('e'), ('f');
CREATE TABLE public.hostile_keep (id int PRIMARY KEY);
INSERT INTO public.hostile_keep VALUES (1), (2), (3);
GRANT SELECT, UPDATE ON public.hostile_big, public.hostile_text, public.hostile_keep
   TO regress_dlock_hostile_b;
-- every planted object writes here when it runs (and raises a NOTICE)
CREATE TABLE public.hostile_log (entry text);
GRANT SELECT, INSERT ON public.hostile_log TO PUBLIC;
-- live state that every bad call below must leave alone
SELECT dlock_acquire('hostile:held', 'a', '1 hour') AS held_token \gset
SELECT :held_token IS NOT NULL AS a_holds_lease;
SELECT count(*) AS a_claimed FROM dlock_claim(NULL::public.hostile_keep, 'keep', 2, '1 hour');
RESET ROLE;

CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;
CREATE FUNCTION pg_temp.fingerprint() RETURNS text LANGUAGE sql
SET search_path = pg_catalog, pg_temp
SET datestyle = 'ISO, YMD' SET timezone = 'UTC' SET extra_float_digits = 3
AS $$
SELECT md5(concat_ws('#',
    (SELECT string_agg(l::text, '|' ORDER BY l.key) FROM dlock.lease l),
    (SELECT string_agg(c::text, '|' ORDER BY c.relid, c.key) FROM dlock.claim c),
    (SELECT s.last_value::text || '/' || s.is_called::text FROM dlock.token_seq s),
    (SELECT string_agg(b::text, '|' ORDER BY b.id) FROM public.hostile_big b),
    (SELECT string_agg(t::text, '|' ORDER BY t.id) FROM public.hostile_text t),
    (SELECT string_agg(k::text, '|' ORDER BY k.id) FROM public.hostile_keep k)))
$$;
-- the session state dlock must give back after every call, failed or not
CREATE FUNCTION pg_temp.session_state() RETURNS text LANGUAGE sql AS $$
SELECT concat_ws(' ', current_user, current_setting('search_path'),
                 current_setting('enable_seqscan'), current_setting('datestyle'))
$$;
CREATE TABLE pg_temp.cases (ord serial, grp text, call text, expected text);
GRANT SELECT ON pg_temp.cases TO PUBLIC;
SELECT pg_temp.fingerprint() AS fp0, pg_temp.session_state() AS state0 \gset
