--
-- claim_ranges: which rows a claim returns around the rows other claims
-- hold (holes, runs, the ends of the table, the extremes of each integer
-- type, another order), and stepping over a long stretch of held rows at
-- the head of the order: after a claim has checked 1,000 or more held rows
-- there, the next claims of the backend start after them, until one of
-- those claims can have changed (give-back, expiry, rollback).
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

-- a stretch of 1,200 held rows at the head of the order: the first claim
-- after it checks them all, the next ones start after them (this
-- transaction's counters; the earlier ones are flushed first, or they
-- would show here too)
CREATE TABLE cr_skip (id bigint PRIMARY KEY, status int NOT NULL DEFAULT 0);
INSERT INTO cr_skip SELECT g FROM generate_series(1, 1300) g;
SELECT count(*) AS skip_a FROM dlock_claim(NULL::cr_skip, 'a', 600, '5 min');
SELECT count(*) AS skip_a FROM dlock_claim(NULL::cr_skip, 'a', 600, '5 min');
SELECT array_agg(id) AS skip_b FROM dlock_claim(NULL::cr_skip, 'b', 2, '5 min');
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT array_agg(id) AS skip_b FROM dlock_claim(NULL::cr_skip, 'b', 2, '5 min');
SELECT idx_tup_fetch < 10 AS stretch_not_read
  FROM pg_stat_xact_user_tables WHERE relid = 'cr_skip'::regclass;
COMMIT;
-- the same with order_by naming the key, and descending from the other end
SELECT array_agg(id) AS skip_c FROM dlock_claim(NULL::cr_skip, 'c', 2, '5 min', NULL, 'id');
SELECT array_agg(id) AS skip_c FROM dlock_claim(NULL::cr_skip, 'c', 2, '5 min', NULL, 'cr_skip.id ASC');
SELECT array_agg(id) AS skip_d FROM dlock_claim(NULL::cr_skip, 'd', 2, '5 min', NULL, 'id DESC');
-- a claim given back inside the stretch is found at once, also by a claim
-- that has learned to step over it (the first one-row claim learns, the
-- second steps)
SELECT array_agg(id) AS skip_e FROM dlock_claim(NULL::cr_skip, 'e', 1, '5 min');
SELECT array_agg(id) AS skip_e_steps FROM dlock_claim(NULL::cr_skip, 'e', 1, '5 min');
SELECT dlock_unclaim('cr_skip', 'a', ARRAY[17]::bigint[]) AS a_gave_back_17;
SELECT array_agg(id) AS skip_e_gets_17 FROM dlock_claim(NULL::cr_skip, 'e', 1, '5 min');
-- a stretch learned from this transaction's own claims is forgotten when
-- it rolls back, to a savepoint or all of it: 2,000 rows claimed in it are
-- stepped over by its next claim, and free again after the rollback
CREATE TABLE cr_roll (id bigint PRIMARY KEY);
INSERT INTO cr_roll SELECT g FROM generate_series(1, 2100) g;
BEGIN;
SELECT count(*) AS roll_f FROM dlock_claim(NULL::cr_roll, 'f', 5, '5 min');
SAVEPOINT s;
SELECT count(*) AS roll_f FROM dlock_claim(NULL::cr_roll, 'f', 1000, '5 min');
SELECT count(*) AS roll_f FROM dlock_claim(NULL::cr_roll, 'f', 1000, '5 min');
SELECT array_agg(id) AS roll_f_steps FROM dlock_claim(NULL::cr_roll, 'f', 1, '5 min');
SELECT array_agg(id) AS roll_f_steps FROM dlock_claim(NULL::cr_roll, 'f', 1, '5 min');
ROLLBACK TO SAVEPOINT s;
SELECT array_agg(id) AS roll_f_after_savepoint FROM dlock_claim(NULL::cr_roll, 'f', 1, '5 min');
-- (no savepoint open below: the ROLLBACK alone must forget the stretch)
RELEASE SAVEPOINT s;
SELECT count(*) AS roll_f FROM dlock_claim(NULL::cr_roll, 'f', 1000, '5 min');
SELECT count(*) AS roll_f FROM dlock_claim(NULL::cr_roll, 'f', 1000, '5 min');
SELECT array_agg(id) AS roll_f_steps FROM dlock_claim(NULL::cr_roll, 'f', 1, '5 min');
SELECT array_agg(id) AS roll_f_steps FROM dlock_claim(NULL::cr_roll, 'f', 1, '5 min');
ROLLBACK;
SELECT array_agg(id) AS roll_g_after_rollback FROM dlock_claim(NULL::cr_roll, 'g', 1, '5 min');
-- a row inside the stretch that comes to match the filter is found once
-- the stretch's claims lapse: here, once they are reset
SELECT array_agg(id) AS skip_h FROM dlock_claim(NULL::cr_skip, 'h', 1, '5 min', 'status = 0');
SELECT array_agg(id) AS skip_h FROM dlock_claim(NULL::cr_skip, 'h', 1, '5 min', 'status = 0');
SELECT dlock_reset_claims('cr_skip', ARRAY[3]::bigint[]) AS reset_3;
SELECT array_agg(id) AS skip_h_gets_3 FROM dlock_claim(NULL::cr_skip, 'h', 1, '5 min', 'status = 0');

