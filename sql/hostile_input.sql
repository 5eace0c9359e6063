--
-- hostile_input: every dlock function against bad arguments, roles that
-- plant look-alike functions, operators and tables in public and pg_temp,
-- session settings that change how values are written, and other roles'
-- leases and claims.  (Objects planted to derail CREATE EXTENSION:
-- hostile_extension.)
--
-- Nothing may crash, nothing may be hijacked, nothing may change.  Every
-- check prints a boolean, a count or a SQLSTATE.  pg_temp.try(sql) runs one
-- statement and returns 'ok' or the SQLSTATE of its error;
-- pg_temp.fingerprint() is an md5 over every row of dlock.lease and
-- dlock.claim, the token sequence and the user tables of this test, so
-- "unchanged" means not one byte of them changed.
--
-- lease_roles covers the basic role separation of leases and the
-- search_path shadowing of the lease functions; claim_roles and
-- claim_errors the basic privileges and errors of claims.  This file
-- covers the rest.
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
-- 2. Planted look-alikes.  Role a plants, in public and in pg_temp,
-- functions named like built-ins dlock could call, comparison and
-- arithmetic operators for the types dlock compares, and tables, views and
-- sequences named like dlock's own.  Each planted function logs itself and
-- raises a NOTICE.  Then every lease and claim function is called by a,
-- by b and by the superuser, under search paths that let the planted
-- objects win wherever a name is looked up: no NOTICE may appear there.
--
SET ROLE regress_dlock_hostile_a;
DO $plant$
DECLARE
    s text;
    f record;
    o record;
    n int := 0;
    body text;
BEGIN
    FOREACH s IN ARRAY ARRAY['public', 'pg_temp'] LOOP
        FOR f IN SELECT * FROM (VALUES
            ('clock_timestamp', '', 'timestamptz', $$'2000-01-01 00:00:00+00'$$),
            ('now', '', 'timestamptz', $$'2000-01-01 00:00:00+00'$$),
            ('statement_timestamp', '', 'timestamptz', $$'2000-01-01 00:00:00+00'$$),
            ('transaction_timestamp', '', 'timestamptz', $$'2000-01-01 00:00:00+00'$$),
            ('nextval', 'regclass', 'bigint', '1'),
            ('nextval', 'text', 'bigint', '1'),
            ('setval', 'regclass, bigint', 'bigint', '1'),
            ('setval', 'text, bigint', 'bigint', '1'),
            ('currval', 'text', 'bigint', '1'),
            ('unnest', 'anyarray', 'SETOF anyelement', ''),
            ('unnest', 'text[]', 'SETOF text', ''),
            ('unnest', 'bigint[]', 'SETOF bigint', ''),
            ('unnest', 'oid[]', 'SETOF oid', ''),
            ('make_interval', 'years int DEFAULT 0, months int DEFAULT 0, weeks int DEFAULT 0, '
                              'days int DEFAULT 0, hours int DEFAULT 0, mins int DEFAULT 0, '
                              'secs double precision DEFAULT 0', 'interval', $$'1 microsecond'$$),
            ('array_length', 'anyarray, int', 'int', '1'),
            ('array_length', 'text[], int', 'int', '1'),
            ('cardinality', 'anyarray', 'int', '1'),
            ('array_position', 'anyarray, anyelement', 'int', '1'),
            ('array_append', 'anyarray, anyelement', 'anyarray', '$1'),
            ('array_cat', 'anyarray, anyarray', 'anyarray', '$1'),
            ('hashtext', 'text', 'int', '0'),
            ('pg_advisory_xact_lock', 'bigint', 'void', ''),
            ('pg_try_advisory_xact_lock', 'bigint', 'boolean', 'true'),
            ('pg_is_in_recovery', '', 'boolean', 'true'),
            ('txid_current', '', 'bigint', '1'),
            ('quote_ident', 'text', 'text', '$1'),
            ('quote_literal', 'text', 'text', '$1'),
            ('format_type', 'oid, int', 'text', $$'int'$$)
          ) AS v(name, args, rettype, retval)
        LOOP
            body := format('BEGIN INSERT INTO public.hostile_log VALUES (%L); '
                           'RAISE NOTICE %L; RETURN %s; END',
                           s || '.' || f.name, 'hijacked: ' || s || '.' || f.name, f.retval);
            EXECUTE format('CREATE FUNCTION %s.%I(%s) RETURNS %s LANGUAGE plpgsql AS %L',
                           s, f.name, f.args, f.rettype, body);
        END LOOP;
        FOR o IN
            SELECT op, t AS l, t AS r, 'boolean' AS rettype, 'true' AS retval
              FROM pg_catalog.unnest(ARRAY['=', '<>', '<', '>', '<=', '>=']) op,
                   pg_catalog.unnest(ARRAY['text', 'oid', 'timestamptz', 'bigint', 'integer', 'regclass']) t
            UNION ALL
            SELECT * FROM (VALUES
                ('+', 'bigint', 'bigint', 'bigint', '$1'),
                ('+', 'integer', 'integer', 'integer', '$1'),
                ('+', 'timestamptz', 'interval', 'timestamptz', '$1'),
                ('-', 'bigint', 'bigint', 'bigint', '$1'),
                ('-', 'bigint', 'integer', 'bigint', '$1'),
                ('-', 'timestamptz', 'timestamptz', 'interval', $$'1 microsecond'$$),
                ('/', 'double precision', 'double precision', 'double precision', '$1'),
                ('/', 'bigint', 'bigint', 'bigint', '$1'),
                ('||', 'text', 'text', 'text', '$1'),
                ('~~', 'text', 'text', 'boolean', 'true'),
                ('=', 'bigint', 'bigint[]', 'boolean', 'true'),
                ('=', 'text', 'text[]', 'boolean', 'true')
              ) AS v(op, l, r, rettype, retval)
        LOOP
            n := n + 1;
            body := format('BEGIN INSERT INTO public.hostile_log VALUES (%L); '
                           'RAISE NOTICE %L; RETURN %s; END',
                           format('%s.%s(%s,%s)', s, o.op, o.l, o.r),
                           format('hijacked: %s.%s(%s,%s)', s, o.op, o.l, o.r), o.retval);
            EXECUTE format('CREATE FUNCTION %s.hostile_op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql AS %L',
                           s, n, o.l, o.r, o.rettype, body);
            EXECUTE format('CREATE OPERATOR %s.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s.hostile_op_%s)',
                           s, o.op, o.l, o.r, s, n);
        END LOOP;
    END LOOP;
