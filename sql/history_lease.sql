--
-- history_lease: dlock.history records each ended tenure of a tracked lease
-- key once, in the transaction that ends it: released, taken_over,
-- expired (a sweep), force_released, released_all; nothing for rolled-back
-- work or untracked keys; the dlock_history view shows a role only the
-- rows of roles whose privileges it has; dlock_held_at; retention.
--
-- Keys used here start with 'hist:' (tracked) and 'nohist:' (not).
-- Everything created is dropped at the end.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE ROLE regress_dlock_hist_a NOLOGIN;
CREATE ROLE regress_dlock_hist_b NOLOGIN;
CREATE ROLE regress_dlock_hist_mon NOLOGIN IN ROLE pg_read_all_stats;
GRANT EXECUTE ON FUNCTION dlock_force_release(text) TO regress_dlock_hist_a;

-- who may change what is tracked
SELECT p.oid::regprocedure AS function,
       has_function_privilege('regress_dlock_hist_b', p.oid, 'EXECUTE') AS b_may_execute
  FROM pg_proc p
 WHERE p.proname IN ('dlock_history_track', 'dlock_history_untrack',
                     'dlock_history_track_claims', 'dlock_history_untrack_claims',
                     'dlock_history', 'dlock_held_at')
 ORDER BY p.oid::regprocedure::text COLLATE "C";
SELECT has_table_privilege('regress_dlock_hist_b', 'dlock.history',
                           'SELECT,INSERT,UPDATE,DELETE,TRUNCATE') AS any_right_on_history,
       has_table_privilege('regress_dlock_hist_b', 'dlock_history', 'SELECT') AS select_on_view;
SET ROLE regress_dlock_hist_b;
SELECT dlock_history_track('hist:');
RESET ROLE;

-- nothing tracked: nothing written
SELECT dlock_acquire('hist:0', 'h', '1h') > 0 AS acquired;
SELECT dlock_release('hist:0', 'h') AS released;
SELECT count(*) AS rows_untracked FROM dlock.history;

-- track the prefix; twice is no change
SELECT dlock_history_track('hist:') AS tracked;
SELECT dlock_history_track('hist:') AS tracked_again;
SELECT dlock_history_track(NULL);
SELECT prefix FROM dlock.history_keys;

-- released
SELECT dlock_acquire('hist:r', 'h1', '1h') AS t_r \gset
SELECT dlock_release('hist:r', 'h1') AS released;
SELECT kind, key, table_name, holder, role, token = :t_r AS same_token,
       ended, attempts, granted_at <= ended_at AS ordered
  FROM dlock_history WHERE key = 'hist:r';

-- an untracked key writes nothing
SELECT dlock_acquire('nohist:x', 'h1', '1h') > 0 AS acquired;
SELECT dlock_release('nohist:x', 'h1') AS released;
SELECT count(*) AS rows_nohist FROM dlock.history WHERE key LIKE 'nohist:%';

-- a rolled-back release writes nothing; the committed one, one row
SELECT dlock_acquire('hist:rb', 'h1', '1h') > 0 AS acquired;
BEGIN;
SELECT dlock_release('hist:rb', 'h1') AS released_in_xact;
SELECT count(*) AS row_in_xact FROM dlock.history WHERE key = 'hist:rb';
ROLLBACK;
SELECT count(*) AS rows_after_rollback FROM dlock.history WHERE key = 'hist:rb';
-- a release rolled back to a savepoint writes nothing either
BEGIN;
SAVEPOINT s;
SELECT dlock_release('hist:rb', 'h1') AS released_in_savepoint;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT count(*) AS rows_after_savepoint_rollback FROM dlock.history WHERE key = 'hist:rb';
SELECT holder FROM dlock_locks WHERE key = 'hist:rb';
BEGIN;
SAVEPOINT s;
SELECT dlock_release('hist:rb', 'h1') AS released_in_savepoint;
RELEASE SAVEPOINT s;
COMMIT;
SELECT ended, count(*) FROM dlock.history WHERE key = 'hist:rb' GROUP BY ended;
-- an acquire and release in a rolled-back transaction: no row
BEGIN;
SELECT dlock_acquire('hist:rb2', 'h1', '1h') > 0 AS acquired;
SELECT dlock_release('hist:rb2', 'h1') AS released;
ROLLBACK;
SELECT count(*) AS rows_rb2 FROM dlock.history WHERE key = 'hist:rb2';

