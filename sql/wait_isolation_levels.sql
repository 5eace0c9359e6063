--
-- wait_isolation_levels: dlock inside REPEATABLE READ and SERIALIZABLE
-- transactions.
--
-- dlock judges a lease by the latest committed state (each of its internal
-- queries runs with a fresh snapshot), not by the snapshot of the calling
-- transaction.  So inside a REPEATABLE READ or SERIALIZABLE transaction:
--  - acquire, validate, renew and release see the transaction's own earlier
--    dlock calls;
--  - a lease that expired after the snapshot was taken can be taken over;
--  - a key released by another session after the snapshot was taken can be
--    acquired, with or without waiting for that release;
--  - a key another session holds is refused (NULL), although the lease is
--    not in the transaction's snapshot at all.
-- "Another session" is a dblink connection (PostgreSQL contrib) in READ
-- COMMITTED, autocommit.  Only results that do not depend on timing are
-- shown.  Runs in one session, so it says nothing about serialization
-- failures between two SERIALIZABLE transactions.
--
CREATE EXTENSION IF NOT EXISTS dblink;
-- libpq connection string for this very server and database
CREATE FUNCTION wil_connstr() RETURNS text LANGUAGE sql AS $$
  SELECT format('host=%s port=%s dbname=%s user=%s application_name=wait_isolation_levels',
                quote_literal(coalesce(nullif(trim(split_part(
                    current_setting('unix_socket_directories'), ',', 1)), ''),
                  'localhost')),
                current_setting('port'), quote_literal(current_database()),
                quote_literal(current_user))
$$;
SELECT dblink_connect('other', wil_connstr());
-- run sql (returning one bigint or boolean) in the other session
CREATE FUNCTION other_bigint(sql text) RETURNS bigint LANGUAGE sql AS $$
  SELECT v FROM dblink('other', sql) AS t(v bigint)
$$;
CREATE FUNCTION other_bool(sql text) RETURNS boolean LANGUAGE sql AS $$
  SELECT v FROM dblink('other', sql) AS t(v boolean)
$$;

-- the result of the query sent with dblink_send_query to the other session
CREATE FUNCTION other_result() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  v boolean;
BEGIN
  SELECT t.v INTO v FROM dblink_get_result('other') AS t(v boolean);
  PERFORM FROM dblink_get_result('other') AS t(v boolean);
  RETURN v;
END $$;
CREATE TABLE wil_stats0 AS SELECT * FROM dlock_stats();

--
-- REPEATABLE READ
--
-- 1. the transaction's own dlock calls
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) AS leases_in_snapshot FROM dlock.lease WHERE key LIKE 'wil:rr:%';
SELECT dlock_acquire('wil:rr:own', 'h1', '1 min') AS tok \gset
SELECT :tok IS NOT NULL AS acquired;
SELECT dlock_validate('wil:rr:own', 'h1', :tok) AS valid;
SELECT dlock_acquire('wil:rr:own', 'h1', '2 min') = :tok AS extended_same_token;
SELECT dlock_renew('wil:rr:own', 'h1', '3 min', :tok) AS renewed;
SELECT dlock_release('wil:rr:own', 'h1') AS released;
SELECT dlock_validate('wil:rr:own', 'h1', :tok) AS valid_after_release;
SELECT dlock_acquire('wil:rr:own', 'h2', '1 min') > :tok AS h2_acquired_newer_token;
COMMIT;
SELECT holder FROM dlock_locks WHERE key = 'wil:rr:own';

-- 2. a lease that expires while the transaction is open: taken over
SELECT dlock_acquire('wil:rr:exp', 'old', '100 ms') AS tok \gset
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT holder FROM dlock.lease WHERE key = 'wil:rr:exp';
SELECT pg_sleep(0.2);
SELECT dlock_acquire('wil:rr:exp', 'new', '1 min') AS tok2 \gset
SELECT :tok2 > :tok AS took_over;
SELECT dlock_validate('wil:rr:exp', 'new', :tok2) AS valid;
COMMIT;

-- 3. waiting in the transaction for a lease to expire
SELECT dlock_acquire('wil:rr:wexp', 'old', '300 ms') AS tok \gset
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT holder FROM dlock.lease WHERE key = 'wil:rr:wexp';
SELECT dlock_acquire('wil:rr:wexp', 'new', '1 min', '5 s') > :tok AS took_over_after_wait;
COMMIT;

-- 4. another session releases after the snapshot was taken: our snapshot
-- still shows its lease, dlock does not
SELECT other_bigint($$SELECT dlock_acquire('wil:rr:rel', 'other', '1 min')$$) AS tok \gset
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT holder FROM dlock.lease WHERE key = 'wil:rr:rel';
SELECT dlock_acquire('wil:rr:rel', 'me', '1 min') IS NULL AS refused;
SELECT other_bool($$SELECT dlock_release('wil:rr:rel', 'other')$$) AS other_released;
SELECT holder FROM dlock.lease WHERE key = 'wil:rr:rel';
SELECT dlock_acquire('wil:rr:rel', 'me', '1 min') AS tok2 \gset
SELECT :tok2 > :tok AS acquired_after_release;
SELECT dlock_validate('wil:rr:rel', 'me', :tok2) AS valid;
COMMIT;
SELECT holder FROM dlock_locks WHERE key = 'wil:rr:rel';

