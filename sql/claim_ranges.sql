--
-- claim_ranges: claims on an integer primary key in the default order read
-- the key ranges between long runs of live claims (32 or more consecutive
-- keys) instead of fetching every claimed row.  What must not change: the
-- rows a claim returns, their order, and that a free row next to, between
-- or after such runs is found.
--
-- Only ids, holders, counts and booleans are printed.
--

CREATE TABLE cr_jobs (id bigint PRIMARY KEY, status int NOT NULL DEFAULT 0);
INSERT INTO cr_jobs SELECT g FROM generate_series(1, 200) g;

-- two long runs: 1..40 (a) and 41..80 (b), one run 1..80 in key terms
SELECT count(*) AS a FROM dlock_claim(NULL::cr_jobs, 'a', 40, '5 min');
SELECT count(*) AS b FROM dlock_claim(NULL::cr_jobs, 'b', 40, '5 min');

-- holes: give back 5 (inside the run) and 60; complete 70 (no longer status 0)
SELECT dlock_unclaim('cr_jobs', 'a', ARRAY[5]::bigint[]) AS a_gave_back;
SELECT dlock_unclaim('cr_jobs', 'b', ARRAY[60]::bigint[]) AS b_gave_back;
UPDATE cr_jobs SET status = 1
  FROM dlock_complete('cr_jobs', 'b', ARRAY[70]::bigint[]) AS done(id)
 WHERE cr_jobs.id = done.id;

-- c gets the holes first, in key order, then the rows after the runs
SELECT array_agg(id) AS c_got
  FROM dlock_claim(NULL::cr_jobs, 'c', 5, '5 min', 'status = 0');

-- a run that ends the table: claim everything after it, then ask for more
SELECT count(*) AS d FROM dlock_claim(NULL::cr_jobs, 'd', 200, '5 min');
SELECT count(*) AS e_nothing_left FROM dlock_claim(NULL::cr_jobs, 'e', 10, '5 min');

-- a free row after the last run is found, and one right before the first
SELECT dlock_unclaim('cr_jobs', 'd', ARRAY[200]::bigint[]) AS d_gave_back_200;
SELECT dlock_unclaim('cr_jobs', 'a', ARRAY[1]::bigint[]) AS a_gave_back_1;
SELECT array_agg(id) AS f_got FROM dlock_claim(NULL::cr_jobs, 'f', 10, '5 min');

-- every row is claimed at most once over all of the above
SELECT count(*) AS claims, count(DISTINCT key) AS distinct_keys
  FROM dlock_claims WHERE table_name = 'cr_jobs'::regclass;

-- the run is skipped, not read: a claim right after 100 claimed rows reads
-- a handful of rows of the table, not the 100 (this transaction's counters;
-- the earlier ones are flushed first, or they would show here too)
CREATE TABLE cr_skip (id bigint PRIMARY KEY);
INSERT INTO cr_skip SELECT g FROM generate_series(1, 200) g;
SELECT count(*) AS skip_a FROM dlock_claim(NULL::cr_skip, 'a', 100, '5 min');
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT array_agg(id) AS skip_b FROM dlock_claim(NULL::cr_skip, 'b', 1, '5 min');
SELECT idx_tup_fetch < 10 AS run_not_read
  FROM pg_stat_xact_user_tables WHERE relid = 'cr_skip'::regclass;
COMMIT;

-- smallint and integer keys, and the extremes of bigint
CREATE TABLE cr_small (id smallint PRIMARY KEY);
INSERT INTO cr_small SELECT g FROM generate_series(-32768, -32700) g;
INSERT INTO cr_small VALUES (32767);
SELECT count(*) AS small_a FROM dlock_claim(NULL::cr_small, 'a', 60, '5 min');
SELECT array_agg(id) AS small_b FROM dlock_claim(NULL::cr_small, 'b', 20, '5 min');

CREATE TABLE cr_int (id int PRIMARY KEY);
INSERT INTO cr_int SELECT g FROM generate_series(1, 100) g;
SELECT count(*) AS int_a FROM dlock_claim(NULL::cr_int, 'a', 50, '5 min');
SELECT array_agg(id) AS int_b FROM dlock_claim(NULL::cr_int, 'b', 3, '5 min');

CREATE TABLE cr_big (id bigint PRIMARY KEY);
INSERT INTO cr_big SELECT 9223372036854775807 - g FROM generate_series(0, 39) g;
INSERT INTO cr_big VALUES (-9223372036854775808);
SELECT count(*) AS big_a FROM dlock_claim(NULL::cr_big, 'a', 40, '5 min', 'id > 0');
SELECT array_agg(id) AS big_b FROM dlock_claim(NULL::cr_big, 'b', 5, '5 min');

-- another order than the primary key's is read as before
SELECT array_agg(id) AS desc_c
  FROM dlock_claim(NULL::cr_int, 'c', 3, '5 min', NULL, 'id DESC');

SELECT sum(dlock_release_all(h)) AS released
  FROM unnest(ARRAY['a', 'b', 'c', 'd', 'e', 'f']) h;
SELECT count(*) AS claims_left FROM dlock_claims
 WHERE table_name IN ('cr_jobs'::regclass, 'cr_skip'::regclass, 'cr_small'::regclass,
                     'cr_int'::regclass, 'cr_big'::regclass);
DROP TABLE cr_jobs, cr_skip, cr_small, cr_int, cr_big;
