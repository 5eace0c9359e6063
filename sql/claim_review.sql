--
-- claim_review: claim bugs found in review (issue 11), one section each.
--
-- Everything created here is dropped at the end, and no claim is left.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

--
-- Bug 1: nested claims.  A filter that runs dlock_claim again, 66 levels
-- deep, each level with its own filter text (so its own cached plan): more
-- plans than the cache keeps (64) are busy at once, and none of them may be
-- freed while its claim runs (that crashed the server).
--
CREATE TABLE review_nest (id int PRIMARY KEY);
INSERT INTO review_nest SELECT g FROM generate_series(1, 100) g;
CREATE FUNCTION review_nest_claim(depth int) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF depth >= 66 THEN
    RETURN true;
  END IF;
  RETURN (SELECT count(*) = 1
            FROM dlock_claim(NULL::review_nest, 'nest-' || depth, 1, '1 min',
                             format('id = %s AND review_nest_claim(%s)', depth + 1, depth + 1)));
END $$;
SELECT id FROM dlock_claim(NULL::review_nest, 'nest-0', 1, '1 min',
                           'id = 1 AND review_nest_claim(1)');
SELECT count(*) AS nested_claims, count(DISTINCT holder) AS holders
  FROM dlock_claims WHERE table_name = 'review_nest'::regclass;
-- the same again: the cached plans are reused, none was lost
SELECT dlock_reset_claims('review_nest', ARRAY(SELECT generate_series(1, 100)));
SELECT id FROM dlock_claim(NULL::review_nest, 'nest-0', 1, '1 min',
                           'id = 1 AND review_nest_claim(1)');
SELECT count(*) AS nested_claims_again FROM dlock_claims WHERE table_name = 'review_nest'::regclass;
SELECT dlock_reset_claims('review_nest', ARRAY(SELECT generate_series(1, 100)));
DROP FUNCTION review_nest_claim(int);
DROP TABLE review_nest;

--
-- Bug 5: a table dropped and created again, in the same session, under the
-- same name and with another key type: its claims follow the new
-- definition (a cached plan of the old table took the bigint keys as int4).
--
CREATE TABLE review_retype (id int PRIMARY KEY);
INSERT INTO review_retype VALUES (1), (2);
SELECT id FROM dlock_claim(NULL::review_retype, 'h', 1, '1 min');
SELECT dlock_reset_claims('review_retype', ARRAY[1, 2]);
DROP TABLE review_retype;
CREATE TABLE review_retype (id bigint PRIMARY KEY);
INSERT INTO review_retype VALUES (5000000001), (5000000002), (5000000003);
SELECT id FROM dlock_claim(NULL::review_retype, 'h', 2, '1 min');
SELECT id FROM dlock_claim(NULL::review_retype, 'h2', 2, '1 min');
SELECT key FROM dlock_claims WHERE table_name = 'review_retype'::regclass ORDER BY key;
SELECT dlock_reset_claims('review_retype', ARRAY[5000000001, 5000000002, 5000000003]);
-- and a column changed in place to another type
ALTER TABLE review_retype ALTER COLUMN id TYPE numeric;
INSERT INTO review_retype VALUES (1.5);
SELECT id FROM dlock_claim(NULL::review_retype, 'h', 4, '1 min');
SELECT dlock_reset_claims('review_retype', ARRAY[1.5, 5000000001, 5000000002, 5000000003]);
DROP TABLE review_retype;

--
-- Bug 2: a row's claim key does not depend on session settings.  A regclass
-- primary key prints according to search_path; two sessions with different
-- search_paths must still see one claim per row.
--
CREATE SCHEMA review_s;
CREATE TABLE review_s.target_a (x int);
CREATE TABLE review_s.target_b (x int);
CREATE TABLE review_reg (id regclass PRIMARY KEY);
INSERT INTO review_reg VALUES ('review_s.target_a'), ('review_s.target_b');
SET search_path = review_s, public;
SELECT id FROM dlock_claim(NULL::review_reg, 'w1', 1, '1 min', order_by => 'id::oid');
RESET search_path;
-- another worker, with another search_path, must not get the same row
SELECT id FROM dlock_claim(NULL::review_reg, 'w2', 2, '1 min');
SELECT key, holder FROM dlock_claims WHERE table_name = 'review_reg'::regclass ORDER BY key;
SELECT dlock_claimed('review_reg', 'review_s.target_a'::regclass, 'w1') AS w1_holds_a;
SET search_path = review_s, public;
SELECT dlock_claimed('review_reg', 'target_a'::regclass, 'w1') AS w1_holds_a_other_path;
RESET search_path;
SELECT dlock_unclaim('review_reg', 'w1') + dlock_unclaim('review_reg', 'w2') AS given_back;
DROP TABLE review_reg;
DROP SCHEMA review_s CASCADE;