-- text and uuid keys step over a held stretch the same way
CREATE TABLE cr_text (id text PRIMARY KEY);
INSERT INTO cr_text SELECT 'k' || lpad(g::text, 5, '0') FROM generate_series(1, 1300) g;
SELECT count(*) AS text_a FROM dlock_claim(NULL::cr_text, 'a', 1000, '5 min');
SELECT count(*) AS text_a FROM dlock_claim(NULL::cr_text, 'a', 200, '5 min');
SELECT array_agg(id) AS text_b FROM dlock_claim(NULL::cr_text, 'b', 2, '5 min');
SELECT array_agg(id) AS text_b_steps FROM dlock_claim(NULL::cr_text, 'b', 2, '5 min');
SELECT array_agg(id) AS text_c FROM dlock_claim(NULL::cr_text, 'c', 1, '5 min');
SELECT array_agg(id) AS text_c_steps FROM dlock_claim(NULL::cr_text, 'c', 1, '5 min');
SELECT dlock_unclaim('cr_text', 'a', ARRAY['k00042']) AS a_gave_back_k00042;
SELECT array_agg(id) AS text_c_gets_k00042 FROM dlock_claim(NULL::cr_text, 'c', 1, '5 min');
SELECT array_agg(id) AS text_d_desc FROM dlock_claim(NULL::cr_text, 'd', 2, '5 min', NULL, 'id DESC');
CREATE TABLE cr_uuid (id uuid PRIMARY KEY);
INSERT INTO cr_uuid SELECT ('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid
  FROM generate_series(1, 1100) g;
SELECT count(*) AS uuid_a FROM dlock_claim(NULL::cr_uuid, 'a', 1000, '5 min');
SELECT array_agg(id) AS uuid_b FROM dlock_claim(NULL::cr_uuid, 'b', 1, '5 min');
SELECT array_agg(id) AS uuid_b_steps FROM dlock_claim(NULL::cr_uuid, 'b', 1, '5 min');
SELECT count(*) AS claims, count(DISTINCT key) AS distinct_keys
  FROM dlock_claims WHERE table_name IN ('cr_text'::regclass, 'cr_uuid'::regclass);

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
  FROM unnest(ARRAY['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']) h;
SELECT count(*) AS claims_left FROM dlock_claims
 WHERE table_name IN ('cr_jobs'::regclass, 'cr_skip'::regclass, 'cr_small'::regclass,
                     'cr_int'::regclass, 'cr_big'::regclass, 'cr_roll'::regclass,
                     'cr_text'::regclass, 'cr_uuid'::regclass);
DROP TABLE cr_jobs, cr_skip, cr_small, cr_int, cr_big, cr_roll, cr_text, cr_uuid;
