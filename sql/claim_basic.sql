--
-- claim_basic: batch claiming (issue 3) used correctly, in one session.
--
-- Only stable values are printed: ids, keys, holders, counts and booleans.
-- Tokens and timestamps are compared, never shown.  Everything created here
-- is dropped at the end, and no claim is left behind.
--

-- the API is what the contract says: names, arguments, defaults, result
-- types, and no function is STRICT (a NULL argument must raise an error)
SELECT p.oid::regprocedure AS function,
       pg_get_function_arguments(p.oid) AS arguments,
       pg_get_function_result(p.oid) AS returns,
       p.proisstrict AS strict
  FROM pg_proc p
 WHERE p.proname IN ('dlock_claim', 'dlock_claimed', 'dlock_unclaim',
                     'dlock_renew_claims', 'dlock_reset_claims')
 ORDER BY p.proname, p.oid::regprocedure::text;

SELECT attrelid::regclass AS view, attname, atttypid::regtype
  FROM pg_attribute
 WHERE attrelid IN ('dlock_claims'::regclass, 'dlock_dead_claims'::regclass)
   AND attnum > 0 AND NOT attisdropped
 ORDER BY attrelid::regclass::text, attnum;

SELECT count(*) AS claims FROM dlock_claims;
SELECT count(*) AS dead_claims FROM dlock_dead_claims;

-- dlock_stats() has one row with dlock in shared_preload_libraries (as in
-- scripts/test.sh), none without: the deltas at the end are checked only then
SELECT coalesce((SELECT claims FROM dlock_stats()), -1) AS stats_claims0,
       coalesce((SELECT redeliveries FROM dlock_stats()), -1) AS stats_redeliveries0 \gset

-- claims as seen by a test: one line per unexpired claim on a table
CREATE TEMP VIEW cl AS
SELECT table_name, key, holder,
       owner = current_user::regrole AS mine,
       attempts
  FROM dlock_claims;

--
-- a jobs table: ids 1..20; created_at runs backwards (id 20 is the oldest),
-- so that claiming in created_at order differs from primary-key order
--
CREATE TABLE jobs (
    id         bigint PRIMARY KEY,
    status     int NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    payload    text
);
INSERT INTO jobs
SELECT i, 0, timestamptz '2024-01-01 00:00:00+00' + (20 - i) * interval '1 minute', 'job ' || i
  FROM generate_series(1, 20) i;
UPDATE jobs SET status = 1 WHERE id IN (20, 19);   -- already done

--
-- w1 claims 3: the three oldest pending jobs, returned whole as rows of jobs
--
SELECT id, status, payload,
       created_at = timestamptz '2024-01-01 00:00:00+00' + (20 - id) * interval '1 minute'
         AS created_at_ok,
       pg_typeof(c) AS row_type
  FROM dlock_claim(NULL::jobs, 'w1', 3, '1 hour', 'status = 0', 'created_at') c
 ORDER BY created_at;
SELECT * FROM cl ORDER BY key;
-- one call, one token; the claim lasts the ttl
SELECT count(DISTINCT token) AS tokens,
       bool_and(expires_at - claimed_at BETWEEN interval '59 min 59 s' AND interval '1 hour 1 s')
         AS lasts_one_hour,
       bool_and(claimed_at <= clock_timestamp()) AS claimed_in_past
  FROM dlock_claims WHERE holder = 'w1';
SELECT max(token) AS w1_token FROM dlock_claims WHERE holder = 'w1' \gset

--
-- w2 claims 3 with the same filter and order: the next three, disjoint
--
SELECT array_agg(id ORDER BY created_at) AS w2_got
  FROM dlock_claim(NULL::jobs, 'w2', 3, '1 hour', 'status = 0', 'created_at');
SELECT * FROM cl ORDER BY key;
SELECT count(*) AS keys_claimed_twice
  FROM (SELECT key FROM dlock_claims GROUP BY table_name, key HAVING count(*) > 1) d;
SELECT min(token) > :w1_token AS w2_token_greater,
       count(DISTINCT token) AS tokens
  FROM dlock_claims WHERE holder = 'w2';

-- the same holder claiming again gets new rows, never its own live ones
SELECT array_agg(id ORDER BY created_at) AS w1_again
  FROM dlock_claim(NULL::jobs, 'w1', 2, '1 hour', 'status = 0', 'created_at');
