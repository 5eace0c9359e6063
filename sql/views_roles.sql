--
-- views_roles: dlock_locks, dlock_claims and dlock_dead_claims show a role
-- only the leases and claims of roles whose privileges it has, claims only
-- on tables it may read, and everything to superusers and to members of
-- pg_read_all_stats.  (dlock_waiters follows the same rule; it needs
-- waiting sessions, see t/015_wake.pl for waits.)
--
-- Keys start with 'vr:'.  Everything created is dropped at the end.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE ROLE regress_dlock_va NOLOGIN;
CREATE ROLE regress_dlock_vb NOLOGIN;
CREATE ROLE regress_dlock_vmember NOLOGIN IN ROLE regress_dlock_va;
CREATE ROLE regress_dlock_vmon NOLOGIN IN ROLE pg_read_all_stats;

CREATE TABLE vr_jobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0);
INSERT INTO vr_jobs SELECT g FROM generate_series(1, 6) g;
GRANT SELECT, UPDATE ON vr_jobs TO regress_dlock_va, regress_dlock_vb;
-- the monitoring role may not read the table at all
REVOKE ALL ON vr_jobs FROM regress_dlock_vmon;

SET ROLE regress_dlock_va;
SELECT dlock_acquire('vr:a', 'holder-a', '1 hour') IS NOT NULL AS a_got_lease;
SELECT count(*) AS a_claimed FROM dlock_claim(NULL::vr_jobs, 'holder-a', 2, '1 hour');
-- a poisoned row of a: claimed once with max_attempts 1, then given up
SELECT count(*) AS a_claimed_short
  FROM dlock_claim(NULL::vr_jobs, 'holder-a', 1, '10 ms', 'id = 6');
SELECT pg_sleep(0.05);
SELECT count(*) AS poisoned_now
  FROM dlock_claim(NULL::vr_jobs, 'holder-a', 1, '1 hour', 'id = 6', max_attempts => 1);
RESET ROLE;

SET ROLE regress_dlock_vb;
SELECT dlock_acquire('vr:b', 'holder-b', '1 hour') IS NOT NULL AS b_got_lease;
SELECT count(*) AS b_claimed FROM dlock_claim(NULL::vr_jobs, 'holder-b', 2, '1 hour');
RESET ROLE;

-- each role sees its own, not the other's
SET ROLE regress_dlock_va;
SELECT key, holder FROM dlock_locks WHERE key LIKE 'vr:%' ORDER BY key;
SELECT holder, count(*) FROM dlock_claims WHERE table_name = 'vr_jobs'::regclass GROUP BY holder ORDER BY holder;
SELECT key, last_holder FROM dlock_dead_claims WHERE table_name = 'vr_jobs'::regclass;
RESET ROLE;
SET ROLE regress_dlock_vb;
SELECT key, holder FROM dlock_locks WHERE key LIKE 'vr:%' ORDER BY key;
SELECT holder, count(*) FROM dlock_claims WHERE table_name = 'vr_jobs'::regclass GROUP BY holder ORDER BY holder;
SELECT count(*) AS b_sees_dead FROM dlock_dead_claims WHERE table_name = 'vr_jobs'::regclass;
RESET ROLE;

-- a member of a sees a's
SET ROLE regress_dlock_vmember;
SELECT key, holder FROM dlock_locks WHERE key LIKE 'vr:%' ORDER BY key;
SELECT holder, count(*) FROM dlock_claims WHERE table_name = 'vr_jobs'::regclass GROUP BY holder ORDER BY holder;
RESET ROLE;

-- the monitoring role sees everything, even claims on a table it cannot read
SET ROLE regress_dlock_vmon;
SELECT key, holder FROM dlock_locks WHERE key LIKE 'vr:%' ORDER BY key;
SELECT holder, count(*) FROM dlock_claims WHERE table_name = 'vr_jobs'::regclass GROUP BY holder ORDER BY holder;
SELECT count(*) AS mon_sees_dead FROM dlock_dead_claims WHERE table_name = 'vr_jobs'::regclass;
RESET ROLE;

-- without SELECT on the table, a role no longer sees even its own claims
-- on it (their keys are the table's primary keys)
REVOKE SELECT ON vr_jobs FROM regress_dlock_va;
SET ROLE regress_dlock_va;
SELECT count(*) AS a_sees_claims_without_select FROM dlock_claims WHERE holder = 'holder-a';
SELECT count(*) AS a_sees_dead_without_select FROM dlock_dead_claims WHERE last_holder = 'holder-a';
SELECT count(*) AS a_sees_own_lease FROM dlock_locks WHERE key = 'vr:a';
RESET ROLE;

-- superuser sees all
SELECT key, holder FROM dlock_locks WHERE key LIKE 'vr:%' ORDER BY key;
SELECT holder, count(*) FROM dlock_claims WHERE table_name = 'vr_jobs'::regclass GROUP BY holder ORDER BY holder;

-- clean up
SELECT dlock_force_release('vr:a'), dlock_force_release('vr:b');
SELECT dlock_reset_claims('vr_jobs', ARRAY[1, 2, 3, 4, 5, 6]);
DROP TABLE vr_jobs;
DROP ROLE regress_dlock_vmember, regress_dlock_vmon, regress_dlock_va, regress_dlock_vb;