-- taken over: the acquire that finds the lease run out ends it, at its expiry
SELECT dlock_acquire('hist:t', 'h1', '50ms') AS t_t1 \gset
SELECT expires_at AS e_t1 FROM dlock.lease WHERE key = 'hist:t' \gset
SELECT pg_sleep(0.1);
SELECT dlock_acquire('hist:t', 'h2', '1h') > :t_t1 AS taken;
SELECT holder, token = :t_t1 AS old_token, ended, ended_at = :'e_t1' AS ended_at_expiry
  FROM dlock_history WHERE key = 'hist:t';
-- the old holder's release afterwards is refused and writes nothing
SELECT dlock_release('hist:t', 'h1') AS late_release;
SELECT count(*) AS rows_t FROM dlock.history WHERE key = 'hist:t';
SELECT dlock_release('hist:t', 'h2') AS released;

-- expired: a sweep that deletes the run-out row ends it
SELECT dlock_acquire('hist:e', 'h1', '50ms') > 0 AS acquired;
SELECT pg_sleep(0.1);
SELECT dlock_cleanup('0') >= 1 AS swept;
SELECT holder, ended FROM dlock_history WHERE key = 'hist:e';
-- and a later acquire of the key finds nothing to end
SELECT dlock_acquire('hist:e', 'h2', '1h') > 0 AS acquired;
SELECT dlock_release('hist:e', 'h2') AS released;
SELECT holder, ended FROM dlock_history WHERE key = 'hist:e' ORDER BY granted_at;

-- force-released
SELECT dlock_acquire('hist:f', 'h1', '1h') > 0 AS acquired;
SELECT dlock_force_release('hist:f') AS forced;
SELECT holder, ended FROM dlock_history WHERE key = 'hist:f';

-- released by release_all, each key once
SELECT dlock_acquire('hist:all1', 'hall', '1h') > 0 AS a1,
       dlock_acquire('hist:all2', 'hall', '1h') > 0 AS a2,
       dlock_acquire('nohist:all3', 'hall', '1h') > 0 AS a3;
SELECT dlock_release_all('hall') AS freed;
SELECT key, holder, ended FROM dlock_history WHERE holder = 'hall' ORDER BY key;

-- a renewal ends nothing; a re-acquire by the holder (an extension) neither
SELECT dlock_acquire('hist:n', 'h1', '1h') > 0 AS acquired;
SELECT dlock_renew('hist:n', 'h1', '2h') AS renewed;
SELECT dlock_acquire('hist:n', 'h1', '1h') > 0 AS extended;
SELECT count(*) AS rows_n FROM dlock.history WHERE key = 'hist:n';

-- roles: each sees the rows of roles whose privileges it has
SET ROLE regress_dlock_hist_a;
SELECT dlock_acquire('hist:ra', 'ha', '1h') > 0 AS acquired;
SELECT dlock_release('hist:ra', 'ha') AS released;
SELECT dlock_acquire('hist:ra2', 'ha', '1h') > 0 AS acquired;
SELECT dlock_force_release('hist:ra2') AS forced;
SELECT key, holder, role, ended FROM dlock_history ORDER BY key;
RESET ROLE;
SET ROLE regress_dlock_hist_b;
SELECT count(*) AS b_sees FROM dlock_history;
SELECT count(*) AS b_sees_of_key FROM dlock_history('hist:ra');
SELECT * FROM dlock_held_at('hist:ra', now());
RESET ROLE;
SET ROLE regress_dlock_hist_mon;
SELECT count(*) > 5 AS monitor_sees_all FROM dlock_history;
RESET ROLE;
SELECT count(DISTINCT role) AS roles FROM dlock_history;

-- who held a key at a time
SELECT dlock_acquire('hist:w', 'w1', '1h') AS t_w1 \gset
SELECT dlock_release('hist:w', 'w1') AS released;
SELECT dlock_acquire('hist:w', 'w2', '1h') AS t_w2 \gset
SELECT granted_at AS g1, ended_at AS e1 FROM dlock_history WHERE key = 'hist:w' \gset
SELECT holder, token = :t_w1 AS token_w1, ended FROM dlock_held_at('hist:w', :'g1');
SELECT holder, token = :t_w1 AS token_w1, ended
  FROM dlock_held_at('hist:w', :'g1'::timestamptz + (:'e1'::timestamptz - :'g1'::timestamptz) / 2);
