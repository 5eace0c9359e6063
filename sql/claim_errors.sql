--
-- claim_errors: every bad input to the claim functions is a clear error,
-- and none of them changes anything.
--
-- Each bad call runs through pg_temp.try(), which prints the SQLSTATE and the
-- message, and then the state after the call: live claims on jobs, rows of
-- jobs, sum of jobs.status, whether the canary table still exists.  A call that is
-- wrongly accepted prints 'no error' and how many rows it claimed.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE TABLE jobs (id bigint PRIMARY KEY, status int NOT NULL DEFAULT 0, payload text);
INSERT INTO jobs SELECT i, 0, 'job ' || i FROM generate_series(1, 10) i;
CREATE TABLE canary (x int);
INSERT INTO canary VALUES (1);

CREATE FUNCTION pg_temp.try(sql text,
    OUT result text, OUT claims bigint, OUT jobs bigint, OUT status_sum bigint,
    OUT canary bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    n bigint;
BEGIN
    BEGIN
        EXECUTE sql;
        GET DIAGNOSTICS n = ROW_COUNT;
        result := 'no error, ' || n || ' row(s)';
    EXCEPTION WHEN OTHERS THEN
        result := SQLSTATE || ': ' || SQLERRM;
    END;
    SELECT count(*) INTO claims FROM public.dlock_claims c WHERE c.table_name = 'public.jobs'::regclass;
    SELECT count(*), sum(j.status) INTO jobs, status_sum FROM public.jobs j;
    SELECT count(*) INTO canary FROM public.canary;
END
$fn$;

-- one live claim, which must survive everything below
SELECT count(*) AS claimed FROM dlock_claim(NULL::jobs, 'keep', 1, '1 hour');
SELECT * FROM pg_temp.try('SELECT 1');

--
-- the row type argument
--
CREATE VIEW jobs_view AS SELECT * FROM jobs;
CREATE TYPE jobs_type AS (id bigint, status int, payload text);
CREATE TABLE nopk (id int, v int);
INSERT INTO nopk VALUES (1, 1);
CREATE TABLE uniq_only (id int NOT NULL UNIQUE, v int);
INSERT INTO uniq_only VALUES (1, 1);
CREATE TABLE twopk (a int, b int, v int, PRIMARY KEY (a, b));
INSERT INTO twopk VALUES (1, 1, 1);
CREATE MATERIALIZED VIEW jobs_mv AS SELECT * FROM jobs;
CREATE FOREIGN DATA WRAPPER claim_fdw;
CREATE SERVER claim_srv FOREIGN DATA WRAPPER claim_fdw;
CREATE FOREIGN TABLE jobs_ft (id int, v int) SERVER claim_srv;
CREATE SEQUENCE jobs_seq;

SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::int, 'h', 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::text, 'h', 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::int[], 'h', 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::record, 'h', 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(ROW(1, 2), 'h', 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL, 'h', 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs_view, 'h', 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs_type, 'h', 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs_mv, 'h', 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs_ft, 'h', 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs_seq, 'h', 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::nopk, 'h', 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::uniq_only, 'h', 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::twopk, 'h', 1)$$);
-- the messages as a user sees them
SELECT * FROM dlock_claim(NULL::int, 'h', 1);
SELECT * FROM dlock_claim(NULL::jobs_view, 'h', 1);
SELECT * FROM dlock_claim(NULL::jobs_type, 'h', 1);
SELECT * FROM dlock_claim(NULL::nopk, 'h', 1);
SELECT * FROM dlock_claim(NULL::twopk, 'h', 1);
-- an ordinary role cannot claim (and so lock) rows of a system catalog
CREATE ROLE regress_dlock_cerr NOLOGIN;
SET ROLE regress_dlock_cerr;
SELECT * FROM dlock_claim(NULL::pg_class, 'h', 1);
SELECT * FROM dlock_claim(NULL::pg_authid, 'h', 1);
RESET ROLE;
DROP ROLE regress_dlock_cerr;

