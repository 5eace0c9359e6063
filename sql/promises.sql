--
-- promises: README promises that had no test of their own (issue 17).
--   - the counters of dlock_stats() count what they say (extended,
--     renewals, validation_failures, releases, claims);
--   - give-back and renewal of more than 500 claims at once (they lock
--     their keys 500 at a time);
--   - dlock_cleanup deletes idle lease and claim rows, never live leases,
--     live claims or poisoned claims.
-- Counters are cluster-wide: this test prints differences only.
--

CREATE TEMP TABLE s0 AS SELECT * FROM dlock_stats();

-- extended: re-acquires by the holder; renewals; validation failures
SELECT dlock_acquire('p:a', 'h', '1 min') IS NOT NULL AS acquired;
SELECT dlock_acquire('p:a', 'h', '1 min') IS NOT NULL AS extended_once;
SELECT dlock_renew('p:a', 'h', '1 min') AS renewed;
SELECT dlock_renew('p:a', 'h', '1 min') AS renewed_again;
SELECT dlock_validate('p:a', 'other', 1) AS validated_wrong_holder;
SELECT dlock_validate('p:a', 'h', 1) AS validated_wrong_token;
SELECT dlock_validate('p:a', 'h', (SELECT token FROM dlock_locks WHERE key = 'p:a')) AS validated;
SELECT dlock_release('p:a', 'h') AS released;
SELECT s.acquired - s0.acquired AS acquired,
       s.extended - s0.extended AS extended,
       s.renewals - s0.renewals AS renewals,
       s.validation_failures - s0.validation_failures AS validation_failures,
       s.releases - s0.releases AS releases
  FROM dlock_stats() s, s0;

-- more than 500 claims given back and renewed at once
CREATE TABLE p_jobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0);
INSERT INTO p_jobs SELECT g FROM generate_series(1, 1300) g;
SELECT count(*) AS claimed FROM dlock_claim(NULL::p_jobs, 'w', 1000, '1 min');
SELECT count(*) AS claimed FROM dlock_claim(NULL::p_jobs, 'w', 200, '1 min');
SELECT (SELECT claims FROM dlock_stats()) - (SELECT claims FROM s0) AS claims_counted;
SELECT dlock_renew_claims('p_jobs', 'w', '1 hour') AS renewed_1200;
SELECT count(*) AS live_for_an_hour FROM dlock_claims
 WHERE table_name = 'p_jobs'::regclass AND expires_at > clock_timestamp() + interval '59 min';
SELECT dlock_unclaim('p_jobs', 'w', ARRAY(SELECT generate_series(1, 700))) AS gave_back_700;
SELECT dlock_unclaim('p_jobs', 'w') AS gave_back_the_other_500;
SELECT count(*) AS live_claims_left FROM dlock_claims WHERE table_name = 'p_jobs'::regclass;
-- and claimed again, 1,000 at a time, with their attempts counted
SELECT count(*) AS claimed_again FROM dlock_claim(NULL::p_jobs, 'w2', 1000, '1 min');
SELECT min(attempts), max(attempts) FROM dlock_claims
 WHERE table_name = 'p_jobs'::regclass AND holder = 'w2';
SELECT dlock_release_all('w2') AS released_all;

-- dlock_cleanup: idle rows go, live leases and live or poisoned claims stay
SELECT dlock_acquire('p:live', 'h', '1 hour') IS NOT NULL AS live_lease;
SELECT dlock_acquire('p:idle', 'h', '1 min') IS NOT NULL AS idle_lease;
SELECT dlock_release('p:idle', 'h') AS idle_released;
SELECT count(*) AS held FROM dlock_claim(NULL::p_jobs, 'w3', 3, '1 hour', 'id <= 3');
-- row 1250 (never claimed before) poisoned: claimed twice with max_attempts 2 (ttl 1 ms: expired at once)
SELECT count(*) FROM dlock_claim(NULL::p_jobs, 'w4', 1, '1 ms', 'id = 1250', NULL, 2);
SELECT pg_sleep(0.01);
SELECT count(*) FROM dlock_claim(NULL::p_jobs, 'w4', 1, '1 ms', 'id = 1250', NULL, 2);
SELECT pg_sleep(0.01);
SELECT count(*) AS poisons_1250 FROM dlock_claim(NULL::p_jobs, 'w4', 1, '1 ms', 'id = 1250', NULL, 2);
SELECT key FROM dlock_dead_claims WHERE table_name = 'p_jobs'::regclass;
SELECT dlock_cleanup('0 s') > 0 AS deleted_some;
-- at most 1,000 lease rows and 1,000 claim rows a call: called again, a
-- transaction each, until it returns 0
CREATE PROCEDURE pg_temp.cleanup_all() LANGUAGE plpgsql AS $$
BEGIN
  WHILE dlock_cleanup('0 s') > 0 LOOP
    COMMIT;
  END LOOP;
END $$;
CALL pg_temp.cleanup_all();
SELECT count(*) AS live_lease_kept FROM dlock_locks WHERE key = 'p:live';
SELECT count(*) AS idle_lease_row_gone FROM dlock.lease WHERE key = 'p:idle';
SELECT count(*) AS live_claims_kept FROM dlock_claims
 WHERE table_name = 'p_jobs'::regclass AND holder = 'w3';
SELECT key AS poisoned_kept FROM dlock_dead_claims WHERE table_name = 'p_jobs'::regclass;
SELECT count(*) AS idle_claim_rows_left FROM dlock.claim
 WHERE relid = 'p_jobs'::regclass AND holder IS NULL AND poisoned_at IS NULL;
-- a poisoned row stays out of claims until it is reset
SELECT count(*) AS poisoned_not_claimed FROM dlock_claim(NULL::p_jobs, 'w5', 1, '1 min', 'id = 1250');
SELECT dlock_reset_claims('p_jobs', ARRAY[1250]) AS reset;
SELECT count(*) AS claimed_after_reset FROM dlock_claim(NULL::p_jobs, 'w5', 1, '1 min', 'id = 1250');

SELECT dlock_release_all(h) >= 0 AS done FROM unnest(ARRAY['h', 'w3', 'w4', 'w5']) h;
DROP TABLE p_jobs;