SELECT holder, array_agg(key::int ORDER BY key::int) AS keys
  FROM dlock_claims GROUP BY holder ORDER BY holder;

--
-- dlock_claimed: the fence
--
SELECT dlock_claimed('jobs', 18, 'w1') AS own_int,
       dlock_claimed('jobs', 18::bigint, 'w1') AS own_bigint,
       dlock_claimed('jobs', '18'::text, 'w1') AS own_text,
       dlock_claimed('jobs'::regclass, 17::smallint, 'w1') AS own_smallint,
       dlock_claimed('jobs', 15, 'w1') AS held_by_w2,
       dlock_claimed('jobs', 15, 'w2') AS w2_own,
       dlock_claimed('jobs', 1, 'w1') AS not_claimed,
       dlock_claimed('jobs', 20, 'w1') AS done_not_claimed,
       dlock_claimed('jobs', 999, 'w1') AS no_such_row;

-- the completion pattern: only the rows w1 still holds are completed
UPDATE jobs SET status = 1
 WHERE id = ANY ('{18,17,16,15,14,1}'::bigint[]) AND dlock_claimed('jobs', id, 'w1');
SELECT id, status FROM jobs WHERE id BETWEEN 13 AND 18 OR id = 1 ORDER BY id;
-- completing does not end the claims: they stay until given back or expired
SELECT holder, count(*) FROM dlock_claims GROUP BY holder ORDER BY holder;