-- 5. waiting in the transaction for a release another session commits
-- 300 ms later
SELECT other_bigint($$SELECT dlock_acquire('wil:rr:wrel', 'other', '1 min')$$) AS tok \gset
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT holder FROM dlock.lease WHERE key = 'wil:rr:wrel';
SELECT dblink_send_query('other',
  $$SELECT dlock_release('wil:rr:wrel', 'other') FROM pg_sleep(0.3)$$) AS sent;
SELECT dlock_acquire('wil:rr:wrel', 'me', '1 min', '5 s') > :tok AS acquired_after_wait;
SELECT other_result() AS other_released;
COMMIT;
SELECT holder FROM dlock_locks WHERE key = 'wil:rr:wrel';

--
-- SERIALIZABLE (the same steps)
--
-- 1. the transaction's own dlock calls
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT count(*) AS leases_in_snapshot FROM dlock.lease WHERE key LIKE 'wil:ser:%';
SELECT dlock_acquire('wil:ser:own', 'h1', '1 min') AS tok \gset
SELECT :tok IS NOT NULL AS acquired;
SELECT dlock_validate('wil:ser:own', 'h1', :tok) AS valid;
SELECT dlock_acquire('wil:ser:own', 'h1', '2 min') = :tok AS extended_same_token;
SELECT dlock_renew('wil:ser:own', 'h1', '3 min', :tok) AS renewed;
SELECT dlock_release('wil:ser:own', 'h1') AS released;
SELECT dlock_validate('wil:ser:own', 'h1', :tok) AS valid_after_release;
SELECT dlock_acquire('wil:ser:own', 'h2', '1 min') > :tok AS h2_acquired_newer_token;
COMMIT;
SELECT holder FROM dlock_locks WHERE key = 'wil:ser:own';

-- 2. a lease that expires while the transaction is open: taken over
SELECT dlock_acquire('wil:ser:exp', 'old', '100 ms') AS tok \gset
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT holder FROM dlock.lease WHERE key = 'wil:ser:exp';
SELECT pg_sleep(0.2);
SELECT dlock_acquire('wil:ser:exp', 'new', '1 min') AS tok2 \gset
SELECT :tok2 > :tok AS took_over;
SELECT dlock_validate('wil:ser:exp', 'new', :tok2) AS valid;
COMMIT;

-- 3. waiting in the transaction for a lease to expire
SELECT dlock_acquire('wil:ser:wexp', 'old', '300 ms') AS tok \gset
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT holder FROM dlock.lease WHERE key = 'wil:ser:wexp';
SELECT dlock_acquire('wil:ser:wexp', 'new', '1 min', '5 s') > :tok AS took_over_after_wait;
COMMIT;

-- 4. another session releases after the snapshot was taken: our snapshot
-- still shows its lease, dlock does not
SELECT other_bigint($$SELECT dlock_acquire('wil:ser:rel', 'other', '1 min')$$) AS tok \gset
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT holder FROM dlock.lease WHERE key = 'wil:ser:rel';
SELECT dlock_acquire('wil:ser:rel', 'me', '1 min') IS NULL AS refused;
SELECT other_bool($$SELECT dlock_release('wil:ser:rel', 'other')$$) AS other_released;
SELECT holder FROM dlock.lease WHERE key = 'wil:ser:rel';
SELECT dlock_acquire('wil:ser:rel', 'me', '1 min') AS tok2 \gset
SELECT :tok2 > :tok AS acquired_after_release;
SELECT dlock_validate('wil:ser:rel', 'me', :tok2) AS valid;
COMMIT;
SELECT holder FROM dlock_locks WHERE key = 'wil:ser:rel';

-- 5. waiting in the transaction for a release another session commits
-- 300 ms later
SELECT other_bigint($$SELECT dlock_acquire('wil:ser:wrel', 'other', '1 min')$$) AS tok \gset
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT holder FROM dlock.lease WHERE key = 'wil:ser:wrel';
SELECT dblink_send_query('other',
  $$SELECT dlock_release('wil:ser:wrel', 'other') FROM pg_sleep(0.3)$$) AS sent;
SELECT dlock_acquire('wil:ser:wrel', 'me', '1 min', '5 s') > :tok AS acquired_after_wait;
SELECT other_result() AS other_released;
COMMIT;
SELECT holder FROM dlock_locks WHERE key = 'wil:ser:wrel';

-- four waits, each ended by a grant
SELECT s.waits - s0.waits AS waits,
       s.handoffs - s0.handoffs AS handoffs,
       s.wait_timeouts - s0.wait_timeouts AS wait_timeouts
  FROM dlock_stats() s, wil_stats0 s0;

-- READ ONLY transactions: a grant must write, so it is refused with
-- read_only_sql_transaction (25006) whatever the isolation level
\set VERBOSITY sqlstate
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
SELECT dlock_acquire('wil:ro', 'h1', '1 min');
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY;
SELECT dlock_acquire('wil:ro', 'h1', '1 min');
ROLLBACK;
\set VERBOSITY default

SELECT count(*) AS waiters_left FROM dlock_waiters;
SELECT dblink_disconnect('other');
DROP FUNCTION wil_connstr(), other_bigint(text), other_bool(text), other_result();
DROP TABLE wil_stats0;
DELETE FROM dlock.lease WHERE key LIKE 'wil:%';
DROP EXTENSION dblink;
