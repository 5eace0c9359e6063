--
-- lease_roles: leases belong to a role as well as to a holder string;
-- ordinary roles cannot bypass the functions; the functions cannot be
-- hijacked through search_path.
--
-- Keys used here start with 'roles:'.  Everything created is dropped at the end.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE ROLE regress_dlock_alice NOLOGIN;
CREATE ROLE regress_dlock_bob NOLOGIN;

--
-- what ordinary roles may do, according to the catalogs
--
SELECT p.oid::regprocedure AS function,
       has_function_privilege('regress_dlock_bob', p.oid, 'EXECUTE') AS bob_may_execute
  FROM pg_proc p
 WHERE p.proname IN ('dlock_acquire', 'dlock_release', 'dlock_renew', 'dlock_validate',
                     'dlock_release_all', 'dlock_force_release')
 ORDER BY p.oid::regprocedure::text COLLATE "C";
SELECT has_schema_privilege('regress_dlock_bob', 'dlock', 'USAGE') AS usage_on_dlock,
       has_schema_privilege('regress_dlock_bob', 'dlock', 'CREATE') AS create_on_dlock,
       has_table_privilege('regress_dlock_bob', 'dlock.lease',
                           'SELECT,INSERT,UPDATE,DELETE,TRUNCATE') AS any_right_on_lease,
       has_sequence_privilege('regress_dlock_bob', 'dlock.token_seq',
                              'USAGE,SELECT,UPDATE') AS any_right_on_token_seq,
       has_table_privilege('regress_dlock_bob', 'dlock_locks', 'SELECT') AS select_on_view;

