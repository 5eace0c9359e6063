--
-- time_promises: the README's promises about time, each at its edge, for
-- every function and in every mode (autocommit, late in a long
-- transaction, after a rolled-back savepoint, in a subtransaction):
--
--   - "at once" (wait => '0', the default; a wrong holder's release, renew
--     and validate; claims over held rows): 1,000 calls in one statement
--     under statement_timeout = '60s', which only ends a hang (a call
--     that sleeps, or waits for a lock, makes them take minutes; no speed
--     is asserted); and dlock_stats() shows that none of them waited;
--   - "never before the wait ends": a waited acquire that is not granted
--     took at least its wait; one granted when the lease ran out was granted
--     no sooner;
--   - "now + ttl" on the server's clock: acquires, re-acquires, renewals,
--     claims and claim renewals made late in a transaction (or a statement)
--     last their ttl from the call, not from the transaction's start;
--   - expiry is judged on the current clock: a lease or claim that ran out
--     during a transaction is lost to every function in it;
--   - dlock_cleanup measures idleness on the clock of the call;
--   - tokens are at or above the server's clock in microseconds since 1970.
--
-- No speed is asserted: timestamps are compared with sleeps made before
-- the call (pg_sleep guarantees their length), and time limits only end
-- hangs, far above any load's delay.  Counters are cluster-wide:
-- only differences are printed.  Keys start with 'tp:'.
--

CREATE TABLE tp_jobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0);
INSERT INTO tp_jobs SELECT g FROM generate_series(1, 100) g;

-- counter differences since the last tp_mark()
CREATE TEMP TABLE tp_s0 AS SELECT * FROM dlock_stats();
CREATE FUNCTION pg_temp.tp_mark() RETURNS void LANGUAGE sql AS $$
  DELETE FROM tp_s0;
  INSERT INTO tp_s0 SELECT * FROM dlock_stats();
$$;
CREATE FUNCTION pg_temp.tp_counted(OUT contended bigint, OUT waits bigint,
                                   OUT wait_timeouts bigint, OUT acquired bigint)
LANGUAGE sql AS $$
  SELECT s.contended - s0.contended, s.waits - s0.waits,
         s.wait_timeouts - s0.wait_timeouts, s.acquired - s0.acquired
    FROM dlock_stats() s, tp_s0 s0;