--
-- dlock_unclaim: by keys (only the holder's own claims count), then all
--
SELECT dlock_unclaim('jobs', 'w1', ARRAY[18, 17, 15, 1]) AS unclaimed_keys;
SELECT holder, array_agg(key::int ORDER BY key::int) AS keys
  FROM dlock_claims GROUP BY holder ORDER BY holder;
SELECT dlock_unclaim('jobs', 'w1', '{16}'::text[]) AS unclaimed_text_key;
SELECT dlock_unclaim('jobs', 'w1', '{}'::bigint[]) AS unclaimed_none;
SELECT dlock_unclaim('jobs', 'w3') AS unclaimed_nothing_held;
SELECT dlock_unclaim('jobs', 'w1') AS unclaimed_all;
SELECT holder, array_agg(key::int ORDER BY key::int) AS keys
  FROM dlock_claims GROUP BY holder ORDER BY holder;
SELECT dlock_claimed('jobs', 12, 'w1') AS after_unclaim;
-- an unclaimed row that is still pending can be claimed at once, as a
-- first attempt again (unclaim forgets the attempt)
SELECT array_agg(id ORDER BY id) AS w3_got
  FROM dlock_claim(NULL::jobs, 'w3', 10, '1 hour', 'id IN (12, 13, 14)');
SELECT key, holder, attempts FROM dlock_claims WHERE holder = 'w3' ORDER BY key;
SELECT dlock_unclaim('jobs', 'w3') AS unclaimed_w3;

--
-- dlock_renew_claims: the heartbeat
--
SELECT max(expires_at) AS w2_exp0 FROM dlock_claims WHERE holder = 'w2' \gset
SELECT pg_sleep(0.05);
-- NULL ttl: the ttl the claims were granted with (1 hour), from now
SELECT dlock_renew_claims('jobs', 'w2') AS renewed;
SELECT count(*) AS w2_claims,
       bool_and(expires_at > :'w2_exp0'::timestamptz) AS all_moved,
       bool_and(expires_at - clock_timestamp() BETWEEN interval '59 min' AND interval '1 hour')
         AS one_hour_left
  FROM dlock_claims WHERE holder = 'w2';
SELECT dlock_renew_claims('jobs', 'w2', '2 hours') AS renewed_2h;
SELECT bool_and(expires_at - clock_timestamp() BETWEEN interval '1 hour 59 min' AND interval '2 hours')
         AS two_hours_left
  FROM dlock_claims WHERE holder = 'w2';
SELECT dlock_renew_claims('jobs', 'w1') AS renewed_none_held,
       dlock_renew_claims('jobs', 'nobody', '1 hour') AS renewed_nobody;
SELECT dlock_unclaim('jobs', 'w2') AS unclaimed_w2;
SELECT count(*) AS claims_left FROM dlock_claims;

--
-- a claim inside a transaction that rolls back never happened
--
BEGIN;
SELECT count(*) AS claimed_in_xact FROM dlock_claim(NULL::jobs, 'wx', 5, '1 hour');
SELECT count(*) AS visible_in_xact FROM dlock_claims WHERE holder = 'wx';
ROLLBACK;
SELECT count(*) AS after_rollback FROM dlock_claims WHERE holder = 'wx';

--
-- expiry: a claim whose ttl ran out makes the row claimable again, and the
-- attempt count survives (attempts 2).  Claimed for an hour (live when
-- read, however slow the machine), then renewed for 1 ms: it runs out by
-- itself 1 ms later (the 10 ms sleep makes sure)
--
SELECT array_agg(id ORDER BY id) AS w4_got
  FROM dlock_claim(NULL::jobs, 'w4', 2, '1 hour', 'id <= 2');
SELECT key, holder, attempts FROM dlock_claims WHERE holder = 'w4' ORDER BY key;
SELECT dlock_claimed('jobs', 1, 'w4') AS live_before_expiry;
SELECT dlock_renew_claims('jobs', 'w4', '1 ms') AS w4_renewed_for_1ms;
SELECT pg_sleep(0.01);
SELECT count(*) AS w4_live_claims FROM dlock_claims WHERE holder = 'w4';
SELECT dlock_claimed('jobs', 1, 'w4') AS after_expiry,
       dlock_renew_claims('jobs', 'w4') AS renew_after_expiry;
-- the fence refuses the expired worker's completion
UPDATE jobs SET status = 1 WHERE id IN (1, 2) AND dlock_claimed('jobs', id, 'w4');
SELECT id, status FROM jobs WHERE id <= 2 ORDER BY id;
SELECT array_agg(id ORDER BY id) AS w5_got
  FROM dlock_claim(NULL::jobs, 'w5', 5, '1 hour', 'id <= 2');
SELECT key, holder, attempts FROM dlock_claims WHERE key IN ('1', '2') ORDER BY key;
-- the expired worker cannot give back or renew what w5 holds now
SELECT dlock_unclaim('jobs', 'w4') AS w4_unclaim_all,
       dlock_unclaim('jobs', 'w4', ARRAY[1, 2]) AS w4_unclaim_keys,
       dlock_renew_claims('jobs', 'w4') AS w4_renew;
SELECT key, holder FROM dlock_claims WHERE key IN ('1', '2') ORDER BY key;
SELECT dlock_claimed('jobs', 1, 'w5') AS w5_holds;
SELECT dlock_unclaim('jobs', 'w5') AS unclaimed_w5;

--
-- max_attempts: a row claimed that many times is not delivered again and
-- shows in dlock_dead_claims
--
SELECT array_agg(id) AS try1
  FROM dlock_claim(NULL::jobs, 'p1', 5, '1 s', 'id = 3', max_attempts => 2);
SELECT pg_sleep(1.2);
SELECT array_agg(id) AS try2
  FROM dlock_claim(NULL::jobs, 'p2', 5, '1 hour', 'id = 3', max_attempts => 2);
SELECT key, attempts FROM dlock_claims WHERE holder = 'p2';
SELECT dlock_renew_claims('jobs', 'p2', '1 ms') AS p2_renewed_for_1ms;
SELECT pg_sleep(0.01);
SELECT array_agg(id) AS try3_poisoned
  FROM dlock_claim(NULL::jobs, 'p3', 5, '1 hour', 'id IN (3, 4)', max_attempts => 2);
SELECT table_name, key, attempts, last_holder,
       last_claimed_at <= clock_timestamp() AS last_claimed_in_past,
       poisoned_at IS NOT NULL AS poisoned
  FROM dlock_dead_claims ORDER BY key;
-- the poison mark stays: the row is not delivered to any claimer, with or
-- without max_attempts, until an operator resets it
SELECT array_agg(id) AS poisoned_no_limit
  FROM dlock_claim(NULL::jobs, 'p3b', 5, '1 hour', 'id = 3');
SELECT key, holder, attempts FROM dlock_claims WHERE holder = 'p3b';
SELECT count(*) AS still_dead FROM dlock_dead_claims;
SELECT dlock_unclaim('jobs', 'p3b') AS unclaimed_p3b;
SELECT dlock_unclaim('jobs', 'p3') AS unclaimed_p3;
-- a row that has not reached its max_attempts yet is still delivered (row
-- 4 was delivered once, to p3, which gave it back: that delivery counts)
SELECT array_agg(id) AS under_limit
  FROM dlock_claim(NULL::jobs, 'p4', 5, '1 hour', 'id = 4', max_attempts => 2);
SELECT dlock_unclaim('jobs', 'p4') AS unclaimed_p4;
-- the operator forgets the row's claims and attempts: delivered again, as a
-- first attempt
SELECT dlock_reset_claims('jobs', ARRAY[3]) AS reset;
SELECT count(*) AS dead_after_reset FROM dlock_dead_claims;
SELECT array_agg(id) AS after_reset
  FROM dlock_claim(NULL::jobs, 'p5', 5, '1 hour', 'id = 3', max_attempts => 2);
SELECT key, holder, attempts FROM dlock_claims WHERE holder = 'p5';
SELECT dlock_reset_claims('jobs', ARRAY[3, 4, 5]) AS reset_live_and_free;
SELECT count(*) AS p5_claims_after_reset FROM dlock_claims WHERE holder = 'p5';

--
-- dlock_release_all(holder) gives back the holder's claims as well as its leases
--
SELECT dlock_acquire('claimbasic:lease', 'w6', '1 hour') IS NOT NULL AS lease_taken;
SELECT count(*) AS w6_claimed FROM dlock_claim(NULL::jobs, 'w6', 2, '1 hour', 'status = 0');
SELECT count(*) AS w7_claimed FROM dlock_claim(NULL::jobs, 'w7', 1, '1 hour', 'status = 0');
SELECT dlock_release_all('w6') AS released_all;
SELECT count(*) AS w6_claims FROM dlock_claims WHERE holder = 'w6';
SELECT count(*) AS w6_leases FROM dlock_locks WHERE holder = 'w6';
SELECT count(*) AS w7_claims_untouched FROM dlock_claims WHERE holder = 'w7';
SELECT dlock_unclaim('jobs', 'w7') AS unclaimed_w7;

--
-- never more than n rows
--
SELECT count(*) AS n2 FROM dlock_claim(NULL::jobs, 'n1', 2, '1 hour');
SELECT count(*) AS n1 FROM dlock_claim(NULL::jobs, 'n1', 1, '1 hour');
-- fewer when fewer match (status = 0: ids 1..15, minus the 3 claimed now)
SELECT count(*) AS n1000 FROM dlock_claim(NULL::jobs, 'n1', 1000, '1 hour', 'status = 0');
SELECT count(*) AS none_left FROM dlock_claim(NULL::jobs, 'n1', 1000, '1 hour', 'status = 0');
SELECT count(*) AS n1_claims, count(DISTINCT key) AS distinct_keys
  FROM dlock_claims WHERE holder = 'n1';
SELECT dlock_unclaim('jobs', 'n1') AS unclaimed_n1;

--
-- filter with a subquery (filter and order_by are the caller's SQL: names
-- resolve with the caller's search_path, as in the caller's own queries)
--
CREATE TABLE wanted (job_id bigint);
INSERT INTO wanted VALUES (5), (7), (11);
SELECT array_agg(id ORDER BY id) AS wanted_got
  FROM dlock_claim(NULL::jobs, 'sq', 10, '1 hour',
                   'id IN (SELECT job_id FROM wanted) AND status = 0');
SELECT array_agg(id ORDER BY id) AS exists_got
  FROM dlock_claim(NULL::jobs, 'sq', 10, '1 hour',
                   'EXISTS (SELECT 1 FROM public.wanted w WHERE w.job_id = id + 1)');
-- string literals may contain ; ) -- and quotes: still one expression
SELECT count(*) AS literal_filter
  FROM dlock_claim(NULL::jobs, 'sq', 1, '1 hour',
                   $f$payload <> 'x); DROP TABLE jobs; --' AND payload <> $q$'$q$$f$);
SELECT count(*) AS jobs_still_there FROM jobs;
SELECT dlock_unclaim('jobs', 'sq') AS unclaimed_sq;

--
-- order_by: DESC, several sort keys, NULLS FIRST/LAST, expressions
--
CREATE TABLE prio (id int PRIMARY KEY, p int, grp text);
INSERT INTO prio VALUES (1, 5, 'b'), (2, 9, 'a'), (3, 5, 'a'), (4, NULL, 'c'),
                        (5, 9, 'b'), (6, 1, 'a'), (7, 5, 'a');
-- which rows are claimed depends on the order (ids shown sorted)
SELECT array_agg(id ORDER BY id) AS desc_pk
  FROM dlock_claim(NULL::prio, 'o1', 3, '1 hour', NULL, 'id DESC');
SELECT dlock_unclaim('prio', 'o1') AS unclaimed;
-- p DESC puts NULL first, as in SELECT ... ORDER BY p DESC: {2,4}, not {2,5}
SELECT array_agg(id ORDER BY id) AS p_desc_id
  FROM dlock_claim(NULL::prio, 'o1', 2, '1 hour', NULL, 'p DESC, id');
SELECT dlock_unclaim('prio', 'o1') AS unclaimed;
SELECT array_agg(id ORDER BY id) AS p_desc_nulls_last_id_desc
  FROM dlock_claim(NULL::prio, 'o1', 3, '1 hour', NULL, 'p DESC NULLS LAST, id DESC');
SELECT dlock_unclaim('prio', 'o1') AS unclaimed;
-- third key breaks the tie in group a, p 5: id DESC takes 7, not 3
SELECT array_agg(id ORDER BY id) AS grp_p_id_desc
  FROM dlock_claim(NULL::prio, 'o1', 2, '1 hour', NULL, 'grp, p, id DESC');
SELECT dlock_unclaim('prio', 'o1') AS unclaimed;
SELECT array_agg(id ORDER BY id) AS expr_order
  FROM dlock_claim(NULL::prio, 'o1', 2, '1 hour', 'p IS NOT NULL', 'abs(p - 5), id');
SELECT dlock_unclaim('prio', 'o1') AS unclaimed;
-- the rows come back in order_by order
SELECT array_agg(id) AS returned_order
  FROM dlock_claim(NULL::prio, 'o1', 5, '1 hour', NULL, 'p DESC NULLS LAST, id DESC');
SELECT dlock_unclaim('prio', 'o1') AS unclaimed;
SELECT array_agg(id) AS returned_order_default_pk
  FROM dlock_claim(NULL::prio, 'o2', 5, '1 hour');
SELECT dlock_unclaim('prio', 'o2') AS unclaimed;

--
-- text primary keys, including keys that need quoting in arrays and SQL
--
CREATE TABLE tjobs (k text PRIMARY KEY, v int);
INSERT INTO tjobs VALUES
  ('f47ac10b-58cc-4372-a567-0e02b2c3d479', 1),
  ('9c5b94b1-35ad-49bb-b118-8e8fc24abf80', 2),
  ('it''s', 3), ('a,b', 4), ('{x}', 5), (' spaced ', 6), ('NULL', 7),
  ('back\slash', 8), ('"dq"', 9), ('ünï', 10);
SELECT count(*) AS claimed_all
  FROM dlock_claim(NULL::tjobs, 't1', 100, '1 hour');
-- the claim key is the key's own text, whatever characters it has
SELECT count(*) AS claims_on_tjobs,
       count(t.k) AS keys_equal_to_pk_text
  FROM dlock_claims c LEFT JOIN tjobs t ON t.k = c.key
 WHERE c.table_name = 'tjobs'::regclass;
SELECT bool_and(dlock_claimed('tjobs', k, 't1')) AS all_claimed,
       bool_or(dlock_claimed('tjobs', k, 't2')) AS any_for_other
  FROM tjobs;
UPDATE tjobs SET v = -v WHERE dlock_claimed('tjobs', k, 't1');
SELECT count(*) FILTER (WHERE v < 0) AS completed FROM tjobs;
SELECT dlock_unclaim('tjobs', 't1',
                     ARRAY['it''s', 'a,b', '{x}', ' spaced ', 'NULL', 'back\slash', '"dq"']) AS unclaimed_odd;
SELECT k FROM tjobs WHERE dlock_claimed('tjobs', k, 't1') ORDER BY v;
SELECT array_agg(v ORDER BY v) AS filter_on_text
  FROM dlock_claim(NULL::tjobs, 't2', 10, '1 hour', $$k LIKE '%,%' OR k = 'it''s'$$);
SELECT dlock_unclaim('tjobs', 't1') + dlock_unclaim('tjobs', 't2') AS unclaimed_rest;

-- a uuid primary key: the key is the uuid's text
CREATE TABLE ujobs (id uuid PRIMARY KEY, n int);
INSERT INTO ujobs VALUES ('f47ac10b-58cc-4372-a567-0e02b2c3d479', 1),
                         ('9c5b94b1-35ad-49bb-b118-8e8fc24abf80', 2);
SELECT array_agg(n) AS uuid_got FROM dlock_claim(NULL::ujobs, 'u1', 1, '1 hour');
SELECT key FROM dlock_claims WHERE table_name = 'ujobs'::regclass;
SELECT dlock_claimed('ujobs', '9c5b94b1-35ad-49bb-b118-8e8fc24abf80'::uuid, 'u1') AS by_uuid,
       dlock_claimed('ujobs', '9C5B94B1-35AD-49BB-B118-8E8FC24ABF80'::uuid, 'u1') AS by_uuid_upper,
       dlock_claimed('ujobs', '9c5b94b1-35ad-49bb-b118-8e8fc24abf80'::text, 'u1') AS by_text;
SELECT dlock_unclaim('ujobs', 'u1', ARRAY['9c5b94b1-35ad-49bb-b118-8e8fc24abf80'::uuid]) AS unclaimed;

--
-- a table in another schema, with a mixed-case name
--
CREATE SCHEMA "Claim Schema";
CREATE TABLE "Claim Schema"."Jobs Table" ("Id" int PRIMARY KEY, "Done" boolean DEFAULT false);
INSERT INTO "Claim Schema"."Jobs Table" ("Id") SELECT generate_series(1, 5);
SELECT array_agg("Id" ORDER BY "Id") AS quoted_got
  FROM dlock_claim(NULL::"Claim Schema"."Jobs Table", 'q1', 2, '1 hour',
                   'NOT "Done"', '"Id" DESC');
SELECT table_name, key FROM dlock_claims WHERE holder = 'q1' ORDER BY key;
SELECT dlock_claimed('"Claim Schema"."Jobs Table"', 5, 'q1') AS quoted_claimed;
SELECT dlock_unclaim('"Claim Schema"."Jobs Table"', 'q1') AS unclaimed;

--
-- a partitioned table (the claim goes through the parent's row type)
--
CREATE TABLE pjobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0) PARTITION BY RANGE (id);
CREATE TABLE pjobs_1 PARTITION OF pjobs FOR VALUES FROM (1) TO (100);
CREATE TABLE pjobs_2 PARTITION OF pjobs FOR VALUES FROM (100) TO (200);
INSERT INTO pjobs (id) VALUES (1), (2), (150), (151);
SELECT array_agg(id ORDER BY id) AS part_got1
  FROM dlock_claim(NULL::pjobs, 'pp', 3, '1 hour');
SELECT array_agg(id ORDER BY id) AS part_got2
  FROM dlock_claim(NULL::pjobs, 'pp2', 3, '1 hour');
SELECT table_name, key, holder FROM dlock_claims WHERE holder LIKE 'pp%' ORDER BY key::int;
UPDATE pjobs SET status = 1 WHERE dlock_claimed('pjobs', id, 'pp');
SELECT array_agg(id ORDER BY id) AS part_completed FROM pjobs WHERE status = 1;
SELECT dlock_unclaim('pjobs', 'pp') + dlock_unclaim('pjobs', 'pp2') AS unclaimed;

--
-- counters (only with dlock preloaded): claims counts claimed rows (89 in
-- this file, the 5 rolled back included: counters are not transactional),
-- redeliveries the rows claimed again after their claim expired (rows 1 and
-- 2 by w5, row 3 by p2)
--
SELECT CASE WHEN :stats_claims0 = -1 THEN 'not preloaded'
            ELSE ((SELECT claims FROM dlock_stats()) - :stats_claims0)::text END AS claims_delta,
       CASE WHEN :stats_redeliveries0 = -1 THEN 'not preloaded'
            ELSE ((SELECT redeliveries FROM dlock_stats()) - :stats_redeliveries0)::text END
         AS redeliveries_delta;

--
-- nothing left behind
--
DROP TABLE jobs, wanted, tjobs, ujobs, pjobs, prio;
DROP SCHEMA "Claim Schema" CASCADE;
SELECT count(*) AS claims_left FROM dlock_claims;
SELECT dlock_acquire('claimbasic:lease', 'w6', '1 hour') IS NOT NULL AS lease_free_again;
SELECT dlock_release('claimbasic:lease', 'w6') AS lease_released;
