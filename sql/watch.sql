--
-- watch: dlock_watch, dlock_unwatch and dlock_leader as seen from SQL
-- (issue 26): argument errors, the channel (random, LISTENed on by
-- dlock_watch itself, one per session), watches and unwatches that take
-- effect at commit and go with a rollback, PREPARE refused, and
-- dlock_leader showing a role only the leases of roles whose privileges it
-- has (superusers and pg_read_all_stats: all), and for a semaphore or
-- shared leases the live holder in the lowest slot.  The notifications
-- themselves are in t/095_watch.pl (their payloads hold tokens and times);
-- this session never changes a key it watches.
--
-- Keys start with 'wa:'.  Everything created is dropped at the end.
--
\set VERBOSITY default
\set SHOW_CONTEXT never

-- arguments
SELECT dlock_watch(NULL);
SELECT dlock_watch('');
SELECT dlock_watch(repeat('x', 1025));
SELECT dlock_unwatch(NULL);
SELECT * FROM dlock_leader(NULL);

-- the channel: "dlock_" and 32 hex digits, listened on once committed
SELECT dlock_watch('wa:1') AS ch \gset
SELECT :'ch' ~ '^dlock_[0-9a-f]{32}$' AS channel_is_random_hex;
SELECT array_agg(c) = ARRAY[:'ch'] AS listening_on_it FROM pg_listening_channels() c;
-- one channel per session: a second key comes on the same one
SELECT dlock_watch('wa:2') = :'ch' AS same_channel;
-- watching a key again changes nothing
SELECT dlock_watch('wa:1') = :'ch' AS same_channel_again;

-- unwatch: true once, then false
SELECT dlock_unwatch('wa:2') AS unwatched, dlock_unwatch('wa:2') AS unwatched_again;
SELECT dlock_unwatch('wa:never') AS never_watched;

-- a watch rolled back never happened; an unwatch rolled back neither
BEGIN;
SELECT dlock_watch('wa:3') = :'ch' AS same_channel_in_xact;
ROLLBACK;
SELECT dlock_unwatch('wa:3') AS rolled_back_watch_is_gone;
BEGIN;
SELECT dlock_unwatch('wa:1') AS unwatched_in_xact;
ROLLBACK;
BEGIN;
SELECT dlock_unwatch('wa:1') AS still_watched_after_rollback;
-- watching it again in the same transaction undoes the unwatch
SELECT dlock_watch('wa:1') = :'ch' AS watched_again;
COMMIT;
SELECT dlock_unwatch('wa:1') AS still_watched_after_rewatch;
-- the same in a savepoint
SELECT dlock_watch('wa:4') = :'ch' AS watching_4;
BEGIN;
SAVEPOINT s;
SELECT dlock_watch('wa:5') = :'ch' AS watching_5;
SELECT dlock_unwatch('wa:4') AS unwatched_4;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT dlock_unwatch('wa:5') AS savepoint_watch_is_gone,
       dlock_unwatch('wa:4') AS savepoint_unwatch_is_undone;

-- dlock_unwatch(): all of them, counted; dlock_watch_count() counts the
-- database's watches at each step
SELECT dlock_watch_count() AS watches_none;
SELECT dlock_watch('wa:6') = :'ch' AS w6, dlock_watch('wa:7') = :'ch' AS w7;
SELECT dlock_watch_count() AS watches_two;
BEGIN;
SELECT dlock_watch('wa:6b') = :'ch' AS w6b;
SELECT dlock_watch_count() AS watches_in_xact;
ROLLBACK;
SELECT dlock_watch_count() AS watches_after_rollback;
SELECT dlock_unwatch() AS unwatched_all;
SELECT dlock_watch_count() AS watches_none_again;
SELECT dlock_unwatch() AS none_left;