--
-- n, holder, ttl, max_attempts
--
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 0)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', -1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 1001)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 2147483647)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', NULL)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, NULL, 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, '', 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, repeat('h', 257), 1)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 1, '0')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 1, '-1 s')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 1, NULL)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 1, '31 days')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 1, '2 mons')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 1, max_attempts => 0)$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 1, max_attempts => -1)$$);
-- the messages as a user sees them
SELECT * FROM dlock_claim(NULL::jobs, 'h', 0);
SELECT * FROM dlock_claim(NULL::jobs, 'h', 1001);
SELECT * FROM dlock_claim(NULL::jobs, 'h', NULL);
SELECT * FROM dlock_claim(NULL::jobs, NULL, 1);
SELECT * FROM dlock_claim(NULL::jobs, '', 1);
SELECT * FROM dlock_claim(NULL::jobs, 'h', 1, '0');
-- the limits themselves are accepted: n = 1000, a 256-byte holder, 30 days
SELECT count(*) AS holder_256 FROM dlock_claim(NULL::jobs, repeat('h', 256), 1);
SELECT count(*) AS n_1000 FROM dlock_claim(NULL::jobs, 'lim', 1000, '30 days');
SELECT dlock_unclaim('jobs', 'lim') + dlock_unclaim('jobs', repeat('h', 256)) AS unclaimed;

