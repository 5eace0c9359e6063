--
-- guard_basic: dlock_guard (issue 40) in one session.  A guarded table's
-- writes are refused (SQLSTATE LK001) unless the transaction fenced the
-- row's key with dlock_validate, or the row's claim with dlock_claimed;
-- the fence of a rolled-back savepoint is forgotten; TRUNCATE is refused;
-- token_column is stamped and a lower token refused.  Tokens are compared,
-- never shown.  Keys used here start with 'g/'; everything is dropped at
-- the end and no lease is left behind.
--
\set VERBOSITY terse
\set SHOW_CONTEXT never

-- the API as the contract says
SELECT p.oid::regprocedure AS function,
       pg_get_function_arguments(p.oid) AS arguments,
       pg_get_function_result(p.oid) AS returns, p.proisstrict AS strict
  FROM pg_proc p
 WHERE p.proname IN ('dlock_guard', 'dlock_unguard', 'dlock_guard_trigger')
 ORDER BY p.oid::regprocedure::text;
SELECT attname, atttypid::regtype FROM pg_attribute
 WHERE attrelid = 'dlock_guards'::regclass AND attnum > 0 ORDER BY attnum;

CREATE TABLE reports (id int PRIMARY KEY, body text, tok bigint);
INSERT INTO reports VALUES (1, 'one', NULL), (2, 'two', NULL);
SELECT dlock_guard('reports', $$'g/' || id$$);
SELECT table_name, key, operations, token_column FROM dlock_guards;

SELECT dlock_acquire('g/1', 'w1', '1 hour') AS t1 \gset
SELECT dlock_acquire('g/2', 'w2', '1 hour') AS t2 \gset

-- no fence: refused, with its SQLSTATE, message, detail and hint
\set VERBOSITY default
UPDATE reports SET body = 'x' WHERE id = 1;
\set VERBOSITY terse
\echo :LAST_ERROR_SQLSTATE
INSERT INTO reports VALUES (3, 'three');
DELETE FROM reports WHERE id = 2;

-- fenced: allowed, for that key only
BEGIN;
SELECT dlock_validate('g/1', 'w1', :t1) AS fenced;
UPDATE reports SET body = 'one, fenced' WHERE id = 1;
UPDATE reports SET body = 'two, unfenced' WHERE id = 2;
ROLLBACK;
BEGIN;
SELECT dlock_validate('g/1', 'w1', :t1) AS fenced;
UPDATE reports SET body = 'one, fenced' WHERE id = 1;
COMMIT;
SELECT id, body FROM reports ORDER BY id;

-- the fence in the statement's own WHERE clause
UPDATE reports SET body = 'one, in where' WHERE id = 1 AND dlock_validate('g/1', 'w1', :t1);
SELECT body FROM reports WHERE id = 1;

-- a fence is the transaction's: the next one has none
UPDATE reports SET body = 'later' WHERE id = 1;

-- a wrong token, another holder: validate is false, the write refused
BEGIN;
SELECT dlock_validate('g/1', 'w1', :t1 - 1) AS wrong_token;
UPDATE reports SET body = 'wrong token' WHERE id = 1;
ROLLBACK;
BEGIN;
SELECT dlock_validate('g/1', 'w2', :t1) AS wrong_holder;
UPDATE reports SET body = 'wrong holder' WHERE id = 1;
ROLLBACK;

-- savepoints: a fence made in a rolled-back savepoint is forgotten; one
-- of a released savepoint is the transaction's
BEGIN;
SAVEPOINT a;
SELECT dlock_validate('g/1', 'w1', :t1) AS fenced_in_a;
ROLLBACK TO SAVEPOINT a;
UPDATE reports SET body = 'after rollback to a' WHERE id = 1;
ROLLBACK;
BEGIN;
SAVEPOINT a;
SELECT dlock_validate('g/1', 'w1', :t1) AS fenced_in_a;
RELEASE SAVEPOINT a;
SAVEPOINT b;
SELECT dlock_validate('g/2', 'w2', :t2) AS fenced_in_b;
ROLLBACK TO SAVEPOINT b;
UPDATE reports SET body = 'kept from a' WHERE id = 1;
UPDATE reports SET body = 'forgotten with b' WHERE id = 2;
ROLLBACK;
-- an exception block is a subtransaction too
SELECT set_config('g.t2', :'t2', false) IS NOT NULL AS set;
BEGIN;
DO $$
BEGIN
  PERFORM dlock_validate('g/2', 'w2', current_setting('g.t2')::bigint);
  RAISE division_by_zero;
