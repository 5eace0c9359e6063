--
-- claim_untyped: dlock_claim with a quoted table name ('jobs') where a row
-- type (NULL::jobs) is wanted gets an error whose hint shows the call to
-- write, not "could not determine polymorphic type"; calls with a row
-- type are not made ambiguous by the overload that catches it.
--
\set VERBOSITY default
CREATE TABLE untyped_jobs (id int PRIMARY KEY, done boolean NOT NULL DEFAULT false);
INSERT INTO untyped_jobs SELECT g FROM generate_series(1, 5) g;

-- a quoted table name, with and without more arguments
SELECT * FROM dlock_claim('untyped_jobs', 'h', 3);
SELECT * FROM dlock_claim('public.untyped_jobs', 'h', 3, ttl => '1 min', order_by => 'id DESC');
SELECT dlock_claim('untyped_jobs', 'h', 3);
-- an untyped NULL
SELECT * FROM dlock_claim(NULL, 'h', 3);
-- text, spelt out
SELECT * FROM dlock_claim('untyped_jobs'::text, 'h', 3);
-- nothing was claimed by any of them
SELECT count(*) FROM dlock_claims;

-- the right calls work as before, with any number of arguments
SELECT id FROM dlock_claim(NULL::untyped_jobs, 'h', 2) ORDER BY id;
SELECT id FROM dlock_claim(NULL::untyped_jobs, 'h', 1, order_by => 'id DESC');
SELECT id FROM dlock_claim(NULL::untyped_jobs, 'h', 5, '1 min', 'NOT done', 'id', 3);
SELECT id FROM dlock_claim(NULL::public.untyped_jobs, 'h2', 1);
SELECT dlock_unclaim('untyped_jobs', 'h');
-- a row value of the table's type
SELECT (dlock_claim(j, 'h', 1)).id FROM untyped_jobs j WHERE j.id = 1;
SELECT dlock_unclaim('untyped_jobs', 'h');

-- the two functions of that name
SELECT p.oid::regprocedure, p.prorettype::regtype
  FROM pg_proc p WHERE p.proname = 'dlock_claim' ORDER BY 1::text;

DROP TABLE untyped_jobs;