--
-- Bug 8: one row, one claim, however it is reached: through the
-- partitioned table, through a partition, or through a sub-partition.
-- A plain inheritance parent claims only its own rows.
--
CREATE TABLE review_part (id int PRIMARY KEY, status int NOT NULL DEFAULT 0)
  PARTITION BY RANGE (id);
CREATE TABLE review_part1 PARTITION OF review_part FOR VALUES FROM (1) TO (100)
  PARTITION BY RANGE (id);
CREATE TABLE review_part1a PARTITION OF review_part1 FOR VALUES FROM (1) TO (50);
CREATE TABLE review_part1b PARTITION OF review_part1 FOR VALUES FROM (50) TO (100);
CREATE TABLE review_part2 PARTITION OF review_part FOR VALUES FROM (100) TO (200);
INSERT INTO review_part SELECT g FROM generate_series(1, 4) g;
INSERT INTO review_part VALUES (60), (150);
SELECT id FROM dlock_claim(NULL::review_part, 'root', 2, '1 min');
SELECT id FROM dlock_claim(NULL::review_part1, 'mid', 2, '1 min');
SELECT id FROM dlock_claim(NULL::review_part1a, 'leaf', 10, '1 min');
SELECT id FROM dlock_claim(NULL::review_part, 'root2', 10, '1 min');
SELECT table_name, key, holder FROM dlock_claims
 WHERE table_name::text LIKE 'review_part%' ORDER BY key::int;
-- the fence and give-back work through any of them
SELECT dlock_claimed('review_part1a', 1, 'root') AS root_holds_1_via_leaf,
       dlock_claimed('review_part', 3, 'mid') AS mid_holds_3_via_root;
SELECT k FROM dlock_complete('review_part1', 'root', ARRAY[1, 2]) AS k ORDER BY k;
SELECT dlock_unclaim('review_part', 'mid') + dlock_unclaim('review_part2', 'root2')
       + dlock_unclaim('review_part1b', 'root2') AS given_back;
SELECT count(*) AS live_claims_left FROM dlock_claims WHERE table_name::text LIKE 'review_part%';
DROP TABLE review_part;

CREATE TABLE review_inh (id int PRIMARY KEY);
CREATE TABLE review_inh_child (id int PRIMARY KEY) INHERITS (review_inh);
INSERT INTO review_inh VALUES (1);
INSERT INTO review_inh_child VALUES (2);
SELECT id FROM dlock_claim(NULL::review_inh, 'p', 10, '1 min');
SELECT id FROM dlock_claim(NULL::review_inh_child, 'c', 10, '1 min');
SELECT dlock_unclaim('review_inh', 'p') + dlock_unclaim('review_inh_child', 'c') AS given_back;
DROP TABLE review_inh CASCADE;

--
-- Bug 3: attempts count deliveries.  A claim given back with dlock_unclaim
-- keeps its attempt count, so max_attempts still poisons a row that keeps
-- failing; completing a row (dlock_complete) clears its claim row, and so
-- does dlock_reset_claims.
--
CREATE TABLE review_att (id int PRIMARY KEY);
INSERT INTO review_att VALUES (1), (2);
SELECT id FROM dlock_claim(NULL::review_att, 'w', 1, '1 min', 'id = 1', max_attempts => 2);
SELECT dlock_unclaim('review_att', 'w', ARRAY[1]) AS given_back;
SELECT id FROM dlock_claim(NULL::review_att, 'w', 1, '1 min', 'id = 1', max_attempts => 2);
SELECT dlock_unclaim('review_att', 'w', ARRAY[1]) AS given_back;
-- two deliveries: the third claim poisons the row instead
SELECT count(*) AS third_delivery FROM dlock_claim(NULL::review_att, 'w', 1, '1 min', 'id = 1', max_attempts => 2);
SELECT key, attempts FROM dlock_dead_claims WHERE table_name = 'review_att'::regclass;
-- completion clears the attempts of a row
SELECT id FROM dlock_claim(NULL::review_att, 'w', 1, '1 min', 'id = 2');
SELECT k FROM dlock_complete('review_att', 'w', ARRAY[2]) AS k;
SELECT id FROM dlock_claim(NULL::review_att, 'w', 1, '1 min', 'id = 2');
SELECT key, attempts FROM dlock_claims WHERE table_name = 'review_att'::regclass;
SELECT dlock_reset_claims('review_att', ARRAY[1, 2]);
DROP TABLE review_att;

