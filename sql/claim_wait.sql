--
-- claim_wait: dlock_claim's wait and dlock_claim_wakeup (issue 38), in one
-- session: the arguments and errors, the trigger put on a table once (under
-- hostile names too), the REPEATABLE READ error, and waits that end without
-- any trigger: by their deadline, and by a claim that lapses.  The waits
-- between sessions are in specs/claim_wait_queue.spec and t/105_claim_wait.pl.
--
-- Only stable values are printed; no result depends on how long a wait took.
--
SET dlock.safety_wake = '1h';
CREATE TABLE cw_jobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'new');

-- the new counters are there
SELECT proargnames[14:15] AS new_counters FROM pg_proc WHERE proname = 'dlock_stats';

-- arguments: wait must be an interval from 0 to 1 day, not NULL
SELECT * FROM dlock_claim(NULL::cw_jobs, 'w', 1, wait => NULL);
SELECT * FROM dlock_claim(NULL::cw_jobs, 'w', 1, wait => '-1 second');
SELECT * FROM dlock_claim(NULL::cw_jobs, 'w', 1, wait => '2 days');
-- wait => '0' (the default) does not wait, in any isolation level
SELECT count(*) FROM dlock_claim(NULL::cw_jobs, 'w', 1, wait => '0');

-- REPEATABLE READ and SERIALIZABLE: a waiting claim could never see new rows
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM dlock_claim(NULL::cw_jobs, 'w', 1, wait => '1 second');
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT * FROM dlock_claim(NULL::cw_jobs, 'w', 1, wait => '1 second');
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM dlock_claim(NULL::cw_jobs, 'w', 1, wait => '0');
ROLLBACK;

-- no trigger, nothing claimable: the wait ends at its deadline, empty
SELECT count(*) AS claimed FROM dlock_claim(NULL::cw_jobs, 'w', 1, wait => '20 ms');
-- a claimable row: returned at once, whatever the wait
INSERT INTO cw_jobs VALUES (1);
SELECT id FROM dlock_claim(NULL::cw_jobs, 'w', 5, wait => '1 day');

-- a claim that lapses wakes a waiting claim by itself (this test runs with
-- dlock.safety_wake = '1h', and no trigger is on the table): row 1's claim,
-- given back with a short ttl, comes back to the waiting claim
SELECT dlock_unclaim('cw_jobs', 'w', ARRAY[1]);
SELECT id FROM dlock_claim(NULL::cw_jobs, 'lapse', 1, ttl => '300 ms');
SELECT id, holder FROM dlock_claim(NULL::cw_jobs, 'after', 1, wait => '1 hour') c,
       LATERAL (SELECT holder FROM dlock_claims WHERE key = c.id::text) h;

-- a claim inside a transaction block waits too (READ COMMITTED)
BEGIN;
SELECT count(*) AS claimed FROM dlock_claim(NULL::cw_jobs, 'w', 1, wait => '10 ms');
COMMIT;

-- nobody is left in the queue
SELECT count(*) AS waiters FROM dlock_waiters;

-- dlock_claim_wakeup: NULL, a view, a table without primary key
SELECT dlock_claim_wakeup(NULL);
CREATE VIEW cw_view AS SELECT * FROM cw_jobs;
SELECT dlock_claim_wakeup('cw_view');
CREATE TABLE cw_nopk (x int);
SELECT dlock_claim_wakeup('cw_nopk');
-- the trigger function alone is not a function to call
SELECT dlock_claim_wakeup_trigger();
CREATE TABLE cw_rowtrig (id int PRIMARY KEY);
CREATE TRIGGER t AFTER INSERT ON cw_rowtrig FOR EACH ROW
  EXECUTE FUNCTION dlock_claim_wakeup_trigger();
INSERT INTO cw_rowtrig VALUES (1);

-- put on once, however often it is called
SELECT dlock_claim_wakeup('cw_jobs');
SELECT dlock_claim_wakeup('cw_jobs');
SELECT tgname, tgtype, tgfoid::regproc FROM pg_trigger
 WHERE tgrelid = 'cw_jobs'::regclass ORDER BY tgname;
-- inserts and updates through it work, in savepoints too
BEGIN;
INSERT INTO cw_jobs VALUES (2);
SAVEPOINT s;
UPDATE cw_jobs SET state = 'x' WHERE id = 2;
ROLLBACK TO s;
INSERT INTO cw_jobs VALUES (3);
COMMIT;
SELECT id FROM dlock_claim(NULL::cw_jobs, 'w', 5, wait => '1 second') ORDER BY id;

-- hostile names: the trigger's table and function are quoted
CREATE SCHEMA "cw s""; DROP TABLE cw_jobs; --";
CREATE TABLE "cw s""; DROP TABLE cw_jobs; --"."t""; DROP TABLE cw_jobs; --" (id int PRIMARY KEY);
SELECT dlock_claim_wakeup('"cw s""; DROP TABLE cw_jobs; --"."t""; DROP TABLE cw_jobs; --"');
SELECT dlock_claim_wakeup('"cw s""; DROP TABLE cw_jobs; --"."t""; DROP TABLE cw_jobs; --"');
SELECT count(*) AS triggers FROM pg_trigger
 WHERE tgrelid = '"cw s""; DROP TABLE cw_jobs; --"."t""; DROP TABLE cw_jobs; --"'::regclass;
INSERT INTO "cw s""; DROP TABLE cw_jobs; --"."t""; DROP TABLE cw_jobs; --" VALUES (1);
SELECT count(*) AS cw_jobs_still_there FROM cw_jobs;

-- a row trigger running the function is not dlock's: the statement
-- trigger goes on beside it; a role without the right to create a trigger
-- on the table (it may claim from it) cannot put it on
CREATE TABLE cw_roles (id int PRIMARY KEY);
CREATE ROLE cw_other;
GRANT SELECT, UPDATE ON cw_roles TO cw_other;
SET ROLE cw_other;
SELECT count(*) FROM dlock_claim(NULL::cw_roles, 'w', 1);
SELECT dlock_claim_wakeup('cw_roles');
RESET ROLE;
GRANT TRIGGER ON cw_roles TO cw_other;
SET ROLE cw_other;
SELECT dlock_claim_wakeup('cw_roles');
RESET ROLE;
DROP TRIGGER t ON cw_rowtrig;
CREATE TRIGGER t AFTER INSERT ON cw_rowtrig FOR EACH ROW
  EXECUTE FUNCTION dlock_claim_wakeup_trigger();
SELECT dlock_claim_wakeup('cw_rowtrig');
SELECT tgrelid::regclass, tgname, tgtype FROM pg_trigger
 WHERE tgrelid IN ('cw_roles'::regclass, 'cw_rowtrig'::regclass)
 ORDER BY 1, 2;

-- clean up
SELECT dlock_reset_claims('cw_jobs', ARRAY[1, 2, 3]);
DROP SCHEMA "cw s""; DROP TABLE cw_jobs; --" CASCADE;
DROP TABLE cw_jobs, cw_nopk, cw_rowtrig, cw_roles CASCADE;
DROP ROLE cw_other;
