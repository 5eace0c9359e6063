--
-- history_claims: dlock.history records each ended claim on a tracked
-- table once, in the transaction that ends it: completed, given_back
-- (also as failed), released_all, taken_over (claimed again after it ran
-- out), dead_lettered (set aside at max_attempts after it ran out),
-- expired (a sweep); nothing for rolled-back work or untracked tables;
-- only the table's owner tracks it; the view shows a role only its
-- claims on tables it can read.
--
-- Tables hjobs (tracked) and hother (not).  Everything created is dropped
-- at the end.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE ROLE regress_dlock_hc_owner NOLOGIN;
CREATE ROLE regress_dlock_hc_other NOLOGIN;
CREATE TABLE hjobs (id bigint PRIMARY KEY, status int NOT NULL DEFAULT 0);
INSERT INTO hjobs SELECT generate_series(1, 20);
CREATE TABLE hother (id bigint PRIMARY KEY);
INSERT INTO hother SELECT generate_series(1, 3);
ALTER TABLE hjobs OWNER TO regress_dlock_hc_owner;
GRANT SELECT, UPDATE ON hother TO regress_dlock_hc_owner;

-- only the owner (or a superuser) tracks a table
SET ROLE regress_dlock_hc_other;
SELECT dlock_history_track_claims('hjobs');
RESET ROLE;
SET ROLE regress_dlock_hc_owner;
SELECT dlock_history_track_claims('hother');
SELECT dlock_history_track_claims('hjobs') AS tracked;
SELECT dlock_history_track_claims('hjobs') AS tracked_again;
RESET ROLE;
SELECT dlock_history_track_claims(NULL);
SELECT relid FROM dlock.history_tables;

SET ROLE regress_dlock_hc_owner;
-- completed
SELECT array_agg(id ORDER BY id) AS got
  FROM dlock_claim(NULL::hjobs, 'w1', 2, '1 hour', 'id IN (1, 2)');
SELECT array_agg(id ORDER BY id) AS completed
  FROM dlock_complete('hjobs', 'w1', ARRAY[1, 2]::bigint[]) AS done(id);
SELECT kind, key, table_name, holder, role, ended, attempts, granted_at <= ended_at AS ordered
  FROM dlock_history ORDER BY key;

-- given back, and given back as failed
SELECT array_agg(id ORDER BY id) AS got
  FROM dlock_claim(NULL::hjobs, 'w1', 2, '1 hour', 'id IN (3, 4)');
SELECT dlock_unclaim('hjobs', 'w1', ARRAY[3]::bigint[]) AS given_back;
SELECT dlock_unclaim('hjobs', 'w1', ARRAY[4]::bigint[], '1 hour') AS given_back_failed;
SELECT key, holder, ended, attempts FROM dlock_history WHERE key IN ('3', '4') ORDER BY key;

-- released by dlock_release_all
SELECT array_agg(id ORDER BY id) AS got
  FROM dlock_claim(NULL::hjobs, 'wall', 2, '1 hour', 'id IN (5, 6)');
SELECT dlock_release_all('wall') AS freed;
SELECT key, holder, ended FROM dlock_history WHERE holder = 'wall' ORDER BY key;

-- taken over: a claim of a row whose claim ran out ends it, at its expiry
SELECT array_agg(id ORDER BY id) AS got
  FROM dlock_claim(NULL::hjobs, 'w1', 1, '50 ms', 'id = 7');
SELECT pg_sleep(0.1);
SELECT array_agg(id ORDER BY id) AS got_again
  FROM dlock_claim(NULL::hjobs, 'w2', 1, '1 hour', 'id = 7');
SELECT key, holder, ended, attempts FROM dlock_history WHERE key = '7';
SELECT dlock_unclaim('hjobs', 'w2') AS given_back;
SELECT key, holder, ended, attempts FROM dlock_history WHERE key = '7' ORDER BY granted_at;

-- dead-lettered: at max_attempts, the claim that finds it run out sets it aside
SELECT array_agg(id ORDER BY id) AS got
  FROM dlock_claim(NULL::hjobs, 'w1', 1, '50 ms', 'id = 8', max_attempts => 1);
