--
-- lease_basic: every dlock function used correctly, in one session.
--
-- Only stable values are printed: booleans, counts and token comparisons.
-- Tokens and timestamps are captured with \gset and never shown.
-- Keys used here start with 'basic:'; the test leaves no lease behind.
--

-- the API is what the contract says: names, arguments, defaults, result
-- types, and no function is STRICT (a NULL argument must raise an error)
SELECT p.oid::regprocedure AS function,
       pg_get_function_arguments(p.oid) AS arguments,
       p.prorettype::regtype AS returns,
       p.proisstrict AS strict
  FROM pg_proc p
 WHERE p.proname IN ('dlock_acquire', 'dlock_release', 'dlock_renew', 'dlock_validate',
                     'dlock_release_all', 'dlock_force_release')
 ORDER BY p.proname, p.oid::regprocedure::text;

SELECT attname, atttypid::regtype
  FROM pg_attribute
 WHERE attrelid = 'dlock_locks'::regclass AND attnum > 0 AND NOT attisdropped
 ORDER BY attnum;

SELECT count(*) AS leases FROM dlock_locks;

--
-- acquire a free key
--
SELECT dlock_acquire('basic:a', 'h1', '1 hour') AS t1 \gset
SELECT :t1 > 0 AS token_positive;

-- the view shows the lease, owned by the calling role, with that token
SELECT key, holder,
       owner = current_user::regrole AS owner_is_me,
       token = :t1 AS token_matches,
       acquired_at <= clock_timestamp() AS acquired_in_past,
       expires_at - acquired_at BETWEEN interval '59 min 59 s' AND interval '1 hour 1 s'
         AS lasts_one_hour
  FROM dlock_locks WHERE key = 'basic:a';

--
-- re-acquire by the same holder: same token, lease extended
--
SELECT expires_at AS e1 FROM dlock_locks WHERE key = 'basic:a' \gset
SELECT pg_sleep(0.01);
SELECT dlock_acquire('basic:a', 'h1', '1 hour') = :t1 AS same_token;
SELECT expires_at > :'e1'::timestamptz AS extended,
       token = :t1 AS token_unchanged
  FROM dlock_locks WHERE key = 'basic:a';
SELECT count(*) AS rows_for_key FROM dlock_locks WHERE key = 'basic:a';

--
-- acquire by another holder: NULL, the lease is untouched
--
SELECT dlock_acquire('basic:a', 'h2', '1 hour') IS NULL AS other_holder_refused;
SELECT holder, token = :t1 AS token_unchanged FROM dlock_locks WHERE key = 'basic:a';

-- with a wait, it gives up after the wait (and not before)
SELECT dlock_acquire('basic:a', 'h2', '1 hour', '200 ms') IS NULL AS refused_after_wait,
       clock_timestamp() - statement_timestamp() >= interval '200 ms' AS waited;
SELECT holder, token = :t1 AS token_unchanged FROM dlock_locks WHERE key = 'basic:a';

-- with a wait on a free key, granted at once
SELECT dlock_acquire('basic:w', 'h1', '1 hour', '10 s') IS NOT NULL AS granted,
       clock_timestamp() - statement_timestamp() < interval '5 s' AS without_waiting;

-- with a wait longer than the lease, granted when the lease expires
SELECT dlock_acquire('basic:x', 'h1', '300 ms') AS tx1 \gset
SELECT dlock_acquire('basic:x', 'h2', '1 hour', '10 s') AS tx2,
       clock_timestamp() - statement_timestamp() < interval '5 s' AS before_wait_ran_out
  \gset
SELECT :tx2 > :tx1 AS granted_after_expiry, :'before_wait_ran_out' AS before_wait_ran_out;
SELECT holder FROM dlock_locks WHERE key = 'basic:x';

--
-- release
--
SELECT dlock_release('basic:a', 'h2') AS wrong_holder;
SELECT dlock_release('basic:a', 'h1', :t1 + 1) AS wrong_token;
SELECT count(*) AS still_held FROM dlock_locks WHERE key = 'basic:a';
SELECT dlock_release('basic:a', 'h1') AS released;
SELECT count(*) AS held FROM dlock_locks WHERE key = 'basic:a';
SELECT dlock_release('basic:a', 'h1') AS released_again;
SELECT dlock_release('basic:never', 'h1') AS never_held;