--
-- filter: anything but a single boolean expression over the row
--
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'true; DROP TABLE canary')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'true; DROP TABLE canary;')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'true) OR (true')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'true)) OR ((true')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'false) OR (true')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'true) UNION SELECT * FROM public.jobs WHERE (true')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'true UNION SELECT 1')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'true FROM pg_authid')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'true, pg_authid')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'status = 0 LIMIT 1')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'status = 0 OFFSET 1')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'status = 0 ORDER BY id')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'status = 0 GROUP BY id')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'status = 0 FOR UPDATE')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'status = 0 FOR SHARE NOWAIT')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'status = 0 WINDOW w AS ()')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'status = 0 INTO TEMP stolen')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'status = 0 RETURNING *')$$);
-- a comment is not structure: accepted, and it is the filter "true"
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'cm', 5, '1 h', 'true /* ) OR (true */')$$);
SELECT dlock_unclaim('jobs', 'cm') AS unclaimed_cm;
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'true /*')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'true)--')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', E'true\n) OR (true')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'status = 0 AND (SELECT 1; SELECT 2) = 1')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', '(WITH d AS (DELETE FROM public.canary RETURNING 1) SELECT true)')$$);
-- parentheses inside a dollar-quoted string are not structure either:
-- accepted, and no row matches
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', '$x$) OR (true$x$ = '''' ')$$);
-- a comment at the end: either refused, or harmless -- it must not switch
-- off the check for live claims (the one 'keep' claim is not returned)
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'c1', 20, '1 h', '1=1 --')$$);
SELECT count(*) AS keep_row_stolen FROM dlock_claims
 WHERE table_name = 'jobs'::regclass AND key = '1' AND holder <> 'keep';
SELECT dlock_unclaim('jobs', 'c1') AS unclaimed_c1;
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'c2', 20, '1 h', E'1=1 --\n')$$);
SELECT count(*) AS keep_row_stolen FROM dlock_claims
 WHERE table_name = 'jobs'::regclass AND key = '1' AND holder <> 'keep';
SELECT dlock_unclaim('jobs', 'c2') AS unclaimed_c2;
-- syntax errors and semantic errors in a filter
-- query parameters would reach dlock's own parameters (the excluded keys, n)
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'NOT (id = ANY ($1))')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'id < $2')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id < $2')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'status = = 0')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', '(status = 0')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'status = 0)')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'payload = ''x')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', ';')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', '')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', '   ')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'no_such_column = 1')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'id')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'count(*) > 0')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'row_number() OVER () < 3')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'generate_series(1, 2) > 0')$$);
-- names resolve with the caller's search_path (public.canary here): a
-- valid filter, and its only match (id 1) is held by 'keep'
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'id IN (SELECT x FROM canary)')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'id = 1/0')$$);
-- the messages as a user sees them
SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'true; DROP TABLE canary');
SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'true) OR (true');
SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', 'status = = 0');

--
-- order_by: anything but an ORDER BY list
--
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id; DELETE FROM jobs')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id; DROP TABLE canary')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id LIMIT 1')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id LIMIT ALL')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id OFFSET 5')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id FOR UPDATE')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id FOR UPDATE NOWAIT')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id) x')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id UNION SELECT * FROM public.jobs')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id FETCH FIRST 1 ROW ONLY')$$);
-- a trailing comment: either refused or harmless (it must not comment out
-- what dlock adds after the ORDER BY list: never more than n = 2 rows)
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'ob', 2, '1 h', NULL, 'id --')$$);
SELECT dlock_unclaim('jobs', 'ob') AS unclaimed_ob;
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'ORDER BY id')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id DESC DESC')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id,')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, '')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'no_such_column')$$);
SELECT * FROM pg_temp.try($$SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'count(*)')$$);
-- the messages as a user sees them
SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id; DELETE FROM jobs');
SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id LIMIT 1');
SELECT * FROM dlock_claim(NULL::jobs, 'h', 5, '1 h', NULL, 'id FOR UPDATE');

--
-- the other claim functions
--
SELECT * FROM pg_temp.try($$SELECT dlock_claimed(NULL, 1, 'keep')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_claimed('jobs', NULL::int, 'keep')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_claimed('jobs', NULL, 'keep')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_claimed('jobs', 1, NULL)$$);
SELECT * FROM pg_temp.try($$SELECT dlock_claimed('jobs', 1, '')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_claimed('nopk', 1, 'keep')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_claimed('twopk', 1, 'keep')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_claimed('jobs_view', 1, 'keep')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_claimed('no_such_table', 1, 'keep')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_claimed('jobs', 'not a number'::text, 'keep')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_unclaim(NULL, 'keep')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_unclaim('jobs', NULL)$$);
SELECT * FROM pg_temp.try($$SELECT dlock_unclaim('jobs', '')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_unclaim('jobs', 'keep', NULL::int[])$$);
SELECT * FROM pg_temp.try($$SELECT dlock_unclaim('nopk', 'keep')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_renew_claims(NULL, 'keep')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_renew_claims('jobs', NULL)$$);
SELECT * FROM pg_temp.try($$SELECT dlock_renew_claims('jobs', 'keep', '0')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_renew_claims('jobs', 'keep', '-1 min')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_renew_claims('jobs', 'keep', '31 days')$$);
SELECT * FROM pg_temp.try($$SELECT dlock_reset_claims(NULL, ARRAY[1])$$);
SELECT * FROM pg_temp.try($$SELECT dlock_reset_claims('jobs', NULL::int[])$$);
-- the 'keep' claim is intact: still live, same holder, first attempt
SELECT key, holder, attempts, expires_at > clock_timestamp() + interval '59 min' AS live
  FROM dlock_claims WHERE table_name = 'jobs'::regclass;

--
-- nothing changed and nothing leaked
--
SELECT count(*) AS jobs, sum(status) AS status_sum FROM jobs;
SELECT count(*) AS canary FROM canary;
SELECT count(*) AS stolen_table FROM pg_class WHERE relname = 'stolen';
SELECT count(*) AS dead_claims FROM dlock_dead_claims;
SELECT dlock_unclaim('jobs', 'keep') AS unclaimed_keep;
SELECT count(*) AS claims_left FROM dlock_claims WHERE table_name = 'jobs'::regclass;
DROP VIEW jobs_view;
DROP MATERIALIZED VIEW jobs_mv;
DROP TABLE jobs, canary, nopk, uniq_only, twopk;
DROP FOREIGN TABLE jobs_ft;
DROP SERVER claim_srv;
DROP FOREIGN DATA WRAPPER claim_fdw;
DROP TYPE jobs_type;
DROP SEQUENCE jobs_seq;