SELECT pg_sleep(0.1);
SELECT count(*) AS got_again
  FROM dlock_claim(NULL::hjobs, 'w2', 1, '1 hour', 'id = 8', max_attempts => 1);
SELECT key, holder, ended, attempts FROM dlock_history WHERE key = '8';
SELECT key FROM dlock_dead_claims WHERE table_name = 'hjobs'::regclass;

-- rolled back: nothing
BEGIN;
SELECT array_agg(id ORDER BY id) AS got
  FROM dlock_claim(NULL::hjobs, 'w3', 1, '1 hour', 'id = 9');
SELECT count(*) AS completed FROM dlock_complete('hjobs', 'w3', ARRAY[9]::bigint[]);
ROLLBACK;
SELECT array_agg(id ORDER BY id) AS got
  FROM dlock_claim(NULL::hjobs, 'w3', 1, '1 hour', 'id = 9');
BEGIN;
SAVEPOINT s;
SELECT count(*) AS completed FROM dlock_complete('hjobs', 'w3', ARRAY[9]::bigint[]);
ROLLBACK TO SAVEPOINT s;
SELECT dlock_unclaim('hjobs', 'w3') AS given_back_in_xact;
ROLLBACK;
SELECT count(*) AS rows_9 FROM dlock_history WHERE key = '9';
SELECT dlock_unclaim('hjobs', 'w3') AS given_back;
SELECT key, ended FROM dlock_history WHERE key = '9';

-- an untracked table: nothing
SELECT count(*) AS got FROM dlock_claim(NULL::hother, 'w1', 3, '1 hour');
SELECT count(*) AS completed FROM dlock_complete('hother', 'w1', ARRAY[1, 2, 3]::bigint[]);
RESET ROLE;
SELECT count(*) AS rows_hother FROM dlock.history WHERE relid = 'hother'::regclass;

-- other roles see nothing of it
SET ROLE regress_dlock_hc_other;
SELECT count(*) AS other_sees FROM dlock_history;
RESET ROLE;
SELECT count(*) > 0 AS superuser_sees FROM dlock_history;

-- expired: a sweep that deletes a run-out claim row ends it
SET ROLE regress_dlock_hc_owner;
SELECT array_agg(id ORDER BY id) AS got
  FROM dlock_claim(NULL::hjobs, 'w1', 1, '50 ms', 'id = 10');
-- and one on the untracked table, swept in the same call: no row
SELECT array_agg(id ORDER BY id) AS got_other
  FROM dlock_claim(NULL::hother, 'w1', 1, '50 ms', 'id = 1');
RESET ROLE;
SELECT pg_sleep(0.1);
SELECT dlock_cleanup('0') >= 2 AS swept;
SELECT count(*) AS claim_rows_left FROM dlock.claim
 WHERE relid IN ('hjobs'::regclass, 'hother'::regclass) AND key IN ('10', '1');
SELECT key, holder, ended, attempts FROM dlock_history WHERE key = '10';
SELECT count(*) AS rows_hother_swept FROM dlock.history WHERE relid = 'hother'::regclass;

-- untracked again: nothing more
SET ROLE regress_dlock_hc_owner;
SELECT dlock_history_untrack_claims('hjobs') AS untracked;
SELECT dlock_history_untrack_claims('hjobs') AS untracked_again;
SELECT array_agg(id ORDER BY id) AS got
  FROM dlock_claim(NULL::hjobs, 'w1', 1, '1 hour', 'id = 11');
SELECT count(*) AS completed FROM dlock_complete('hjobs', 'w1', ARRAY[11]::bigint[]);
RESET ROLE;
SELECT count(*) AS rows_11 FROM dlock.history WHERE key = '11';

-- the endings written, by kind
SELECT ended, count(*) FROM dlock.history GROUP BY ended ORDER BY ended;

DELETE FROM dlock.history;
SELECT dlock_reset_claims('hjobs', ARRAY(SELECT id FROM hjobs));
SELECT dlock_reset_claims('hother', ARRAY(SELECT id FROM hother));
DROP TABLE hjobs, hother;
DROP ROLE regress_dlock_hc_owner;
DROP ROLE regress_dlock_hc_other;
