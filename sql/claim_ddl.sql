--
-- claim_ddl: claims after DDL, in a backend that claimed before it (and so
-- had cached what it knew of the table: names, key type, partition root,
-- plans).  Every DDL that changes those facts must be seen by the next
-- claim call of the same backend; and DDL that changes what a key names or
-- where a row lives leaves one claim per row: claims follow detached and
-- attached partitions and renamed enum labels, and a table whose primary
-- key now names its rows differently forgets its claims.
--
\set VERBOSITY terse

-- held: the live claims of a table, as table:key=holder
CREATE FUNCTION pg_temp.held(tbl regclass) RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(string_agg(format('%s:%s=%s', table_name, key, holder), ' '
                             ORDER BY table_name::text, key), '-')
    FROM dlock_claims WHERE table_name = tbl
$$;

--
-- ALTER SCHEMA ... RENAME: the next claim reads the renamed table, and a
-- new table under the old name is another table
--
CREATE SCHEMA s2;
CREATE TABLE s2.q (id int PRIMARY KEY, v text);
INSERT INTO s2.q SELECT g, 'old' FROM generate_series(1, 10) g;
SELECT id FROM dlock_claim(NULL::s2.q, 'h', 2);
SELECT id FROM dlock_claim(NULL::s2.q, 'h', 1, '30 s', 'v = ''old''', 'id DESC');
ALTER SCHEMA s2 RENAME TO s2new;
SELECT id FROM dlock_claim(NULL::s2new.q, 'h', 2);
SELECT id FROM dlock_claim(NULL::s2new.q, 'h', 1, '30 s', 'v = ''old''', 'id DESC');
SELECT dlock_claimed('s2new.q', 1, 'h') AS fence_after_rename,
       dlock_renew_claims('s2new.q', 'h') AS renewed;
CREATE SCHEMA s2;
CREATE TABLE s2.q (id int PRIMARY KEY, v text);
INSERT INTO s2.q SELECT g, 'new' FROM generate_series(101, 103) g;
SELECT id, v FROM dlock_claim(NULL::s2.q, 'h', 2);
SELECT id, v FROM dlock_claim(NULL::s2new.q, 'h', 1);

-- ALTER TABLE ... RENAME, SET SCHEMA, RENAME COLUMN of the key
ALTER TABLE s2new.q RENAME TO q2;
SELECT id FROM dlock_claim(NULL::s2new.q2, 'h', 1);
CREATE SCHEMA s3;
ALTER TABLE s2new.q2 SET SCHEMA s3;
SELECT id FROM dlock_claim(NULL::s3.q2, 'h', 1);
ALTER TABLE s3.q2 RENAME COLUMN id TO ident;
SELECT ident FROM dlock_claim(NULL::s3.q2, 'h', 1, '30 s', NULL, 'ident');
SELECT pg_temp.held('s3.q2');
-- the claims stayed with their rows through all of it
SELECT dlock_unclaim('s3.q2', 'h') AS unclaimed;

-- DROP TABLE and CREATE TABLE under the same name: another table, whose
-- claims are its own; the dropped one's claims went with it
DROP TABLE s2.q;
CREATE TABLE s2.q (code text PRIMARY KEY);
INSERT INTO s2.q VALUES ('a'), ('b');
SELECT code FROM dlock_claim(NULL::s2.q, 'h', 5);
SELECT count(*) AS claim_rows_of_dropped_tables
  FROM dlock.claim c WHERE NOT EXISTS (SELECT FROM pg_class r WHERE r.oid = c.relid);