-- every function of the extension runs with a pinned search_path that does
-- not include public and names pg_temp last, except the ones that run no SQL
-- and resolve no name (src/no_search_path.h, checked in security_pins)
CREATE TEMP VIEW dlock_function_config AS
SELECT p.oid::regprocedure AS function,
       (SELECT c FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%') AS setting
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'dlock'
 -- dlock_claim is the one exception, on purpose: its filter and order_by
 -- are the caller's SQL and resolve names with the caller's search_path;
 -- its internal queries pin search_path in C (checked in hostile_input_lookalikes).
 WHERE p.proname <> 'dlock_claim'
   AND p.proname NOT IN ('dlock_acquire', 'dlock_acquire_shared', 'dlock_release',
                         'dlock_renew', 'dlock_validate', 'dlock_claimed',
                         'dlock_claim_unheld', 'dlock_acquire_all');
SELECT function, setting FROM dlock_function_config
 WHERE function::text ~ '^dlock_(acquire|release|renew|validate|release_all|force_release)\('
 ORDER BY function::text COLLATE "C";
SELECT count(*) >= 6 AS found_functions,
       count(*) FILTER (WHERE setting IS NULL) AS without_search_path,
       count(*) FILTER (WHERE setting LIKE '%public%' OR setting LIKE '%$user%') AS with_public,
       count(*) FILTER (WHERE setting NOT LIKE '%, pg\_temp') AS pg_temp_not_last
  FROM dlock_function_config;
-- (lists the offenders, if any)
SELECT function, setting FROM dlock_function_config
 WHERE setting IS NULL OR setting LIKE '%public%' OR setting NOT LIKE '%, pg\_temp'
 ORDER BY function::text COLLATE "C";
DROP VIEW dlock_function_config;

--
-- alice takes a lease; bob, with the same holder string and token, cannot touch it
--
SET ROLE regress_dlock_alice;
SELECT dlock_acquire('roles:a', 'shared', '1 hour') AS ta \gset
SELECT :ta IS NOT NULL AS alice_acquired;

SET ROLE regress_dlock_bob;
SELECT dlock_acquire('roles:a', 'shared', '1 hour') IS NULL AS bob_acquire_refused;
SELECT dlock_validate('roles:a', 'shared', :ta) AS bob_validate;
SELECT dlock_renew('roles:a', 'shared') AS bob_renew;
SELECT dlock_renew('roles:a', 'shared', '2 hours', :ta) AS bob_renew_token;
SELECT dlock_release('roles:a', 'shared', :ta) AS bob_release_token;
SELECT dlock_release('roles:a', 'shared') AS bob_release;
SELECT dlock_release_all('shared') AS bob_release_all;

SET ROLE regress_dlock_alice;
SELECT dlock_validate('roles:a', 'shared', :ta) AS alice_still_valid;
SELECT dlock_renew('roles:a', 'shared', '1 hour', :ta) AS alice_renew;
RESET ROLE;
SELECT holder, owner::text AS owner, token = :ta AS same_token
  FROM dlock_locks WHERE key LIKE 'roles:%' ORDER BY key;

--
-- release_all touches only the calling role's leases
--
SET ROLE regress_dlock_alice;
SELECT dlock_acquire('roles:ra1', 'w', '1 hour') IS NOT NULL AS alice_ra1;
SELECT dlock_acquire('roles:ra2', 'w', '1 hour') IS NOT NULL AS alice_ra2;
SET ROLE regress_dlock_bob;
SELECT dlock_acquire('roles:ra3', 'w', '1 hour') IS NOT NULL AS bob_ra3;
SELECT dlock_release_all('w') AS bob_released;
RESET ROLE;
SELECT key, owner::text AS owner FROM dlock_locks WHERE key LIKE 'roles:ra%' ORDER BY key;
SET ROLE regress_dlock_alice;
SELECT dlock_release_all('w') AS alice_released;
RESET ROLE;
SELECT count(*) AS left_over FROM dlock_locks WHERE key LIKE 'roles:ra%';

--
-- force_release: denied to ordinary roles, allowed to the superuser
--
SET ROLE regress_dlock_alice;
SELECT dlock_force_release('roles:a');
SET ROLE regress_dlock_bob;
SELECT dlock_force_release('roles:a');
RESET ROLE;
SELECT count(*) AS still_held FROM dlock_locks WHERE key = 'roles:a';
SELECT dlock_force_release('roles:a') AS superuser_forced;
SELECT count(*) AS held FROM dlock_locks WHERE key = 'roles:a';
-- bob can now take the key, with a greater token
SET ROLE regress_dlock_bob;
SELECT dlock_acquire('roles:a', 'shared', '1 hour') AS tb \gset
SELECT :tb > :ta AS bob_token_gt_alice_token;
SET ROLE regress_dlock_alice;
SELECT dlock_validate('roles:a', 'shared', :ta) AS alice_old_token_valid;
SELECT dlock_validate('roles:a', 'shared', :tb) AS alice_validates_bob_token;
SET ROLE regress_dlock_bob;
SELECT dlock_release('roles:a', 'shared', :tb) AS bob_released;
RESET ROLE;

--
-- no direct access to the lease table or the token sequence
--
SET ROLE regress_dlock_alice;
INSERT INTO dlock.lease DEFAULT VALUES;
UPDATE dlock.lease SET holder = 'x';
DELETE FROM dlock.lease;
TRUNCATE dlock.lease;
SELECT count(*) FROM dlock.lease;
SELECT nextval('dlock.token_seq');
SELECT setval('dlock.token_seq', 1);
CREATE TABLE dlock.alice_table ();
RESET ROLE;

--
-- objects planted in public and pg_temp do not change what dlock does
--
-- PostgreSQL 15 no longer lets everybody create in public; a database
-- upgraded from an older release still does, which this grant simulates.
GRANT CREATE ON SCHEMA public TO regress_dlock_alice;
SET ROLE regress_dlock_alice;
-- every planted object announces itself, and lies
CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS
  $$ BEGIN RAISE NOTICE 'planted clock_timestamp() called'; RETURN '2000-01-01 00:00:00+00'; END $$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS
  $$ BEGIN RAISE NOTICE 'planted now() called'; RETURN '2000-01-01 00:00:00+00'; END $$;
CREATE FUNCTION public.nextval(regclass) RETURNS bigint LANGUAGE plpgsql AS
  $$ BEGIN RAISE NOTICE 'planted nextval() called'; RETURN 1; END $$;
CREATE FUNCTION public.planted_texteq(text, text) RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN RAISE NOTICE 'planted text = text called'; RETURN true; END $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.planted_texteq);
CREATE FUNCTION public.planted_tscmp(timestamptz, timestamptz) RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN RAISE NOTICE 'planted timestamptz comparison called'; RETURN true; END $$;
CREATE OPERATOR public.> (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.planted_tscmp);
CREATE OPERATOR public.< (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.planted_tscmp);
CREATE OPERATOR public.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.planted_tscmp);
CREATE OPERATOR public.>= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.planted_tscmp);
-- look-alikes of dlock's own objects in pg_temp (searched first for tables
-- unless a search_path names pg_temp explicitly)
CREATE TEMP TABLE lease (key text, holder text, owner oid, token bigint,
                         acquired_at timestamptz, expires_at timestamptz);
