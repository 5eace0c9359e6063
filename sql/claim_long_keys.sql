--
-- claim_long_keys: every key the user's primary key accepts can be claimed.
-- dlock.claim is keyed by the key's text, and an index entry holds at most
-- about 2,700 bytes, less than many keys the user's own index takes (a
-- bytea of 1,400 bytes is 2,802 characters of hex; a numeric of 3,000
-- digits is stored in 1,500 bytes; a compressible text of 100,000
-- characters fits its index compressed).  Key texts longer than 1,024
-- bytes (or beginning with chr(127)) are kept under their SHA-256 digest,
-- with the text beside it: claims, fences, completion, give-back, renewal,
-- resets, the views and max_attempts work for them as for short keys, and
-- no such row stops a queue.
--
\set VERBOSITY terse

-- incompressible bytes: a chain of SHA-256 digests
CREATE FUNCTION pg_temp.noise(seed int, len int) RETURNS bytea LANGUAGE sql AS $$
  SELECT substr(string_agg(sha256(convert_to(seed || ':' || i, 'UTF8')), ''::bytea ORDER BY i), 1, len)
    FROM generate_series(1, (len + 31) / 32) i
$$;

--
-- bytea keys around 1,400 bytes, in a queue of short ones
--
CREATE TABLE kb (id bytea PRIMARY KEY, n int NOT NULL, done bool NOT NULL DEFAULT false);
INSERT INTO kb SELECT pg_temp.noise(g, len), g, false
  FROM (VALUES (1, 8), (2, 1300), (3, 1400), (4, 16), (5, 1351), (6, 2000), (7, 511), (8, 512), (9, 513))
       AS v(g, len);
SELECT n, octet_length(id) AS bytes FROM kb ORDER BY n;
-- the whole queue, in batches of 2 in the primary key's order
SELECT count(*) AS batch_1 FROM dlock_claim(NULL::kb, 'w1', 2);
SELECT count(*) AS batch_2 FROM dlock_claim(NULL::kb, 'w1', 2);
SELECT count(*) AS rest FROM dlock_claim(NULL::kb, 'w1', 10);
SELECT count(*) AS nothing_left FROM dlock_claim(NULL::kb, 'w2', 10);
-- the view shows every key's text, of any length
SELECT k.n, length(c.key) AS key_chars
  FROM dlock_claims c JOIN kb k ON c.key = '\x' || encode(k.id, 'hex')
 WHERE c.table_name = 'kb'::regclass ORDER BY k.n;
SELECT count(*) AS claims_on_kb FROM dlock_claims WHERE table_name = 'kb'::regclass;
-- what dlock.claim keeps in its primary key: no entry longer than 1,024 bytes
SELECT max(octet_length(key)) <= 1024 AS index_entries_bounded,
       count(*) FILTER (WHERE long_key IS NOT NULL) AS kept_as_digest,
       bool_and(long_key IS NULL OR octet_length(key) = 65) AS digests_are_65_bytes
  FROM dlock.claim WHERE relid = 'kb'::regclass;
-- fences, completion, give-back, renewal, by the key given in any spelling
SELECT n, dlock_claimed('kb', id, 'w1') AS w1, dlock_claimed('kb', id, 'w2') AS w2,
       dlock_claimed('kb', encode(id, 'hex'), 'w1') AS hex_text_spelling
  FROM kb ORDER BY n;
SELECT dlock_renew_claims('kb', 'w1', '1 hour') AS renewed;
UPDATE kb SET done = true
  FROM dlock_complete('kb', 'w1', (SELECT array_agg(id) FROM kb WHERE n IN (2, 3, 4))) AS d(id)
 WHERE kb.id = d.id;
SELECT array_agg(n ORDER BY n) AS completed FROM kb WHERE done;
SELECT dlock_unclaim('kb', 'w1', (SELECT array_agg(id) FROM kb WHERE n IN (5, 6))) AS given_back;
SELECT array_agg(n ORDER BY n) AS w2_gets FROM dlock_claim(NULL::kb, 'w2', 10, '30 s', 'NOT done');
SELECT dlock_unclaim('kb', 'w1') AS w1_rest, dlock_unclaim('kb', 'w2') AS w2_rest;

-- max_attempts: a long key is set aside like any other, and shown whole
-- (row 6 has been delivered twice already)
SELECT array_agg(n ORDER BY n) AS try_3 FROM dlock_claim(NULL::kb, 'p', 10, '30 s', 'n = 6', NULL, 3);
SELECT dlock_unclaim('kb', 'p') AS back;
SELECT array_agg(n ORDER BY n) AS try_4 FROM dlock_claim(NULL::kb, 'p', 10, '30 s', 'n = 6', NULL, 3);
SELECT length(key) AS dead_key_chars, attempts FROM dlock_dead_claims WHERE table_name = 'kb'::regclass;
SELECT dlock_reset_claims('kb', (SELECT array_agg(id) FROM kb WHERE n = 6)) AS reset;
SELECT array_agg(n ORDER BY n) AS after_reset FROM dlock_claim(NULL::kb, 'p', 10, '30 s', 'n = 6', NULL, 3);
SELECT dlock_unclaim('kb', 'p') AS back;