--
-- Bug 6: the holder-side functions need UPDATE on the table (and USAGE on
-- its schema), as dlock_claim does; without it they fail, and no key lock
-- is taken for another role's claims.
--
CREATE ROLE regress_dlock_rv_owner NOLOGIN;
CREATE ROLE regress_dlock_rv_other NOLOGIN;
CREATE SCHEMA review_priv;
GRANT USAGE ON SCHEMA review_priv TO regress_dlock_rv_owner, regress_dlock_rv_other;
CREATE TABLE review_priv.jobs (id int PRIMARY KEY);
INSERT INTO review_priv.jobs VALUES (1), (2);
GRANT SELECT, UPDATE ON review_priv.jobs TO regress_dlock_rv_owner;
GRANT SELECT ON review_priv.jobs TO regress_dlock_rv_other;
SET ROLE regress_dlock_rv_owner;
SELECT id FROM dlock_claim(NULL::review_priv.jobs, 'w', 2, '1 min');
RESET ROLE;
SET ROLE regress_dlock_rv_other;
\set VERBOSITY terse
SELECT dlock_claimed('review_priv.jobs', 1, 'w');
SELECT dlock_unclaim('review_priv.jobs', 'w');
SELECT dlock_unclaim('review_priv.jobs', 'w', ARRAY[1]);
SELECT dlock_renew_claims('review_priv.jobs', 'w');
SELECT * FROM dlock_complete('review_priv.jobs', 'w', ARRAY[1]);
\set VERBOSITY default
RESET ROLE;
-- issue 17 item 3: no USAGE on the table's schema, the table reached by OID
REVOKE USAGE ON SCHEMA review_priv FROM regress_dlock_rv_owner;
SELECT oid AS jobs_oid FROM pg_class WHERE relname = 'jobs'
   AND relnamespace = 'review_priv'::regnamespace \gset
SET ROLE regress_dlock_rv_owner;
\set VERBOSITY terse
SELECT dlock_claimed(:jobs_oid, 1, 'w');
\set VERBOSITY default
RESET ROLE;
GRANT USAGE ON SCHEMA review_priv TO regress_dlock_rv_owner;
-- the owner still holds both claims and can complete them
SET ROLE regress_dlock_rv_owner;
SELECT k FROM dlock_complete('review_priv.jobs', 'w', ARRAY[1, 2]) AS k ORDER BY k;
RESET ROLE;
DROP SCHEMA review_priv CASCADE;
DROP ROLE regress_dlock_rv_owner, regress_dlock_rv_other;

--
-- Bug 9: dlock_cleanup deletes idle claim rows too, never live claims or
-- poisoned rows.
--
CREATE TABLE review_clean (id int PRIMARY KEY);
INSERT INTO review_clean SELECT g FROM generate_series(1, 4) g;
SELECT count(*) FROM dlock_claim(NULL::review_clean, 'w', 1, '10 ms', 'id = 1');
SELECT count(*) FROM dlock_claim(NULL::review_clean, 'w', 1, '1 hour', 'id = 2');
SELECT count(*) FROM dlock_claim(NULL::review_clean, 'w', 1, '10 ms', 'id = 3');
SELECT pg_sleep(0.05);
SELECT count(*) AS poisoned_3
  FROM dlock_claim(NULL::review_clean, 'w', 1, '1 hour', 'id = 3', max_attempts => 1);
