--
-- claim_complete: dlock_complete(tbl, holder, keys) (version 0.2), the
-- completion and its fence in one call, in one session.  The concurrent
-- side (the fence against other claimers) is specs/claim_complete_fence.spec.
--
-- Only stable values are printed: ids, keys, holders, counts and booleans.
-- Tokens and timestamps are compared, never shown.  Roles are
-- regress_dlock_k*; everything created here is dropped at the end, no claim
-- is left behind, and the extension is left installed at the default version.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

-- the function as installed by CREATE EXTENSION at the default version
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'dlock')
       AS at_default_version
  FROM pg_extension WHERE extname = 'dlock';
SELECT p.oid::regprocedure AS function,
       pg_get_function_arguments(p.oid) AS arguments,
       pg_get_function_result(p.oid) AS returns,
       p.proisstrict AS strict,
       p.provolatile AS volatile,
       p.prosecdef AS security_definer,
       p.proconfig AS config
  FROM pg_proc p
 WHERE p.proname = 'dlock_complete';
-- the members of the extension, to compare with an upgraded 0.1 at the end
SELECT md5(string_agg(pg_describe_object(classid, objid, objsubid), ','
                      ORDER BY pg_describe_object(classid, objid, objsubid))) AS members_fresh,
       count(*) AS nmembers_fresh
  FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dlock') \gset
SELECT md5(pg_get_functiondef('dlock_complete(regclass,text,anyarray)'::regprocedure))
         AS def_fresh \gset

--
-- jobs: bigint primary key, ids 1..10
--
CREATE TABLE jobs (id bigint PRIMARY KEY, status int NOT NULL DEFAULT 0);
INSERT INTO jobs SELECT generate_series(1, 10);

--
-- the intended use: w1 claims 5 rows and completes 3 of them in one UPDATE
--
SELECT array_agg(id ORDER BY id) AS w1_got
  FROM dlock_claim(NULL::jobs, 'w1', 5, '1 hour', 'status = 0');
UPDATE jobs SET status = 1
  FROM dlock_complete('jobs', 'w1', ARRAY[4, 2, 5]::bigint[]) AS done(id)
 WHERE jobs.id = done.id;
SELECT array_agg(id ORDER BY id) AS completed FROM jobs WHERE status = 1;
-- the completed claims are given back, the other two are still w1's
SELECT key, holder, owner = current_user::regrole AS mine
  FROM dlock_claims WHERE table_name = 'jobs'::regclass ORDER BY key::int;
-- completing again: nothing is held any more, nothing is returned
SELECT count(*) AS completed_twice FROM dlock_complete('jobs', 'w1', ARRAY[4, 2, 5]::bigint[]);
-- the completed rows are free again: a claim whose filter matches them gets them
SELECT array_agg(id ORDER BY id) AS reclaimed_completed
  FROM dlock_claim(NULL::jobs, 'w2', 10, '1 hour', 'id IN (2, 4, 5)');
SELECT dlock_unclaim('jobs', 'w2') AS unclaimed_w2;

--
-- the result: the keys in the order given, each once, as the array's type
--
SELECT array_agg(id ORDER BY id) AS w1_got
  FROM dlock_claim(NULL::jobs, 'w1', 4, '1 hour', 'status = 0');
SELECT key FROM dlock_claims WHERE holder = 'w1' ORDER BY key::int;
-- w1 holds 1, 3, 6, 7, 8, 9; 2 and 5 are not held (completed above), 3 and
-- 7 are given twice: 7, 3, 9, 1, 6 in that order, each once
SELECT ord, k, pg_typeof(k) AS type
  FROM dlock_complete('jobs', 'w1', ARRAY[7, 3, 2, 9, 1, 3, 6, 5, 7]::bigint[])
       WITH ORDINALITY AS r(k, ord);
-- int[] keys for a bigint primary key: int results
SELECT k, pg_typeof(k) AS type FROM dlock_complete('jobs', 'w1', ARRAY[8, 8]) AS k;
SELECT count(*) AS w1_claims_left FROM dlock_claims WHERE holder = 'w1';
-- text and numeric keys are converted to the key's text as well
SELECT array_agg(id ORDER BY id) AS w1_got
  FROM dlock_claim(NULL::jobs, 'w1', 2, '1 hour', 'status = 0');
SELECT k, pg_typeof(k) AS type FROM dlock_complete('jobs', 'w1', ARRAY['1']::text[]) AS k;
SELECT k, pg_typeof(k) AS type FROM dlock_complete('jobs', 'w1', ARRAY[3]::numeric[]) AS k;
-- an empty array: nothing
SELECT count(*) AS empty_keys FROM dlock_complete('jobs', 'w1', '{}'::bigint[]);
SELECT count(*) AS claims_left FROM dlock_claims WHERE table_name = 'jobs'::regclass;

