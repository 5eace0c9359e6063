--
-- hostile_input_rights: code that dlock runs on a role's behalf, session
-- settings that change how values are written, and other roles' leases
-- and claims.
--
-- Nothing may crash, nothing may be hijacked, nothing may change.  Every
-- check prints a boolean, a count or a SQLSTATE.  pg_temp.try(sql) runs one
-- statement and returns 'ok' or the SQLSTATE of its error;
-- pg_temp.fingerprint() is an md5 over every row of dlock.lease and
-- dlock.claim, the token sequence and the user tables of these tests, so
-- "unchanged" means not one byte of them changed.  The roles, tables, live
-- leases and claims and these helpers are include/hostile_setup.sql's.
--
-- The hostile_input_* files: _args (bad arguments), _lookalikes (planted
-- functions, operators and tables), _rights (code run on a role's behalf,
-- session settings, other roles' leases and claims).  Objects planted to
-- derail CREATE EXTENSION: hostile_extension.  lease_roles covers the basic
-- role separation of leases and the search_path shadowing of the lease
-- functions; claim_roles and claim_errors the basic privileges and errors
-- of claims.
--
-- Roles are regress_dlock_hostile_*; everything created is dropped at the end.
--
\i sql/include/hostile_setup.sql

--
-- 3. Code that dlock runs on a role's behalf runs with that role's rights
-- only: a primary key whose type is a domain with a CHECK that calls the
-- role's own function, and a row-level security policy that a filter
-- tries to see through.
--
SET ROLE regress_dlock_hostile_a;
CREATE FUNCTION public.hostile_check(v int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hostile_log VALUES (current_user::text);
    RETURN true;
END
$$;
CREATE DOMAIN public.hostile_id AS int CHECK (public.hostile_check(VALUE));
CREATE TABLE public.hostile_dom (id public.hostile_id PRIMARY KEY);
INSERT INTO public.hostile_dom VALUES (1), (2), (3);
TRUNCATE public.hostile_log;
SELECT ARRAY(SELECT id FROM dlock_claim(NULL::public.hostile_dom, 'd1', 1, '1 hour')) AS d1_got;
SELECT ARRAY(SELECT id FROM dlock_claim(NULL::public.hostile_dom, 'd2', 1, '1 hour')) AS d2_got;
SELECT ARRAY(SELECT id FROM dlock_claim(NULL::public.hostile_dom, 'd3', 5, '1 hour')) AS d3_got;
SELECT dlock_claimed('public.hostile_dom', 1, 'd1') AS d1_claimed,
       dlock_unclaim('public.hostile_dom', 'd3', ARRAY[3]) AS d3_unclaimed,
       dlock_release_all('d1') + dlock_release_all('d2') AS released;
RESET ROLE;
-- the CHECK only ever ran as a
SELECT count(*) FILTER (WHERE entry <> 'regress_dlock_hostile_a') AS check_ran_as_another_role,
       (SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_dlock_hostile_a') AS a_is_superuser
  FROM public.hostile_log;
TRUNCATE public.hostile_log;

-- row-level security: b sees tenant b's rows only.  A filter or an
-- order_by that would fail on a hidden row (division by zero on id 3), or a
-- non-leakproof function that records every row it is shown, learns
-- nothing: the policy is applied before the caller's filter and order.
CREATE TABLE public.hostile_rls (id int PRIMARY KEY, tenant text NOT NULL);
INSERT INTO public.hostile_rls VALUES (1, 'b'), (2, 'b'), (3, 'a'), (4, 'b'), (5, 'b'), (6, 'a');
ALTER TABLE public.hostile_rls ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_b ON public.hostile_rls TO regress_dlock_hostile_b USING (tenant = 'b');
GRANT SELECT, UPDATE ON public.hostile_rls TO regress_dlock_hostile_b;
SET ROLE regress_dlock_hostile_b;
CREATE FUNCTION pg_temp.peek(id int, tenant text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hostile_log VALUES (tenant || ':' || id);
    RETURN true;
END
$$;
SELECT ARRAY(SELECT id FROM dlock_claim(NULL::public.hostile_rls, 'r1', 2, '1 hour',
                                        '(1 / (id - 3)) IS NOT NULL')) AS divide_by_hidden_row;
SELECT ARRAY(SELECT id FROM dlock_claim(NULL::public.hostile_rls, 'r2', 1, '1 hour',
                                        'true', '1 / (id - 3)')) AS order_by_hidden_row;
SELECT ARRAY(SELECT id FROM dlock_claim(NULL::public.hostile_rls, 'r3', 1000, '1 hour',
                                        'pg_temp.peek(id, tenant)')) AS peek_at_every_row;
SELECT dlock_release_all('r1') + dlock_release_all('r2') + dlock_release_all('r3') AS released;
RESET ROLE;
SELECT count(*) FILTER (WHERE entry LIKE 'a:%') AS hidden_rows_seen,
       count(*) FILTER (WHERE entry LIKE 'b:%') > 0 AS visible_rows_seen
  FROM public.hostile_log;
TRUNCATE public.hostile_log;

--
-- 4. Session settings are the caller's input too: the text of a claim's
-- key must not depend on DateStyle, TimeZone or extra_float_digits, or one
-- row gets two keys (and two holders) and two rows get one key.
--
SET ROLE regress_dlock_hostile_a;
CREATE TABLE public.hostile_ts (ts timestamptz PRIMARY KEY);
INSERT INTO public.hostile_ts VALUES ('2024-01-02 12:00:00+00'), ('2024-02-01 12:00:00+00');
SET timezone = 'UTC';
SET datestyle = 'SQL, DMY';
SELECT count(*) AS s1_claimed FROM dlock_claim(NULL::public.hostile_ts, 's1', 1, '1 hour');
SET datestyle = 'SQL, MDY';
SELECT count(*) AS s2_claimed,
       count(*) FILTER (WHERE ts = '2024-01-02 12:00:00+00') AS s2_got_s1_row
  FROM dlock_claim(NULL::public.hostile_ts, 's2', 1000, '1 hour');
RESET datestyle;
SELECT count(*) AS s3_claimed FROM dlock_claim(NULL::public.hostile_ts, 's3', 1000, '1 hour');
SET timezone = 'Asia/Tokyo';
SELECT dlock_claimed('public.hostile_ts', '2024-01-02 12:00:00+00'::timestamptz, 's1') AS s1_claimed_in_tokyo;
RESET timezone;
SELECT dlock_release_all('s1') + dlock_release_all('s2') + dlock_release_all('s3') AS released;
CREATE TABLE public.hostile_float (id float8 PRIMARY KEY);
INSERT INTO public.hostile_float VALUES (0.3), (0.1::float8 + 0.2::float8);
SET extra_float_digits = 0;
SELECT count(*) AS f0_claimed FROM dlock_claim(NULL::public.hostile_float, 'f0', 1000, '1 hour');
RESET extra_float_digits;
SELECT count(*) AS f1_claimed FROM dlock_claim(NULL::public.hostile_float, 'f1', 1000, '1 hour');
SELECT dlock_release_all('f0') + dlock_release_all('f1') AS released;
RESET ROLE;

--
-- 5. Other roles.  a holds a lease and claims; b (same holder strings, the
-- token known) and m (a member of a, with a's privileges) can neither
-- release, renew, validate nor give back any of it, nor keep a's keys
-- locked; nor write dlock's storage through its tables, views, sequence or
-- functions.
--
SET ROLE regress_dlock_hostile_a;
SELECT dlock_validate('hostile:held', 'a', :held_token) AS a_valid,
       dlock_claimed('public.hostile_keep', 1, 'keep') AS a_claimed;
RESET ROLE;
SELECT pg_temp.fingerprint() AS fp1 \gset
SET ROLE regress_dlock_hostile_b;
SELECT dlock_release('hostile:held', 'a', :held_token) AS release,
       dlock_release('hostile:held', 'a') AS release_no_token,
       dlock_renew('hostile:held', 'a', '2 hours', :held_token) AS renew,
       dlock_validate('hostile:held', 'a', :held_token) AS validate,
       dlock_release_all('a') AS release_all,
       dlock_acquire('hostile:held', 'a', '1 hour') IS NULL AS acquire_refused;
SELECT dlock_claimed('public.hostile_keep', 1, 'keep') AS claimed,
       dlock_unclaim('public.hostile_keep', 'keep') AS unclaim_all,
       dlock_unclaim('public.hostile_keep', 'keep', ARRAY[1, 2]) AS unclaim_keys,
       dlock_unclaim('public.hostile_keep', 'keep', ARRAY['1', '2']) AS unclaim_text_keys,
       dlock_renew_claims('public.hostile_keep', 'keep', '5 hours') AS renew_claims,
       dlock_release_all('keep') AS release_all,
       ARRAY(SELECT id FROM dlock_claim(NULL::public.hostile_keep, 'keep', 1000, '1 hour',
                                        'id <= 2')) AS claim;
SET ROLE regress_dlock_hostile_m;
SELECT dlock_release('hostile:held', 'a', :held_token) AS release,
       dlock_renew('hostile:held', 'a', '2 hours') AS renew,
       dlock_validate('hostile:held', 'a', :held_token) AS validate,
       dlock_release_all('a') AS release_all,
       dlock_claimed('public.hostile_keep', 1, 'keep') AS claimed,
       dlock_unclaim('public.hostile_keep', 'keep', ARRAY[1, 2]) AS unclaim_keys,
       dlock_renew_claims('public.hostile_keep', 'keep', '5 hours') AS renew_claims;
RESET ROLE;
SELECT pg_temp.fingerprint() = :'fp1' AS a_state_unchanged;
-- failed calls by b keep no lock on a's keys: inside an open transaction of
-- b, a's leases and claims stay free to renew, release and complete
BEGIN;
SET LOCAL ROLE regress_dlock_hostile_b;
SELECT dlock_release('hostile:held', 'a') AS release,
       dlock_renew('hostile:held', 'a') AS renew,
       dlock_validate('hostile:held', 'a', :held_token) AS validate,
       dlock_claimed('public.hostile_keep', 1, 'keep') AS claimed,
       dlock_unclaim('public.hostile_keep', 'keep', ARRAY[1, 2, 3]) AS unclaim_keys,
       dlock_unclaim('public.hostile_keep', 'keep') AS unclaim_all,
       dlock_renew_claims('public.hostile_keep', 'keep') AS renew_claims;
SELECT count(*) AS dlock_locks_held_by_b
  FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory';
ROLLBACK;
-- nor can a huge list of keys fill the shared lock table
SET ROLE regress_dlock_hostile_b;
SELECT pg_temp.try($$SELECT dlock_unclaim('public.hostile_keep', 'keep',
                         ARRAY(SELECT g FROM generate_series(1, 200000) g))$$) = 'ok'
       AS huge_key_list_clean;
RESET ROLE;

-- direct writes, and replacing dlock's objects
-- (dlock_locks and dlock_claims read through functions, so they are not
-- updatable at all: writes fail with 55000 before any privilege check)
INSERT INTO pg_temp.cases (grp, call, expected) VALUES
  ('direct', $$SELECT * FROM dlock.lease$$, '42501'),
  ('direct', $$INSERT INTO dlock.lease VALUES ('hostile:held', 'b', 0, 1, 1, now(), 'infinity')$$, '42501'),
  ('direct', $$UPDATE dlock.lease SET holder = 'b'$$, '42501'),
  ('direct', $$DELETE FROM dlock.lease$$, '42501'),
  ('direct', $$TRUNCATE dlock.lease$$, '42501'),
  ('direct', $$INSERT INTO dlock.claim VALUES ('hostile_keep'::regclass, '3', 'keep', 0, 1, 1, now(), 'infinity', 1, NULL)$$, '42501'),
  ('direct', $$UPDATE dlock.claim SET expires_at = 'infinity'$$, '42501'),
  ('direct', $$DELETE FROM dlock.claim$$, '42501'),
  ('direct', $$TRUNCATE dlock.claim$$, '42501'),
  ('direct', $$SELECT setval('dlock.token_seq', 1)$$, '42501'),
  ('direct', $$SELECT nextval('dlock.token_seq')$$, '42501'),
  ('direct', $$ALTER SEQUENCE dlock.token_seq RESTART$$, '42501'),
  ('direct', $$LOCK TABLE dlock.lease IN ACCESS EXCLUSIVE MODE$$, '42501'),
  ('direct', $$CREATE TABLE public.hostile_child () INHERITS (dlock.lease)$$, '42501'),
  ('direct', $$CREATE INDEX ON dlock.claim (holder)$$, '42501'),
  ('direct', $$ALTER TABLE dlock.lease DISABLE TRIGGER ALL$$, '42501'),
  ('direct', $$CREATE POLICY p ON dlock.lease USING (true)$$, '42501'),
  ('direct', $$INSERT INTO dlock_locks VALUES ('hostile:held', 'b')$$, '55000'),
  ('direct', $$UPDATE dlock_locks SET holder = 'b'$$, '55000'),
  ('direct', $$DELETE FROM dlock_locks$$, '55000'),
  ('direct', $$UPDATE dlock_claims SET holder = 'b'$$, '55000'),
  ('direct', $$DELETE FROM dlock_claims$$, '55000'),
  ('direct', $$DELETE FROM dlock_dead_claims$$, '55000'),
  ('direct', $$CREATE OR REPLACE VIEW public.dlock_locks AS SELECT * FROM public.dlock_locks WHERE false$$, '42501'),
  ('direct', $$ALTER VIEW public.dlock_claims RENAME TO hostile_claims$$, '42501'),
  ('direct', $$DROP VIEW public.dlock_locks$$, '42501'),
  ('direct', $$CREATE OR REPLACE FUNCTION public.dlock_validate(key text, holder text, token bigint) RETURNS boolean LANGUAGE sql AS 'SELECT true'$$, '42501'),
  ('direct', $$ALTER FUNCTION public.dlock_claimed(regclass, anyelement, text) SET search_path = public$$, '42501'),
  ('direct', $$ALTER FUNCTION public.dlock_acquire(text, text, interval, interval, integer) SECURITY DEFINER$$, '42501'),
  ('direct', $$DROP FUNCTION public.dlock_release(text, text, bigint)$$, '42501'),
  ('direct', $$ALTER EXTENSION dlock DROP FUNCTION public.dlock_release(text, text, bigint)$$, '42501'),
  ('direct', $$CREATE TABLE dlock.hostile ()$$, '42501'),
  ('direct', $$SELECT dlock_force_release('hostile:held')$$, '42501'),
  ('direct', $$SELECT dlock_cleanup('0')$$, '42501'),
  ('direct', $$SELECT dlock_reset_claims('public.hostile_keep', ARRAY[1, 2])$$, '42501'),
  ('direct', $$SELECT * FROM dlock_claim(NULL::public.hostile_priv, 'p', 1)$$, '42501'),
  ('direct', $$GRANT SELECT ON public.hostile_priv TO regress_dlock_hostile_b$$, '42501');
CREATE TABLE public.hostile_priv (id int PRIMARY KEY);
INSERT INTO public.hostile_priv VALUES (1), (2);
SET ROLE regress_dlock_hostile_b;
SELECT call, expected, pg_temp.try(call) AS got FROM pg_temp.cases WHERE grp = 'direct' ORDER BY ord;
RESET ROLE;
-- a table b may read but not update, or update but not read
GRANT SELECT ON public.hostile_priv TO regress_dlock_hostile_b;
SET ROLE regress_dlock_hostile_b;
SELECT pg_temp.try($$SELECT * FROM dlock_claim(NULL::public.hostile_priv, 'p', 1)$$) AS select_only;
RESET ROLE;
REVOKE SELECT ON public.hostile_priv FROM regress_dlock_hostile_b;
GRANT UPDATE ON public.hostile_priv TO regress_dlock_hostile_b;
SET ROLE regress_dlock_hostile_b;
SELECT pg_temp.try($$SELECT * FROM dlock_claim(NULL::public.hostile_priv, 'p', 1)$$) AS update_only;
RESET ROLE;
SELECT pg_temp.fingerprint() = :'fp1' AS a_state_unchanged,
       (SELECT count(*) FROM dlock_claims WHERE table_name = 'public.hostile_priv'::regclass) AS claims_on_priv;
SET ROLE regress_dlock_hostile_a;
SELECT dlock_validate('hostile:held', 'a', :held_token) AS a_still_valid,
       dlock_claimed('public.hostile_keep', 2, 'keep') AS a_still_claimed;
RESET ROLE;
SELECT 1 AS alive;

--
-- clean up
--
\i sql/include/hostile_cleanup.sql

--
-- last, on purpose: a claim on a table with a column named like the table
-- (dlock's query refers to the whole row by the table's name)
--
CREATE TABLE hostile_named (id int PRIMARY KEY, hostile_named int);
INSERT INTO hostile_named VALUES (1, 10), (2, NULL);
SELECT id, hostile_named FROM dlock_claim(NULL::hostile_named, 'n', 2, '1 hour');
SELECT dlock_release_all('n') AS released;
DROP TABLE hostile_named;
SELECT 1 AS alive;
