-- dlock's functions inside queries with parallel plans: a function that
-- reads dlock's tables with a snapshot of its own must not be marked
-- parallel safe or restricted, since even the leader of a parallel plan
-- cannot take a new snapshot ("cannot update SecondarySnapshot during a
-- parallel operation").  Each is called beside a Gather; the list of the
-- functions not marked unsafe is checked, so that a new one is looked at.
CREATE TABLE par_big AS SELECT g FROM generate_series(1, 20000) g;
ANALYZE par_big;
CREATE TABLE par_jobs (id int PRIMARY KEY);
INSERT INTO par_jobs SELECT generate_series(1, 10);
SELECT count(*) FROM dlock_claim(NULL::par_jobs, 'par', 3, '1 h');
SELECT dlock_acquire('par-key', 'par', '1 h') IS NOT NULL AS acquired;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
CREATE FUNCTION par_gathers(q text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    l text;
BEGIN
    FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
        IF l LIKE '%Gather%' THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END $$;
SELECT par_gathers('SELECT (SELECT count(*) FROM par_big), (SELECT count(*) FROM dlock_locks)') AS gathers;
SELECT (SELECT count(*) FROM par_big) AS big, (SELECT count(*) FROM dlock_locks WHERE key = 'par-key') AS locks;
SELECT (SELECT count(*) FROM par_big) AS big, (SELECT count(*) FROM dlock_claims WHERE table_name = 'par_jobs'::regclass) AS claims;
SELECT (SELECT count(*) FROM par_big) AS big, (SELECT count(*) FROM dlock_dead_claims) AS dead;
SELECT (SELECT count(*) FROM par_big) AS big, (SELECT holder FROM dlock_leader('par-key')) AS leader;
SELECT (SELECT count(*) FROM par_big) AS big, (SELECT count(*) FROM dlock_waiters) AS waiters;
SELECT (SELECT count(*) FROM par_big) AS big, (SELECT acquired > 0 FROM dlock_stats()) AS stats;
SELECT (SELECT count(*) FROM par_big) AS big,
       (SELECT count(*) FROM par_jobs WHERE dlock_claim_unheld('par_jobs', id)) AS unheld;
-- the joined side scanned in parallel, the function in the leader
SELECT par_gathers('SELECT count(*) FROM par_big b JOIN dlock_claims c ON c.key = b.g::text') AS gathers;
SELECT count(*) FROM par_big b JOIN dlock_claims c ON c.key = b.g::text;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
-- every function of the extension not marked parallel unsafe, and why it
-- may be: these read no table with a snapshot of their own
SELECT p.oid::regprocedure AS function, p.proparallel
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dlock')
   AND p.proparallel <> 'u'
 ORDER BY p.oid::regprocedure::text;
SELECT dlock_release_all('par');
DROP TABLE par_big, par_jobs;
DROP FUNCTION par_gathers(text);
