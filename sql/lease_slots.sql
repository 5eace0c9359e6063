--
-- lease_slots: counting semaphores, dlock_acquire(key, holder, ttl, wait,
-- slots).  Up to slots holders at once, each with its own token; tokens of
-- a key only grow across its holders; release, renew and validate by key
-- and holder (and token); every acquire names the same slots while anyone
-- holds; slots 1 is a lease.  Keys used here start with 'slots:'.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT coalesce((SELECT acquired FROM dlock_stats()), -1) AS acq0,
       coalesce((SELECT contended FROM dlock_stats()), -1) AS cont0,
       coalesce((SELECT releases FROM dlock_stats()), -1) AS rel0,
       coalesce((SELECT renewals FROM dlock_stats()), -1) AS ren0,
       coalesce((SELECT extended FROM dlock_stats()), -1) AS ext0 \gset

-- the holders of the test's keys, as dlock_locks shows them
CREATE TEMP VIEW held AS
SELECT key, holder, owner
  FROM dlock_locks WHERE key LIKE 'slots:%' ORDER BY key, holder;

--
-- the old calls still resolve to the lease (no ambiguity with the new
-- function); named and positional slots reach the semaphore
--
SELECT dlock_acquire('slots:old2', 'h') > 0 AS two_args,
       dlock_acquire('slots:old3', 'h', '1 min') > 0 AS three_args,
       dlock_acquire('slots:old4', 'h', '1 min', '0') > 0 AS four_args,
       dlock_acquire(key => 'slots:old5', holder => 'h', ttl => '1 min') > 0 AS named;
SELECT dlock_acquire('slots:named', 'h', '1 min', '0', slots => 3) > 0 AS named_slots,
       dlock_acquire(key => 'slots:named', holder => 'h2', ttl => '1 min',
                     wait => '0', slots => 3) > 0 AS all_named,
       dlock_acquire('slots:named', 'h3', '1 min', '0', 3) > 0 AS positional;
SELECT p.oid::regprocedure AS function, p.prosrc, p.provolatile, p.proparallel,
       p.proconfig, obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc p WHERE p.proname = 'dlock_acquire'
 ORDER BY p.pronargs;
-- slots named without a wait (issue 36), or without ttl and wait; the
-- positional forms still mean a lease
SELECT dlock_acquire('slots:nowait', 'n1', '1 min', slots => 3) IS NOT NULL AS named_slots,
       dlock_acquire('slots:nowait', 'n2', slots => 3) IS NOT NULL AS named_slots_only,
       dlock_acquire('slots:named-lease', 'n3') IS NOT NULL AS two_arguments,
       dlock_acquire('slots:named-lease', 'n4', '1 min', '0') IS NULL AS four_arguments_a_lease;
SELECT dlock_release('slots:nowait', 'n1') AND dlock_release('slots:nowait', 'n2')
       AND dlock_release('slots:named-lease', 'n3') AS named_released;
SELECT count(*) AS released FROM held h
 WHERE dlock_release(h.key, h.holder);

--
-- three slots: three holders, each with its own token, growing
--
SELECT dlock_acquire('slots:s', 'a', '1 min', '0', 3) AS ta \gset
SELECT dlock_acquire('slots:s', 'b', '1 min', '0', 3) AS tb \gset
SELECT dlock_acquire('slots:s', 'c', '1 min', '0', 3) AS tc \gset
SELECT :ta < :tb AND :tb < :tc AS tokens_grow;
-- full: a fourth gets NULL at once
SELECT dlock_acquire('slots:s', 'd', '1 min', '0', 3) IS NULL AS fourth_refused;
SELECT * FROM held;
-- the same holder acquiring again extends its own slot: same token
SELECT dlock_acquire('slots:s', 'b', '2 min', '0', 3) = :tb AS b_extended;
SELECT count(*) AS holders FROM held WHERE key = 'slots:s';

--
-- release, renew and validate by the right holder and token only
--
SELECT dlock_release('slots:s', 'd') AS d_releases,
       dlock_release('slots:s', 'a', :tb) AS a_with_b_token,
       dlock_renew('slots:s', 'd') AS d_renews,
       dlock_renew('slots:s', 'a', NULL, :tb) AS a_renews_with_b_token,
       dlock_validate('slots:s', 'a', :tb) AS a_validates_b_token;
