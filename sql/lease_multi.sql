--
-- lease_multi: dlock_acquire_all, several keys at once, all or none.
--
-- Keys used here start with 'multi:'.  Everything created is dropped at
-- the end.  (Waiting for keys in opposite orders and FIFO order are in
-- specs/multi_opposite_order.spec and specs/multi_fifo.spec.)
--
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE ROLE regress_dlock_multi_alice NOLOGIN;
CREATE ROLE regress_dlock_multi_bob NOLOGIN;
-- what this backend holds in the lock table besides its own locks on
-- relations (key locks are advisory-class locks)
CREATE TEMP VIEW multi_key_locks AS
SELECT count(*) AS key_locks FROM pg_locks
 WHERE pid = pg_backend_pid() AND locktype = 'advisory';

--
-- one token per key, in the order of keys; taken in byte order
--
SELECT dlock_acquire_all('{multi:b,multi:a,multi:c}', 'h1', '1 min') AS t \gset
SELECT cardinality(:'t'::bigint[]) AS tokens,
       (:'t'::bigint[])[2] < (:'t'::bigint[])[1] AND
       (:'t'::bigint[])[1] < (:'t'::bigint[])[3] AS granted_in_byte_order;
SELECT u.k AS key, l.holder, l.token = u.tok AS its_token,
       l.expires_at - l.acquired_at AS ttl
  FROM unnest('{multi:b,multi:a,multi:c}'::text[], :'t'::bigint[]) AS u(k, tok)
  LEFT JOIN dlock_locks l ON l.key = u.k
 ORDER BY u.k;
-- byte order, not the collation's: 'multi:B' (0x42) comes before 'multi:a'
SELECT dlock_acquire_all('{multi:a,multi:B}', 'h1', '1 min') AS t2 \gset
SELECT (:'t2'::bigint[])[1] = (:'t'::bigint[])[2] AS a_extended_same_token,
       (:'t2'::bigint[])[2] > (:'t'::bigint[])[3] AS b_new_token;
-- each is an ordinary lease: validated, renewed, released one by one
SELECT dlock_validate('multi:a', 'h1', (:'t'::bigint[])[2]) AS a_valid,
       dlock_renew('multi:b', 'h1', '2 min', (:'t'::bigint[])[1]) AS b_renewed,
       dlock_release('multi:c', 'h1', (:'t'::bigint[])[3]) AS c_released;
SELECT key FROM dlock_locks WHERE key LIKE 'multi:%' ORDER BY key COLLATE "C";
-- a holder that holds them all gets its tokens back, lease extended
SELECT dlock_acquire_all('{multi:B,multi:a,multi:b}', 'h1', '1 min')
       = ARRAY[(:'t2'::bigint[])[2], (:'t'::bigint[])[2], (:'t'::bigint[])[1]]
       AS same_tokens;
SELECT dlock_release_all('h1') AS released_all;

--
-- duplicates, an empty array
--
SELECT t[1] = t[3] AS dup_same_token, t[1] <> t[2] AS others_differ,
       cardinality(t) AS tokens
  FROM dlock_acquire_all('{multi:d,multi:e,multi:d}', 'h1') AS t;
SELECT dlock_acquire_all('{}', 'h1') AS empty;
SELECT dlock_release_all('h1') AS released_all;

--
-- errors
--
SELECT dlock_acquire_all(NULL, 'h1');
SELECT dlock_acquire_all('{multi:a,NULL}', 'h1');
SELECT dlock_acquire_all('{multi:a,""}', 'h1');
SELECT dlock_acquire_all(ARRAY['multi:a', repeat('x', 1025)], 'h1');
SELECT dlock_acquire_all('{{multi:a},{multi:b}}', 'h1');
SELECT dlock_acquire_all(array_agg('multi:n' || g), 'h1')
  FROM generate_series(1, 1001) g;
SELECT dlock_acquire_all('{multi:a}', NULL);
SELECT dlock_acquire_all('{multi:a}', 'h1', '0');
SELECT dlock_acquire_all('{multi:a}', 'h1', '1 min', NULL);
SELECT dlock_acquire_all('{multi:a}', 'h1', '1 min', '-1 s');
BEGIN READ ONLY;
SELECT dlock_acquire_all('{multi:a}', 'h1');
ROLLBACK;
SELECT count(*) AS nothing_held FROM dlock_locks WHERE key LIKE 'multi:%';
-- 1000 keys is the limit, and it works
SELECT cardinality(dlock_acquire_all(array_agg('multi:n' || g), 'h1'))
  FROM generate_series(1, 1000) g;
SELECT dlock_release_all('h1') AS released_all;

--
-- all or none: one key held by another holder
--
SELECT dlock_acquire('multi:x', 'other', '1 hour') IS NOT NULL AS other_holds_x;
BEGIN;
-- multi:a is taken first (byte order), then multi:x is not had
SELECT dlock_acquire_all('{multi:z,multi:x,multi:a}', 'h1', '1 min') AS not_acquired;
-- nothing written (not even in this transaction), no key lock kept
SELECT count(*) AS held_in_xact FROM dlock.lease
 WHERE key IN ('multi:a', 'multi:z') AND holder IS NOT NULL;