END
$plant$;
-- look-alikes of dlock's tables and sequence, each saying the keys and rows
-- used below are held by an intruder forever
CREATE TABLE public.lease (key text, holder text, owner oid, token bigint, ttl_us bigint,
                           acquired_at timestamptz, expires_at timestamptz);
INSERT INTO public.lease VALUES
  ('hostile:x', 'intruder', 0, 9223372036854775807, 1, '-infinity', 'infinity'),
  ('hostile:y', 'intruder', 0, 9223372036854775807, 1, '-infinity', 'infinity'),
  ('hostile:z', 'intruder', 0, 9223372036854775807, 1, '-infinity', 'infinity');
CREATE TEMP TABLE lease AS SELECT * FROM public.lease;
CREATE VIEW public.claim AS
  SELECT 'public.hostile_big'::regclass::oid AS relid, g::text AS key, 'intruder'::text AS holder,
         0::oid AS owner, 9223372036854775807 AS token, 1::bigint AS ttl_us,
         '-infinity'::timestamptz AS claimed_at, 'infinity'::timestamptz AS expires_at,
         1 AS attempts, NULL::timestamptz AS poisoned_at
    FROM generate_series(1, 6) g;
CREATE TEMP VIEW claim AS SELECT * FROM public.claim;
CREATE SEQUENCE public.token_seq START 9000000000000000000;
CREATE TEMP SEQUENCE token_seq START 9000000000000000000;
RESET ROLE;
-- what was planted
SELECT n.nspname = 'public' AS in_public, count(*) AS functions
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.proowner = 'regress_dlock_hostile_a'::regrole GROUP BY 1 ORDER BY 1;
SELECT n.nspname = 'public' AS in_public, count(*) AS operators
  FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace
 WHERE o.oprowner = 'regress_dlock_hostile_a'::regrole GROUP BY 1 ORDER BY 1;
SELECT n.nspname = 'public' AS in_public, c.relkind, count(*) AS relations
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relowner = 'regress_dlock_hostile_a'::regrole AND c.relname IN ('lease', 'claim', 'token_seq')
 GROUP BY 1, 2 ORDER BY 1, 2;

-- the planted objects do take over wherever a name is looked up (each
-- statement here raises a NOTICE)...
SET ROLE regress_dlock_hostile_a;
SET search_path = public, pg_temp;
SELECT nextval('hostile_no_such_sequence') AS planted_nextval;
SELECT count(*) AS planted_unnest FROM unnest(ARRAY[1, 2]::bigint[]);
SELECT array_length(ARRAY['x'], 1) AS planted_array_length;
SELECT count(*) AS public_lease_rows FROM lease;
SET search_path = pg_temp, public;
SELECT count(*) AS temp_lease_rows, count(*) FILTER (WHERE holder OPERATOR(pg_catalog.=) 'intruder') AS intruders FROM lease;
SELECT count(*) AS temp_claim_rows FROM claim;
SET search_path = public, pg_catalog, pg_temp;
SELECT 1::bigint = 2::bigint AS planted_bigint_eq;
SELECT 'a'::text = 'b'::text AS planted_text_eq;
SELECT now() OPERATOR(pg_catalog.=) '2000-01-01 00:00:00+00' AS planted_now;
SELECT pg_temp.clock_timestamp() OPERATOR(pg_catalog.=) '2000-01-01 00:00:00+00' AS planted_temp_clock;
RESET search_path;
RESET ROLE;
SELECT count(*) AS planted_calls_logged FROM public.hostile_log;
TRUNCATE public.hostile_log;