--
-- left out: keys w1 does not hold -- another holder's, never claimed,
-- nonexistent rows, and w1's own expired claim
--
SELECT array_agg(id ORDER BY id) AS w1_got
  FROM dlock_claim(NULL::jobs, 'w1', 1, '1 hour', 'id = 1');
SELECT array_agg(id ORDER BY id) AS w2_got
  FROM dlock_claim(NULL::jobs, 'w2', 1, '1 hour', 'id = 3');
-- ttl 50 ms and a 0.2 s sleep: w1's claim on 6 has certainly expired
SELECT array_agg(id ORDER BY id) AS w1_short_got
  FROM dlock_claim(NULL::jobs, 'w1', 1, '50 ms', 'id = 6');
SELECT pg_sleep(0.2);
SELECT count(*) AS w1_live_on_6 FROM dlock_claims WHERE key = '6';
-- 3: w2's, 6: expired, 7: never claimed, 999: no such row; only 1 is w1's
SELECT k FROM dlock_complete('jobs', 'w1', ARRAY[3, 6, 7, 999, 1]) AS k;
-- w2's claim is untouched; w2 may complete it
SELECT key, holder FROM dlock_claims WHERE table_name = 'jobs'::regclass ORDER BY key::int;
SELECT dlock_claimed('jobs', 3, 'w2') AS w2_still_holds;
-- the holder string is compared exactly
SELECT count(*) AS other_case FROM dlock_complete('jobs', 'W2', ARRAY[3]);
SELECT count(*) AS prefix FROM dlock_complete('jobs', 'w', ARRAY[3]);
SELECT k AS w2_completed FROM dlock_complete('jobs', 'w2', ARRAY[3]) AS k;
-- the expired claim on 6 is not given back by the completion either: the
-- row is claimed again as a second attempt
SELECT array_agg(id) AS w3_got FROM dlock_claim(NULL::jobs, 'w3', 5, '1 hour', 'id = 6');
SELECT key, holder, attempts FROM dlock_claims WHERE table_name = 'jobs'::regclass;
-- and w1 cannot complete what w3 took over
SELECT count(*) AS w1_after_takeover FROM dlock_complete('jobs', 'w1', ARRAY[6]);
SELECT dlock_unclaim('jobs', 'w3') AS unclaimed_w3;

--
-- a completion that rolls back leaves the claims with the holder, as they
-- were (same token, same attempts, same expiry)
--
SELECT array_agg(id ORDER BY id) AS w1_got
  FROM dlock_claim(NULL::jobs, 'w1', 3, '1 hour', 'id IN (7, 9, 10)');
CREATE TEMP TABLE before_rollback AS
  SELECT key, holder, owner, token, claimed_at, expires_at, attempts
    FROM dlock_claims WHERE holder = 'w1';
BEGIN;
UPDATE jobs SET status = 1
  FROM dlock_complete('jobs', 'w1', ARRAY[10, 9]) AS done(id)
 WHERE jobs.id = done.id;
SELECT count(*) AS w1_claims_in_xact FROM dlock_claims WHERE holder = 'w1';
SELECT dlock_claimed('jobs', 9, 'w1') AS claimed_in_xact;
ROLLBACK;
SELECT array_agg(id ORDER BY id) AS completed_after_rollback FROM jobs WHERE id IN (7, 9, 10) AND status = 1;
SELECT count(*) AS w1_claims,
       count(*) = (SELECT count(*) FROM before_rollback) AND
       NOT EXISTS (SELECT key, holder, owner, token, claimed_at, expires_at, attempts
                     FROM dlock_claims WHERE holder = 'w1'
                   EXCEPT
                   SELECT * FROM before_rollback) AS unchanged
  FROM dlock_claims WHERE holder = 'w1';
SELECT dlock_claimed('jobs', 9, 'w1') AS claimed_after_rollback;
-- a savepoint rolled back: the same
BEGIN;
SAVEPOINT s;
SELECT k FROM dlock_complete('jobs', 'w1', ARRAY[7]) AS k;
ROLLBACK TO SAVEPOINT s;
SELECT dlock_claimed('jobs', 7, 'w1') AS claimed_after_savepoint_rollback;
COMMIT;
-- and the claims can then be completed for real
SELECT k FROM dlock_complete('jobs', 'w1', ARRAY[7, 9, 10]) AS k;
SELECT count(*) AS claims_left FROM dlock_claims WHERE table_name = 'jobs'::regclass;
DROP TABLE before_rollback;