SELECT * FROM multi_key_locks;
COMMIT;
SELECT key, holder FROM dlock_locks WHERE key LIKE 'multi:%' ORDER BY key;
-- the same with a wait that runs out: nothing held or queued either
BEGIN;
SELECT dlock_acquire_all('{multi:a,multi:x}', 'h1', '1 min', '0.2 s') AS not_acquired;
SELECT count(*) AS held_in_xact FROM dlock.lease WHERE key = 'multi:a' AND holder IS NOT NULL;
SELECT * FROM multi_key_locks;
SELECT count(*) AS waiting FROM dlock_waiters;
COMMIT;
SELECT key, holder FROM dlock_locks WHERE key LIKE 'multi:%' ORDER BY key;

--
-- an error while waiting (statement_timeout, caught by an exception block)
-- undoes the keys already had; the transaction goes on
--
BEGIN;
SET LOCAL statement_timeout = '300ms';
DO $$
BEGIN
  RAISE NOTICE 'tokens: %', dlock_acquire_all('{multi:a,multi:x}', 'h1', '1 min', '1 min');
EXCEPTION WHEN query_canceled THEN
  RAISE NOTICE 'cancelled: %', SQLERRM;
END $$;
SET LOCAL statement_timeout = 0;
SELECT count(*) AS held_in_xact FROM dlock.lease WHERE key = 'multi:a' AND holder IS NOT NULL;
SELECT * FROM multi_key_locks;
SELECT dlock_acquire_all('{multi:a,multi:b}', 'h1') IS NOT NULL AS acquired_after;
COMMIT;
SELECT key, holder FROM dlock_locks WHERE key LIKE 'multi:%' ORDER BY key;
SELECT dlock_release_all('h1') AS released_all;
SELECT dlock_release('multi:x', 'other') AS other_released;

--
-- in a transaction block, and savepoints
--
BEGIN;
SELECT dlock_acquire_all('{multi:s1,multi:s2}', 'h1', '1 min') IS NOT NULL AS acquired;
SAVEPOINT sp;
SELECT dlock_acquire_all('{multi:s3,multi:s4}', 'h1', '1 min') IS NOT NULL AS acquired;
SELECT * FROM multi_key_locks;
ROLLBACK TO sp;
SELECT * FROM multi_key_locks;
SELECT key FROM dlock.lease WHERE key LIKE 'multi:s%' AND holder IS NOT NULL ORDER BY key;
COMMIT;
SELECT key, holder FROM dlock_locks WHERE key LIKE 'multi:%' ORDER BY key;
SELECT dlock_release_all('h1') AS released_all;

--
-- with a wait: every lease runs for ttl from the end of the call (the
-- earlier keys are not left with ttl + wait)
--
SELECT dlock_acquire_all('{multi:w1,multi:w2,multi:w3}', 'h1', '1 min', '1 hour')
       IS NOT NULL AS acquired;
SELECT key, expires_at <= clock_timestamp() + interval '1 min' AS within_ttl,
       expires_at > clock_timestamp() AS live
  FROM dlock.lease WHERE key LIKE 'multi:w%' ORDER BY key;
SELECT dlock_release_all('h1') AS released_all;

--
-- roles: a lease belongs to the role that took it
--
SET ROLE regress_dlock_multi_alice;
SELECT dlock_acquire('multi:r', 'shared', '1 hour') IS NOT NULL AS alice_holds_r;
SET ROLE regress_dlock_multi_bob;
SELECT dlock_acquire_all('{multi:q,multi:r}', 'shared', '1 hour') AS bob_not_acquired;
SELECT dlock_acquire_all('{multi:q,multi:p}', 'shared', '1 hour') IS NOT NULL AS bob_acquired;
-- bob sees his own leases only
SELECT key, holder, owner::text AS owner FROM dlock_locks WHERE key LIKE 'multi:%' ORDER BY key;
SET ROLE regress_dlock_multi_alice;
SELECT dlock_release('multi:q', 'shared') AS alice_releases_bobs;
SELECT dlock_release_all('shared') AS alice_released_all;
RESET ROLE;
SELECT key, owner::text AS owner FROM dlock_locks WHERE key LIKE 'multi:%' ORDER BY key;
SET ROLE regress_dlock_multi_bob;
SELECT dlock_release_all('shared') AS bob_released_all;
RESET ROLE;
SELECT count(*) AS left_over FROM dlock_locks WHERE key LIKE 'multi:%';

--
-- counters: each key counts as dlock_acquire would count it
--
CREATE TEMP TABLE multi_stats1 AS SELECT * FROM dlock_stats();
SELECT dlock_acquire_all('{multi:c1,multi:c2,multi:c3}', 'h1') IS NOT NULL AS acquired;
SELECT dlock_acquire_all('{multi:c1,multi:c2}', 'h1') IS NOT NULL AS extended;
SELECT dlock_acquire('multi:c9', 'other') IS NOT NULL AS other_holds_c9;
SELECT dlock_acquire_all('{multi:c4,multi:c9}', 'h1') AS not_acquired;
SELECT s.acquired - s1.acquired AS acquired, s.extended - s1.extended AS extended,
       s.contended - s1.contended AS contended, s.waits - s1.waits AS waits,
       s.releases - s1.releases AS releases
  FROM dlock_stats() s, multi_stats1 s1;
SELECT dlock_release_all('h1') + dlock_release_all('other') AS released_all;

DROP VIEW multi_key_locks;
DROP TABLE multi_stats1;
DELETE FROM dlock.lease WHERE key LIKE 'multi:%';
DROP ROLE regress_dlock_multi_alice, regress_dlock_multi_bob;