INSERT INTO pg_temp.lease VALUES ('roles:p1', 'nobody', 0, 9223372036854775807,
                                  '2000-01-01', 'infinity');
CREATE TEMP SEQUENCE token_seq;
CREATE TEMP VIEW locks AS SELECT * FROM pg_temp.lease;
-- and a search_path that puts all of them first
SET search_path = pg_temp, public, pg_catalog;
-- the planted objects do take over where they are looked up by name...
SELECT 'a'::text = 'b'::text AS planted_equality;
SELECT clock_timestamp() OPERATOR(pg_catalog.=) '2000-01-01 00:00:00+00' AS planted_clock;
SELECT count(*) AS planted_lease_rows FROM lease;
-- ...but not inside dlock: no NOTICE may appear from here on

SELECT dlock_acquire('roles:p1', 'x', '1 hour') AS tp1 \gset
SELECT dlock_acquire('roles:p2', 'y2', '50 ms') AS tp2 \gset
SELECT dlock_acquire('roles:p4', 'y', '1 hour') IS NOT NULL AS acquired_p4;
SELECT dlock_acquire('roles:p1', 'y', '1 hour') IS NULL AS other_holder_refused;
SELECT dlock_validate('roles:p1', 'y', :tp1) AS wrong_holder_valid;
SELECT dlock_validate('roles:p1', 'x', :tp1) AS right_holder_valid;
SELECT pg_catalog.pg_sleep(0.1);
SELECT dlock_validate('roles:p2', 'y2', :tp2) AS expired_lease_valid;
SELECT dlock_renew('roles:p2', 'y2') AS expired_lease_renewed;
SELECT dlock_release('roles:p1', 'x', :tp1) AS released;
SELECT dlock_release('roles:p1', 'x', :tp1) AS released_again;
SELECT dlock_release_all('y') AS released_all;
SELECT dlock_acquire('roles:p3', 'z', '1 hour') AS tp3 \gset
SELECT key, holder FROM dlock_locks WHERE key LIKE 'roles:p%' ORDER BY key;
RESET search_path;
SELECT :tp1 > :tb AS tp1_gt_earlier, :tp2 > :tp1 AS tp2_gt_tp1, :tp3 > :tp2 AS tp3_gt_tp2;
RESET ROLE;
SELECT key, holder, owner::text AS owner FROM dlock_locks WHERE key LIKE 'roles:%' ORDER BY key;
SELECT dlock_force_release('roles:p3') AS forced;