-- ...but never inside dlock.  One round of every lease and claim function,
-- with a text and a bigint primary key, NULL filter and order_by (dlock's
-- own exclusion, default order and limit), and a filter / order_by that
-- name only pg_catalog operators.  Written with qualified operators only,
-- so that the only unqualified names looked up are dlock's functions.
CREATE TABLE pg_temp.runs (run text, ord int, step text, result text);
GRANT INSERT ON pg_temp.runs TO PUBLIC;
CREATE FUNCTION pg_temp.exercise(OUT ord int, OUT step text, OUT result text)
RETURNS SETOF record LANGUAGE plpgsql AS $fn$
DECLARE
    t1 bigint;
    t2 bigint;
    t3 bigint;
BEGIN
    ord := 0;
    t1 := dlock_acquire('hostile:x', 'h1', '1 hour');
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'acquire'; result := (t1 IS NOT NULL)::text; RETURN NEXT;
    t2 := dlock_acquire('hostile:x', 'h1', '1 hour');
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'acquire again: same token'; result := (t2 OPERATOR(pg_catalog.=) t1)::text; RETURN NEXT;
    t3 := dlock_acquire('hostile:x', 'h2', '1 hour');
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'other holder gets NULL'; result := (t3 IS NULL)::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'validate'; result := dlock_validate('hostile:x', 'h1', t1)::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'validate, other holder'; result := dlock_validate('hostile:x', 'h2', t1)::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'validate, older token'; result := dlock_validate('hostile:x', 'h1', t1 OPERATOR(pg_catalog.-) 1)::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'renew'; result := dlock_renew('hostile:x', 'h1', '2 hours')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'renew, other holder'; result := dlock_renew('hostile:x', 'h2')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'release, other holder'; result := dlock_release('hostile:x', 'h2')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'release, older token'; result := dlock_release('hostile:x', 'h1', t1 OPERATOR(pg_catalog.-) 1)::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'release'; result := dlock_release('hostile:x', 'h1', t1)::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'release again'; result := dlock_release('hostile:x', 'h1')::text; RETURN NEXT;
    t2 := dlock_acquire('hostile:x', 'h2', '1 hour');
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'next holder: greater token'; result := (t2 OPERATOR(pg_catalog.>) t1)::text; RETURN NEXT;
    PERFORM dlock_acquire('hostile:y', 'h2', '1 hour'), dlock_acquire('hostile:z', 'h2', '1 hour');
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'release_all'; result := dlock_release_all('h2')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'claim, bigint key'; result := ARRAY(SELECT j.id FROM dlock_claim(NULL::public.hostile_big, 'c1', 2, '1 hour') j)::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'claim the rest'; result := ARRAY(SELECT j.id FROM dlock_claim(NULL::public.hostile_big, 'c2', 1000, '1 hour') j)::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'nothing left'; result := ARRAY(SELECT j.id FROM dlock_claim(NULL::public.hostile_big, 'c3', 1000, '1 hour') j)::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'claim, text key'; result := ARRAY(SELECT j.id FROM dlock_claim(NULL::public.hostile_text, 'c1', 2, '1 hour') j)::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'claim, text key, filter and order_by';
    result := ARRAY(SELECT j.id FROM dlock_claim(NULL::public.hostile_text, 'c2', 2, '1 hour',
                                                 'status OPERATOR(pg_catalog.=) 0 AND id OPERATOR(pg_catalog.<>) ''c''',
                                                 'id DESC', 100) j)::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'claimed'; result := dlock_claimed('public.hostile_big', 1, 'c1')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'claimed, key as text'; result := dlock_claimed('public.hostile_big', '2'::text, 'c1')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'claimed, other holder'; result := dlock_claimed('public.hostile_big', 1, 'c2')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'claimed, text key'; result := dlock_claimed('public.hostile_text', 'a'::text, 'c1')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'claimed, text key, not claimed'; result := dlock_claimed('public.hostile_text', 'c'::text, 'c1')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'renew_claims'; result := dlock_renew_claims('public.hostile_big', 'c1', '2 hours')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'renew_claims, text key'; result := dlock_renew_claims('public.hostile_text', 'c2')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'renew_claims, other holder'; result := dlock_renew_claims('public.hostile_text', 'c3')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'unclaim keys'; result := dlock_unclaim('public.hostile_big', 'c1', ARRAY[1]::bigint[])::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'unclaim keys again'; result := dlock_unclaim('public.hostile_big', 'c1', ARRAY[1]::bigint[])::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'unclaim keys, text key'; result := dlock_unclaim('public.hostile_text', 'c1', ARRAY['a'])::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'unclaim all'; result := dlock_unclaim('public.hostile_big', 'c2')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'claim given-back rows'; result := ARRAY(SELECT j.id FROM dlock_claim(NULL::public.hostile_big, 'c3', 1000, '1 hour') j)::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'release_all c1'; result := dlock_release_all('c1')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'release_all c2'; result := dlock_release_all('c2')::text; RETURN NEXT;
    ord := ord OPERATOR(pg_catalog.+) 1; step := 'release_all c3'; result := dlock_release_all('c3')::text; RETURN NEXT;
