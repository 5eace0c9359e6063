--
-- claim_keys: one row, one claim key, however a caller writes the key.
--
-- A row's claim key is the text of its stored primary key.  Where a key
-- type's equality is coarser than its text (numeric 1.0 = 1, float -0 = 0,
-- intervals, case-insensitive types and collations) or the key is char(n)
-- (the column pads it), a key given to dlock_claimed, dlock_complete,
-- dlock_unclaim or dlock_claim_unheld names the row it equals, written
-- any way.  Each table below holds one or two rows; the worker claims them
-- and then names them the other way.
--
-- Everything created here is dropped at the end, and no claim is left.
--
\set VERBOSITY terse
\set SHOW_CONTEXT never

CREATE EXTENSION IF NOT EXISTS citext;
CREATE COLLATION keys_ci (provider = icu, locale = 'und-u-ks-level2',
                          deterministic = false);

CREATE TABLE keys_num (id numeric PRIMARY KEY);
INSERT INTO keys_num VALUES (1.0), (2.50);
CREATE TABLE keys_num_scaled (id numeric(6, 2) PRIMARY KEY);
INSERT INTO keys_num_scaled VALUES (3);
CREATE TABLE keys_float (id float8 PRIMARY KEY);
INSERT INTO keys_float VALUES ('-0');
CREATE TABLE keys_char (id char(4) PRIMARY KEY);
INSERT INTO keys_char VALUES ('ab');
CREATE TABLE keys_interval (id interval PRIMARY KEY);
INSERT INTO keys_interval VALUES ('1 day');
CREATE TABLE keys_citext (id citext PRIMARY KEY);
INSERT INTO keys_citext VALUES ('Job-A');
CREATE TABLE keys_coll (id text COLLATE keys_ci PRIMARY KEY);
INSERT INTO keys_coll VALUES ('Job-B');
CREATE TABLE keys_part (id numeric PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE keys_part_lo PARTITION OF keys_part FOR VALUES FROM (0) TO (10);
CREATE TABLE keys_part_hi PARTITION OF keys_part FOR VALUES FROM (10) TO (20);
INSERT INTO keys_part VALUES (1.50), (12.0);

-- the claims, under the stored keys
SELECT id FROM dlock_claim(NULL::keys_num, 'w', 2, '1 hour') ORDER BY id;
SELECT id FROM dlock_claim(NULL::keys_num_scaled, 'w', 1, '1 hour');
SELECT id FROM dlock_claim(NULL::keys_float, 'w', 1, '1 hour');
SELECT id FROM dlock_claim(NULL::keys_char, 'w', 1, '1 hour');
SELECT id FROM dlock_claim(NULL::keys_interval, 'w', 1, '1 hour');
SELECT id FROM dlock_claim(NULL::keys_citext, 'w', 1, '1 hour');
SELECT id FROM dlock_claim(NULL::keys_coll, 'w', 1, '1 hour');
SELECT id FROM dlock_claim(NULL::keys_part, 'w', 2, '1 hour') ORDER BY id;
SELECT table_name, key FROM dlock_claims
 WHERE table_name::text LIKE 'keys_%' ORDER BY 1, 2;

-- the fence, with the key written another way: the holder's claim is seen
SELECT dlock_claimed('keys_num', 1, 'w') AS num_1,
       dlock_claimed('keys_num', 1.000, 'w') AS num_1_000,
       dlock_claimed('keys_num', '1'::text, 'w') AS num_text,
       dlock_claimed('keys_num', 2.5::float8, 'w') AS num_float,
       dlock_claimed('keys_num_scaled', 3, 'w') AS scaled_3,
       dlock_claimed('keys_float', 0::float8, 'w') AS float_zero,
       dlock_claimed('keys_char', 'ab'::text, 'w') AS char_text,
       dlock_claimed('keys_interval', '24 hours'::interval, 'w') AS interval_24h,
       dlock_claimed('keys_citext', 'JOB-a'::citext, 'w') AS citext_case,
       dlock_claimed('keys_citext', 'job-a'::text, 'w') AS citext_text,
       dlock_claimed('keys_coll', 'JOB-b'::text, 'w') AS coll_case,
       dlock_claimed('keys_part', 1.5, 'w') AS part_root,
       dlock_claimed('keys_part_hi', 12, 'w') AS part_leaf;

-- ... and nobody else's, and no row that is not there
SELECT dlock_claimed('keys_num', 1, 'other') AS other_holder,
       dlock_claimed('keys_num', 7, 'w') AS no_such_row,
       dlock_claimed('keys_citext', 'job-b'::text, 'w') AS another_row,
       dlock_claimed('keys_part', 5, 'w') AS no_such_part_row;

-- the per-row check of a claim, called with the key written another way
SELECT dlock_claim_unheld('keys_num', 1.00) AS num_unheld,
       dlock_claim_unheld('keys_float', 0::float8) AS float_unheld,
       dlock_claim_unheld('keys_coll', 'job-b'::text) AS coll_unheld;

-- a second worker cannot claim them either way
SELECT count(*) AS claimed_by_other FROM dlock_claim(NULL::keys_num, 'other', 10, '1 hour');
SELECT count(*) AS claimed_by_other FROM dlock_claim(NULL::keys_coll, 'other', 10, '1 hour');

-- give-back and completion with the keys written another way
SELECT dlock_unclaim('keys_part', 'w', ARRAY[12]) AS unclaimed_part;
SELECT dlock_unclaim('keys_interval', 'w', ARRAY['24 hours'::interval]) AS unclaimed_interval;
SELECT k FROM dlock_complete('keys_num', 'w', ARRAY[1, 2.5]) AS k ORDER BY k;
SELECT k FROM dlock_complete('keys_coll', 'w', ARRAY['job-b'::text]) AS k;
SELECT k FROM dlock_complete('keys_float', 'w', ARRAY['0'::float8]) AS k;
SELECT table_name, key FROM dlock_claims
 WHERE table_name::text LIKE 'keys_%' ORDER BY 1, 2;

-- clean up
SELECT dlock_unclaim(t, 'w') AS given_back
  FROM unnest('{keys_num_scaled,keys_char,keys_citext,keys_part}'::regclass[]) t;
SELECT count(*) AS claims_left FROM dlock_claims WHERE table_name::text LIKE 'keys_%';
DROP TABLE keys_num, keys_num_scaled, keys_float, keys_char, keys_interval,
           keys_citext, keys_coll, keys_part;
DROP COLLATION keys_ci;
DROP EXTENSION citext;