EXCEPTION WHEN division_by_zero THEN NULL;
END $$;
UPDATE reports SET body = 'fence of a failed block' WHERE id = 2;
ROLLBACK;

-- insert: the new row's key; delete: the old row's
BEGIN;
SELECT dlock_validate('g/2', 'w2', :t2) AS fenced;
INSERT INTO reports VALUES (3, 'three');
DELETE FROM reports WHERE id = 2;
ROLLBACK;
SELECT dlock_acquire('g/3', 'w3', '1 hour') AS t3 \gset
BEGIN;
SELECT dlock_validate('g/3', 'w3', :t3) AS fenced;
INSERT INTO reports VALUES (3, 'three');
DELETE FROM reports WHERE id = 2;
ROLLBACK;
BEGIN;
SELECT dlock_validate('g/3', 'w3', :t3) AS fenced;
INSERT INTO reports VALUES (3, 'three');
DELETE FROM reports WHERE id = 3;
COMMIT;

-- an update that moves a row to another key needs both fences
BEGIN;
SELECT dlock_validate('g/1', 'w1', :t1) AS fenced_old;
UPDATE reports SET id = 3 WHERE id = 1;
ROLLBACK;
BEGIN;
SELECT dlock_validate('g/3', 'w3', :t3) AS fenced_new;
UPDATE reports SET id = 3 WHERE id = 1;
ROLLBACK;
BEGIN;
SELECT dlock_validate('g/1', 'w1', :t1) AND dlock_validate('g/3', 'w3', :t3) AS fenced_both;
UPDATE reports SET id = 3 WHERE id = 1;
ROLLBACK;

-- TRUNCATE is refused; COPY FROM fires the row trigger
TRUNCATE reports;
-- the statement trigger alone refuses it too (a backend that has not
-- loaded dlock makes no check before TRUNCATE): made to fire under
-- session_replication_role = replica, where that check stands aside
ALTER TABLE reports ENABLE ALWAYS TRIGGER zz_dlock_guard_truncate;
SET session_replication_role = replica;
TRUNCATE reports;
RESET session_replication_role;
ALTER TABLE reports ENABLE TRIGGER zz_dlock_guard_truncate;
COPY reports (id, body) FROM stdin;
4	copied
\.
SELECT count(*) AS rows FROM reports;

-- operations: only the chosen ones are guarded; dlock_guard replaces the guard
SELECT dlock_guard('reports', $$'g/' || id$$, '{delete}');
SELECT table_name, key, operations, token_column FROM dlock_guards;
INSERT INTO reports VALUES (5, 'five, unguarded insert');
UPDATE reports SET body = 'unguarded update' WHERE id = 5;
DELETE FROM reports WHERE id = 5;
SELECT dlock_guard('reports', $$'g/' || id$$, '{INSERT,frobnicate}');
SELECT dlock_guard('reports', $$'g/' || id$$, '{}');
SELECT dlock_guard('reports', NULL);

-- the key: one expression, checked when the guard is put
SELECT dlock_guard('reports', $$id) FROM pg_class AS x WHERE (true$$);
SELECT dlock_guard('reports', $$1), (2$$);
SELECT dlock_guard('reports', $$1); DROP TABLE reports; SELECT (1$$);
SELECT dlock_guard('reports', $$no_such_column$$);
SELECT dlock_guard('reports', $$'g/' || id$$, token_column => 'nope');
SELECT dlock_guard('reports', $$'g/' || id$$, token_column => 'body');

-- a constant key guards the whole table
SELECT dlock_guard('reports', $$'g/all'$$);
SELECT dlock_acquire('g/all', 'w1', '1 hour') AS tall \gset
UPDATE reports SET body = 'no fence' WHERE id = 1;
BEGIN;
SELECT dlock_validate('g/all', 'w1', :tall) AS fenced;
UPDATE reports SET body = 'whole table' WHERE id IN (1, 2);
COMMIT;
SELECT id, body FROM reports ORDER BY id;