-- a new grant of the same key gets a greater token; the old token is dead
SELECT dlock_acquire('basic:a', 'h1', '1 hour') AS t2 \gset
SELECT :t2 > :t1 AS t2_gt_t1;
SELECT dlock_release('basic:a', 'h1', :t1) AS release_with_older_token;
SELECT dlock_validate('basic:a', 'h1', :t2) AS still_valid;
SELECT dlock_release('basic:a', 'h1', :t2) AS release_with_current_token;
SELECT count(*) AS held FROM dlock_locks WHERE key = 'basic:a';

--
-- expiry
--
SELECT dlock_acquire('basic:b', 'h1', '50 ms') AS t3 \gset
SELECT :t3 > :t2 AS t3_gt_t2;
SELECT pg_sleep(0.1);
SELECT dlock_validate('basic:b', 'h1', :t3) AS valid_after_expiry;
SELECT count(*) AS visible_after_expiry FROM dlock_locks WHERE key = 'basic:b';
-- another holder takes the expired key, with a greater token
SELECT dlock_acquire('basic:b', 'h2', '1 hour') AS t4 \gset
SELECT :t4 > :t3 AS t4_gt_t3;
SELECT dlock_validate('basic:b', 'h1', :t3) AS old_holder_valid;
SELECT dlock_release('basic:b', 'h1') AS old_holder_release;
SELECT holder, token = :t4 AS token_matches FROM dlock_locks WHERE key = 'basic:b';

-- the same holder re-acquiring after its own lease expired gets a new grant
SELECT dlock_acquire('basic:c', 'h1', '50 ms') AS t5 \gset
SELECT pg_sleep(0.1);
SELECT dlock_acquire('basic:c', 'h1', '1 hour') AS t6 \gset
SELECT :t5 > :t4 AS t5_gt_t4, :t6 > :t5 AS new_grant_after_own_expiry;
SELECT dlock_validate('basic:c', 'h1', :t5) AS expired_grant_valid,
       dlock_validate('basic:c', 'h1', :t6) AS new_grant_valid;

--
-- renew
--
SELECT expires_at AS e4 FROM dlock_locks WHERE key = 'basic:b' \gset
SELECT dlock_renew('basic:b', 'h2', '2 hours') AS renewed_with_ttl;
SELECT expires_at - :'e4'::timestamptz > interval '59 min' AS extended_by_new_ttl,
       token = :t4 AS token_unchanged
  FROM dlock_locks WHERE key = 'basic:b';

-- without a ttl: extended (the lease keeps a ttl of its own)
SELECT expires_at AS e6 FROM dlock_locks WHERE key = 'basic:c' \gset
SELECT pg_sleep(0.01);
SELECT dlock_renew('basic:c', 'h1') AS renewed_without_ttl;
SELECT expires_at > :'e6'::timestamptz AS extended,
       expires_at - clock_timestamp() > interval '59 min' AS still_about_one_hour,
       token = :t6 AS token_unchanged
  FROM dlock_locks WHERE key = 'basic:c';

-- with a token: only that exact grant
SELECT dlock_renew('basic:c', 'h1', '1 hour', :t6) AS renew_current_token;
SELECT dlock_renew('basic:c', 'h1', '1 hour', :t5) AS renew_older_token;
SELECT dlock_renew('basic:c', 'h1', NULL, :t6 + 1) AS renew_unknown_token;
-- wrong holder, unknown key
SELECT dlock_renew('basic:c', 'h2') AS renew_wrong_holder;
SELECT dlock_renew('basic:c', 'h2', '1 hour') AS renew_wrong_holder_ttl;
SELECT dlock_renew('basic:never', 'h1') AS renew_never_held;
SELECT holder, token = :t6 AS token_unchanged FROM dlock_locks WHERE key = 'basic:c';

-- after expiry: false, even though nobody took the key, and nothing revived
SELECT dlock_acquire('basic:d', 'h1', '50 ms') AS t7 \gset
SELECT pg_sleep(0.1);
SELECT dlock_renew('basic:d', 'h1') AS renew_after_expiry;
SELECT dlock_renew('basic:d', 'h1', '1 hour') AS renew_ttl_after_expiry;
SELECT dlock_renew('basic:d', 'h1', '1 hour', :t7) AS renew_token_after_expiry;
SELECT count(*) AS visible FROM dlock_locks WHERE key = 'basic:d';
SELECT dlock_validate('basic:d', 'h1', :t7) AS valid;

--
-- validate
--
SELECT dlock_validate('basic:c', 'h1', :t6) AS right_holder_right_token;
SELECT dlock_validate('basic:c', 'h1', :t5) AS older_token;
SELECT dlock_validate('basic:c', 'h1', :t6 + 1) AS unknown_token;
SELECT dlock_validate('basic:c', 'h2', :t6) AS wrong_holder;
SELECT dlock_validate('basic:never', 'h1', :t6) AS unknown_key;