-- a transaction that watches cannot be prepared (PostgreSQL's rule for LISTEN)
BEGIN;
SELECT dlock_watch('wa:8') = :'ch' AS w8;
PREPARE TRANSACTION 'wa_watch';
SELECT dlock_unwatch('wa:8') AS prepared_watch_is_gone;

-- dlock_leader: the live lease, to those who may see it
CREATE ROLE regress_dlock_wla NOLOGIN;
CREATE ROLE regress_dlock_wlb NOLOGIN;
CREATE ROLE regress_dlock_wlmember NOLOGIN IN ROLE regress_dlock_wla;
CREATE ROLE regress_dlock_wlmon NOLOGIN IN ROLE pg_read_all_stats;

SET ROLE regress_dlock_wla;
SELECT dlock_acquire('wa:leader', 'node-a', '1 hour') AS token_a \gset
SELECT holder, owner, token = :token_a AS same_token, expires_at > clock_timestamp() AS live
  FROM dlock_leader('wa:leader');
RESET ROLE;

SET ROLE regress_dlock_wlb;
SELECT count(*) AS b_sees FROM dlock_leader('wa:leader');
RESET ROLE;
SET ROLE regress_dlock_wlmember;
SELECT holder AS member_sees FROM dlock_leader('wa:leader');
RESET ROLE;
SET ROLE regress_dlock_wlmon;
SELECT holder AS monitor_sees FROM dlock_leader('wa:leader');
-- dlock_watch_count() is pg_monitor's alone
SELECT dlock_watch_count();
RESET ROLE;
CREATE ROLE regress_dlock_wlpgmon NOLOGIN IN ROLE pg_monitor;
SET ROLE regress_dlock_wlpgmon;
SELECT dlock_watch_count() >= 0 AS pg_monitor_counts;
RESET ROLE;
DROP ROLE regress_dlock_wlpgmon;
SELECT holder AS superuser_sees FROM dlock_leader('wa:leader');
-- the same row as dlock_locks
SELECT (SELECT (holder, owner, token, acquired_at, expires_at) FROM dlock_leader('wa:leader'))
     = (SELECT (holder, owner, token, acquired_at, expires_at) FROM dlock_locks WHERE key = 'wa:leader')
       AS same_as_dlock_locks;

-- a free key and a lease that ran out have no leader
SELECT count(*) AS free_key FROM dlock_leader('wa:nobody');
SELECT dlock_acquire('wa:short', 'node-s', '10 ms') IS NOT NULL AS got_short;
SELECT pg_sleep(0.05);
SELECT count(*) AS ran_out FROM dlock_leader('wa:short');

-- in a function: one row or none
SELECT (dlock_leader('wa:leader')).holder AS as_a_value,
       (dlock_leader('wa:nobody')).holder AS none_as_null;

SET ROLE regress_dlock_wla;
SELECT dlock_release('wa:leader', 'node-a') AS released;
RESET ROLE;
SELECT count(*) AS released_key FROM dlock_leader('wa:leader');

-- a semaphore's or shared leases' key: its live holder in the lowest slot
SELECT dlock_acquire('wa:sem', 'sem-0', '1 hour', '0', 3) IS NOT NULL AS got_slot_0,
       dlock_acquire('wa:sem', 'sem-1', '1 hour', '0', 3) IS NOT NULL AS got_slot_1;
SELECT holder AS semaphore_leader FROM dlock_leader('wa:sem');
SELECT dlock_release('wa:sem', 'sem-0') AS released_slot_0;
SELECT holder AS slot_1_leads_now FROM dlock_leader('wa:sem');
SELECT dlock_acquire_shared('wa:shared', 'sh-0', '10 ms') IS NOT NULL AS got_sh_0,
       dlock_acquire_shared('wa:shared', 'sh-1', '1 hour') IS NOT NULL AS got_sh_1;
SELECT pg_sleep(0.05);
SELECT holder AS live_shared_leads FROM dlock_leader('wa:shared');
SELECT dlock_force_release('wa:sem') AS freed_sem, dlock_force_release('wa:shared') AS freed_shared;

DROP ROLE regress_dlock_wla, regress_dlock_wlb, regress_dlock_wlmember,
          regress_dlock_wlmon;