-- token_column: stamped with the fence's token; a lower token is refused
SELECT dlock_guard('reports', $$'g/' || id$$, token_column => 'tok');
SELECT table_name, key, operations, token_column FROM dlock_guards;
BEGIN;
SELECT dlock_validate('g/1', 'w1', :t1) AS fenced;
UPDATE reports SET body = 'stamped' WHERE id = 1;
COMMIT;
SELECT tok = :t1 AS stamped_with_t1 FROM reports WHERE id = 1;
-- the lease moves on: released, taken again with a higher token
SELECT dlock_release('g/1', 'w1');
SELECT dlock_acquire('g/1', 'w1', '1 hour') AS t1b \gset
SELECT :t1b > :t1 AS higher;
BEGIN;
SELECT dlock_validate('g/1', 'w1', :t1b) AS fenced;
UPDATE reports SET body = 'stamped again', tok = 0 WHERE id = 1;
COMMIT;
SELECT tok = :t1b AS stamped_with_t1b FROM reports WHERE id = 1;
-- a row holding a higher token than the fence's: refused
UPDATE reports SET tok = :t1b + 1000 WHERE id = 1 AND dlock_validate('g/1', 'w1', :t1b);
SELECT dlock_unguard('reports');
UPDATE reports SET tok = :t1b + 1000 WHERE id = 1;
SELECT dlock_guard('reports', $$'g/' || id$$, token_column => 'tok');
UPDATE reports SET body = 'lower token' WHERE id = 1 AND dlock_validate('g/1', 'w1', :t1b);
\echo :LAST_ERROR_SQLSTATE
SELECT body FROM reports WHERE id = 1;

-- unguard: everything goes through again; a second unguard says false
SELECT dlock_unguard('reports') AS had_guard;
SELECT dlock_unguard('reports') AS had_guard;
SELECT count(*) AS guards FROM dlock_guards;
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'reports'::regclass;
TRUNCATE reports;

-- only the owner or a superuser may guard; the view shows tables one can read
CREATE ROLE regress_dlock_guard_other NOLOGIN;
GRANT SELECT ON reports TO regress_dlock_guard_other;
CREATE TABLE hidden (id int PRIMARY KEY);
SELECT dlock_guard('reports', $$'g/' || id$$);
SELECT dlock_guard('hidden', $$'g/h'$$);
SET ROLE regress_dlock_guard_other;
SELECT dlock_guard('reports', $$'g/' || id$$);
\echo :LAST_ERROR_SQLSTATE
SELECT dlock_unguard('reports');
SELECT table_name FROM dlock_guards ORDER BY table_name::text;
RESET ROLE;
SELECT table_name FROM dlock_guards ORDER BY table_name::text;
SELECT dlock_unguard('reports'), dlock_unguard('hidden');
DROP TABLE hidden;

-- hostile names: a table, schema and columns that need quoting
CREATE SCHEMA "g s""; DROP";
CREATE TABLE "g s""; DROP"."t'; --" ("i d" int PRIMARY KEY, "to""k" bigint);
SELECT dlock_guard('"g s""; DROP"."t''; --"', $$'g/' || "i d"$$, token_column => 'to"k');
SELECT table_name, key, token_column FROM dlock_guards;
INSERT INTO "g s""; DROP"."t'; --" VALUES (1, NULL);
BEGIN;
SELECT dlock_validate('g/1', 'w1', :t1b) AS fenced;
INSERT INTO "g s""; DROP"."t'; --" VALUES (1, NULL);
SELECT "to""k" = :t1b AS stamped FROM "g s""; DROP"."t'; --";
ROLLBACK;
SELECT dlock_unguard('"g s""; DROP"."t''; --"');
DROP SCHEMA "g s""; DROP" CASCADE;

-- the key is resolved with search_path pinned: a writer's own || operator,
-- first in its search_path, does not make every row's key 'g/1'
CREATE TABLE pinned (id int PRIMARY KEY, body text);
INSERT INTO pinned VALUES (1, 'one'), (2, 'two');
SELECT dlock_guard('pinned', $$'g/' || id$$);
CREATE SCHEMA gevil;
CREATE FUNCTION gevil.cat(text, int) RETURNS text LANGUAGE sql AS $$SELECT 'g/1'$$;
CREATE OPERATOR gevil.|| (leftarg = text, rightarg = int, function = gevil.cat);
SET search_path = gevil, pg_catalog, public;
SELECT 'g/' || 2 AS evil_concatenation;
BEGIN;
SELECT dlock_validate('g/1', 'w1', :t1b) AS fenced;
UPDATE pinned SET body = 'redirected' WHERE id = 2;
ROLLBACK;
RESET search_path;
SELECT dlock_unguard('pinned');
DROP TABLE pinned;
DROP SCHEMA gevil CASCADE;

