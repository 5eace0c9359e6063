--
-- claim_roles: claims read and lock the user's table with the caller's own
-- privileges (SELECT and UPDATE needed, row-level security applies), filter
-- and order_by run as the caller, claims belong to a role as well as to a
-- holder string, and ordinary roles cannot write dlock's claim storage.
--
-- Roles are regress_dlock_c*; everything created is dropped at the end.
--
-- terse errors: the message only (an error inside the caller's filter would
-- otherwise print dlock's internal claim query, which is not part of the API)
\set VERBOSITY terse
\set SHOW_CONTEXT never

CREATE ROLE regress_dlock_cw1 NOLOGIN;
CREATE ROLE regress_dlock_cw2 NOLOGIN;
CREATE ROLE regress_dlock_cnosel NOLOGIN;
CREATE ROLE regress_dlock_cnoupd NOLOGIN;
CREATE ROLE regress_dlock_ccol NOLOGIN;

--
-- what ordinary roles may do, according to the catalogs
--
SELECT p.oid::regprocedure AS function,
       has_function_privilege('regress_dlock_cw1', p.oid, 'EXECUTE') AS may_execute,
       p.prosecdef AS security_definer
  FROM pg_proc p
 WHERE p.proname IN ('dlock_claim', 'dlock_claimed', 'dlock_unclaim',
                     'dlock_renew_claims', 'dlock_reset_claims')
 ORDER BY p.oid::regprocedure::text COLLATE "C";
SELECT has_table_privilege('regress_dlock_cw1', 'dlock_claims', 'SELECT') AS select_claims,
       has_table_privilege('regress_dlock_cw1', 'dlock_dead_claims', 'SELECT') AS select_dead_claims;
SELECT c.relname,
       has_table_privilege('regress_dlock_cw1', c.oid,
                           'SELECT,INSERT,UPDATE,DELETE,TRUNCATE') AS any_right
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'dlock' AND c.relkind IN ('r', 'p', 'S', 'v')
 ORDER BY 1;

-- every claim function runs with a pinned search_path without public,
-- pg_temp last; except dlock_claim itself, on purpose: filter and order_by are
-- the caller's SQL and resolve names as the caller's own queries do (dlock's
-- own parts of that query are schema-qualified, its other queries pinned);
-- and dlock_claimed, which runs no SQL and resolves no name
-- (src/no_search_path.h, checked in security_pins)
SELECT p.oid::regprocedure AS function,
       (SELECT c FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%') AS setting
  FROM pg_proc p
 WHERE p.proname IN ('dlock_claim', 'dlock_claimed', 'dlock_unclaim',
                     'dlock_renew_claims', 'dlock_reset_claims')
 ORDER BY p.oid::regprocedure::text COLLATE "C";

--
-- SELECT and UPDATE on the table are both needed, on every column
--
CREATE TABLE pjobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0, secret text);
INSERT INTO pjobs SELECT i, 0, 's' || i FROM generate_series(1, 5) i;
GRANT UPDATE ON pjobs TO regress_dlock_cnosel;
GRANT SELECT ON pjobs TO regress_dlock_cnoupd;
GRANT SELECT (id, status), UPDATE ON pjobs TO regress_dlock_ccol;

SET ROLE regress_dlock_cnosel;
SELECT * FROM dlock_claim(NULL::pjobs, 'nosel', 1, '1 hour');
SET ROLE regress_dlock_cnoupd;
SELECT * FROM dlock_claim(NULL::pjobs, 'noupd', 1, '1 hour');
SET ROLE regress_dlock_ccol;
SELECT * FROM dlock_claim(NULL::pjobs, 'col', 1, '1 hour');
SELECT id FROM dlock_claim(NULL::pjobs, 'col', 1, '1 hour');
RESET ROLE;
SELECT count(*) AS claims_on_pjobs FROM dlock_claims WHERE table_name = 'pjobs'::regclass;

-- no USAGE on the table's schema
CREATE SCHEMA claim_hidden;
CREATE TABLE claim_hidden.hjobs (id int PRIMARY KEY);
INSERT INTO claim_hidden.hjobs VALUES (1);
GRANT SELECT, UPDATE ON claim_hidden.hjobs TO regress_dlock_cw1;
SELECT 'claim_hidden.hjobs'::regclass::oid AS hjobs_oid \gset
SET ROLE regress_dlock_cw1;
-- by name, the parser refuses; by OID, the call reaches dlock, which refuses
SELECT * FROM dlock_claim(NULL::claim_hidden.hjobs, 'hid', 1, '1 hour');
SELECT dlock_claimed('claim_hidden.hjobs', 1, 'hid');
SELECT dlock_claimed(:hjobs_oid, 1, 'hid');
SELECT dlock_unclaim(:hjobs_oid, 'hid');
SELECT dlock_renew_claims(:hjobs_oid, 'hid');
SELECT * FROM dlock_complete(:hjobs_oid, 'hid', ARRAY[1]);
RESET ROLE;
SELECT count(*) AS claims_on_hjobs FROM dlock_claims WHERE table_name = 'claim_hidden.hjobs'::regclass;

-- with both rights, the claim works
GRANT SELECT ON pjobs TO regress_dlock_cnosel;
SET ROLE regress_dlock_cnosel;
SELECT id, secret FROM dlock_claim(NULL::pjobs, 'nosel', 1, '1 hour');
SELECT dlock_unclaim('pjobs', 'nosel') AS unclaimed;
RESET ROLE;

--
-- filter and order_by are evaluated as the caller, never with dlock's rights
--
GRANT SELECT, UPDATE ON pjobs TO regress_dlock_cw1;
CREATE TABLE private_list (id int);
INSERT INTO private_list VALUES (1);
-- err(): SQLSTATE and message of a failing statement, without the position
-- of the error inside dlock's internal query
CREATE FUNCTION pg_temp.err(sql text) RETURNS text LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE sql;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$fn$;
SET ROLE regress_dlock_cw1;
SELECT array_agg(id) AS as_caller
  FROM dlock_claim(NULL::pjobs, 'f', 5, '1 hour', 'current_user = ''regress_dlock_cw1''');
SELECT dlock_unclaim('pjobs', 'f') AS unclaimed;
SELECT pg_temp.err($$SELECT * FROM dlock_claim(NULL::pjobs, 'f', 5, '1 hour',
                       'id IN (SELECT id FROM public.private_list)')$$) AS private_table;
SELECT pg_temp.err($$SELECT * FROM dlock_claim(NULL::pjobs, 'f', 5, '1 hour',
                       'EXISTS (SELECT 1 FROM dlock.claim)')$$) AS dlock_claim_table;
SELECT pg_temp.err($$SELECT * FROM dlock_claim(NULL::pjobs, 'f', 5, '1 hour',
                       'EXISTS (SELECT 1 FROM dlock.lease)')$$) AS dlock_lease_table;
SELECT pg_temp.err($$SELECT * FROM dlock_claim(NULL::pjobs, 'f', 5, '1 hour',
                       '(SELECT count(*) FROM pg_catalog.pg_authid) >= 0')$$) AS pg_authid;
SELECT pg_temp.err($$SELECT * FROM dlock_claim(NULL::pjobs, 'f', 5, '1 hour', NULL,
                       '(SELECT count(*) FROM dlock.claim)')$$) AS order_by_dlock_claim;
SELECT pg_temp.err($$SELECT * FROM dlock_claim(NULL::pjobs, 'f', 5, '1 hour',
                       'pg_catalog.pg_read_file(''PG_VERSION'') <> ''''')$$) AS superuser_function;
RESET ROLE;
SELECT count(*) AS claims_on_pjobs FROM dlock_claims WHERE table_name = 'pjobs'::regclass;

--
-- row-level security: a policy hides rows, and the claim never returns them
--
CREATE TABLE rjobs (id int PRIMARY KEY, tenant text NOT NULL, status int NOT NULL DEFAULT 0);
INSERT INTO rjobs SELECT i, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END, 0
  FROM generate_series(1, 10) i;
GRANT SELECT, UPDATE ON rjobs TO regress_dlock_cw1, regress_dlock_cw2;
ALTER TABLE rjobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_a ON rjobs TO regress_dlock_cw1 USING (tenant = 'a');
CREATE POLICY tenant_b ON rjobs TO regress_dlock_cw2 USING (tenant = 'b');
SET ROLE regress_dlock_cw1;
SELECT array_agg(id ORDER BY id) AS cw1_got, count(*) FILTER (WHERE tenant <> 'a') AS foreign_rows
  FROM dlock_claim(NULL::rjobs, 'r1', 1000, '1 hour');
SELECT count(*) AS cw1_again FROM dlock_claim(NULL::rjobs, 'r1', 1000, '1 hour');
-- a filter cannot widen what the policy shows
SELECT count(*) AS with_filter
  FROM dlock_claim(NULL::rjobs, 'r1b', 1000, '1 hour', 'tenant = ''b'' OR true');
SET ROLE regress_dlock_cw2;
SELECT array_agg(id ORDER BY id) AS cw2_got
  FROM dlock_claim(NULL::rjobs, 'r2', 1000, '1 hour');
RESET ROLE;
SELECT holder, owner::text AS owner, array_agg(key::int ORDER BY key::int) AS keys
  FROM dlock_claims WHERE table_name = 'rjobs'::regclass GROUP BY 1, 2 ORDER BY 1;
-- a policy that lets the role see rows but not update them (SELECT-only
-- policy): FOR UPDATE locks need the UPDATE policy too, so nothing is claimed
CREATE TABLE r2jobs (id int PRIMARY KEY);
INSERT INTO r2jobs SELECT generate_series(1, 3);
GRANT SELECT, UPDATE ON r2jobs TO regress_dlock_cw1;
ALTER TABLE r2jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY see_all ON r2jobs FOR SELECT TO regress_dlock_cw1 USING (true);
CREATE POLICY update_odd ON r2jobs FOR UPDATE TO regress_dlock_cw1 USING (id % 2 = 1);
SET ROLE regress_dlock_cw1;
SELECT array_agg(id ORDER BY id) AS select_all_update_odd
  FROM dlock_claim(NULL::r2jobs, 'r3', 1000, '1 hour');
SELECT dlock_unclaim('r2jobs', 'r3') AS unclaimed;
SELECT dlock_unclaim('rjobs', 'r1') + dlock_unclaim('rjobs', 'r1b') AS unclaimed;
SET ROLE regress_dlock_cw2;
SELECT dlock_unclaim('rjobs', 'r2') AS unclaimed;
RESET ROLE;

--
-- claims belong to the role: with the same holder string, cw2 can neither
-- see cw1's claims as its own, nor give them back, renew or complete them
--
CREATE TABLE sjobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0);
INSERT INTO sjobs SELECT generate_series(1, 6);
GRANT SELECT, UPDATE ON sjobs TO regress_dlock_cw1, regress_dlock_cw2;
SET ROLE regress_dlock_cw1;
SELECT array_agg(id ORDER BY id) AS cw1_shared FROM dlock_claim(NULL::sjobs, 'shared', 2, '1 hour');
SELECT dlock_claimed('sjobs', 1, 'shared') AS cw1_claimed;
SET ROLE regress_dlock_cw2;
SELECT dlock_claimed('sjobs', 1, 'shared') AS cw2_claimed;
UPDATE sjobs SET status = 2 WHERE dlock_claimed('sjobs', id, 'shared');
SELECT dlock_unclaim('sjobs', 'shared') AS cw2_unclaim_all,
       dlock_unclaim('sjobs', 'shared', ARRAY[1, 2]) AS cw2_unclaim_keys,
       dlock_renew_claims('sjobs', 'shared', '5 hours') AS cw2_renew,
       dlock_release_all('shared') AS cw2_release_all;
SELECT array_agg(id ORDER BY id) AS cw2_shared FROM dlock_claim(NULL::sjobs, 'shared', 2, '1 hour');
SET ROLE regress_dlock_cw1;
SELECT dlock_claimed('sjobs', 3, 'shared') AS cw1_claimed_cw2_row;
UPDATE sjobs SET status = 1 WHERE dlock_claimed('sjobs', id, 'shared');
RESET ROLE;
SELECT id, status FROM sjobs ORDER BY id;
SELECT key, owner::text AS owner,
       expires_at < clock_timestamp() + interval '2 hours' AS not_renewed_by_cw2
  FROM dlock_claims WHERE table_name = 'sjobs'::regclass ORDER BY key;
SET ROLE regress_dlock_cw1;
SELECT dlock_renew_claims('sjobs', 'shared') AS cw1_renew,
       dlock_release_all('shared') AS cw1_release_all;
SET ROLE regress_dlock_cw2;
SELECT dlock_unclaim('sjobs', 'shared') AS cw2_unclaim_own;
RESET ROLE;
SELECT count(*) AS claims_on_sjobs FROM dlock_claims WHERE table_name = 'sjobs'::regclass;

--
-- no direct access to the claim storage; reset is for operators only
--
SELECT count(*) AS claimed FROM dlock_claim(NULL::sjobs, 'su', 1, '1 hour');
SET ROLE regress_dlock_cw1;
INSERT INTO dlock.claim DEFAULT VALUES;
UPDATE dlock.claim SET holder = 'x';
DELETE FROM dlock.claim;
TRUNCATE dlock.claim;
SELECT count(*) FROM dlock.claim;
SELECT dlock_reset_claims('sjobs', ARRAY[1]);
RESET ROLE;
SELECT key, holder FROM dlock_claims WHERE table_name = 'sjobs'::regclass;
SELECT dlock_reset_claims('sjobs', ARRAY[1]) AS superuser_reset;
SELECT count(*) AS claims_left FROM dlock_claims
 WHERE table_name IN ('pjobs'::regclass, 'rjobs'::regclass, 'r2jobs'::regclass,
                      'sjobs'::regclass, 'claim_hidden.hjobs'::regclass);

--
-- clean up
--
DROP TABLE pjobs, rjobs, r2jobs, sjobs, private_list;
DROP SCHEMA claim_hidden CASCADE;
DROP ROLE regress_dlock_cw1, regress_dlock_cw2, regress_dlock_cnosel,
          regress_dlock_cnoupd, regress_dlock_ccol;
