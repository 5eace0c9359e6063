--
-- hostile_input_args: every dlock function against bad arguments, and the
-- extremes that are valid.
--
-- Nothing may crash, nothing may be hijacked, nothing may change.  Every
-- check prints a boolean, a count or a SQLSTATE.  pg_temp.try(sql) runs one
-- statement and returns 'ok' or the SQLSTATE of its error;
-- pg_temp.fingerprint() is an md5 over every row of dlock.lease and
-- dlock.claim, the token sequence and the user tables of these tests, so
-- "unchanged" means not one byte of them changed.  The roles, tables, live
-- leases and claims and these helpers are include/hostile_setup.sql's.
--
-- The hostile_input_* files: _args (bad arguments), _lookalikes (planted
-- functions, operators and tables), _rights (code run on a role's behalf,
-- session settings, other roles' leases and claims).  Objects planted to
-- derail CREATE EXTENSION: hostile_extension.  lease_roles covers the basic
-- role separation of leases and the search_path shadowing of the lease
-- functions; claim_roles and claim_errors the basic privileges and errors
-- of claims.
--
-- Roles are regress_dlock_hostile_*; everything created is dropped at the end.
--
\i sql/include/hostile_setup.sql

--
-- 1. Bad arguments.  22004: a NULL where a value is required; 22023: a
-- value out of range (empty, longer than the limit, a ttl or wait out of
-- range, n, max_attempts); 42601: filter / order_by that are not one
-- expression / one ORDER BY list.  Polymorphic arguments given an untyped
-- NULL cannot even be resolved (42804, from the parser), except
-- dlock_claim's first, caught by its text overload (42809).
--
INSERT INTO pg_temp.cases (grp, call, expected) VALUES
  ('lease', $$SELECT dlock_acquire(NULL, 'h')$$, '22004'),
  ('lease', $$SELECT dlock_acquire('hostile:k', NULL)$$, '22004'),
  ('lease', $$SELECT dlock_acquire('hostile:k', 'h', NULL)$$, '22004'),
  ('lease', $$SELECT dlock_acquire('hostile:k', 'h', '1 s', NULL)$$, '22004'),
  ('lease', $$SELECT dlock_acquire(NULL, NULL, NULL, NULL)$$, '22004'),
  ('lease', $$SELECT dlock_acquire('', 'h')$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:k', '')$$, '22023'),
  ('lease', $$SELECT dlock_acquire(repeat('x', 1000000), 'h')$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:k', repeat('x', 1000000))$$, '22023'),
  ('lease', $$SELECT dlock_acquire(repeat('x', 1025), 'h')$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:k', repeat('x', 257))$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:k', 'h', '-1 s')$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:k', 'h', '0')$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:k', 'h', '-1 microsecond')$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:k', 'h', '1 mon -30 days')$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:k', 'h', '1000 years')$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:k', 'h', '178000000 years')$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:k', 'h', '-178000000 years')$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:k', 'h', '2147483647 days 2147483647 hours')$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:k', 'h', '1 s', '-1 s')$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:k', 'h', '1 s', '1000 years')$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:k', 'h', '1 s', '-178000000 years')$$, '22023'),
  ('lease', $$SELECT dlock_acquire('hostile:held', 'a', '-1 s')$$, '22023'),
  ('lease', $$SELECT dlock_release(NULL, 'a')$$, '22004'),
  ('lease', $$SELECT dlock_release('hostile:held', NULL)$$, '22004'),
  ('lease', $$SELECT dlock_release('', 'a')$$, '22023'),
  ('lease', $$SELECT dlock_release('hostile:held', '')$$, '22023'),
  ('lease', $$SELECT dlock_release(repeat('x', 1000000), 'a')$$, '22023'),
  ('lease', $$SELECT dlock_release('hostile:held', repeat('x', 1000000))$$, '22023'),
  ('lease', $$SELECT dlock_renew(NULL, 'a')$$, '22004'),
  ('lease', $$SELECT dlock_renew('hostile:held', NULL)$$, '22004'),
  ('lease', $$SELECT dlock_renew('', 'a')$$, '22023'),
  ('lease', $$SELECT dlock_renew('hostile:held', '')$$, '22023'),
  ('lease', $$SELECT dlock_renew(repeat('x', 1000000), 'a')$$, '22023'),
  ('lease', $$SELECT dlock_renew('hostile:held', repeat('x', 1000000))$$, '22023'),
  ('lease', $$SELECT dlock_renew('hostile:held', 'a', '-1 s')$$, '22023'),
  ('lease', $$SELECT dlock_renew('hostile:held', 'a', '0')$$, '22023'),
  ('lease', $$SELECT dlock_renew('hostile:held', 'a', '1000 years')$$, '22023'),
  ('lease', $$SELECT dlock_renew('hostile:held', 'a', '-178000000 years')$$, '22023'),
  ('lease', $$SELECT dlock_validate(NULL, 'a', 1)$$, '22004'),
  ('lease', $$SELECT dlock_validate('hostile:held', NULL, 1)$$, '22004'),
  ('lease', $$SELECT dlock_validate('hostile:held', 'a', NULL)$$, '22004'),
  ('lease', $$SELECT dlock_validate('', 'a', 1)$$, '22023'),
  ('lease', $$SELECT dlock_validate('hostile:held', '', 1)$$, '22023'),
  ('lease', $$SELECT dlock_validate(repeat('x', 1000000), 'a', 1)$$, '22023'),
  ('lease', $$SELECT dlock_validate('hostile:held', repeat('x', 1000000), 1)$$, '22023'),
  ('lease', $$SELECT dlock_release_all(NULL)$$, '22004'),
  ('lease', $$SELECT dlock_release_all('')$$, '22023'),
  ('lease', $$SELECT dlock_release_all(repeat('x', 1000000))$$, '22023'),
  ('lease-operator', $$SELECT dlock_force_release(NULL)$$, '22004'),
  ('lease-operator', $$SELECT dlock_force_release('')$$, '22023'),
  ('lease-operator', $$SELECT dlock_force_release(repeat('x', 1000000))$$, '22023'),
  ('lease-operator', $$SELECT dlock_cleanup('-1 s')$$, '22023'),
  ('lease-operator', $$SELECT dlock_cleanup('-178000000 years')$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL, 'h', 1)$$, '42809'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::int, 'h', 1)$$, '42809'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, NULL, 1)$$, '22004'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', NULL)$$, '22004'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, NULL)$$, '22004'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, '', 1)$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, repeat('x', 1000000), 1)$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 0)$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', -1)$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 2147483647)$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', -2147483648)$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, '-1 s')$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, '0')$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, '1000 years')$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, '178000000 years')$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, max_attempts => 0)$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, max_attempts => -5)$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, max_attempts => -2147483648)$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, filter => '')$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, filter => E' \n\t ')$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, filter => 'true; ' || repeat('x ', 500000))$$, '42601'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, filter => 'true) OR (' || repeat('x ', 500000))$$, '42601'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, filter => repeat('(', 500000) || 'true' || repeat(')', 500000))$$, '42601'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, filter => 'true ' || repeat(')', 1000000))$$, '42601'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, filter => 'false --' || repeat('x', 1000000))$$, 'ok'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, filter => 'id = $1')$$, '42601'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, order_by => '')$$, '22023'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, order_by => repeat('id, ', 250000) || 'id LIMIT 1')$$, '42601'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, order_by => 'id; ' || repeat('x ', 500000))$$, '42601'),
  ('claim', $$SELECT * FROM dlock_claim(NULL::hostile_big, 'h', 1, order_by => repeat('(', 500000) || 'id' || repeat(')', 500000))$$, '42601'),
  ('claim', $$SELECT dlock_claimed(NULL, 1, 'h')$$, '22004'),
  ('claim', $$SELECT dlock_claimed('hostile_big', NULL::bigint, 'h')$$, '22004'),
  ('claim', $$SELECT dlock_claimed('hostile_big', NULL, 'h')$$, '42804'),
  ('claim', $$SELECT dlock_claimed('hostile_big', 1, NULL)$$, '22004'),
  ('claim', $$SELECT dlock_claimed('hostile_big', 1, '')$$, '22023'),
  ('claim', $$SELECT dlock_claimed('hostile_big', 1, repeat('x', 1000000))$$, '22023'),
  ('claim', $$SELECT dlock_claimed('hostile_big', 'abc'::text, 'h')$$, '22P02'),
  ('claim', $$SELECT dlock_claimed('hostile_big', 1e30, 'h')$$, '22003'),
  ('claim', $$SELECT dlock_claimed(0::regclass, 1, 'h')$$, '42P01'),
  ('claim', $$SELECT dlock_claimed('hostile_big_pkey', 1, 'h')$$, '42809'),
  ('claim', $$SELECT dlock_unclaim(NULL, 'keep')$$, '22004'),
  ('claim', $$SELECT dlock_unclaim('hostile_keep', NULL)$$, '22004'),
  ('claim', $$SELECT dlock_unclaim('hostile_keep', '')$$, '22023'),
  ('claim', $$SELECT dlock_unclaim('hostile_keep', repeat('x', 1000000))$$, '22023'),
  ('claim', $$SELECT dlock_unclaim(NULL, 'keep', ARRAY[1])$$, '22004'),
  ('claim', $$SELECT dlock_unclaim('hostile_keep', NULL, ARRAY[1])$$, '22004'),
  ('claim', $$SELECT dlock_unclaim('hostile_keep', 'keep', NULL::int[])$$, '22004'),
  ('claim', $$SELECT dlock_unclaim('hostile_keep', 'keep', NULL)$$, '42804'),
  ('claim', $$SELECT dlock_unclaim('hostile_keep', 'keep', ARRAY[1, NULL])$$, '22004'),
  ('claim', $$SELECT dlock_unclaim('hostile_keep', 'keep', ARRAY['abc'])$$, '22P02'),
  ('claim', $$SELECT dlock_unclaim('hostile_keep', 'keep', ARRAY[1e30])$$, '22003'),
  ('claim', $$SELECT dlock_unclaim('hostile_keep', repeat('x', 1000000), ARRAY[1])$$, '22023'),
  ('claim', $$SELECT dlock_renew_claims(NULL, 'keep')$$, '22004'),
  ('claim', $$SELECT dlock_renew_claims('hostile_keep', NULL)$$, '22004'),
  ('claim', $$SELECT dlock_renew_claims('hostile_keep', '')$$, '22023'),
  ('claim', $$SELECT dlock_renew_claims('hostile_keep', repeat('x', 1000000))$$, '22023'),
  ('claim', $$SELECT dlock_renew_claims('hostile_keep', 'keep', '-1 s')$$, '22023'),
  ('claim', $$SELECT dlock_renew_claims('hostile_keep', 'keep', '0')$$, '22023'),
  ('claim', $$SELECT dlock_renew_claims('hostile_keep', 'keep', '1000 years')$$, '22023'),
  ('claim', $$SELECT dlock_renew_claims('hostile_keep', 'keep', '-178000000 years')$$, '22023'),
  ('claim-operator', $$SELECT dlock_reset_claims(NULL, ARRAY[1])$$, '22004'),
  ('claim-operator', $$SELECT dlock_reset_claims('hostile_keep', NULL::int[])$$, '22004'),
  ('claim-operator', $$SELECT dlock_reset_claims('hostile_keep', ARRAY[1, NULL])$$, '22004'),
  ('claim-operator', $$SELECT dlock_reset_claims('hostile_keep', ARRAY['abc'])$$, '22P02');

