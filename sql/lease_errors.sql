--
-- lease_errors: every bad input of the contract, for every function.
--
-- Each failing call is followed by a check of its SQLSTATE and of the lease
-- table: one lease ('err:held') exists before the first call and after each,
-- with the same token.  Keys used here start with 'err:'.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT dlock_acquire('err:held', 'h', '1 hour') AS t \gset
SELECT count(*) AS leases FROM dlock_locks;

--
-- dlock_acquire(key, holder, ttl, wait)
--
-- key
SELECT dlock_acquire(NULL, 'h');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('', 'h');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire(repeat('k', 1025), 'h');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
-- a key is measured in bytes, not characters: 513 two-byte characters
SELECT dlock_acquire(repeat('é', 513), 'h');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
-- holder
SELECT dlock_acquire('err:k', NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('err:k', '');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('err:k', repeat('h', 257));
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
-- ttl
SELECT dlock_acquire('err:k', 'h', NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('err:k', 'h', '0');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('err:k', 'h', '-1 s');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('err:k', 'h', '1 day -25 hours');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('err:k', 'h', '30 days 1 microsecond');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('err:k', 'h', '1 month 1 s');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('err:k', 'h', '721 hours');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
-- wait
SELECT dlock_acquire('err:k', 'h', '1 hour', NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('err:k', 'h', '1 hour', '-1 microsecond');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('err:k', 'h', '1 hour', '1 day 1 microsecond');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('err:k', 'h', '1 hour', '25 hours');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
-- the same checks when the key is held by someone else (no short cut)
SELECT dlock_acquire('err:held', 'other', '-1 s');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('err:held', 'other', '1 hour', '-1 s');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('err:held', 'h', '31 days');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;

--
-- dlock_release(key, holder, token)
--
SELECT dlock_release(NULL, 'h');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_release('', 'h');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_release(repeat('k', 1025), 'h');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_release('err:held', NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_release('err:held', '');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_release('err:held', repeat('h', 257));
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;

--
-- dlock_renew(key, holder, ttl, token); a NULL ttl is the default
--
SELECT dlock_renew(NULL, 'h');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_renew('', 'h');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_renew(repeat('k', 1025), 'h');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_renew('err:held', NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_renew('err:held', '');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_renew('err:held', repeat('h', 257));
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_renew('err:held', 'h', '0');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_renew('err:held', 'h', '-1 s');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_renew('err:held', 'h', '30 days 1 microsecond');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_renew('err:held', 'h', '1 month 1 s', :t);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;

--
-- dlock_validate(key, holder, token)
--
SELECT dlock_validate(NULL, 'h', :t);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_validate('', 'h', :t);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_validate(repeat('k', 1025), 'h', :t);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_validate('err:held', NULL, :t);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_validate('err:held', '', :t);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_validate('err:held', repeat('h', 257), :t);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_validate('err:held', 'h', NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;

--
-- dlock_release_all(holder)
--
SELECT dlock_release_all(NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_release_all('');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_release_all(repeat('h', 257));
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;

--
-- dlock_force_release(key)
--
SELECT dlock_force_release(NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_force_release('');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_force_release(repeat('k', 1025));
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;

--
-- a 1 MB key or holder is refused cleanly (and the message stays short)
--
SELECT dlock_acquire(k, 'h') FROM (SELECT repeat('x', 1000000) AS k) s WHERE length(k) > 0;
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_acquire('err:k', h) FROM (SELECT repeat('x', 1000000) AS h) s WHERE length(h) > 0;
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_release(k, 'h') FROM (SELECT repeat('x', 1000000) AS k) s WHERE length(k) > 0;
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT dlock_validate('err:held', h, :t) FROM (SELECT repeat('x', 1000000) AS h) s WHERE length(h) > 0;
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate, count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;
SELECT count(*) AS found FROM dlock_locks WHERE key = repeat('x', 1000000);

--
-- an error inside a transaction block aborts it: the acquire before it is gone
--
BEGIN;
SELECT dlock_acquire('err:xact', 'h', '1 hour') IS NOT NULL AS acquired;
SELECT dlock_acquire('err:xact2', 'h', '0');
ROLLBACK;
SELECT count(*) AS leases, bool_and(token = :t) AS held_lease_intact FROM dlock_locks;

--
-- the limits themselves are accepted
--
SELECT dlock_acquire(repeat('k', 1024), repeat('h', 256), '30 days', '1 day') IS NOT NULL
       AS max_key_holder_ttl_wait;
SELECT dlock_acquire('err:month', 'h', '1 month') IS NOT NULL AS ttl_one_month;
SELECT dlock_acquire('err:hours', 'h', '720 hours', '24 hours') IS NOT NULL AS ttl_720_hours;
SELECT dlock_acquire('err:tiny', 'tiny', '1 microsecond') IS NOT NULL AS ttl_one_microsecond;
SELECT dlock_renew('err:month', 'h', '30 days') AS renew_max_ttl;
SELECT dlock_validate(repeat('k', 1024), repeat('h', 256), token) AS validate_max
  FROM dlock_locks WHERE key = repeat('k', 1024);
SELECT dlock_release(repeat('k', 1024), repeat('h', 256)) AS release_max;
SELECT dlock_release_all('h') AS released;
SELECT count(*) AS leases FROM dlock_locks;
