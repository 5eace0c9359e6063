--
-- hostile_input_lookalikes: roles that plant look-alike functions,
-- operators and tables in public and pg_temp, where dlock could look a
-- name up.
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
-- clean up
--
DROP TABLE pg_temp.runs;
DROP FUNCTION pg_temp.exercise(), pg_temp.after_round();
\i sql/include/hostile_cleanup.sql