--
-- the primary key
--
CREATE TABLE k (id int PRIMARY KEY, code text UNIQUE NOT NULL);
INSERT INTO k SELECT g, 'c' || g FROM generate_series(1, 5) g;
SELECT id FROM dlock_claim(NULL::k, 'h1', 2);
-- re-created on the same column, of the same type: same keys, claims kept
ALTER TABLE k DROP CONSTRAINT k_pkey, ADD PRIMARY KEY (id);
ALTER TABLE k ALTER COLUMN id TYPE int;
SELECT pg_temp.held('k') AS kept;
-- USING can rename every key: the claims are forgotten (fences false),
-- the rows are free again, and claims are keyed by the new values
ALTER TABLE k ALTER COLUMN id TYPE int USING id + 100;
SELECT pg_temp.held('k') AS after_using, dlock_claimed('k', 1, 'h1') AS old_fence;
SELECT id FROM dlock_claim(NULL::k, 'h2', 2);
-- another type: the same, and the claim query now has the new key type
ALTER TABLE k ALTER COLUMN id TYPE numeric(10,2);
SELECT pg_temp.held('k') AS after_retype;
SELECT id FROM dlock_claim(NULL::k, 'h2', 2);
SELECT dlock_claimed('k', 101, 'h2') AS fence_numeric;
-- another column of the table: the claims stay
ALTER TABLE k ALTER COLUMN code TYPE varchar(20);
SELECT pg_temp.held('k') AS other_column;
-- the primary key rebuilt on another column: one claim per row, keyed by
-- the new key; the old holder's fences are false
ALTER TABLE k DROP CONSTRAINT k_pkey;
SELECT pg_temp.held('k') AS no_primary_key;
ALTER TABLE k ADD PRIMARY KEY (code);
SELECT code FROM dlock_claim(NULL::k, 'h3', 2);
SELECT dlock_claimed('k', '101.00'::text, 'h2') AS old_holder_fence,
       dlock_claimed('k', 'c1'::text, 'h3') AS new_holder_fence;
SELECT pg_temp.held('k');

--
-- enum labels: a renamed label's claims follow it
--
CREATE TYPE st AS ENUM ('a', 'b', 'c');
CREATE TABLE e (id st PRIMARY KEY, v int);
INSERT INTO e VALUES ('a', 1), ('b', 2), ('c', 3);
SELECT id FROM dlock_claim(NULL::e, 'h', 1);
ALTER TYPE st RENAME VALUE 'a' TO 'z';
ALTER TYPE st ADD VALUE 'a';
INSERT INTO e VALUES ('a', 4);
SELECT pg_temp.held('e');
SELECT dlock_claimed('e', 'z'::st, 'h') AS renamed_row,
       dlock_claimed('e', 'a'::st, 'h') AS new_row;
SELECT id FROM dlock_claim(NULL::e, 'h2', 10);
-- a key type that contains the enum: its keys cannot be followed
CREATE TYPE pair AS (s st, n int);
CREATE TABLE ep (id pair PRIMARY KEY);
INSERT INTO ep VALUES (ROW('b', 1)), (ROW('c', 2));
SELECT id FROM dlock_claim(NULL::ep, 'h', 1);
ALTER TYPE st RENAME VALUE 'b' TO 'y';
SELECT pg_temp.held('ep') AS forgotten, pg_temp.held('e') AS renamed;
SELECT id FROM dlock_claim(NULL::ep, 'h2', 5);