--
-- text keys up to the user's own index limit, and beyond it compressed
--
CREATE TABLE kt (id text PRIMARY KEY, n int NOT NULL);
INSERT INTO kt SELECT encode(pg_temp.noise(g, len), 'hex'), g
  FROM (VALUES (1, 500), (2, 512), (3, 513), (4, 1300), (5, 1345)) AS v(g, len);
INSERT INTO kt VALUES (repeat('x', 100000), 6), (repeat('x', 99999) || 'y', 7),
                      (chr(127) || 'starts with the mark', 8), ('short', 9), ('', 10);
SELECT n, octet_length(id) AS bytes FROM kt ORDER BY n;
SELECT array_agg(n ORDER BY n) AS got FROM dlock_claim(NULL::kt, 'w', 3);
SELECT array_agg(n ORDER BY n) AS got FROM dlock_claim(NULL::kt, 'w', 3, '30 s', NULL, 'n');
SELECT array_agg(n ORDER BY n) AS got FROM dlock_claim(NULL::kt, 'w', 10);
SELECT array_agg(n ORDER BY n) AS fenced FROM kt WHERE dlock_claimed('kt', id, 'w');
SELECT count(*) AS shown, bool_and(k.n IS NOT NULL) AS each_names_its_row
  FROM dlock_claims c LEFT JOIN kt k ON k.id = c.key WHERE c.table_name = 'kt'::regclass;
-- two 100,000-character keys that differ in their last character are two rows
SELECT count(DISTINCT key) AS distinct_claim_keys FROM dlock.claim WHERE relid = 'kt'::regclass;
SELECT length(k) AS completed, k = repeat('x', 99999) || 'y' AS the_y_one
  FROM dlock_complete('kt', 'w', ARRAY[repeat('x', 99999) || 'y']) AS k;
SELECT dlock_claimed('kt', repeat('x', 100000), 'w') AS other_still_held,
       dlock_claimed('kt', repeat('x', 99999) || 'y', 'w') AS completed_one;
SELECT dlock_unclaim('kt', 'w') AS given_back;

--
-- numeric keys of thousands of digits
--
CREATE TABLE kn (id numeric PRIMARY KEY, n int NOT NULL);
INSERT INTO kn VALUES (repeat('7', 3000)::numeric, 1), (repeat('7', 2999)::numeric, 2),
                      (('1' || repeat('0', 2000) || '.5')::numeric, 3), (42, 4);
SELECT array_agg(n ORDER BY n) AS got FROM dlock_claim(NULL::kn, 'w', 10);
-- a key written another way (trailing zeros) names the same row and claim
SELECT dlock_claimed('kn', (repeat('7', 3000) || '.000')::numeric, 'w') AS other_spelling,
       dlock_claimed('kn', ('1' || repeat('0', 2000) || '.50')::numeric, 'w') AS other_spelling_2;
SELECT count(*) AS completed
  FROM dlock_complete('kn', 'w', ARRAY[(repeat('7', 3000) || '.0')::numeric, 42]);
SELECT array_agg(n ORDER BY n) AS left_held FROM kn WHERE dlock_claimed('kn', id, 'w');
SELECT dlock_unclaim('kn', 'w') AS given_back;

DROP TABLE kb, kt, kn;

--
-- upgrade: claim rows of dlock 0.3 with texts over 1,024 bytes (0.3 took
-- them up to about 2,700), or beginning with chr(127), are rewritten to the
-- digest form, and go on naming their rows.  (Until the update, keys are
-- kept as their texts, as 0.3 kept them.)
--
DROP EXTENSION dlock;
CREATE EXTENSION dlock VERSION '0.3';
CREATE TABLE ku (id text PRIMARY KEY);
INSERT INTO ku VALUES (repeat('a', 2000)), (chr(127) || 'mark'), ('b');
SELECT count(*) AS claimed_under_0_3 FROM dlock_claim(NULL::ku, 'w', 10);
SELECT count(*) AS rows_under_0_3 FROM dlock.claim;
ALTER EXTENSION dlock UPDATE;
SELECT octet_length(key) AS key_bytes, octet_length(long_key) AS long_key_bytes
  FROM dlock.claim ORDER BY 1, 2;
SELECT array_agg(octet_length(id) ORDER BY id) AS fenced FROM ku WHERE dlock_claimed('ku', id, 'w');
SELECT count(*) AS nothing_claimable FROM dlock_claim(NULL::ku, 'w2', 10);
SELECT count(*) AS claims_shown, sum(length(key)) AS key_chars FROM dlock_claims;
SELECT dlock_unclaim('ku', 'w') AS given_back;
DROP TABLE ku;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'dlock')
       AS at_default_version
  FROM pg_extension WHERE extname = 'dlock';