-- an ordinary role (the owner of the tables) calls the functions open to PUBLIC
SET ROLE regress_dlock_hostile_a;
SELECT call, expected, pg_temp.try(call) AS got
  FROM pg_temp.cases WHERE grp IN ('lease', 'claim') ORDER BY ord;
RESET ROLE;
-- the operators' functions, as the superuser
SELECT call, expected, pg_temp.try(call) AS got
  FROM pg_temp.cases WHERE grp IN ('lease-operator', 'claim-operator') ORDER BY ord;
-- the server still answers, nothing changed
SELECT 1 AS alive;
SELECT pg_temp.fingerprint() = :'fp0' AS unchanged,
       pg_temp.session_state() = :'state0' AS session_as_before;

-- extremes that are valid must work (and change nothing when they find nothing)
SET ROLE regress_dlock_hostile_a;
SELECT dlock_validate('hostile:held', 'a', 9223372036854775807) AS validate_max_token,
       dlock_validate('hostile:held', 'a', -9223372036854775808) AS validate_min_token,
       dlock_release('hostile:held', 'a', 0) AS release_token_0,
       dlock_renew('hostile:held', 'a', NULL, -1) AS renew_token_minus_1;
SELECT dlock_validate('hostile:held', 'a', :held_token) AS still_valid;
SELECT count(*) AS filter_1mb_string
  FROM dlock_claim(NULL::hostile_big, 'h', 5, '1 h', 'id::text = ' || quote_literal(repeat('x', 1000000)));