--
-- release_all: every live lease of this holder (and role), and only those
--
SELECT dlock_acquire('basic:ra1', 'ra', '1 hour') IS NOT NULL AS ra1;
SELECT dlock_acquire('basic:ra2', 'ra', '1 hour') IS NOT NULL AS ra2;
SELECT dlock_acquire('basic:ra3', 'ra', '1 hour') IS NOT NULL AS ra3;
SELECT dlock_acquire('basic:ra4', 'ra-other', '1 hour') IS NOT NULL AS ra4;
SELECT dlock_acquire('basic:ra5', 'ra', '50 ms') IS NOT NULL AS ra5;
SELECT pg_sleep(0.1);
SELECT dlock_release_all('ra') AS released_count;
SELECT dlock_release_all('ra') AS released_again;
SELECT dlock_release_all('nobody') AS released_nobody;
SELECT key, holder FROM dlock_locks WHERE key LIKE 'basic:ra%' ORDER BY key;

--
-- force_release (superuser here)
--
SELECT token AS t_ra4 FROM dlock_locks WHERE key = 'basic:ra4' \gset
SELECT dlock_force_release('basic:ra4') AS forced;
SELECT dlock_force_release('basic:ra4') AS forced_again;
SELECT dlock_force_release('basic:never') AS forced_never_held;
SELECT dlock_validate('basic:ra4', 'ra-other', :t_ra4) AS old_holder_valid;
SELECT dlock_acquire('basic:ra4', 'h1', '1 hour') AS t8 \gset
SELECT :t8 > :t_ra4 AS t8_gt_forced, :t8 > :t7 AS t8_gt_t7;

--
-- transactions: a rolled back acquire never happened
--
BEGIN;
SELECT dlock_acquire('basic:tx', 'h1', '1 hour') IS NOT NULL AS acquired_in_xact;
SELECT count(*) AS visible_in_xact FROM dlock_locks WHERE key = 'basic:tx';
ROLLBACK;
SELECT count(*) AS visible_after_rollback FROM dlock_locks WHERE key = 'basic:tx';
SELECT dlock_validate('basic:tx', 'h1', :t8 + 1000000) AS valid_after_rollback;
SELECT dlock_release('basic:tx', 'h1') AS release_after_rollback;
SELECT dlock_acquire('basic:tx', 'h2', '1 hour') AS t9 \gset
SELECT :t9 > :t8 AS other_holder_granted_with_greater_token;

-- a rolled back release never happened either
BEGIN;
SELECT dlock_release('basic:tx', 'h2') AS released_in_xact;
SELECT count(*) AS visible_in_xact FROM dlock_locks WHERE key = 'basic:tx';
ROLLBACK;
SELECT dlock_validate('basic:tx', 'h2', :t9) AS valid_after_rollback;

-- nor a rolled back renew, nor an acquire undone by ROLLBACK TO SAVEPOINT
SELECT expires_at AS e9 FROM dlock_locks WHERE key = 'basic:tx' \gset
BEGIN;
SELECT dlock_renew('basic:tx', 'h2', '5 hours') AS renewed_in_xact;
ROLLBACK;
SELECT expires_at = :'e9'::timestamptz AS expiry_unchanged FROM dlock_locks WHERE key = 'basic:tx';
BEGIN;
SAVEPOINT sp;
SELECT dlock_acquire('basic:sp', 'h1', '1 hour') IS NOT NULL AS acquired_in_savepoint;
ROLLBACK TO SAVEPOINT sp;
SELECT dlock_acquire('basic:sp2', 'h1', '1 hour') IS NOT NULL AS acquired_after_savepoint;
COMMIT;
SELECT key FROM dlock_locks WHERE key IN ('basic:sp', 'basic:sp2') ORDER BY key;

--
-- expiry is judged on clock_timestamp(), not on the transaction's now()
--
BEGIN;
SELECT dlock_acquire('basic:clock', 'h1', '100 ms') AS tc \gset
SELECT pg_sleep(0.2);
SELECT dlock_renew('basic:clock', 'h1') AS renew_in_xact_after_expiry;
SELECT dlock_validate('basic:clock', 'h1', :tc) AS valid_in_xact_after_expiry;
COMMIT;
SELECT count(*) AS visible FROM dlock_locks WHERE key = 'basic:clock';