SELECT dlock_renew('slots:s', 'a', '5 min', :ta) AS a_renews,
       dlock_validate('slots:s', 'c', :tc) AS c_validates;
SELECT holder, expires_at - acquired_at > '4 min' AS renewed
  FROM dlock_locks WHERE key = 'slots:s' ORDER BY holder;
SELECT dlock_release('slots:s', 'b', :tb) AS b_released;
SELECT * FROM held;
-- a freed slot goes to the next acquire, with a greater token than all
SELECT dlock_acquire('slots:s', 'd', '1 min', '0', 3) AS td \gset
SELECT :td > :tc AS d_token_greatest;
SELECT dlock_acquire('slots:s', 'e', '1 min', '0', 3) IS NULL AS full_again;

--
-- every acquire names the same slots while anyone holds
--
SELECT dlock_acquire('slots:s', 'e', '1 min', '0', 2);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire('slots:s', 'e', '1 min');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
-- a holder too cannot change them
SELECT dlock_acquire('slots:s', 'a', '1 min', '0', 4);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
-- and a lease is slots 1
SELECT dlock_acquire('slots:lease', 'x', '1 min') > 0 AS lease;
SELECT dlock_acquire('slots:lease', 'y', '1 min', '0', 2);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire('slots:lease', 'x', '1 min', '0', 1) > 0 AS slots_1_is_the_lease;
SELECT dlock_acquire('slots:lease', 'y', '1 min', '0', 1) IS NULL AS lease_refuses_y;
-- nothing changed
SELECT * FROM held;