--
-- semaphores and shared leases across roles (issue 35): a role sees only
-- the holders of roles whose privileges it has, in dlock_locks and in
-- dlock_leader (the lowest live slot, if it may see it), and nobody
-- releases, renews or validates another role's slot, even with the same
-- holder string and its token
--
SET ROLE regress_dlock_alice;
SELECT dlock_acquire('roles:sem', 'same', '1 h', '0', 3) AS sa \gset
SELECT dlock_acquire_shared('roles:sh', 'alice-r', '1 h') IS NOT NULL AS alice_shared;
SET ROLE regress_dlock_bob;
SELECT dlock_acquire('roles:sem', 'same', '1 h', '0', 3) AS sb \gset
SELECT :sb > :sa AS bob_has_a_slot_of_his_own;
SELECT dlock_acquire_shared('roles:sh', 'bob-r', '1 h') IS NOT NULL AS bob_shared;
SELECT key, holder, owner::text AS owner FROM dlock_locks
 WHERE key IN ('roles:sem', 'roles:sh') ORDER BY key, holder;
SELECT count(*) AS leaders_bob_sees FROM dlock_leader('roles:sem');
SELECT count(*) AS leaders_bob_sees FROM dlock_leader('roles:sh');
SELECT dlock_release('roles:sem', 'same', :sa) AS bob_releases_alices,
       dlock_renew('roles:sem', 'same', NULL, :sa) AS bob_renews_alices,
       dlock_validate('roles:sem', 'same', :sa) AS bob_validates_alices,
       dlock_validate('roles:sem', 'same', :sb) AS bob_validates_his;
SET ROLE regress_dlock_alice;
SELECT key, holder, owner::text AS owner FROM dlock_locks
 WHERE key IN ('roles:sem', 'roles:sh') ORDER BY key, holder;
SELECT holder, owner::text AS owner, token = :sa AS alices_token
  FROM dlock_leader('roles:sem');
SELECT dlock_renew('roles:sem', 'same', NULL, :sa) AS alice_renews_hers;
SELECT dlock_release('roles:sem', 'same') AND dlock_release('roles:sh', 'alice-r')
       AS alice_released;
SET ROLE regress_dlock_bob;
SELECT holder, owner::text AS owner, token = :sb AS bobs_token
  FROM dlock_leader('roles:sem');
SELECT dlock_release('roles:sem', 'same') AND dlock_release('roles:sh', 'bob-r')
       AS bob_released;
RESET ROLE;

--
-- clean up
--
DROP VIEW pg_temp.locks;
DROP TABLE pg_temp.lease;
DROP SEQUENCE pg_temp.token_seq;
DROP OPERATOR public.= (text, text);
DROP OPERATOR public.> (timestamptz, timestamptz);
DROP OPERATOR public.< (timestamptz, timestamptz);
DROP OPERATOR public.<= (timestamptz, timestamptz);
DROP OPERATOR public.>= (timestamptz, timestamptz);
DROP FUNCTION public.planted_texteq(text, text);
DROP FUNCTION public.planted_tscmp(timestamptz, timestamptz);
DROP FUNCTION public.clock_timestamp();
DROP FUNCTION public.now();
DROP FUNCTION public.nextval(regclass);
REVOKE CREATE ON SCHEMA public FROM regress_dlock_alice;
SELECT count(*) AS leases_left FROM dlock_locks WHERE key LIKE 'roles:%';
DROP ROLE regress_dlock_alice;
DROP ROLE regress_dlock_bob;

-- The first token on a timeline moves dlock.token_seq up to (timeline << 47)
-- with setval.  In a fresh database that is done by whoever acquires first,
-- also a role with no privileges on dlock's sequence: it must work (it runs
-- as dlock's owner).  A database of its own, so that the token sequence of
-- this one is not set back.
CREATE DATABASE regress_dlock_fresh;
\c regress_dlock_fresh
CREATE EXTENSION dlock;
CREATE ROLE regress_dlock_first NOLOGIN;
SELECT setval('dlock.token_seq', 5) AS sequence_set_back;
SET ROLE regress_dlock_first;
SELECT dlock_acquire('fresh', 'h') > (pg_catalog.int8 '1' << 47) AS first_token_on_timeline;
SELECT current_user AS still_the_caller;
RESET ROLE;
\c contrib_regression
DROP DATABASE regress_dlock_fresh;
DROP ROLE regress_dlock_first;