END
$fn$;
-- what must be true after every round: nothing fired, nothing left behind
CREATE FUNCTION pg_temp.after_round(OUT fired bigint, OUT leases_left bigint, OUT claims_left bigint)
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
SELECT (SELECT count(*) FROM public.hostile_log),
       (SELECT count(*) FROM public.dlock_locks WHERE key LIKE 'hostile:_'),
       (SELECT count(*) FROM public.dlock_claims
         WHERE table_name IN ('public.hostile_big'::regclass, 'public.hostile_text'::regclass))
$$;

SET ROLE regress_dlock_hostile_a;
SET search_path = public, pg_temp;
INSERT INTO pg_temp.runs SELECT 'a: public, pg_temp', e.* FROM pg_temp.exercise() e;
RESET search_path;
RESET ROLE;
SELECT ord, step, result FROM pg_temp.runs ORDER BY ord;
SELECT * FROM pg_temp.after_round();

SET ROLE regress_dlock_hostile_a;
SET search_path = pg_temp, public;
INSERT INTO pg_temp.runs SELECT 'a: pg_temp, public', e.* FROM pg_temp.exercise() e;
RESET search_path;
SET search_path = public, pg_catalog, pg_temp;
INSERT INTO pg_temp.runs SELECT 'a: public, pg_catalog, pg_temp', e.* FROM pg_temp.exercise() e;
RESET search_path;
SET search_path = pg_temp, public, pg_catalog;
INSERT INTO pg_temp.runs SELECT 'a: pg_temp, public, pg_catalog', e.* FROM pg_temp.exercise() e;
RESET search_path;
-- another role, in the planter's search path
SET ROLE regress_dlock_hostile_b;
SET search_path = public, pg_catalog, pg_temp;
INSERT INTO pg_temp.runs SELECT 'b: public, pg_catalog, pg_temp', e.* FROM pg_temp.exercise() e;
RESET search_path;
-- the superuser: dlock's internal queries run with its rights anyway
RESET ROLE;
SET search_path = public, pg_catalog, pg_temp;
INSERT INTO pg_temp.runs SELECT 'superuser: public, pg_catalog, pg_temp', e.* FROM pg_temp.exercise() e;
RESET search_path;
-- and the operators' functions, as the superuser in that search path
SET ROLE regress_dlock_hostile_a;
SELECT dlock_acquire('hostile:x', 'h1', '1 hour') IS NOT NULL AS a_acquired;
SELECT count(*) AS a_claimed FROM dlock_claim(NULL::public.hostile_big, 'c1', 2, '1 hour');
RESET ROLE;
SET search_path = public, pg_catalog, pg_temp;
SELECT dlock_force_release('hostile:x') AS forced;
SELECT dlock_force_release('hostile:x') AS forced_again;
SELECT dlock_reset_claims('public.hostile_big', ARRAY[1, 2]::bigint[]) AS reset;
SELECT dlock_reset_claims('public.hostile_big', ARRAY[1, 2]::bigint[]) AS reset_again;
SELECT dlock_cleanup('1000 years') >= 0 AS cleanup_ran;
RESET search_path;
-- every round gave the results of the first one, nothing fired, nothing left
SELECT r.run, count(*) AS steps,
       count(*) FILTER (WHERE r.result IS DISTINCT FROM f.result) AS differing
  FROM pg_temp.runs r JOIN pg_temp.runs f ON f.ord = r.ord AND f.run = 'a: public, pg_temp'
 GROUP BY r.run ORDER BY r.run;
SELECT * FROM pg_temp.after_round();