--
-- claims belong to the role: with the same holder string, another role can
-- neither complete the first role's claims nor see them completed
--
CREATE ROLE regress_dlock_kw1 NOLOGIN;
CREATE ROLE regress_dlock_kw2 NOLOGIN;
GRANT SELECT, UPDATE ON jobs TO regress_dlock_kw1, regress_dlock_kw2;
SET ROLE regress_dlock_kw1;
SELECT array_agg(id ORDER BY id) AS kw1_got
  FROM dlock_claim(NULL::jobs, 'shared', 2, '1 hour', 'id IN (1, 2)');
SET ROLE regress_dlock_kw2;
SELECT count(*) AS kw2_completes_kw1 FROM dlock_complete('jobs', 'shared', ARRAY[1, 2]);
SELECT array_agg(id ORDER BY id) AS kw2_got
  FROM dlock_claim(NULL::jobs, 'shared', 2, '1 hour', 'id IN (1, 2, 3)');
-- kw2's own claim it can complete
SELECT k AS kw2_completed FROM dlock_complete('jobs', 'shared', ARRAY[3, 1, 2]) AS k;
RESET ROLE;
-- nor can a superuser, whose claims these are not
SELECT count(*) AS superuser_completes_kw1 FROM dlock_complete('jobs', 'shared', ARRAY[1, 2]);
SELECT key, holder, owner::text AS owner
  FROM dlock_claims WHERE table_name = 'jobs'::regclass ORDER BY key::int;
SET ROLE regress_dlock_kw1;
SELECT k AS kw1_completed FROM dlock_complete('jobs', 'shared', ARRAY[2, 1]) AS k;
RESET ROLE;
SELECT count(*) AS claims_left FROM dlock_claims WHERE table_name = 'jobs'::regclass;
REVOKE ALL ON jobs FROM regress_dlock_kw1, regress_dlock_kw2;
DROP ROLE regress_dlock_kw1, regress_dlock_kw2;

--
-- bad input: every call below is an error and changes nothing.  One live
-- claim of 'keep' (row 1) must survive all of them.
--
SELECT array_agg(id) AS keep_got FROM dlock_claim(NULL::jobs, 'keep', 1, '1 hour', 'id = 1');
CREATE TABLE nopk (id int, v int);
INSERT INTO nopk VALUES (1, 1);
CREATE TABLE twopk (a int, b int, PRIMARY KEY (a, b));
INSERT INTO twopk VALUES (1, 1);
CREATE VIEW jobs_view AS SELECT * FROM jobs;
CREATE FUNCTION pg_temp.try(sql text, OUT result text, OUT keep_claims bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    n bigint;
BEGIN
    BEGIN
        EXECUTE sql;
        GET DIAGNOSTICS n = ROW_COUNT;
        result := 'no error, ' || n || ' row(s)';
    EXCEPTION WHEN OTHERS THEN
        result := SQLSTATE || ': ' || SQLERRM;
    END;
    SELECT count(*) INTO keep_claims FROM public.dlock_claims c
     WHERE c.table_name = 'public.jobs'::regclass AND c.holder = 'keep';
END
$fn$;
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete(NULL, 'keep', ARRAY[1])$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete('jobs', NULL, ARRAY[1])$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete('jobs', 'keep', NULL::int[])$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete('jobs', 'keep', ARRAY[1, NULL])$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete('jobs', 'keep', ARRAY[NULL::int])$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete('jobs', 'keep', ARRAY(SELECT generate_series(1, 1001)))$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete('jobs', '', ARRAY[1])$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete('jobs', 'keep', ARRAY['x'])$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete('nopk', 'keep', ARRAY[1])$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete('twopk', 'keep', ARRAY[1])$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete('jobs_view', 'keep', ARRAY[1])$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete('no_such_table', 'keep', ARRAY[1])$$);
-- the messages as a user sees them
SELECT * FROM dlock_complete(NULL, 'keep', ARRAY[1]);
SELECT * FROM dlock_complete('jobs', NULL, ARRAY[1]);
SELECT * FROM dlock_complete('jobs', 'keep', NULL::int[]);
SELECT * FROM dlock_complete('jobs', 'keep', ARRAY[1, NULL]);
SELECT * FROM dlock_complete('jobs', 'keep', ARRAY(SELECT generate_series(1, 1001)));
-- the limit itself is accepted: 1000 keys (only row 1 is keep's), and the
-- limit counts the keys given, duplicates included
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete('jobs', 'keep', ARRAY(SELECT 1 FROM generate_series(1, 1001)))$$);
BEGIN;
SELECT array_agg(k) AS keep_1000
  FROM dlock_complete('jobs', 'keep', ARRAY(SELECT generate_series(1, 1000))) AS k;
