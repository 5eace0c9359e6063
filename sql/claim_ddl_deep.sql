--
-- claim_ddl_deep: claims follow DDL beyond the simple case (issue 36):
-- keys longer than 1,024 bytes (kept as their digest, with the text in
-- long_key) across DETACH PARTITION, DETACH ... CONCURRENTLY and ATTACH
-- PARTITION, in partition trees of four and five levels, with claims made
-- through a leaf, a middle partition and the root.  After each DDL:
--  - where each live claim is kept (the root of its row's tree now), and
--    that long keys are still digests there;
--  - fences through the leaf, the middle and the root (true only where the
--    row is in the named table's tree);
--  - no row can be claimed twice: a new holder claiming everything through
--    each member of a tree gets exactly the rows nobody holds.
--
\set VERBOSITY terse

-- a text of 1 + 1,280 characters starting with p
CREATE FUNCTION pg_temp.long(p text, seed int) RETURNS text LANGUAGE sql AS $$
  SELECT p || string_agg(md5(seed || ':' || i), '' ORDER BY i) FROM generate_series(1, 40) i
$$;

-- top
-- `- dt                     ('a' to 'z')   [attached to top later]
--    |- dt_m                ('a' to 'm')
--    |   |- dt_l1           ('a' to 'f')
--    |   |   |- dt_l1a      ('a' to 'c')   rows 1, 2, 9
--    |   |   `- dt_l1b      ('c' to 'f')   rows 3, 4, 10
--    |   `- dt_l2           ('f' to 'm')   rows 5, 6
--    `- dt_r                ('m' to 'z')   rows 7, 8
-- odd rows have short keys, even rows long ones
CREATE TABLE dt (id text PRIMARY KEY, n int NOT NULL) PARTITION BY RANGE (id);
CREATE TABLE dt_m PARTITION OF dt FOR VALUES FROM ('a') TO ('m') PARTITION BY RANGE (id);
CREATE TABLE dt_l1 PARTITION OF dt_m FOR VALUES FROM ('a') TO ('f') PARTITION BY RANGE (id);
CREATE TABLE dt_l1a PARTITION OF dt_l1 FOR VALUES FROM ('a') TO ('c');
CREATE TABLE dt_l1b PARTITION OF dt_l1 FOR VALUES FROM ('c') TO ('f');
CREATE TABLE dt_l2 PARTITION OF dt_m FOR VALUES FROM ('f') TO ('m');
CREATE TABLE dt_r PARTITION OF dt FOR VALUES FROM ('m') TO ('z');
CREATE TABLE dt_rows (id text PRIMARY KEY, n int NOT NULL);
INSERT INTO dt_rows VALUES
  ('a1', 1), (pg_temp.long('b', 2), 2), ('c3', 3), (pg_temp.long('d', 4), 4),
  ('g5', 5), (pg_temp.long('h', 6), 6), ('n7', 7), (pg_temp.long('p', 8), 8),
  ('b9', 9), (pg_temp.long('e', 10), 10);
INSERT INTO dt SELECT id, n FROM dt_rows;
SELECT n, tableoid::regclass AS partition, octet_length(id) > 1024 AS long_key
  FROM dt ORDER BY n;

-- the live claims of these rows, as table:row=holder (row+ when the claim
-- is kept under the key's digest)
CREATE FUNCTION pg_temp.held() RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(string_agg(format('%s:%s%s=%s', c.relid::regclass, r.n,
                                    CASE WHEN c.long_key IS NOT NULL
                                          AND octet_length(c.key) <= 1024 THEN '+' END,
                                    c.holder), ' '
                             ORDER BY c.relid::regclass::text, r.n), '-')
    FROM dlock.claim c JOIN dt_rows r ON coalesce(c.long_key, c.key) = r.id
   WHERE c.holder IS NOT NULL AND c.expires_at > clock_timestamp()
$$;
-- the rows holder gets claiming up to n rows through tbl (with filter)
CREATE FUNCTION pg_temp.claim(tbl regclass, holder text, n int, filter text DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  got text;
BEGIN
  EXECUTE format('SELECT string_agg(n::text, '','' ORDER BY n)'
                 '  FROM dlock_claim(NULL::%s, %L, %s, ''1 hour'', %L)', tbl, holder, n, filter)
     INTO got;
  RETURN coalesce(got, '-');
END $$;
-- the rows whose fence is true for holder through tbl
CREATE FUNCTION pg_temp.fences(tbl regclass, holder text) RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(string_agg(n::text, ',' ORDER BY n), '-')
    FROM dt_rows WHERE dlock_claimed(tbl, id, holder)
$$;
-- every table of the trees: what a new holder gets through each of them,
-- each in a subtransaction that is rolled back (the claims are not kept)
CREATE FUNCTION pg_temp.free_through_each(holder text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  tbl text;
  out text := '';
BEGIN
  FOREACH tbl IN ARRAY ARRAY['top', 'dt', 'dt_m', 'dt_l1', 'dt_l1a', 'dt_l1b', 'dt_l2', 'dt_r'] LOOP
    CONTINUE WHEN to_regclass(tbl) IS NULL;
    BEGIN
      out := out || tbl || ':' || pg_temp.claim(tbl::regclass, holder, 100) || ' ';
      RAISE EXCEPTION 'undo' USING ERRCODE = 'P0001';
    EXCEPTION WHEN raise_exception THEN NULL;
    END;
  END LOOP;
  RETURN rtrim(out);
END $$;

-- claims through the root, the middle and a leaf
SELECT pg_temp.claim('dt', 'root', 2, 'n IN (2, 3)') AS root,
       pg_temp.claim('dt_m', 'mid', 2, 'n IN (4, 6)') AS mid,
       pg_temp.claim('dt_l1a', 'leaf', 1, 'n = 1') AS leaf,
       pg_temp.claim('dt_r', 'right', 1, 'n = 8') AS right_;
SELECT pg_temp.held();
SELECT pg_temp.free_through_each('x');

--
-- DETACH PARTITION of the middle: the claims of its rows, long keys too,
-- move to it
--
ALTER TABLE dt DETACH PARTITION dt_m;
SELECT pg_temp.held();
SELECT pg_temp.fences('dt_l1a', 'leaf') AS leaf_via_leaf,
       pg_temp.fences('dt_m', 'root') AS root_via_mid,
       pg_temp.fences('dt_l1b', 'mid') AS mid_via_leaf,
       pg_temp.fences('dt', 'root') AS root_via_old_root,
       pg_temp.fences('dt', 'right') AS right_via_old_root;
SELECT pg_temp.free_through_each('x');

--
-- ATTACH it back, and the whole tree into a new root: five levels, the
-- claims (long keys too) move to the new root
--
ALTER TABLE dt ATTACH PARTITION dt_m FOR VALUES FROM ('a') TO ('m');
SELECT pg_temp.held();
CREATE TABLE top (id text PRIMARY KEY, n int NOT NULL) PARTITION BY RANGE (id);
ALTER TABLE top ATTACH PARTITION dt FOR VALUES FROM ('a') TO ('z');
SELECT pg_temp.held();
SELECT pg_temp.fences('dt_l1a', 'leaf') AS leaf_via_leaf,
       pg_temp.fences('top', 'root') AS root_via_top,
       pg_temp.fences('dt_l1', 'mid') AS mid_via_l1,
       pg_temp.fences('dt_r', 'right') AS right_via_leaf;
SELECT pg_temp.free_through_each('x');
-- a claim through the deepest leaf, and through the middle, of the new tree
SELECT pg_temp.claim('dt_l1b', 'deep', 1, 'n = 3') AS deep_held_by_root,
       pg_temp.claim('dt', 'dt', 1, 'n = 5') AS dt;
SELECT pg_temp.held();
SELECT pg_temp.free_through_each('x');

--
-- DETACH ... CONCURRENTLY of a partition three levels down that has
-- partitions of its own: its rows' claims move from top to it
--
ALTER TABLE dt_m DETACH PARTITION dt_l1 CONCURRENTLY;
SELECT pg_temp.held();
SELECT pg_temp.fences('dt_l1a', 'leaf') AS leaf_via_leaf,
       pg_temp.fences('dt_l1', 'root') AS root_via_l1,
       pg_temp.fences('dt_l1b', 'mid') AS mid_via_leaf,
       pg_temp.fences('top', 'root') AS root_via_top,
       pg_temp.fences('dt_m', 'mid') AS mid_via_old_parent;
SELECT pg_temp.free_through_each('x');
-- its free rows are claimed while it is a tree of its own
SELECT pg_temp.claim('dt_l1', 'alone', 10) AS alone;

--
-- ATTACH it again, under the middle of the five-level tree: its claims
-- move to top, not to the partition it was attached to
--
ALTER TABLE dt_m ATTACH PARTITION dt_l1 FOR VALUES FROM ('a') TO ('f');
SELECT pg_temp.held();
SELECT pg_temp.fences('dt_l1a', 'alone') AS alone_via_leaf,
       pg_temp.fences('top', 'root') AS root_via_top,
       pg_temp.fences('dt_m', 'alone') AS alone_via_mid,
       pg_temp.fences('dt_l1', 'alone') AS alone_via_l1;
SELECT pg_temp.free_through_each('x');

-- completion of long keys through a leaf after all of it (row 6 is in
-- another leaf: not completed there)
SELECT count(*) AS completed
  FROM dlock_complete('dt_l1b', 'mid', (SELECT array_agg(id) FROM dt_rows WHERE n IN (4, 6)));
SELECT pg_temp.held();

DROP TABLE top, dt_rows;
SELECT count(*) AS claim_rows_left FROM dlock.claim
 WHERE NOT EXISTS (SELECT FROM pg_class r WHERE r.oid = relid);