-- the caller's own filter is the caller's SQL: under a search path that puts
-- public first, its unqualified = is the planted one (expected); with the
-- operator qualified, nothing fires
SET ROLE regress_dlock_hostile_a;
SET search_path = public, pg_catalog, pg_temp;
SET client_min_messages = warning;
SELECT count(*) AS claimed_unqualified_filter
  FROM dlock_claim(NULL::public.hostile_big, 'f', 1, '1 hour', 'status = 7');
RESET client_min_messages;
RESET search_path;
RESET ROLE;
SELECT count(*) > 0 AS caller_filter_used_planted_operator FROM public.hostile_log;
TRUNCATE public.hostile_log;
SET ROLE regress_dlock_hostile_a;
SET search_path = public, pg_catalog, pg_temp;
SELECT count(*) AS claimed_qualified_filter
  FROM dlock_claim(NULL::public.hostile_big, 'f', 1, '1 hour', 'status OPERATOR(pg_catalog.=) 7');
SELECT dlock_release_all('f') AS released;
RESET search_path;
RESET ROLE;
SELECT * FROM pg_temp.after_round();

-- an error inside dlock, caught by the caller, gives back the caller's
-- identity and settings (dlock runs its queries as the owner of schema
-- dlock, with its own search_path and enable_seqscan = off)
SET ROLE regress_dlock_hostile_a;
SELECT pg_temp.try($$SELECT * FROM dlock_claim(NULL::public.hostile_big, 'e', 1, '1 hour', 'pg_catalog.int4div(1, 0) = 0')$$) AS error_in_filter,
       pg_temp.try($$SELECT * FROM dlock_claim(NULL::public.hostile_big, 'e', 1, '1 hour', NULL, 'pg_catalog.int4div(1, 0)')$$) AS error_in_order_by,
       pg_temp.try($$SELECT dlock_claimed('public.hostile_big', 'x'::text, 'e')$$) AS error_in_key;
SELECT current_user = 'regress_dlock_hostile_a' AS still_role_a,
       current_setting('search_path') AS search_path,
       current_setting('enable_seqscan') AS enable_seqscan;
RESET ROLE;

-- take the planted functions and operators away again (the rest of this
-- file must not run into them)
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT o.oid::regoperator AS op FROM pg_operator o
              WHERE o.oprowner = 'regress_dlock_hostile_a'::regrole LOOP
        EXECUTE format('DROP OPERATOR %s', r.op);
    END LOOP;
    FOR r IN SELECT p.oid::regprocedure AS fn FROM pg_proc p
              WHERE p.proowner = 'regress_dlock_hostile_a'::regrole LOOP
        EXECUTE format('DROP FUNCTION %s', r.fn);
    END LOOP;
END
$$;
DROP TABLE public.lease, pg_temp.lease;
DROP VIEW pg_temp.claim, public.claim;
DROP SEQUENCE public.token_seq, pg_temp.token_seq;