--
-- bad slots (22023) and NULLs (22004)
--
SELECT dlock_acquire('slots:bad', 'h', '1 min', '0', 0);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire('slots:bad', 'h', '1 min', '0', -1);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire('slots:bad', 'h', '1 min', '0', 1001);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire('slots:bad', 'h', '1 min', '0', NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire('slots:bad', 'h', NULL, '0', 2);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire('slots:bad', 'h', '1 min', NULL, 2);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire(NULL, 'h', '1 min', '0', 2);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire('slots:bad', NULL, '1 min', '0', 2);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
-- the limit itself is fine
SELECT dlock_acquire('slots:bad', 'h', '1 min', '0', 1000) > 0 AS thousand_slots;
SELECT dlock_release('slots:bad', 'h') AS released;
SELECT count(*) AS bad_keys_held FROM held WHERE key = 'slots:bad';

--
-- once everyone has gone, the key may be had with other slots
--
SELECT dlock_release('slots:s', 'a') AND dlock_release('slots:s', 'c')
       AND dlock_release('slots:s', 'd') AS all_released;
SELECT dlock_acquire('slots:s', 'x', '1 min') > :td AS now_a_lease;
SELECT dlock_acquire('slots:s', 'y', '1 min') IS NULL AS lease_refuses_y;
SELECT dlock_release('slots:s', 'x') AS released;
SELECT dlock_acquire('slots:s', 'p', '1 min', '0', 2) > 0 AS p,
       dlock_acquire('slots:s', 'q', '1 min', '0', 2) > 0 AS q,
       dlock_acquire('slots:s', 'r', '1 min', '0', 2) IS NULL AS r_refused;
-- slot 0 free, slot 1 held: still a semaphore, a lease is refused
SELECT dlock_release('slots:s', 'p') AS p_released;
SELECT dlock_acquire('slots:s', 'x', '1 min');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT dlock_acquire('slots:s', 'r', '1 min', '0', 2) > 0 AS r_gets_the_free_slot;
SELECT * FROM held;

--
-- an expired slot is taken over (no one else's slot is)
--
SELECT dlock_acquire('slots:exp', 'a', '1 min', '0', 2) > 0 AS a,
       dlock_acquire('slots:exp', 'b', '10 ms', '0', 2) AS tb_exp \gset
SELECT pg_sleep(0.05);
SELECT dlock_renew('slots:exp', 'b') AS expired_b_renews,
       dlock_validate('slots:exp', 'b', :tb_exp) AS expired_b_validates;
SELECT dlock_acquire('slots:exp', 'c', '1 min', '0', 2) > :tb_exp AS c_takes_over;
SELECT dlock_acquire('slots:exp', 'd', '1 min', '0', 2) IS NULL AS d_refused;
SELECT * FROM held WHERE key = 'slots:exp';

--
-- in a transaction: a rolled-back acquire never happened
--
BEGIN;
SELECT dlock_acquire('slots:tx', 'a', '1 min', '0', 2) > 0 AS a;
SELECT dlock_acquire('slots:tx', 'b', '1 min', '0', 2) > 0 AS b;
ROLLBACK;
SELECT count(*) AS after_rollback FROM held WHERE key = 'slots:tx';

--
-- another role cannot see, release, renew or validate a slot
--
CREATE ROLE regress_dlock_slots_alice NOLOGIN;
CREATE ROLE regress_dlock_slots_bob NOLOGIN;
SET ROLE regress_dlock_slots_alice;
SELECT dlock_acquire('slots:roles', 'w', '1 min', '0', 2) AS talice \gset
SET ROLE regress_dlock_slots_bob;
SELECT count(*) AS bob_sees FROM dlock_locks WHERE key = 'slots:roles';
SELECT dlock_release('slots:roles', 'w') AS bob_releases,
       dlock_renew('slots:roles', 'w') AS bob_renews,
       dlock_validate('slots:roles', 'w', :talice) AS bob_validates;
-- bob's own holder 'w' is another slot
SELECT dlock_acquire('slots:roles', 'w', '1 min', '0', 2) <> :talice AS bob_own_slot;
SELECT dlock_acquire('slots:roles', 'w2', '1 min', '0', 2) IS NULL AS full;
SELECT dlock_release_all('w') AS bob_release_all;
SET ROLE regress_dlock_slots_alice;
SELECT count(*) AS alice_sees, bool_and(owner = 'regress_dlock_slots_alice'::regrole) AS alices
  FROM dlock_locks WHERE key = 'slots:roles';
SELECT dlock_release_all('w') AS alice_release_all;
RESET ROLE;
DROP ROLE regress_dlock_slots_alice;
DROP ROLE regress_dlock_slots_bob;

--
-- the operators' force release frees every slot
--
SELECT dlock_acquire('slots:force', 'a', '1 min', '0', 3) > 0 AS a,
       dlock_acquire('slots:force', 'b', '1 min', '0', 3) > 0 AS b;
SELECT dlock_force_release('slots:force') AS forced;
SELECT count(*) AS left_after_force FROM held WHERE key = 'slots:force';
SELECT dlock_force_release('slots:force') AS forced_again;

--
-- counters (only with dlock preloaded): 26 grants (the two rolled back
-- and the takeover included), 7 refusals (the errors are not counted), 16
-- releases (2 by dlock_release_all; forced releases are not counted), 1
-- renewal, 2 re-acquires that extended
--
SELECT CASE WHEN :acq0 = -1 THEN 'not preloaded'
            ELSE ((SELECT acquired FROM dlock_stats()) - :acq0)::text END AS acquired,
       CASE WHEN :cont0 = -1 THEN 'not preloaded'
            ELSE ((SELECT contended FROM dlock_stats()) - :cont0)::text END AS contended,
       CASE WHEN :rel0 = -1 THEN 'not preloaded'
            ELSE ((SELECT releases FROM dlock_stats()) - :rel0)::text END AS releases,
       CASE WHEN :ren0 = -1 THEN 'not preloaded'
            ELSE ((SELECT renewals FROM dlock_stats()) - :ren0)::text END AS renewals,
       CASE WHEN :ext0 = -1 THEN 'not preloaded'
            ELSE ((SELECT extended FROM dlock_stats()) - :ext0)::text END AS extended;

--
-- nothing left behind
--
SELECT count(*) AS released FROM held h WHERE dlock_release(h.key, h.holder);
SELECT count(*) AS left FROM held;
DROP VIEW held;
