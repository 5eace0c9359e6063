--
-- claim_retry: retry with backoff (0.5, issue 38).  A row whose claim
-- lapsed (expired, or given back as failed with dlock_unclaim's
-- retry_after) is not claimable again before its backoff runs out; a claim
-- asks for a fixed backoff, or one that doubles per attempt up to
-- backoff_max.  dlock_claims shows the rows in their backoff, with
-- retry_at, when they are claimable again.
--
-- Only stable values are printed: keys, holders, counts, booleans and the
-- delays the claims stored (retry_at - expires_at, exact values).  Time
-- passes only in polling loops with a hang limit (pg_temp.wait_past), and
-- no duration is asserted.  Roles are regress_dlock_r*; everything created
-- is dropped at the end, and the extension is left at its default version.
--
\set VERBOSITY terse
\set SHOW_CONTEXT never

CREATE TABLE rjobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0);
INSERT INTO rjobs SELECT generate_series(1, 20);

-- until the clock is past t (at most 10 s: then the test fails loudly)
CREATE FUNCTION pg_temp.wait_past(t timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  i int := 0;
BEGIN
  WHILE clock_timestamp() <= t LOOP
    i := i + 1;
    IF i > 2000 THEN
      RAISE EXCEPTION 'clock never passed %', t;
    END IF;
    PERFORM pg_sleep(0.005);
  END LOOP;
  RETURN true;
END $$;
-- the delay the row's claim stored after its expiry (NULL: not in the view)
CREATE FUNCTION pg_temp.delay(k int) RETURNS interval
LANGUAGE sql AS $$
  SELECT retry_at - expires_at FROM dlock_claims
   WHERE table_name = 'rjobs'::regclass AND key = k::text $$;
-- whether the row is claimable now by claim 'probe' (given back at once)
CREATE FUNCTION pg_temp.claimable(k int) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  got int;
BEGIN
  SELECT count(*) INTO got
    FROM dlock_claim(NULL::rjobs, 'probe', 1, '1 hour', format('id = %s', k));
  PERFORM dlock_unclaim('rjobs', 'probe');
  RETURN got = 1;
END $$;

--
-- no backoff: as before, retry_at is the expiry
--
SELECT count(*) AS claimed FROM dlock_claim(NULL::rjobs, 'w', 1, '1 hour', 'id = 1');
SELECT key, holder, retry_at = expires_at AS retry_at_is_expiry, pg_temp.delay(1)
  FROM dlock_claims WHERE table_name = 'rjobs'::regclass;
SELECT dlock_unclaim('rjobs', 'w') AS unclaimed;
SELECT pg_temp.claimable(1) AS claimable_at_once;

--
-- a fixed backoff: an expired claim's row waits for it
--
SELECT count(*) AS claimed
  FROM dlock_claim(NULL::rjobs, 'w', 1, '10 ms', 'id = 2', backoff => '1 hour');
SELECT pg_temp.delay(2) AS fixed_delay;
SELECT pg_temp.wait_past(expires_at) AS expired
  FROM dlock_claims WHERE table_name = 'rjobs'::regclass AND key = '2';
-- expired, but in its backoff: held for claimers, no more the holder's
SELECT dlock_claimed('rjobs', 2, 'w') AS still_w;
SELECT count(*) AS claimed_in_backoff FROM dlock_claim(NULL::rjobs, 'w2', 5, '1 hour', 'id = 2');
SELECT dlock_claim_unheld('rjobs', 2) AS unheld_in_backoff;
-- the view lists it, with when it is claimable again
SELECT key, holder, attempts, expires_at < clock_timestamp() AS expired,
       retry_at > clock_timestamp() AS in_backoff
  FROM dlock_claims WHERE table_name = 'rjobs'::regclass ORDER BY key;
-- the holder cannot give back or renew a lapsed claim
SELECT dlock_unclaim('rjobs', 'w', ARRAY[2], '0') AS unclaimed_lapsed,
       dlock_renew_claims('rjobs', 'w') AS renewed_lapsed;
-- the sweep keeps a row in its backoff (its attempts and its backoff) ...
CREATE PROCEDURE pg_temp.cleanup_all() LANGUAGE plpgsql AS $$
BEGIN
  WHILE dlock_cleanup('0') > 0 LOOP
    COMMIT;
  END LOOP;
END $$;
SELECT count(*) AS claimed
  FROM dlock_claim(NULL::rjobs, 'w', 1, '10 ms', 'id = 3');
SELECT pg_temp.wait_past(max(expires_at)) AS expired
  FROM dlock.claim WHERE relid = 'rjobs'::regclass;
CALL pg_temp.cleanup_all();
-- ... and deletes the idle ones (1 and 3, no backoff)
SELECT key, attempts FROM dlock.claim WHERE relid = 'rjobs'::regclass ORDER BY key;
SELECT pg_temp.claimable(2) AS claimable_2_after_sweep;

--
-- an exponential backoff: doubling per attempt, up to backoff_max
-- (dlock_unclaim with retry_after 0 gives a claim back claimable at once,
-- its attempts counted)
--
CREATE FUNCTION pg_temp.delays(k int, rounds int, backoff interval,
                               backoff_max interval)
RETURNS interval[] LANGUAGE plpgsql AS $$
DECLARE
  d interval[] := '{}';
BEGIN
  FOR i IN 1..rounds LOOP
    PERFORM dlock_claim(NULL::rjobs, 'e', 1, '1 hour', format('id = %s', k),
                        backoff => backoff, backoff_max => backoff_max);
    d := d || pg_temp.delay(k);
    PERFORM dlock_unclaim('rjobs', 'e', ARRAY[k], '0');
  END LOOP;
  RETURN d;
END $$;
SELECT pg_temp.delays(4, 5, '1 min', '5 min') AS doubling_to_the_cap;
SELECT pg_temp.delays(5, 3, '1 min', '1 min') AS cap_equal_to_base;
-- attempt 6 of a fixed backoff
SELECT pg_temp.delays(4, 1, '7 s', NULL) AS fixed_after_five_attempts;
-- many attempts: the doubling stays finite (the cap, 30 days)
SELECT (pg_temp.delays(6, 70, '1 microsecond', '30 days'))[60:70] AS capped_after_many;
SELECT attempts FROM dlock.claim WHERE relid = 'rjobs'::regclass AND key = '6';
SELECT (dlock_claim_unheld('rjobs', 6)) AS given_back_with_zero_is_claimable;

--
-- dlock_unclaim(tbl, holder, keys, retry_after): given back as failed
--
SELECT count(*) AS claimed
  FROM dlock_claim(NULL::rjobs, 'u', 3, '1 hour', 'id IN (7, 8, 9)', backoff => '2 min');
SELECT dlock_unclaim('rjobs', 'u', ARRAY[7], '1 hour') AS failed_1h,
       dlock_unclaim('rjobs', 'u', ARRAY[8], NULL) AS failed_own_backoff,
       dlock_unclaim('rjobs', 'u', ARRAY[7, 8, 10], '1 s') AS again_none_held;
-- holder NULL, owner kept, expired now, claimable at now + retry_after
SELECT key, holder, owner = current_user::regrole AS owner_kept, attempts,
       retry_at - expires_at AS delay, expires_at <= clock_timestamp() AS freed
  FROM dlock_claims WHERE table_name = 'rjobs'::regclass AND key IN ('7', '8')
 ORDER BY key;
SELECT pg_temp.claimable(7) AS claimable_7, pg_temp.claimable(8) AS claimable_8,
       dlock_claimed('rjobs', 7, 'u') AS still_u;
-- a plain dlock_unclaim leaves no backoff: 9 had asked for 2 min
SELECT pg_temp.delay(9) AS delay_9;
SELECT dlock_unclaim('rjobs', 'u', ARRAY[9]) AS unclaimed;
SELECT pg_temp.delay(9) AS delay_9_after, pg_temp.claimable(9) AS claimable_9;
-- retry_after NULL without a backoff asked for: claimable at once
SELECT count(*) AS claimed FROM dlock_claim(NULL::rjobs, 'u', 1, '1 hour', 'id = 10');
SELECT dlock_unclaim('rjobs', 'u', ARRAY[10], NULL) AS failed,
       pg_temp.claimable(10) AS claimable_10;
-- a short retry_after runs out: claimable again, attempts counted
SELECT count(*) AS claimed FROM dlock_claim(NULL::rjobs, 'u', 1, '1 hour', 'id = 11');
SELECT dlock_unclaim('rjobs', 'u', ARRAY[11], '20 ms') AS failed;
SELECT pg_temp.wait_past(retry_at) AS retry_at_passed
  FROM dlock_claims WHERE table_name = 'rjobs'::regclass AND key = '11';
SELECT id, dlock_claimed('rjobs', id, 'u2') AS fenced
  FROM dlock_claim(NULL::rjobs, 'u2', 1, '1 hour', 'id = 11');
SELECT key, holder, attempts FROM dlock_claims
 WHERE table_name = 'rjobs'::regclass AND key = '11';
SELECT dlock_unclaim('rjobs', 'u2') AS unclaimed;

--
-- dlock_renew_claims moves the end of the backoff with the expiry
--
SELECT count(*) AS claimed
  FROM dlock_claim(NULL::rjobs, 'n', 1, '1 min', 'id = 12', backoff => '5 min');
SELECT expires_at AS old_expiry FROM dlock_claims
 WHERE table_name = 'rjobs'::regclass AND key = '12' \gset
SELECT dlock_renew_claims('rjobs', 'n', '2 hours') AS renewed;
SELECT expires_at > :'old_expiry'::timestamptz + interval '1 hour' AS expiry_moved,
       retry_at - expires_at AS delay_kept
  FROM dlock_claims WHERE table_name = 'rjobs'::regclass AND key = '12';
SELECT dlock_renew_claims('rjobs', 'n') AS renewed_own_ttl, pg_temp.delay(12) AS delay_kept;
SELECT dlock_unclaim('rjobs', 'n') AS unclaimed;

--
-- max_attempts still poisons, backoff or not
--
CREATE FUNCTION pg_temp.attempt(k int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  got int;
BEGIN
  SELECT count(*) INTO got
    FROM dlock_claim(NULL::rjobs, 'p', 1, '1 hour', format('id = %s', k),
                     max_attempts => 2, backoff => '1 min');
  PERFORM dlock_unclaim('rjobs', 'p', ARRAY[k], '0');
  RETURN got;
END $$;
SELECT pg_temp.attempt(13) AS a1, pg_temp.attempt(13) AS a2, pg_temp.attempt(13) AS a3;
SELECT key, attempts FROM dlock_dead_claims WHERE table_name = 'rjobs'::regclass;
SELECT count(*) AS listed_in_claims FROM dlock_claims
 WHERE table_name = 'rjobs'::regclass AND key = '13';
SELECT dlock_reset_claims('rjobs', ARRAY[13]) AS reset;

--
-- roles: another role can neither give back nor see a role's claims,
-- in their backoff or not
--
CREATE ROLE regress_dlock_r1 NOLOGIN;
CREATE ROLE regress_dlock_r2 NOLOGIN;
GRANT SELECT, UPDATE ON rjobs TO regress_dlock_r1, regress_dlock_r2;
SET ROLE regress_dlock_r1;
SELECT count(*) AS r1_claimed
  FROM dlock_claim(NULL::rjobs, 'same', 2, '1 hour', 'id IN (14, 15)', backoff => '1 hour');
SELECT dlock_unclaim('rjobs', 'same', ARRAY[15], '1 hour') AS r1_failed_15;
SET ROLE regress_dlock_r2;
SELECT dlock_unclaim('rjobs', 'same', ARRAY[14, 15], '0') AS r2_unclaimed;
SELECT count(*) AS r2_sees FROM dlock_claims WHERE table_name = 'rjobs'::regclass;
SELECT count(*) AS r2_claimed FROM dlock_claim(NULL::rjobs, 'other', 5, '1 hour', 'id IN (14, 15)');
SET ROLE regress_dlock_r1;
SELECT key, holder, attempts FROM dlock_claims WHERE table_name = 'rjobs'::regclass ORDER BY key;
SELECT dlock_unclaim('rjobs', 'same') AS r1_unclaimed;
RESET ROLE;

--
-- errors
--
SELECT dlock_unclaim('rjobs', 'w', ARRAY[1], '-1 s');
SELECT dlock_unclaim('rjobs', 'w', ARRAY[1], '31 days');
SELECT dlock_unclaim('rjobs', NULL, ARRAY[1], '1 s');
SELECT dlock_unclaim('rjobs', 'w', NULL::int[], '1 s');
SELECT dlock_unclaim(NULL, 'w', ARRAY[1], '1 s');
SELECT * FROM dlock_claim(NULL::rjobs, 'w', 1, backoff => '-1 s');
SELECT * FROM dlock_claim(NULL::rjobs, 'w', 1, backoff => '31 days');
SELECT * FROM dlock_claim(NULL::rjobs, 'w', 1, backoff_max => '1 min');
SELECT * FROM dlock_claim(NULL::rjobs, 'w', 1, backoff => '2 min', backoff_max => '1 min');
-- a zero backoff is no backoff
SELECT count(*) AS claimed FROM dlock_claim(NULL::rjobs, 'z', 1, '1 hour', 'id = 16', backoff => '0');
SELECT pg_temp.delay(16) AS zero_backoff_delay, dlock_unclaim('rjobs', 'z') AS unclaimed;

--
-- dlock 0.4's tables (the library updated, the extension not yet): claims
-- behave as before
--
DROP EXTENSION dlock;
CREATE EXTENSION dlock VERSION '0.4';
SELECT count(*) AS claimed_04 FROM dlock_claim(NULL::rjobs, 'o', 2, '1 hour', 'id IN (17, 18)');
SELECT dlock_renew_claims('rjobs', 'o', '1 hour') AS renewed_04;
SELECT dlock_unclaim('rjobs', 'o', ARRAY[17]) AS unclaimed_04;
SELECT key, holder, attempts FROM dlock_claims WHERE table_name = 'rjobs'::regclass;
SELECT count(*) AS reclaimed_04 FROM dlock_claim(NULL::rjobs, 'o2', 5, '10 ms', 'id IN (17, 18)');
SELECT pg_temp.wait_past(expires_at) AS expired
  FROM dlock.claim WHERE relid = 'rjobs'::regclass AND key = '17';
SELECT dlock_cleanup('0') AS swept_04;
SELECT key, holder FROM dlock.claim WHERE relid = 'rjobs'::regclass;
DROP EXTENSION dlock;
CREATE EXTENSION dlock;

DROP TABLE rjobs;
DROP ROLE regress_dlock_r1;
DROP ROLE regress_dlock_r2;