SELECT dlock_cleanup('0') >= 1 AS cleaned;
-- (at most 1,000 claim rows a call: the other tests' idle rows may come
-- first, so again, a transaction each, until it returns 0)
CREATE PROCEDURE pg_temp.cleanup_all() LANGUAGE plpgsql AS $$
BEGIN
  WHILE dlock_cleanup('0') > 0 LOOP
    COMMIT;
  END LOOP;
END $$;
CALL pg_temp.cleanup_all();
SELECT c.key, c.expires_at > clock_timestamp() AS live, c.poisoned_at IS NOT NULL AS poisoned
  FROM dlock.claim c WHERE c.relid = 'review_clean'::regclass ORDER BY c.key;
SELECT dlock_reset_claims('review_clean', ARRAY[1, 2, 3, 4]);
DROP TABLE review_clean;

-- The sweep (dlock_cleanup, and every 64th claim or so) goes by index: it
-- finds the idle rows of every table that has claims, and every row of a
-- table that no longer exists, without reading dlock.claim from end to end
-- (which made claims slower with every live claim).
CREATE TABLE sweep_a (id int PRIMARY KEY);
CREATE TABLE sweep_b (id text PRIMARY KEY);
CREATE TABLE sweep_gone (id int PRIMARY KEY);
INSERT INTO sweep_a SELECT g FROM generate_series(1, 40) g;
INSERT INTO sweep_b SELECT g::text FROM generate_series(1, 40) g;
INSERT INTO sweep_gone SELECT g FROM generate_series(1, 40) g;
SELECT count(*) AS a_idle FROM dlock_claim(NULL::sweep_a, 'w', 20, '10 ms', 'id <= 20');
SELECT count(*) AS a_live FROM dlock_claim(NULL::sweep_a, 'w', 10, '1 hour', 'id > 30');
SELECT count(*) AS b_idle FROM dlock_claim(NULL::sweep_b, 'w', 15, '10 ms');
SELECT count(*) AS gone_live FROM dlock_claim(NULL::sweep_gone, 'w', 12, '1 hour');
SELECT 'sweep_gone'::regclass::oid AS gone_oid \gset
DROP TABLE sweep_gone;
SELECT pg_sleep(0.05);
SET stats_fetch_consistency = none;
SELECT pg_stat_force_next_flush();
SELECT seq_scan AS claim_seq_scans FROM pg_stat_all_tables
 WHERE relid = 'dlock.claim'::regclass \gset
CALL pg_temp.cleanup_all();
SELECT pg_stat_force_next_flush();
SELECT seq_scan - :claim_seq_scans AS claim_seq_scans_by_the_sweep
  FROM pg_stat_all_tables WHERE relid = 'dlock.claim'::regclass;
SELECT CASE relid WHEN :gone_oid THEN 'sweep_gone' ELSE relid::regclass::text END AS tbl,
       count(*) AS rows_left, bool_and(expires_at > clock_timestamp()) AS all_live
  FROM dlock.claim
 WHERE relid IN ('sweep_a'::regclass, 'sweep_b'::regclass, :gone_oid)
 GROUP BY 1 ORDER BY 1;
RESET stats_fetch_consistency;
SELECT dlock_release_all('w') AS released;
DROP TABLE sweep_a, sweep_b;

--
-- Bug 10: errors in the caller's filter or order_by are reported against
-- the caller's text, not dlock's internal query, and a missing privilege
-- is named.
--
CREATE TABLE review_err (id int PRIMARY KEY, status int);
INSERT INTO review_err VALUES (1, 0);
-- the context names the argument; dlock's own query text appears nowhere
\set SHOW_CONTEXT always
SELECT * FROM dlock_claim(NULL::review_err, 'h', 1, filter => 'status = 0 AND nosuch = 1');
SELECT * FROM dlock_claim(NULL::review_err, 'h', 1, order_by => 'status, nosuch DESC');
SELECT * FROM dlock_claim(NULL::review_err, 'h', 1, filter => 'status / 0 = 1');
\set SHOW_CONTEXT never
CREATE ROLE regress_dlock_rv_reader NOLOGIN;
GRANT SELECT ON review_err TO regress_dlock_rv_reader;
SET ROLE regress_dlock_rv_reader;
SELECT * FROM dlock_claim(NULL::review_err, 'h', 1);
RESET ROLE;
DROP TABLE review_err;
DROP ROLE regress_dlock_rv_reader;