$$;
-- a wait => '0' acquire in a subtransaction of its own (an exception block)
CREATE FUNCTION pg_temp.tp_try_sub(k text, h text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  RETURN dlock_acquire(k, h, '1 min', '0') IS NULL;
EXCEPTION WHEN division_by_zero THEN
  RETURN NULL;
END $$;

--
-- "at once": wait => '0' on a held key, 1,000 times a statement
--
SELECT dlock_acquire('tp:held', 'h1', '1 hour') AS t_held \gset
SELECT pg_temp.tp_mark();
SET statement_timeout = '60s';
-- autocommit; the wait spelt out, and the default
SELECT count(*) AS refused FROM generate_series(1, 1000)
 WHERE dlock_acquire('tp:held', 'h2', '1 min', '0') IS NULL;
SELECT count(*) AS refused FROM generate_series(1, 1000)
 WHERE dlock_acquire('tp:held', 'h2', '1 min', '0 ms') IS NULL;
SELECT count(*) AS refused_default_wait FROM generate_series(1, 1000)
 WHERE dlock_acquire('tp:held', 'h2') IS NULL;
-- each in a subtransaction of its own
SELECT count(*) AS refused_in_subxact FROM generate_series(1, 1000)
 WHERE pg_temp.tp_try_sub('tp:held', 'h2');
-- late in a long transaction, and after a rolled-back savepoint
BEGIN;
SET LOCAL statement_timeout = '60s';
SELECT pg_sleep(0.3);
SET LOCAL statement_timeout = '60s';
SELECT count(*) AS refused_late_in_xact FROM generate_series(1, 1000)
 WHERE dlock_acquire('tp:held', 'h2', '1 min', '0') IS NULL;
SAVEPOINT sp;
SELECT dlock_acquire('tp:sp', 'h2', '1 min') IS NOT NULL AS acquired_in_savepoint;
SELECT count(*) AS refused_in_savepoint FROM generate_series(1, 1000)
 WHERE dlock_acquire('tp:held', 'h2', '1 min', '0') IS NULL;
ROLLBACK TO SAVEPOINT sp;
SELECT count(*) AS refused_after_savepoint FROM generate_series(1, 1000)
 WHERE dlock_acquire('tp:held', 'h2', '1 min', '0') IS NULL;
COMMIT;
-- none of them waited; every one was counted as contended
SELECT contended >= 6000 AS contended, waits, wait_timeouts FROM pg_temp.tp_counted();

-- a wrong holder's release, renew, validate and release_all, and the
-- holder's own validate and renew, are answered at once too
SELECT pg_temp.tp_mark();
SELECT count(*) FILTER (WHERE dlock_release('tp:held', 'h2')) AS wrong_released,
       count(*) FILTER (WHERE dlock_release('tp:held', 'h1', :t_held - 1)) AS wrong_token_released,
       count(*) FILTER (WHERE dlock_renew('tp:held', 'h2', '1 day')) AS wrong_renewed,
       count(*) FILTER (WHERE dlock_validate('tp:held', 'h2', :t_held)) AS wrong_validated
  FROM generate_series(1, 1000);
SELECT sum(dlock_release_all('h2')) AS h2_released_all FROM generate_series(1, 200);
BEGIN;
SELECT count(*) FILTER (WHERE dlock_validate('tp:held', 'h1', :t_held)) AS validated_1000
  FROM generate_series(1, 1000);
COMMIT;
SELECT count(*) FILTER (WHERE dlock_renew('tp:held', 'h1')) AS renewed_200,
       count(*) FILTER (WHERE dlock_acquire('tp:held', 'h1', '1 hour', '0') = :t_held) AS extended_200
  FROM generate_series(1, 200);
SELECT waits, wait_timeouts FROM pg_temp.tp_counted();

-- claims over held rows come back empty at once (200 calls: n refers to
-- g, or the function would run once and be rescanned), and so do another
-- holder's give-back, completion, fence and heartbeat, and the per-row check
SELECT count(*) AS w1_claimed FROM dlock_claim(NULL::tp_jobs, 'w1', 10, '1 hour', 'id <= 10');
SELECT count(c.id) AS claimed_held_rows
  FROM generate_series(1, 200) g, LATERAL dlock_claim(NULL::tp_jobs, 'w2', 5 + 0 * g, '1 min', 'id <= 10') c;
SELECT count(*) FILTER (WHERE dlock_claimed('tp_jobs', 1 + g % 10, 'w2')) AS w2_fenced,
       sum(dlock_unclaim('tp_jobs', 'w2', ARRAY[1 + g % 10])) AS w2_unclaimed,
       sum(dlock_renew_claims('tp_jobs', 'w2', '1 day')) AS w2_renewed,
       sum((SELECT count(*) FROM dlock_complete('tp_jobs', 'w2', ARRAY[1 + g % 10]))) AS w2_completed
  FROM generate_series(1, 200) g;
SELECT count(*) FILTER (WHERE dlock_claim_unheld('tp_jobs', 1 + g % 20)) AS unheld_rows_seen
  FROM generate_series(1, 300) g;
SELECT count(*) AS w1_still_holds FROM dlock_claims
 WHERE table_name = 'tp_jobs'::regclass AND holder = 'w1';
RESET statement_timeout;

--
-- waits: a waited acquire that is not granted took at least its wait
--
SELECT pg_temp.tp_mark();
SELECT dlock_acquire('tp:held', 'h2', '1 min', '300 ms') IS NULL AS not_acquired,
       clock_timestamp() - statement_timestamp() >= interval '300 ms' AS waited_it_all;
-- three waits in one statement: each one whole
SELECT count(*) AS not_acquired_3,
       clock_timestamp() - statement_timestamp() >= interval '600 ms' AS waited_them_all
  FROM generate_series(1, 3)
 WHERE dlock_acquire('tp:held', 'h2', '1 min', '200 ms') IS NULL;
BEGIN;
SELECT pg_sleep(0.5);
SELECT dlock_acquire('tp:held', 'h2', '1 min', '300 ms') IS NULL AS not_acquired_late_in_xact,
       clock_timestamp() - statement_timestamp() >= interval '300 ms' AS waited_it_all;
SAVEPOINT sp;
SELECT dlock_acquire('tp:sp', 'h2', '1 min') IS NOT NULL AS acquired_in_savepoint;
ROLLBACK TO SAVEPOINT sp;
SELECT dlock_acquire('tp:held', 'h2', '1 min', '300 ms') IS NULL AS not_acquired_after_savepoint,
       clock_timestamp() - statement_timestamp() >= interval '300 ms' AS waited_it_all;
COMMIT;
SELECT waits, wait_timeouts, acquired FROM pg_temp.tp_counted();

-- a wait longer than the lease: granted when the lease ran out, not
-- before, with the ttl counted from the grant
SELECT dlock_acquire('tp:short', 'h1', '400 ms') AS t_short \gset
SELECT expires_at AS short_end FROM dlock.lease WHERE key = 'tp:short' \gset
SELECT dlock_acquire('tp:short', 'h2', '1 hour', '10 s') > :t_short AS granted_with_greater_token,
       clock_timestamp() >= :'short_end'::timestamptz AS not_before_the_lease_ran_out;
SELECT acquired_at >= :'short_end'::timestamptz AS acquired_after_it_ran_out,
       expires_at - acquired_at = interval '1 hour' AS ttl_from_the_grant
  FROM dlock.lease WHERE key = 'tp:short';
-- the same late in a transaction
SELECT dlock_acquire('tp:short2', 'h1', '400 ms') AS t_short2 \gset
SELECT expires_at AS short2_end FROM dlock.lease WHERE key = 'tp:short2' \gset
BEGIN;
SELECT pg_sleep(0.1);
SELECT dlock_acquire('tp:short2', 'h2', '1 hour', '10 s') > :t_short2 AS granted_with_greater_token,
       clock_timestamp() >= :'short2_end'::timestamptz AS not_before_the_lease_ran_out;
SELECT acquired_at >= :'short2_end'::timestamptz AS acquired_after_it_ran_out,
       expires_at - acquired_at = interval '1 hour' AS ttl_from_the_grant,
       acquired_at >= now() + interval '100 ms' AS not_from_xact_start
  FROM dlock.lease WHERE key = 'tp:short2';
COMMIT;

--
-- now + ttl, on the clock of the call
--
-- autocommit, late in its statement
WITH s AS MATERIALIZED (SELECT pg_sleep(0.3))
SELECT statement_timestamp() AS st, dlock_acquire('tp:late1', 'h1', '1 hour') IS NOT NULL AS acquired
  FROM s \gset
SELECT :'acquired' AS acquired,
       acquired_at >= :'st'::timestamptz + interval '300 ms' AS acquired_at_the_call,
       expires_at - acquired_at = interval '1 hour' AS lasts_its_ttl
  FROM dlock.lease WHERE key = 'tp:late1';
-- late in a long transaction: acquire, re-acquire, renew (with a ttl and
-- with its own)
BEGIN;
SELECT pg_sleep(0.3);
SELECT dlock_acquire('tp:late2', 'h1', '1 hour') IS NOT NULL AS acquired;
SELECT acquired_at >= now() + interval '300 ms' AS acquired_at_the_call,
       expires_at - acquired_at = interval '1 hour' AS lasts_its_ttl
  FROM dlock.lease WHERE key = 'tp:late2';
SELECT pg_sleep(0.2);
SELECT dlock_acquire('tp:late2', 'h1', '2 hours') IS NOT NULL AS extended;
SELECT expires_at >= now() + interval '500 ms' + interval '2 hours' AS extended_from_the_call
  FROM dlock.lease WHERE key = 'tp:late2';
SELECT pg_sleep(0.2);
SELECT dlock_renew('tp:late2', 'h1', '1 hour') AS renewed;
SELECT expires_at >= now() + interval '700 ms' + interval '1 hour' AS renewed_from_the_call
  FROM dlock.lease WHERE key = 'tp:late2';
SELECT pg_sleep(0.2);
SELECT dlock_renew('tp:late2', 'h1') AS renewed_with_its_own_ttl;
SELECT expires_at >= now() + interval '900 ms' + interval '1 hour' AS renewed_from_the_call,
       expires_at <= clock_timestamp() + interval '1 hour' AS with_its_own_ttl
  FROM dlock.lease WHERE key = 'tp:late2';
COMMIT;
-- after a rolled-back savepoint, and in a subtransaction
BEGIN;
SAVEPOINT sp;
SELECT dlock_acquire('tp:late3', 'h1', '1 hour') IS NOT NULL AS acquired_in_savepoint;
ROLLBACK TO SAVEPOINT sp;
SELECT pg_sleep(0.3);
SELECT dlock_acquire('tp:late3', 'h1', '1 hour') IS NOT NULL AS acquired_after_savepoint;
SELECT acquired_at >= now() + interval '300 ms' AS acquired_at_the_call,
       expires_at - acquired_at = interval '1 hour' AS lasts_its_ttl
  FROM dlock.lease WHERE key = 'tp:late3';
SAVEPOINT sp2;
SELECT pg_sleep(0.1);
SELECT dlock_renew('tp:late3', 'h1', '3 hours') AS renewed_in_savepoint;
RELEASE SAVEPOINT sp2;
SELECT expires_at >= now() + interval '400 ms' + interval '3 hours' AS renewed_from_the_call
  FROM dlock.lease WHERE key = 'tp:late3';
COMMIT;
-- a short lease taken late in a long transaction is live, and fences,
-- right after it was taken (one plpgsql block: no gap between the calls;
-- 5 s: far longer than a loaded machine's pause between them)
BEGIN;
SELECT pg_sleep(5.2);
DO $$
DECLARE
  t bigint := dlock_acquire('tp:late4', 'h1', '5 s');
BEGIN
  RAISE NOTICE 'late 5 s lease: acquired %, valid %, renewed %',
    t IS NOT NULL, dlock_validate('tp:late4', 'h1', t), dlock_renew('tp:late4', 'h1', '5 s', t);
END $$;
COMMIT;

-- claims and their renewals, late in a transaction
SELECT dlock_unclaim('tp_jobs', 'w1') AS w1_gave_back;
BEGIN;
SELECT pg_sleep(0.3);
SELECT count(*) AS claimed FROM dlock_claim(NULL::tp_jobs, 'c1', 3, '1 hour', 'id <= 3');
SELECT count(*) AS claimed_at_the_call FROM dlock.claim
 WHERE relid = 'tp_jobs'::regclass AND holder = 'c1'
   AND claimed_at >= now() + interval '300 ms' AND expires_at - claimed_at = interval '1 hour';
SELECT pg_sleep(0.2);
SELECT dlock_renew_claims('tp_jobs', 'c1', '2 hours') AS renewed;
SELECT count(*) AS renewed_from_the_call FROM dlock.claim
 WHERE relid = 'tp_jobs'::regclass AND holder = 'c1'
   AND expires_at >= now() + interval '500 ms' + interval '2 hours';
SELECT pg_sleep(0.2);
SELECT dlock_renew_claims('tp_jobs', 'c1') AS renewed_with_its_own_ttl;
SELECT count(*) AS renewed_from_the_call FROM dlock.claim
 WHERE relid = 'tp_jobs'::regclass AND holder = 'c1'
   AND expires_at >= now() + interval '700 ms' + interval '2 hours';
COMMIT;
-- autocommit, late in its statement
WITH s AS MATERIALIZED (SELECT pg_sleep(0.3))
SELECT statement_timestamp() AS st, (SELECT count(*) FROM dlock_claim(NULL::tp_jobs, 'c2', 2, '1 hour', 'id BETWEEN 4 AND 10')) AS claimed
  FROM s \gset
SELECT :claimed AS claimed, count(*) AS claimed_at_the_call FROM dlock.claim
 WHERE relid = 'tp_jobs'::regclass AND holder = 'c2'
   AND claimed_at >= :'st'::timestamptz + interval '300 ms' AND expires_at - claimed_at = interval '1 hour';
-- a 5 s claim made late in a long transaction is live right after
BEGIN;
SELECT pg_sleep(5.2);
DO $$
DECLARE
  n bigint := (SELECT count(*) FROM dlock_claim(NULL::tp_jobs, 'c3', 1, '5 s', 'id = 50'));
BEGIN
  RAISE NOTICE 'late 5 s claim: claimed %, fenced %, renewed %',
    n, dlock_claimed('tp_jobs', 50, 'c3'), dlock_renew_claims('tp_jobs', 'c3', '5 s');
END $$;
COMMIT;

--
-- expiry on the current clock: leases and claims that ran out during a
-- transaction are lost to every function in it (taken for an hour, so
-- that they are live when read first however slow the machine, then
-- renewed for 300 ms)
--
SELECT dlock_acquire('tp:exp', 'h1', '1 hour') AS t_exp \gset
SELECT count(*) AS claimed FROM dlock_claim(NULL::tp_jobs, 'e1', 2, '1 hour', 'id IN (60, 61)');
BEGIN;
SELECT dlock_validate('tp:exp', 'h1', :t_exp) AS valid_before;
SELECT dlock_claimed('tp_jobs', 60, 'e1') AS fenced_before;
ROLLBACK;
SELECT dlock_renew('tp:exp', 'h1', '300 ms', :t_exp) AS renewed_for_300ms,
       dlock_renew_claims('tp_jobs', 'e1', '300 ms') AS claims_renewed_for_300ms;
BEGIN;
SELECT pg_sleep(0.4);
SELECT dlock_release('tp:exp', 'h1') AS released_after_expiry;
SELECT dlock_renew('tp:exp', 'h1') AS renewed_after_expiry;
SELECT dlock_validate('tp:exp', 'h1', :t_exp) AS valid_after_expiry;
SELECT dlock_claimed('tp_jobs', 60, 'e1') AS fenced_after_expiry;
SELECT dlock_renew_claims('tp_jobs', 'e1') AS claims_renewed_after_expiry;
SELECT dlock_unclaim('tp_jobs', 'e1') AS unclaimed_after_expiry;
SELECT count(*) AS completed_after_expiry FROM dlock_complete('tp_jobs', 'e1', ARRAY[60, 61]);
SELECT dlock_force_release('tp:exp') AS forced_after_expiry;
-- others may take them in the same transaction
SELECT dlock_acquire('tp:exp', 'h2', '1 hour', '0') > :t_exp AS taken_over;
SELECT count(*) AS claimed_again FROM dlock_claim(NULL::tp_jobs, 'e2', 2, '1 hour', 'id IN (60, 61)');
COMMIT;

--
-- dlock_cleanup: lease and claim rows idle for longer than idle go, idle
-- measured on the clock of the call, not the transaction's start
--
SELECT dlock_acquire('tp:idle', 'h1', '1 hour') IS NOT NULL AS acquired;
SELECT dlock_release('tp:idle', 'h1') AS released;
SELECT count(*) AS claimed FROM dlock_claim(NULL::tp_jobs, 'i1', 1, '100 ms', 'id = 90');
BEGIN;
SELECT pg_sleep(0.5);
SELECT dlock_cleanup('1 hour') >= 0 AS swept_the_old;
SELECT (SELECT count(*) FROM dlock.lease WHERE key = 'tp:idle') AS lease_row_kept,
       (SELECT count(*) FROM dlock.claim WHERE relid = 'tp_jobs'::regclass AND key = '90') AS claim_row_kept;
SELECT dlock_cleanup('300 ms') > 0 AS swept;
SELECT (SELECT count(*) FROM dlock.lease WHERE key = 'tp:idle') AS lease_row_left,
       (SELECT count(*) FROM dlock.claim WHERE relid = 'tp_jobs'::regclass AND key = '90') AS claim_row_left;
COMMIT;

-- and claims sweep idle claim rows by themselves now and then (about one
-- claim in 64 that claims something, in a transaction of its own): with
-- dlock.idle_key_lifetime = 0, one-row claims given back at once, a
-- transaction each, until a sweep has deleted some
SET dlock.idle_key_lifetime = 0;
CREATE TABLE tp_sweep (id int PRIMARY KEY);
INSERT INTO tp_sweep SELECT g FROM generate_series(1, 5000) g;
CREATE PROCEDURE pg_temp.tp_claim_until_swept() LANGUAGE plpgsql AS $$
DECLARE
  i int := 0;
  d bigint;
  deleted bigint := 0;
BEGIN
  WHILE deleted = 0 AND i < 5000 LOOP
    i := i + 1;
    PERFORM count(*) FROM dlock_claim(NULL::tp_sweep, 's', 1, '1 min', 'id = ' || i);
    PERFORM dlock_unclaim('tp_sweep', 's');
    SELECT n_tup_del INTO d FROM pg_stat_xact_all_tables WHERE relid = 'dlock.claim'::regclass;
    deleted := deleted + coalesce(d, 0);
    COMMIT;
  END LOOP;
  RAISE NOTICE 'a claim swept idle claim rows: %', deleted > 0;
END $$;
CALL pg_temp.tp_claim_until_swept();
RESET dlock.idle_key_lifetime;
DROP TABLE tp_sweep;

--
-- tokens are at or above the server's clock (microseconds since 1970, at
-- most 10 ms below) when they are handed out: a new key, a takeover, a
-- claim (acquired_at and claimed_at are read from the clock just before)
--
SELECT dlock_acquire('tp:tok', 'h1', '1 hour') IS NOT NULL AS new_key,
       dlock_acquire('tp:exp', 'h3', '1 hour') IS NULL AS held;
SELECT dlock_acquire('tp:short', 'h3', '1 min') IS NULL AS held,
       dlock_force_release('tp:short') AS forced;
SELECT dlock_acquire('tp:short', 'h3', '1 ms') IS NOT NULL AS short_lease;
SELECT pg_sleep(0.05);
SELECT dlock_acquire('tp:short', 'h4', '1 hour') IS NOT NULL AS taken_over;
SELECT key, token >= (extract(epoch FROM acquired_at) * 1000000)::bigint - 10000 AS token_at_clock
  FROM dlock.lease WHERE key IN ('tp:tok', 'tp:short') ORDER BY key;
SELECT count(*) AS claimed FROM dlock_claim(NULL::tp_jobs, 'tk', 2, '1 hour', 'id IN (70, 71)');
SELECT key, token >= (extract(epoch FROM claimed_at) * 1000000)::bigint - 10000 AS token_at_clock
  FROM dlock.claim WHERE relid = 'tp_jobs'::regclass AND holder = 'tk' ORDER BY key;

-- clean up
SELECT count(*) FILTER (WHERE dlock_force_release(key)) > 0 AS force_released
  FROM (SELECT key FROM dlock_locks WHERE key LIKE 'tp:%') s;
SELECT sum(dlock_release_all(h)) >= 0 AS done
  FROM unnest(ARRAY['h1', 'h2', 'h3', 'h4', 'w1', 'c1', 'c2', 'c3', 'e1', 'e2', 'tk']) h;
SELECT count(*) AS leases_left FROM dlock_locks WHERE key LIKE 'tp:%';
DROP TABLE tp_jobs;