-- a lease granted late in a long transaction lasts its full ttl from then
BEGIN;
SELECT pg_sleep(1);
SELECT dlock_acquire('basic:clock2', 'h1', '700 ms') AS tc2 \gset
SELECT dlock_validate('basic:clock2', 'h1', :tc2) AS valid_late_in_xact;
SELECT expires_at > clock_timestamp() AS expires_in_future,
       expires_at > now() + interval '1 s' AS expires_after_xact_start_plus_ttl
  FROM dlock_locks WHERE key = 'basic:clock2';
SELECT dlock_release('basic:clock2', 'h1', :tc2) AS released_late_in_xact;
COMMIT;

--
-- defaults: ttl 30 seconds, wait 0
--
SELECT dlock_acquire('basic:default', 'h1') IS NOT NULL AS acquired;
SELECT expires_at - acquired_at BETWEEN interval '29 s' AND interval '31 s' AS ttl_30s
  FROM dlock_locks WHERE key = 'basic:default';
SELECT dlock_acquire('basic:default', 'h2') IS NULL AS refused_at_once,
       clock_timestamp() - statement_timestamp() < interval '10 s' AS without_waiting;

--
-- tokens: each grant is greater than every token issued before it
--
SELECT dlock_acquire('basic:last', 'h1', '1 hour') AS t_last \gset
SELECT :t_last > greatest(:t1, :t2, :t3, :t4, :t5, :t6, :t7, :t8, :t9, :tc, :tc2,
                          :tx1, :tx2, :t_ra4) AS last_token_is_greatest;
SELECT count(DISTINCT token) = count(*) AS tokens_distinct FROM dlock_locks;

--
-- clean up: force-release what is left
--
SELECT count(*) FILTER (WHERE dlock_force_release(key)) AS force_released
  FROM (SELECT key FROM dlock_locks WHERE key LIKE 'basic:%') s;
SELECT count(*) AS leases FROM dlock_locks;

--
-- The sweep an acquire runs now and then (about one in 1,024 that write)
-- reads a window of the lease table at a random place, never the whole
-- table: its cost must not grow with the number of keys.  20,000 free keys
-- (idle at once with dlock.idle_key_lifetime = 0), then new keys, 100 to a
-- transaction, until a sweep has deleted some; meanwhile dlock.lease was
-- never read from end to end.
--
SET dlock.idle_key_lifetime = 0;
CREATE PROCEDURE pg_temp.sweep_fill() LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..20000 LOOP
    PERFORM dlock_acquire('sweep:old:' || i, 'h', '1 hour');
    PERFORM dlock_release('sweep:old:' || i, 'h');
    IF i % 100 = 0 THEN COMMIT; END IF;
  END LOOP;
END $$;
CALL pg_temp.sweep_fill();
SELECT pg_relation_size('dlock.lease') / current_setting('block_size')::int > 64 AS over_64_blocks;
-- (the table statistics of this session's transactions add up until they
-- are flushed: flushed now, then read at the end)
SELECT pg_stat_force_next_flush();
CREATE PROCEDURE pg_temp.sweep_wait() LANGUAGE plpgsql AS $$
DECLARE
  i int := 0;
  deleted bigint := 0;
  scans bigint;
BEGIN
  WHILE deleted = 0 AND i < 50000 LOOP
    i := i + 1;
    PERFORM dlock_acquire('sweep:new:' || i, 'h', '1 hour');
    IF i % 100 = 0 THEN
      SELECT n_tup_del INTO deleted FROM pg_stat_xact_all_tables
       WHERE relid = 'dlock.lease'::regclass;
      COMMIT;
    END IF;
  END LOOP;
  SELECT seq_scan INTO scans FROM pg_stat_xact_all_tables
   WHERE relid = 'dlock.lease'::regclass;
  RAISE NOTICE 'a sweep deleted idle keys: %; whole-table scans: %', deleted > 0, scans;
END $$;
CALL pg_temp.sweep_wait();
RESET dlock.idle_key_lifetime;
SELECT dlock_release_all('h') > 0 AS released_new_keys;
-- dlock_cleanup deletes at most 1,000 lease rows a call (so that a call
-- stays short): called until it returns 0
SELECT dlock_cleanup('0') BETWEEN 1000 AND 2000 AS first_call_capped;
CREATE PROCEDURE pg_temp.cleanup_all() LANGUAGE plpgsql AS $$
DECLARE
  calls int := 1;
BEGIN
  WHILE dlock_cleanup('0') > 0 LOOP
    calls := calls + 1;
    COMMIT;
  END LOOP;
  RAISE NOTICE 'calls: over 15: %', calls > 15;
END $$;
CALL pg_temp.cleanup_all();
SELECT count(*) AS sweep_rows_left FROM dlock.lease WHERE key LIKE 'sweep:%';
