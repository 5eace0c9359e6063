--
-- lease_shared: shared leases, dlock_acquire_shared(key, holder, ttl, wait).
-- Any number of shared holders, or one holder of the key's lease
-- (dlock_acquire), never both; each shared holder has its own token;
-- release, renew and validate as for a lease; a semaphore's slots are not
-- shared leases.  Keys used here start with 'shared:'.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT coalesce((SELECT acquired FROM dlock_stats()), -1) AS acq0,
       coalesce((SELECT contended FROM dlock_stats()), -1) AS cont0,
       coalesce((SELECT releases FROM dlock_stats()), -1) AS rel0 \gset

CREATE TEMP VIEW held AS
SELECT key, holder, owner
  FROM dlock_locks WHERE key LIKE 'shared:%' ORDER BY key, holder;

-- the function: its defaults, markings and comment
SELECT p.oid::regprocedure AS function, pg_get_function_arguments(p.oid) AS arguments,
       p.prosrc, p.provolatile, p.proparallel, p.proisstrict, p.proconfig,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc p WHERE p.proname = 'dlock_acquire_shared';

--
-- readers share, each with its own token; a writer is refused while they hold
--
SELECT dlock_acquire_shared('shared:k', 'r1') AS t1 \gset
SELECT dlock_acquire_shared('shared:k', 'r2', '1 min') AS t2 \gset
SELECT dlock_acquire_shared('shared:k', 'r3', '1 min', '0') AS t3 \gset
SELECT :t1 < :t2 AND :t2 < :t3 AS tokens_grow;
SELECT * FROM held;
SELECT dlock_acquire('shared:k', 'w', '1 min') IS NULL AS writer_refused;
-- a reader acquiring again extends its own lease: same token
SELECT dlock_acquire_shared('shared:k', 'r2', '5 min') = :t2 AS r2_extended;
-- a shared holder asking for the lease itself: an error at once naming
-- its shared lease, not a wait for itself (no upgrade; issue 35)
SELECT dlock_acquire('shared:k', 'r1', '1 min', '1 h');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
-- a semaphore is not shared leases
SELECT dlock_acquire('shared:k', 'x', '1 min', '0', 3);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;

--
-- release, renew and validate by the right holder and token only
--
SELECT dlock_release('shared:k', 'w') AS w_releases,
       dlock_release('shared:k', 'r1', :t2) AS r1_with_r2_token,
       dlock_renew('shared:k', 'w') AS w_renews,
       dlock_validate('shared:k', 'r1', :t2) AS r1_validates_r2_token;
SELECT dlock_renew('shared:k', 'r1', '5 min', :t1) AS r1_renews,
       dlock_validate('shared:k', 'r3', :t3) AS r3_validates;
SELECT dlock_release('shared:k', 'r1') AND dlock_release('shared:k', 'r2')
       AS r1_r2_released;
SELECT dlock_acquire('shared:k', 'w', '1 min') IS NULL AS writer_refused_while_r3;
SELECT dlock_release('shared:k', 'r3', :t3) AS r3_released;

--
-- the writer once the readers are gone; readers refused while it holds
--
SELECT dlock_acquire('shared:k', 'w', '1 min') AS tw \gset
SELECT :tw > :t3 AS writer_token_greatest;
-- the lease's holder asking for a shared lease: the same error, at once
SELECT dlock_acquire_shared('shared:k', 'w', '1 min', '1 h');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire_shared('shared:k', 'r1') IS NULL AS reader_refused;
SELECT * FROM held;
SELECT dlock_release('shared:k', 'w', :tw) AS w_released;
SELECT dlock_acquire_shared('shared:k', 'r1') > :tw AS reader_after_writer;

--
-- an expired writer is taken over by a reader, an expired reader by a writer
--
SELECT dlock_acquire('shared:exp', 'w', '10 ms') > 0 AS w;
SELECT pg_sleep(0.05);
SELECT dlock_acquire_shared('shared:exp', 'r', '10 ms') > 0 AS reader_takes_over;
SELECT pg_sleep(0.05);
SELECT dlock_acquire('shared:exp', 'w2', '1 min') > 0 AS writer_takes_over;
SELECT * FROM held WHERE key = 'shared:exp';

--
-- semaphores and shared leases do not mix
--
SELECT dlock_acquire('shared:sem', 'a', '1 min', '0', 2) > 0 AS semaphore;
SELECT dlock_acquire_shared('shared:sem', 'b');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;

--
-- NULLs and bad arguments are errors, as for dlock_acquire
--
SELECT dlock_acquire_shared(NULL, 'h');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire_shared('shared:bad', NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire_shared('shared:bad', 'h', NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire_shared('shared:bad', 'h', '1 min', NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire_shared('shared:bad', 'h', '0');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire_shared('shared:bad', 'h', '1 min', '-1 s');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;

--
-- another role cannot see, release, renew or validate a shared lease
--
CREATE ROLE regress_dlock_shared_alice NOLOGIN;
CREATE ROLE regress_dlock_shared_bob NOLOGIN;
SET ROLE regress_dlock_shared_alice;
SELECT dlock_acquire_shared('shared:roles', 'r', '1 min') AS talice \gset
SET ROLE regress_dlock_shared_bob;
SELECT count(*) AS bob_sees FROM dlock_locks WHERE key = 'shared:roles';
SELECT dlock_release('shared:roles', 'r') AS bob_releases,
       dlock_renew('shared:roles', 'r') AS bob_renews,
       dlock_validate('shared:roles', 'r', :talice) AS bob_validates;
SELECT dlock_acquire_shared('shared:roles', 'r', '1 min') <> :talice AS bob_shares_too;
SELECT dlock_release_all('r') AS bob_release_all;
SET ROLE regress_dlock_shared_alice;
SELECT count(*) AS alice_sees FROM dlock_locks WHERE key = 'shared:roles';
SELECT dlock_release_all('r') AS alice_release_all;
RESET ROLE;
DROP ROLE regress_dlock_shared_alice;
DROP ROLE regress_dlock_shared_bob;

--
-- counters (only with dlock preloaded): 11 grants (the re-acquire that
-- extended is not one; the two takeovers are), 5 refusals (errors are not
-- counted), 6 releases (2 by dlock_release_all)
--
SELECT CASE WHEN :acq0 = -1 THEN 'not preloaded'
            ELSE ((SELECT acquired FROM dlock_stats()) - :acq0)::text END AS acquired,
       CASE WHEN :cont0 = -1 THEN 'not preloaded'
            ELSE ((SELECT contended FROM dlock_stats()) - :cont0)::text END AS contended,
       CASE WHEN :rel0 = -1 THEN 'not preloaded'
            ELSE ((SELECT releases FROM dlock_stats()) - :rel0)::text END AS releases;

--
-- nothing left behind
--
SELECT count(*) AS released FROM held h WHERE dlock_release(h.key, h.holder);
SELECT count(*) AS left FROM held;
DROP VIEW held;