--
-- 3. Code that dlock runs on a role's behalf runs with that role's rights
-- only: a primary key whose type is a domain with a CHECK that calls the
-- role's own function, and a row-level security policy that a filter
-- tries to see through.
--
SET ROLE regress_dlock_hostile_a;
CREATE FUNCTION public.hostile_check(v int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hostile_log VALUES (current_user::text);
    RETURN true;
END
$$;
CREATE DOMAIN public.hostile_id AS int CHECK (public.hostile_check(VALUE));
CREATE TABLE public.hostile_dom (id public.hostile_id PRIMARY KEY);
INSERT INTO public.hostile_dom VALUES (1), (2), (3);
TRUNCATE public.hostile_log;
SELECT ARRAY(SELECT id FROM dlock_claim(NULL::public.hostile_dom, 'd1', 1, '1 hour')) AS d1_got;
SELECT ARRAY(SELECT id FROM dlock_claim(NULL::public.hostile_dom, 'd2', 1, '1 hour')) AS d2_got;
SELECT ARRAY(SELECT id FROM dlock_claim(NULL::public.hostile_dom, 'd3', 5, '1 hour')) AS d3_got;
SELECT dlock_claimed('public.hostile_dom', 1, 'd1') AS d1_claimed,
       dlock_unclaim('public.hostile_dom', 'd3', ARRAY[3]) AS d3_unclaimed,
       dlock_release_all('d1') + dlock_release_all('d2') AS released;
RESET ROLE;
-- the CHECK only ever ran as a
SELECT count(*) FILTER (WHERE entry <> 'regress_dlock_hostile_a') AS check_ran_as_another_role,
       (SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_dlock_hostile_a') AS a_is_superuser
  FROM public.hostile_log;
TRUNCATE public.hostile_log;

-- row-level security: b sees tenant b's rows only.  A filter or an
-- order_by that would fail on a hidden row (division by zero on id 3), or a
-- non-leakproof function that records every row it is shown, learns
-- nothing: the policy is applied before the caller's filter and order.
CREATE TABLE public.hostile_rls (id int PRIMARY KEY, tenant text NOT NULL);
INSERT INTO public.hostile_rls VALUES (1, 'b'), (2, 'b'), (3, 'a'), (4, 'b'), (5, 'b'), (6, 'a');
ALTER TABLE public.hostile_rls ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_b ON public.hostile_rls TO regress_dlock_hostile_b USING (tenant = 'b');
GRANT SELECT, UPDATE ON public.hostile_rls TO regress_dlock_hostile_b;
SET ROLE regress_dlock_hostile_b;
CREATE FUNCTION pg_temp.peek(id int, tenant text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hostile_log VALUES (tenant || ':' || id);
    RETURN true;
END
$$;
SELECT ARRAY(SELECT id FROM dlock_claim(NULL::public.hostile_rls, 'r1', 2, '1 hour',
                                        '(1 / (id - 3)) IS NOT NULL')) AS divide_by_hidden_row;
SELECT ARRAY(SELECT id FROM dlock_claim(NULL::public.hostile_rls, 'r2', 1, '1 hour',
                                        'true', '1 / (id - 3)')) AS order_by_hidden_row;
SELECT ARRAY(SELECT id FROM dlock_claim(NULL::public.hostile_rls, 'r3', 1000, '1 hour',
                                        'pg_temp.peek(id, tenant)')) AS peek_at_every_row;
SELECT dlock_release_all('r1') + dlock_release_all('r2') + dlock_release_all('r3') AS released;
RESET ROLE;
SELECT count(*) FILTER (WHERE entry LIKE 'a:%') AS hidden_rows_seen,
       count(*) FILTER (WHERE entry LIKE 'b:%') > 0 AS visible_rows_seen
  FROM public.hostile_log;
TRUNCATE public.hostile_log;

--
-- 4. Session settings are the caller's input too: the text of a claim's
-- key must not depend on DateStyle, TimeZone or extra_float_digits, or one
-- row gets two keys (and two holders) and two rows get one key.
--
SET ROLE regress_dlock_hostile_a;
CREATE TABLE public.hostile_ts (ts timestamptz PRIMARY KEY);
INSERT INTO public.hostile_ts VALUES ('2024-01-02 12:00:00+00'), ('2024-02-01 12:00:00+00');
SET timezone = 'UTC';
SET datestyle = 'SQL, DMY';
SELECT count(*) AS s1_claimed FROM dlock_claim(NULL::public.hostile_ts, 's1', 1, '1 hour');
SET datestyle = 'SQL, MDY';
SELECT count(*) AS s2_claimed,
       count(*) FILTER (WHERE ts = '2024-01-02 12:00:00+00') AS s2_got_s1_row
  FROM dlock_claim(NULL::public.hostile_ts, 's2', 1000, '1 hour');
RESET datestyle;
SELECT count(*) AS s3_claimed FROM dlock_claim(NULL::public.hostile_ts, 's3', 1000, '1 hour');
SET timezone = 'Asia/Tokyo';
SELECT dlock_claimed('public.hostile_ts', '2024-01-02 12:00:00+00'::timestamptz, 's1') AS s1_claimed_in_tokyo;
RESET timezone;
SELECT dlock_release_all('s1') + dlock_release_all('s2') + dlock_release_all('s3') AS released;
CREATE TABLE public.hostile_float (id float8 PRIMARY KEY);
INSERT INTO public.hostile_float VALUES (0.3), (0.1::float8 + 0.2::float8);
SET extra_float_digits = 0;
SELECT count(*) AS f0_claimed FROM dlock_claim(NULL::public.hostile_float, 'f0', 1000, '1 hour');
RESET extra_float_digits;
SELECT count(*) AS f1_claimed FROM dlock_claim(NULL::public.hostile_float, 'f1', 1000, '1 hour');
SELECT dlock_release_all('f0') + dlock_release_all('f1') AS released;
RESET ROLE;

--
-- 5. Other roles.  a holds a lease and claims; b (same holder strings, the
-- token known) and m (a member of a, with a's privileges) can neither
-- release, renew, validate nor give back any of it, nor keep a's keys
-- locked; nor write dlock's storage through its tables, views, sequence or
-- functions.
--
SET ROLE regress_dlock_hostile_a;
SELECT dlock_validate('hostile:held', 'a', :held_token) AS a_valid,
       dlock_claimed('public.hostile_keep', 1, 'keep') AS a_claimed;
RESET ROLE;
SELECT pg_temp.fingerprint() AS fp1 \gset
SET ROLE regress_dlock_hostile_b;
SELECT dlock_release('hostile:held', 'a', :held_token) AS release,
       dlock_release('hostile:held', 'a') AS release_no_token,
       dlock_renew('hostile:held', 'a', '2 hours', :held_token) AS renew,
       dlock_validate('hostile:held', 'a', :held_token) AS validate,
       dlock_release_all('a') AS release_all,
       dlock_acquire('hostile:held', 'a', '1 hour') IS NULL AS acquire_refused;
SELECT dlock_claimed('public.hostile_keep', 1, 'keep') AS claimed,
       dlock_unclaim('public.hostile_keep', 'keep') AS unclaim_all,
       dlock_unclaim('public.hostile_keep', 'keep', ARRAY[1, 2]) AS unclaim_keys,
       dlock_unclaim('public.hostile_keep', 'keep', ARRAY['1', '2']) AS unclaim_text_keys,
       dlock_renew_claims('public.hostile_keep', 'keep', '5 hours') AS renew_claims,
       dlock_release_all('keep') AS release_all,
       ARRAY(SELECT id FROM dlock_claim(NULL::public.hostile_keep, 'keep', 1000, '1 hour',
                                        'id <= 2')) AS claim;
SET ROLE regress_dlock_hostile_m;
SELECT dlock_release('hostile:held', 'a', :held_token) AS release,
       dlock_renew('hostile:held', 'a', '2 hours') AS renew,
       dlock_validate('hostile:held', 'a', :held_token) AS validate,
       dlock_release_all('a') AS release_all,
       dlock_claimed('public.hostile_keep', 1, 'keep') AS claimed,
       dlock_unclaim('public.hostile_keep', 'keep', ARRAY[1, 2]) AS unclaim_keys,
       dlock_renew_claims('public.hostile_keep', 'keep', '5 hours') AS renew_claims;
RESET ROLE;
SELECT pg_temp.fingerprint() = :'fp1' AS a_state_unchanged;
-- failed calls by b keep no lock on a's keys: inside an open transaction of
-- b, a's leases and claims stay free to renew, release and complete
BEGIN;
SET LOCAL ROLE regress_dlock_hostile_b;
SELECT dlock_release('hostile:held', 'a') AS release,
       dlock_renew('hostile:held', 'a') AS renew,
       dlock_validate('hostile:held', 'a', :held_token) AS validate,
       dlock_claimed('public.hostile_keep', 1, 'keep') AS claimed,
       dlock_unclaim('public.hostile_keep', 'keep', ARRAY[1, 2, 3]) AS unclaim_keys,
       dlock_unclaim('public.hostile_keep', 'keep') AS unclaim_all,
       dlock_renew_claims('public.hostile_keep', 'keep') AS renew_claims;
SELECT count(*) AS dlock_locks_held_by_b
  FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory';
ROLLBACK;
-- nor can a huge list of keys fill the shared lock table
SET ROLE regress_dlock_hostile_b;
SELECT pg_temp.try($$SELECT dlock_unclaim('public.hostile_keep', 'keep',
                         ARRAY(SELECT g FROM generate_series(1, 200000) g))$$) = 'ok'
       AS huge_key_list_clean;
RESET ROLE;

-- direct writes, and replacing dlock's objects
-- (dlock_locks and dlock_claims read through functions, so they are not
-- updatable at all: writes fail with 55000 before any privilege check)
INSERT INTO pg_temp.cases (grp, call, expected) VALUES
  ('direct', $$SELECT * FROM dlock.lease$$, '42501'),
  ('direct', $$INSERT INTO dlock.lease VALUES ('hostile:held', 'b', 0, 1, 1, now(), 'infinity')$$, '42501'),
  ('direct', $$UPDATE dlock.lease SET holder = 'b'$$, '42501'),
  ('direct', $$DELETE FROM dlock.lease$$, '42501'),
  ('direct', $$TRUNCATE dlock.lease$$, '42501'),
  ('direct', $$INSERT INTO dlock.claim VALUES ('hostile_keep'::regclass, '3', 'keep', 0, 1, 1, now(), 'infinity', 1, NULL)$$, '42501'),
  ('direct', $$UPDATE dlock.claim SET expires_at = 'infinity'$$, '42501'),
  ('direct', $$DELETE FROM dlock.claim$$, '42501'),
  ('direct', $$TRUNCATE dlock.claim$$, '42501'),
  ('direct', $$SELECT setval('dlock.token_seq', 1)$$, '42501'),
  ('direct', $$SELECT nextval('dlock.token_seq')$$, '42501'),
  ('direct', $$ALTER SEQUENCE dlock.token_seq RESTART$$, '42501'),
  ('direct', $$LOCK TABLE dlock.lease IN ACCESS EXCLUSIVE MODE$$, '42501'),
  ('direct', $$CREATE TABLE public.hostile_child () INHERITS (dlock.lease)$$, '42501'),
  ('direct', $$CREATE INDEX ON dlock.claim (holder)$$, '42501'),
  ('direct', $$ALTER TABLE dlock.lease DISABLE TRIGGER ALL$$, '42501'),
  ('direct', $$CREATE POLICY p ON dlock.lease USING (true)$$, '42501'),
  ('direct', $$INSERT INTO dlock_locks VALUES ('hostile:held', 'b')$$, '55000'),
  ('direct', $$UPDATE dlock_locks SET holder = 'b'$$, '55000'),
  ('direct', $$DELETE FROM dlock_locks$$, '55000'),
  ('direct', $$UPDATE dlock_claims SET holder = 'b'$$, '55000'),
  ('direct', $$DELETE FROM dlock_claims$$, '55000'),
  ('direct', $$DELETE FROM dlock_dead_claims$$, '55000'),
  ('direct', $$CREATE OR REPLACE VIEW public.dlock_locks AS SELECT * FROM public.dlock_locks WHERE false$$, '42501'),
  ('direct', $$ALTER VIEW public.dlock_claims RENAME TO hostile_claims$$, '42501'),
  ('direct', $$DROP VIEW public.dlock_locks$$, '42501'),
  ('direct', $$CREATE OR REPLACE FUNCTION public.dlock_validate(key text, holder text, token bigint) RETURNS boolean LANGUAGE sql AS 'SELECT true'$$, '42501'),
  ('direct', $$ALTER FUNCTION public.dlock_claimed(regclass, anyelement, text) SET search_path = public$$, '42501'),
  ('direct', $$ALTER FUNCTION public.dlock_acquire(text, text, interval, interval) SECURITY DEFINER$$, '42501'),
  ('direct', $$DROP FUNCTION public.dlock_release(text, text, bigint)$$, '42501'),
  ('direct', $$ALTER EXTENSION dlock DROP FUNCTION public.dlock_release(text, text, bigint)$$, '42501'),
  ('direct', $$CREATE TABLE dlock.hostile ()$$, '42501'),
  ('direct', $$SELECT dlock_force_release('hostile:held')$$, '42501'),
  ('direct', $$SELECT dlock_cleanup('0')$$, '42501'),
  ('direct', $$SELECT dlock_reset_claims('public.hostile_keep', ARRAY[1, 2])$$, '42501'),
  ('direct', $$SELECT * FROM dlock_claim(NULL::public.hostile_priv, 'p', 1)$$, '42501'),
  ('direct', $$GRANT SELECT ON public.hostile_priv TO regress_dlock_hostile_b$$, '42501');
CREATE TABLE public.hostile_priv (id int PRIMARY KEY);
INSERT INTO public.hostile_priv VALUES (1), (2);
SET ROLE regress_dlock_hostile_b;
SELECT call, expected, pg_temp.try(call) AS got FROM pg_temp.cases WHERE grp = 'direct' ORDER BY ord;
RESET ROLE;
-- a table b may read but not update, or update but not read
GRANT SELECT ON public.hostile_priv TO regress_dlock_hostile_b;
SET ROLE regress_dlock_hostile_b;
SELECT pg_temp.try($$SELECT * FROM dlock_claim(NULL::public.hostile_priv, 'p', 1)$$) AS select_only;
RESET ROLE;
REVOKE SELECT ON public.hostile_priv FROM regress_dlock_hostile_b;
GRANT UPDATE ON public.hostile_priv TO regress_dlock_hostile_b;
SET ROLE regress_dlock_hostile_b;
SELECT pg_temp.try($$SELECT * FROM dlock_claim(NULL::public.hostile_priv, 'p', 1)$$) AS update_only;
RESET ROLE;
SELECT pg_temp.fingerprint() = :'fp1' AS a_state_unchanged,
       (SELECT count(*) FROM dlock_claims WHERE table_name = 'public.hostile_priv'::regclass) AS claims_on_priv;
SET ROLE regress_dlock_hostile_a;
SELECT dlock_validate('hostile:held', 'a', :held_token) AS a_still_valid,
       dlock_claimed('public.hostile_keep', 2, 'keep') AS a_still_claimed;
RESET ROLE;
SELECT 1 AS alive;

--
-- clean up
--
DROP TABLE pg_temp.runs;
DROP FUNCTION pg_temp.exercise(), pg_temp.after_round();
\i sql/include/hostile_cleanup.sql

--
-- last, on purpose: a claim on a table with a column named like the table
-- (dlock's query refers to the whole row by the table's name)
--
CREATE TABLE hostile_named (id int PRIMARY KEY, hostile_named int);
INSERT INTO hostile_named VALUES (1, 10), (2, NULL);
SELECT id, hostile_named FROM dlock_claim(NULL::hostile_named, 'n', 2, '1 hour');
SELECT dlock_release_all('n') AS released;
DROP TABLE hostile_named;
SELECT 1 AS alive;