ROLLBACK;
-- a READ ONLY transaction: refused, the claim is still keep's
BEGIN TRANSACTION READ ONLY;
SELECT * FROM dlock_complete('jobs', 'keep', ARRAY[1]);
ROLLBACK;
BEGIN TRANSACTION READ ONLY;
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete('jobs', 'keep', ARRAY[1])$$);
ROLLBACK;
SET default_transaction_read_only = on;
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_complete('jobs', 'keep', ARRAY[1])$$);
RESET default_transaction_read_only;
-- the 'keep' claim is intact: still live, same holder, first attempt
SELECT key, holder, attempts, expires_at > clock_timestamp() + interval '59 min' AS live
  FROM dlock_claims WHERE table_name = 'jobs'::regclass;
SELECT k AS keep_completed FROM dlock_complete('jobs', 'keep', ARRAY[1]) AS k;
SELECT count(*) AS claims_left FROM dlock_claims;
DROP FUNCTION pg_temp.try(text);
DROP VIEW jobs_view;
DROP TABLE nopk, twopk;

--
-- upgrade path: 0.1 has no dlock_complete; ALTER EXTENSION ... UPDATE to the
-- default version adds it, exactly as a fresh install has it
--
DROP EXTENSION dlock;
CREATE EXTENSION dlock VERSION '0.1';
SELECT extversion FROM pg_extension WHERE extname = 'dlock';
SELECT to_regprocedure('dlock_complete(regclass,text,anyarray)') IS NULL AS no_complete_in_0_1;
SELECT count(*) AS w1_got_0_1 FROM dlock_claim(NULL::jobs, 'w1', 3, '1 hour', 'id IN (1, 2, 3)');
ALTER EXTENSION dlock UPDATE;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'dlock')
       AS at_default_version
  FROM pg_extension WHERE extname = 'dlock';
SELECT to_regprocedure('dlock_complete(regclass,text,anyarray)') AS complete_in_0_2;
SELECT md5(string_agg(pg_describe_object(classid, objid, objsubid), ','
                      ORDER BY pg_describe_object(classid, objid, objsubid))) = :'members_fresh'
         AS same_members_as_fresh,
       count(*) = :nmembers_fresh AS same_count_as_fresh
  FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dlock');
SELECT md5(pg_get_functiondef('dlock_complete(regclass,text,anyarray)'::regprocedure)) = :'def_fresh'
         AS same_definition_as_fresh;
-- claims made under 0.1 are completed by the 0.2 function
UPDATE jobs SET status = 2
  FROM dlock_complete('jobs', 'w1', ARRAY[3, 1]) AS done(id)
 WHERE jobs.id = done.id;
SELECT array_agg(id ORDER BY id) AS status_2 FROM jobs WHERE status = 2;
SELECT key, holder FROM dlock_claims ORDER BY key;
SELECT k AS w1_completed FROM dlock_complete('jobs', 'w1', ARRAY[2]) AS k;

--
-- the planner's row estimates: n for a claim, the number of keys for a
-- completion (not the 1,000 of an unknown set-returning function), so that
-- "UPDATE jobs ... FROM dlock_complete(...)" goes through jobs' primary key
--
CREATE FUNCTION pg_temp.plan_rows(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
  j json;
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO j;
  RETURN (j -> 0 -> 'Plan' ->> 'Plan Rows')::float8;
END $$;
SELECT pg_temp.plan_rows('SELECT * FROM dlock_claim(NULL::jobs, ''w'', 7)') AS claim_7,
       pg_temp.plan_rows('SELECT * FROM dlock_claim(NULL::jobs, ''w'', 250, ''1 min'', ''status = 0'')') AS claim_250,
       pg_temp.plan_rows('SELECT * FROM dlock_complete(''jobs'', ''w'', ARRAY[1, 2, 3])') AS complete_3,
       pg_temp.plan_rows('SELECT * FROM dlock_complete(''jobs'', ''w'', ''{}''::int[])') AS complete_none;
PREPARE claim_n(int) AS SELECT * FROM dlock_claim(NULL::jobs, 'w', $1);
SELECT pg_temp.plan_rows('EXECUTE claim_n(5)') AS claim_param_custom;
DEALLOCATE claim_n;
INSERT INTO jobs SELECT g FROM generate_series(1001, 20000) g;
ANALYZE jobs;
EXPLAIN (COSTS OFF)
UPDATE jobs SET status = 2
  FROM dlock_complete('jobs', 'w', ARRAY[1001, 1002]) AS done(id)
 WHERE jobs.id = done.id;

--
-- nothing left behind; the extension stays installed at the default version
--
DROP TABLE jobs;
SELECT count(*) AS claims_left FROM dlock_claims;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'dlock')
       AS at_default_version
  FROM pg_extension WHERE extname = 'dlock';