SELECT count(*) AS filter_1mb_comment
  FROM dlock_claim(NULL::hostile_big, 'h', 5, '1 h', '/* ' || repeat('x', 1000000) || ' */ false');
SELECT count(*) AS filter_100k_terms
  FROM dlock_claim(NULL::hostile_big, 'h', 5, '1 h', repeat('false OR ', 100000) || 'false');
SELECT count(*) AS order_by_1mb
  FROM dlock_claim(NULL::hostile_big, 'h', 5, '1 h', 'false', repeat(' ', 1000000) || 'id DESC');
SELECT dlock_claimed('hostile_text', repeat('x', 1000000), 'h') AS claimed_1mb_key,
       dlock_unclaim('hostile_text', 'h', ARRAY[repeat('x', 1000000)]) AS unclaimed_1mb_key,
       dlock_unclaim('hostile_keep', 'keep', '{}'::int[]) AS unclaimed_no_keys,
       dlock_renew_claims('hostile_keep', 'nobody', '30 days') AS renewed_none;
-- a ttl right at the limit, a month (counted as 30 days), a wait of one day
-- on a free key, and an interval whose parts overflow 64 bits on their own
-- but whose value is just under 20 hours
SELECT dlock_acquire('hostile:e1', 'h', '30 days') IS NOT NULL AS ttl_30_days,
       dlock_acquire('hostile:e2', 'h', '1 mon') IS NOT NULL AS ttl_1_month,
       dlock_acquire('hostile:e3', 'h', '1 s', '1 day') IS NOT NULL AS wait_1_day;
SELECT dlock_acquire('hostile:e4', 'h', interval '106751992 days -2562047788:00:54.775807')
         IS NOT NULL AS ttl_20_hours_in_odd_parts;
SELECT dlock_release_all('h') AS released;
RESET ROLE;
SELECT 1 AS alive;


--
-- clean up
--
\i sql/include/hostile_cleanup.sql
