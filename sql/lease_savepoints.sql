--
-- lease_savepoints: resources across subtransaction aborts (issue 35).
-- Acquires, fences, renewals and releases of every shape (a lease, a
-- semaphore's slot, a shared lease, several keys, a wait that runs out),
-- each statement failing after them and rolled back to its savepoint,
-- thousands of times in one transaction: no key lock, queue entry or
-- lease is left behind, and the transaction's memory stays bounded (the
-- watch events of rolled-back grants are freed with their savepoint).
-- Keys used here start with 'sp:'.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT dlock_acquire('sp:held', 'other', '1 h') AS held \gset
SELECT dlock_acquire('sp:renew', 'h', '1 h') AS rt \gset

-- one failed statement of every shape; the error comes after the calls
-- (a volatile division by zero, which the planner cannot fold)
CREATE FUNCTION pg_temp.churn(n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..n LOOP
    BEGIN
      PERFORM dlock_validate('sp:lease', 'h', dlock_acquire('sp:lease', 'h', '1 h')),
              dlock_validate('sp:sem', 'h', dlock_acquire('sp:sem', 'h', '1 h', '0', 3)),
              dlock_validate('sp:sh', 'h', dlock_acquire_shared('sp:sh', 'h', '1 h')),
              dlock_acquire_all(ARRAY['sp:a', 'sp:b'], 'h', '1 h'),
              dlock_renew('sp:renew', 'h'),
              dlock_release('sp:held', 'other'),
              dlock_release_all('h'),
              1 / (random() * 0)::int;
    EXCEPTION WHEN division_by_zero THEN NULL;
    END;
    IF i % 100 = 0 THEN
      BEGIN
        PERFORM dlock_acquire('sp:held', 'h', '1 h', '1 ms'), 1 / (random() * 0)::int;
      EXCEPTION WHEN division_by_zero THEN NULL;
      END;
    END IF;
  END LOOP;
END $$;

CREATE TEMP TABLE sp_m (n int, locks bigint, xact_bytes bigint);
CREATE FUNCTION pg_temp.measure(n int) RETURNS void LANGUAGE sql AS $$
  INSERT INTO sp_m
  SELECT n,
         (SELECT count(*) FROM pg_locks
           WHERE pid = pg_backend_pid() AND locktype = 'advisory'),
         (SELECT sum(total_bytes) FROM pg_backend_memory_contexts
           WHERE name = 'TopTransactionContext')
$$;

BEGIN;
SELECT pg_temp.measure(0);
SELECT pg_temp.churn(1500);
SELECT pg_temp.measure(1500);
SELECT pg_temp.churn(1500);
SELECT pg_temp.measure(3000);
-- no key lock left by the rolled-back statements
SELECT n, locks FROM sp_m ORDER BY n;
-- the second 1,500 statements did not grow the transaction's memory by
-- what they allocated (about 1.5 kB each before issue 35), only by what
-- PostgreSQL keeps of a rolled-back subtransaction (a few bytes)
SELECT b.xact_bytes - a.xact_bytes < 262144 AS memory_bounded
  FROM sp_m a, sp_m b WHERE a.n = 1500 AND b.n = 3000;
-- an explicit savepoint, rolled back after an error in the same statement
SAVEPOINT s;
SELECT dlock_acquire('sp:sem', 'h', '1 h', '0', 3) IS NOT NULL AS sem, 1 / (random() * 0)::int;
ROLLBACK TO SAVEPOINT s;
SELECT count(*) AS locks_after_rollback_to FROM pg_locks
 WHERE pid = pg_backend_pid() AND locktype = 'advisory';
COMMIT;

-- nothing is left queued or held by 'h' but the lease it held before
SELECT count(*) AS waiters FROM dlock_waiters WHERE key LIKE 'sp:%';
SELECT key, holder FROM dlock_locks WHERE key LIKE 'sp:%' ORDER BY key;
SELECT dlock_release('sp:held', 'other', :held) AND dlock_release('sp:renew', 'h', :rt)
       AS released;