SELECT count(*) AS before_any FROM dlock_held_at('hist:w', :'g1'::timestamptz - interval '1 s');
SELECT holder, token = :t_w2 AS token_w2, ended_at, ended FROM dlock_held_at('hist:w', clock_timestamp());
SELECT dlock_release('hist:w', 'w2') AS released;
SELECT holder FROM dlock_held_at('hist:w', :'e1'::timestamptz);

-- a semaphore's and shared leases' holders: each holding ends on its own
SELECT dlock_acquire('hist:sem', 's1', '1h', slots => 2) > 0 AS s1,
       dlock_acquire('hist:sem', 's2', '1h', slots => 2) > 0 AS s2;
SELECT dlock_release('hist:sem', 's1') AS released;
SELECT holder, ended FROM dlock_history WHERE key = 'hist:sem';
SELECT dlock_force_release('hist:sem') AS forced;
SELECT holder, ended FROM dlock_history WHERE key = 'hist:sem' ORDER BY holder;
SELECT dlock_acquire_shared('hist:sh', 'r1', '1h') > 0 AS r1,
       dlock_acquire_shared('hist:sh', 'r2', '1h') > 0 AS r2;
SELECT dlock_release('hist:sh', 'r2') AS released;
SELECT dlock_release_all('r1') AS freed;
SELECT holder, ended FROM dlock_history WHERE key = 'hist:sh' ORDER BY holder;

-- untracking: nothing more is written; the rows stay
SELECT dlock_history_untrack('hist:') AS untracked;
SELECT dlock_history_untrack('hist:') AS untracked_again;
SELECT dlock_acquire('hist:u', 'h1', '1h') > 0 AS acquired;
SELECT dlock_release('hist:u', 'h1') AS released;
SELECT count(*) AS rows_u FROM dlock.history WHERE key = 'hist:u';
-- a rolled-back track changes nothing
BEGIN;
SELECT dlock_history_track('') AS tracked_all;
ROLLBACK;
SELECT dlock_acquire('hist:u', 'h1', '1h') > 0 AS acquired;
SELECT dlock_release('hist:u', 'h1') AS released;
SELECT count(*) AS rows_u FROM dlock.history WHERE key = 'hist:u';
-- '' tracks every key
SELECT dlock_history_track('') AS tracked_all;
SELECT dlock_acquire('nohist:all', 'h1', '1h') > 0 AS acquired;
SELECT dlock_release('nohist:all', 'h1') AS released;
SELECT key, ended FROM dlock_history WHERE key = 'nohist:all';
SELECT dlock_history_untrack('') AS untracked_all;

-- retention: dlock_cleanup deletes rows older than dlock.history_retention,
-- at most 1,000 a call; 0 keeps them forever
SHOW dlock.history_retention;
SELECT dlock_history_track('hist:') AS tracked;
DO $$
BEGIN
  FOR i IN 1..1100 LOOP
    PERFORM dlock_acquire('hist:many:' || i, 'm', '1h');
    PERFORM dlock_release('hist:many:' || i, 'm');
  END LOOP;
END $$;
SELECT count(*) AS old_rows FROM dlock.history \gset
SELECT pg_sleep(1.2);
SELECT dlock_acquire('hist:fresh', 'h1', '1h') > 0 AS acquired;
SELECT dlock_release('hist:fresh', 'h1') AS released;
SET dlock.history_retention = 0;
SELECT dlock_cleanup('1h') AS deleted_forever;
SET dlock.history_retention = '1s';
SELECT dlock_cleanup('1h') AS deleted_first_batch;
SELECT count(*) = :old_rows - 1000 + 1 AS left_after_first FROM dlock.history;
SELECT dlock_cleanup('1h') = :old_rows - 1000 AS deleted_rest;
SELECT dlock_cleanup('1h') AS deleted_none;
SELECT key FROM dlock.history;
RESET dlock.history_retention;

SELECT dlock_history_untrack('hist:') AS untracked;
DELETE FROM dlock.history;
SELECT dlock_force_release(key) FROM dlock_locks WHERE key LIKE 'hist:%' OR key LIKE 'nohist:%';
REVOKE EXECUTE ON FUNCTION dlock_force_release(text) FROM regress_dlock_hist_a;
DROP ROLE regress_dlock_hist_a;
DROP ROLE regress_dlock_hist_b;
DROP ROLE regress_dlock_hist_mon;