-- a partitioned table: the guard on the parent applies to its partitions,
-- present and attached later; TRUNCATE of a present partition is refused
CREATE TABLE parts (id int PRIMARY KEY, body text) PARTITION BY RANGE (id);
CREATE TABLE parts_low PARTITION OF parts FOR VALUES FROM (0) TO (10);
SELECT dlock_guard('parts', $$'g/' || id$$);
CREATE TABLE parts_high PARTITION OF parts FOR VALUES FROM (10) TO (100);
INSERT INTO parts VALUES (1, 'low');
INSERT INTO parts_low VALUES (1, 'low');
INSERT INTO parts VALUES (11, 'high');
BEGIN;
SELECT dlock_validate('g/1', 'w1', :t1b) AS fenced;
INSERT INTO parts VALUES (1, 'low');
INSERT INTO parts_low VALUES (2, 'low');
COMMIT;
SELECT dlock_acquire('g/11', 'w1', '1 hour') AS t11 \gset
BEGIN;
SELECT dlock_validate('g/11', 'w1', :t11) AS fenced;
INSERT INTO parts VALUES (11, 'high');
-- moving the row to another partition is a delete and an insert: key g/1
UPDATE parts SET id = 1 WHERE id = 11;
ROLLBACK;
TRUNCATE parts;
TRUNCATE parts_low;
ALTER TABLE parts_low ENABLE ALWAYS TRIGGER zz_dlock_guard_truncate;
SET session_replication_role = replica;
TRUNCATE parts_low;
RESET session_replication_role;
ALTER TABLE parts_low ENABLE TRIGGER zz_dlock_guard_truncate;
-- a partition made after dlock_guard has no statement trigger: the check
-- before TRUNCATE (dlock's ProcessUtility hook) refuses it all the same
TRUNCATE parts_high;
-- unless the owner disabled the guard's row trigger there
ALTER TABLE parts_high DISABLE TRIGGER zz_dlock_guard;
TRUNCATE parts_high;
ALTER TABLE parts_high ENABLE TRIGGER zz_dlock_guard;
-- and session_replication_role = replica bypasses it, as it bypasses the
-- row trigger (logical replication's apply)
SET session_replication_role = replica;
INSERT INTO parts VALUES (12, 'replicated');
TRUNCATE parts_high;
RESET session_replication_role;
INSERT INTO parts VALUES (13, 'origin again');
SELECT table_name FROM dlock_guards;
SELECT dlock_unguard('parts');
SELECT count(*) AS triggers FROM pg_trigger
 WHERE tgrelid IN ('parts'::regclass, 'parts_low'::regclass, 'parts_high'::regclass);
DROP TABLE parts;

-- a claim table: the row's live claim (dlock_claimed) lets its writes through
CREATE TABLE jobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0);
INSERT INTO jobs SELECT g FROM generate_series(1, 3) g;
SELECT dlock_guard('jobs', $$'job/' || id$$);
SELECT count(*) AS claimed FROM dlock_claim(NULL::jobs, 'cw', 1, '1 hour', order_by => 'id');
UPDATE jobs SET status = 1 WHERE id = 1;
BEGIN;
SELECT dlock_claimed('jobs', 1, 'cw') AS claimed;
UPDATE jobs SET status = 1 WHERE id = 1;
UPDATE jobs SET status = 1 WHERE id = 2;
ROLLBACK;
BEGIN;
SELECT dlock_claimed('jobs', 2, 'cw') AS not_claimed;
UPDATE jobs SET status = 1 WHERE id = 2;
ROLLBACK;
BEGIN;
SELECT dlock_claimed('jobs', 1, 'cw') AS claimed;
UPDATE jobs SET status = 1 WHERE id = 1;
COMMIT;
SELECT id, status FROM jobs ORDER BY id;
SELECT dlock_unclaim('jobs', 'cw');
SELECT dlock_unguard('jobs');
DROP TABLE jobs;

-- clean up
DROP TABLE reports;
DROP ROLE regress_dlock_guard_other;
SELECT dlock_release_all(h) FROM unnest(ARRAY['w1', 'w2', 'w3']) h;
SELECT count(*) AS leases_left FROM dlock_locks WHERE key LIKE 'g/%';