--
-- partitions: a row's claim follows it out of its tree and into another
--
CREATE TABLE pr (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE pr1 PARTITION OF pr FOR VALUES FROM (1) TO (100) PARTITION BY RANGE (id);
CREATE TABLE pr1a PARTITION OF pr1 FOR VALUES FROM (1) TO (50);
CREATE TABLE pr1b PARTITION OF pr1 FOR VALUES FROM (50) TO (100);
CREATE TABLE pr2 PARTITION OF pr FOR VALUES FROM (100) TO (200);
INSERT INTO pr SELECT g, 'x' FROM generate_series(1, 191, 10) g;
SELECT id FROM dlock_claim(NULL::pr, 'h1', 2);
SELECT id FROM dlock_claim(NULL::pr1b, 'h1', 1);
SELECT id FROM dlock_claim(NULL::pr2, 'h1', 1);
SELECT pg_temp.held('pr') AS before_detach;
ALTER TABLE pr DETACH PARTITION pr1;
SELECT pg_temp.held('pr') AS pr, pg_temp.held('pr1') AS pr1;
-- the detached tree hands out only what nobody holds, through any member
SELECT id FROM dlock_claim(NULL::pr1a, 'h2', 10);
SELECT id FROM dlock_claim(NULL::pr1, 'h2', 10);
SELECT dlock_claimed('pr1', 1, 'h1') AS h1_through_pr1,
       dlock_claimed('pr1a', 1, 'h1') AS h1_through_pr1a,
       dlock_claimed('pr', 1, 'h1') AS h1_through_old_root,
       dlock_claimed('pr1', 1, 'h2') AS h2;
-- and back: the claims move to the root again
ALTER TABLE pr ATTACH PARTITION pr1 FOR VALUES FROM (1) TO (100);
SELECT pg_temp.held('pr') AS pr, pg_temp.held('pr1') AS pr1;
SELECT id FROM dlock_claim(NULL::pr, 'h3', 20);
SELECT dlock_claimed('pr1a', 1, 'h1') AS h1, dlock_claimed('pr', 31, 'h2') AS h2;
-- a table with claims of its own attached: they move to the new root, in
-- place of what the root kept for those keys (a row deleted long ago)
CREATE TABLE pr3 (id int PRIMARY KEY, v text);
INSERT INTO pr3 VALUES (201, 'y'), (202, 'y');
SELECT id FROM dlock_claim(NULL::pr3, 'h4', 1);
ALTER TABLE pr ATTACH PARTITION pr3 FOR VALUES FROM (200) TO (300);
SELECT pg_temp.held('pr3') AS pr3, dlock_claimed('pr', 201, 'h4') AS h4;
SELECT id FROM dlock_claim(NULL::pr, 'h5', 20);
-- DETACH ... CONCURRENTLY too
ALTER TABLE pr DETACH PARTITION pr3 CONCURRENTLY;
SELECT pg_temp.held('pr3') AS pr3_detached, dlock_claimed('pr3', 201, 'h4') AS h4;

-- a row moved to another partition by an UPDATE of its key is another key:
-- the old key's claim names no row, so its fence is false; the row is
-- claimed under its new key, and one fence is true for it
SELECT dlock_unclaim('pr', h) FROM unnest(ARRAY['h1', 'h2', 'h3', 'h5']) h;
SELECT id FROM dlock_claim(NULL::pr, 'm', 1, '30 s', 'id = 191');
UPDATE pr SET id = 49 WHERE id = 191;
SELECT id FROM dlock_claim(NULL::pr, 'm2', 20, '30 s', 'id = 49');
SELECT dlock_claimed('pr', 191, 'm') AS old_key_fence,
       dlock_claimed('pr', 49, 'm2') AS new_key_fence,
       dlock_claimed('pr1a', 49, 'm2') AS through_leaf,
       dlock_claimed('pr2', 49, 'm2') AS through_other_partition;
SELECT * FROM dlock_complete('pr', 'm', ARRAY[191]) AS old_key_completed;
SELECT * FROM dlock_complete('pr', 'm2', ARRAY[49]) AS new_key_completed;
-- the same in a plain table
SELECT ident FROM dlock_claim(NULL::s3.q2, 'h', 1, '30 s', 'ident = 3');
UPDATE s3.q2 SET ident = 1003 WHERE ident = 3;
SELECT dlock_claimed('s3.q2', 3, 'h') AS old_key_fence;
SELECT ident FROM dlock_claim(NULL::s3.q2, 'h2', 1, '30 s', 'ident = 1003');

-- two tables of one name: an unqualified ALTER TABLE changes (and makes
-- forget its claims) only the one the session's search_path names
CREATE SCHEMA s9;
CREATE TABLE dup (id int PRIMARY KEY);
CREATE TABLE s9.dup (id int PRIMARY KEY);
INSERT INTO dup VALUES (1);
INSERT INTO s9.dup VALUES (1);
SELECT id FROM dlock_claim(NULL::dup, 'd', 1);
SELECT id FROM dlock_claim(NULL::s9.dup, 'd', 1);
ALTER TABLE dup ALTER COLUMN id TYPE bigint;
SELECT pg_temp.held('dup') AS public_dup, pg_temp.held('s9.dup') AS s9_dup;
SET search_path = s9, public;
ALTER TABLE dup ALTER COLUMN id TYPE bigint;
RESET search_path;
SELECT pg_temp.held('dup') AS public_dup, pg_temp.held('s9.dup') AS s9_dup;
DROP TABLE dup, s9.dup;
DROP SCHEMA s9;

-- DDL by a table's owner who is not a superuser: dlock's own writes are
-- made as dlock's owner
CREATE ROLE regress_dlock_ddl_owner NOLOGIN;
GRANT CREATE ON SCHEMA public TO regress_dlock_ddl_owner;
SET ROLE regress_dlock_ddl_owner;
CREATE TABLE owned (id int PRIMARY KEY);
INSERT INTO owned VALUES (1), (2);
SELECT id FROM dlock_claim(NULL::owned, 'o', 1);
ALTER TABLE owned ALTER COLUMN id TYPE bigint;
SELECT id FROM dlock_claim(NULL::owned, 'o2', 5);
DROP TABLE owned;
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM regress_dlock_ddl_owner;
DROP ROLE regress_dlock_ddl_owner;

DROP TABLE pr, pr3, k, e, ep, s2.q, s3.q2;
DROP TYPE pair;
DROP TYPE st;
DROP SCHEMA s2, s2new, s3;
SELECT count(*) AS claim_rows_left FROM dlock.claim;
