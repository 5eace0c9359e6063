--
-- idle_sweep: the sweep that acquires and claims run by themselves now and
-- then (about one acquire in 1,024 that writes: src/lease/lease_grant.c dlock_lease_attempt;
-- about one claim in 64 that takes rows: src/claim/claim_manage.c
-- dlock_claim_maybe_cleanup) deletes lease and claim rows that have been
-- free or expired for longer than dlock.idle_key_lifetime, and never a
-- live lease, a live claim, a poisoned claim, nor a row idle for less than
-- that (README: "idle keys are deleted after dlock.idle_key_lifetime").
--
-- dlock.idle_key_lifetime (superuser, 0 s - 1 year) is set to 1 min.  The
-- old idle rows are made so by moving their expires_at two hours back
-- (dlock judges idleness by expires_at alone).  Then, a transaction each,
-- an acquire and release of one key and a claim and give-back of one row,
-- until the old idle rows are gone: the sweeps are random, so at most
-- 20,000 rounds (no sweep in 20,000 acquires: a chance of about 3e-9).
-- With a sweep removed (scripts/mutate.sh no-lease-sweep, no-claim-sweep)
-- its old rows stay and this test fails.
--
-- dlock.lease is compacted first (VACUUM FULL): the lease sweep reads the
-- whole of a table of at most 32 blocks, but only a random window of 32
-- blocks of a bigger one, and tests run before this one (lease_basic) may
-- have left hundreds of empty blocks; 20,000 rounds would not be enough
-- then.  The windowed sweep is lease_basic's test.
--
SET dlock.idle_key_lifetime = '1 min';
SET synchronous_commit = off;
VACUUM FULL dlock.lease;
SELECT pg_relation_size('dlock.lease') <= 32 * current_setting('block_size')::int
       AS lease_table_small;

-- leases: old free, old expired (held, ran out 2 hours ago), live,
-- recently freed
SELECT dlock_acquire('sw:old-free', 'h', '1 hour') IS NOT NULL AS acquired;
SELECT dlock_release('sw:old-free', 'h') AS released;
SELECT dlock_acquire('sw:old-expired', 'h', '1 hour') IS NOT NULL AS acquired;
SELECT dlock_acquire('sw:live', 'h', '1 hour') IS NOT NULL AS acquired;
SELECT dlock_acquire('sw:recent-free', 'h', '1 hour') IS NOT NULL AS acquired;
SELECT dlock_release('sw:recent-free', 'h') AS released;
UPDATE dlock.lease SET expires_at = now() - interval '2 hours'
 WHERE key IN ('sw:old-free', 'sw:old-expired');

-- claims on sw_jobs: rows 1 and 2 given back and 3 expired, long ago;
-- 4 live; 5 poisoned (claimed once, expired, then refused by max_attempts
-- 1) long ago; 6 given back just now; 10 is for the rounds
CREATE TABLE sw_jobs (id int PRIMARY KEY);
INSERT INTO sw_jobs SELECT g FROM generate_series(1, 10) g;
SELECT count(*) AS claimed FROM dlock_claim(NULL::sw_jobs, 'w', 2, '1 hour', 'id IN (1, 2)');
SELECT dlock_unclaim('sw_jobs', 'w') AS gave_back;
SELECT count(*) AS claimed FROM dlock_claim(NULL::sw_jobs, 'w', 1, '10 ms', 'id = 3');
SELECT count(*) AS claimed FROM dlock_claim(NULL::sw_jobs, 'w-live', 1, '1 hour', 'id = 4');
SELECT count(*) AS claimed FROM dlock_claim(NULL::sw_jobs, 'w', 1, '10 ms', 'id = 5');
SELECT pg_sleep(0.05);
SELECT count(*) AS poisons_5
  FROM dlock_claim(NULL::sw_jobs, 'w', 1, '1 hour', 'id = 5', max_attempts => 1);
SELECT count(*) AS claimed FROM dlock_claim(NULL::sw_jobs, 'w', 1, '1 hour', 'id = 6');
SELECT dlock_unclaim('sw_jobs', 'w') AS gave_back;
UPDATE dlock.claim SET expires_at = now() - interval '2 hours'
 WHERE relid = 'sw_jobs'::regclass AND key IN ('1', '2', '3', '5');

SELECT key, holder IS NOT NULL AS held, expires_at > clock_timestamp() AS live
  FROM dlock.lease WHERE key LIKE 'sw:%' ORDER BY key;
SELECT key, holder IS NOT NULL AS held, expires_at > clock_timestamp() AS live,
       poisoned_at IS NOT NULL AS poisoned
  FROM dlock.claim WHERE relid = 'sw_jobs'::regclass ORDER BY key::int;

-- dlock_cleanup is not called anywhere below: only the sweeps delete
CREATE PROCEDURE pg_temp.rounds_until_swept() LANGUAGE plpgsql AS $$
DECLARE
  rounds int := 0;
  leases_left bigint;
  claims_left bigint;
BEGIN
  LOOP
    SELECT count(*) INTO leases_left FROM dlock.lease
     WHERE key IN ('sw:old-free', 'sw:old-expired');
    SELECT count(*) INTO claims_left FROM dlock.claim
     WHERE relid = 'sw_jobs'::regclass AND key IN ('1', '2', '3');
    EXIT WHEN (leases_left = 0 AND claims_left = 0) OR rounds >= 20000;
    rounds := rounds + 1;
    IF leases_left > 0 THEN
      -- a grant (not an extension): the acquires that may sweep
      PERFORM dlock_acquire('sw:churn', 'churn', '1 min');
      PERFORM dlock_release('sw:churn', 'churn');
    END IF;
    IF claims_left > 0 THEN
      PERFORM count(*) FROM dlock_claim(NULL::sw_jobs, 'churn', 1, '1 min', 'id = 10');
      PERFORM dlock_unclaim('sw_jobs', 'churn');
    END IF;
    COMMIT;
  END LOOP;
  RAISE NOTICE 'old idle lease rows left: %, old idle claim rows left: %',
    leases_left, claims_left;
END $$;
CALL pg_temp.rounds_until_swept();

-- gone: the old idle rows; kept: the live lease, the recently freed key
-- (and sw:churn), the live claim, the poisoned row (idle for two hours, but
-- poisoned), the recently given-back row (and row 10)
SELECT key, holder IS NOT NULL AS held, expires_at > clock_timestamp() AS live
  FROM dlock.lease WHERE key LIKE 'sw:%' ORDER BY key;
SELECT key, holder IS NOT NULL AS held, expires_at > clock_timestamp() AS live,
       poisoned_at IS NOT NULL AS poisoned
  FROM dlock.claim WHERE relid = 'sw_jobs'::regclass ORDER BY key::int;
SELECT key AS poisoned_kept FROM dlock_dead_claims WHERE table_name = 'sw_jobs'::regclass;

RESET dlock.idle_key_lifetime;
RESET synchronous_commit;
SELECT dlock_release('sw:live', 'h') AS released;
SELECT dlock_release_all('w-live') AS released_all;
SELECT dlock_reset_claims('sw_jobs', ARRAY(SELECT id FROM sw_jobs)) AS reset;
DROP TABLE sw_jobs;
DELETE FROM dlock.lease WHERE key LIKE 'sw:%';
