--
-- claim_ddl_cost: what dlock's event triggers cost an ALTER TABLE does not
-- depend on how many tables have claims, nor on how many statements failed
-- before it (issue 35).  Timing cannot be asserted on a loaded machine, so
-- the work is: the scans of dlock.claim that the current transaction made
-- (pg_stat_xact_user_tables, counted in the backend, exact), and the
-- memory of the session's TopMemoryContext.
--  - an ALTER TABLE that attaches or detaches nothing reads no claim;
--  - an ATTACH PARTITION (and a DETACH) reads the claims of the tables it
--    moves, the same number of scans with 1 table or with 61 that have
--    claims (0.4 walked every table with claims after every ALTER TABLE);
--  - a failed ALTER TABLE in a subtransaction (a PL/pgSQL exception block)
--    leaves nothing behind in the session.
--
\set VERBOSITY terse

-- scans of dlock.claim made by this transaction so far
CREATE FUNCTION pg_temp.claim_scans() RETURNS bigint LANGUAGE sql AS $$
  SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0)
    FROM pg_stat_xact_all_tables WHERE relid = 'dlock.claim'::regclass
$$;

CREATE TABLE cost_u (id int PRIMARY KEY);
CREATE TABLE cost_p (id int PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE cost_p1 PARTITION OF cost_p FOR VALUES FROM (1) TO (100);
CREATE TABLE cost_x (id int PRIMARY KEY);
CREATE TABLE cost_c (id int PRIMARY KEY);
INSERT INTO cost_p VALUES (1), (2);
INSERT INTO cost_x VALUES (101), (102);
INSERT INTO cost_c VALUES (1), (2);
SELECT id FROM dlock_claim(NULL::cost_x, 'h', 1, '1 hour');
SELECT id FROM dlock_claim(NULL::cost_c, 'h', 1, '1 hour');
SELECT id FROM dlock_claim(NULL::cost_p, 'h', 1, '1 hour');

-- the work of one ALTER TABLE: claim_scans() after it less before it
CREATE FUNCTION pg_temp.scans_of(ddl text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  before bigint := pg_temp.claim_scans();
BEGIN
  EXECUTE ddl;
  RETURN pg_temp.claim_scans() - before;
END $$;

SELECT pg_temp.scans_of('ALTER TABLE cost_u ADD COLUMN a int') AS unrelated,
       pg_temp.scans_of('ALTER TABLE cost_c ADD COLUMN a int') AS claimed_table;
SELECT pg_temp.scans_of('ALTER TABLE cost_p ATTACH PARTITION cost_x FOR VALUES FROM (100) TO (200)')
       AS attach_1 \gset
SELECT pg_temp.scans_of('ALTER TABLE cost_p DETACH PARTITION cost_x') AS detach_1 \gset
SELECT :attach_1 > 0 AS attach_reads_claims, :detach_1 > 0 AS detach_reads_claims;

-- 60 more tables with claims
DO $$
BEGIN
  FOR i IN 1..60 LOOP
    EXECUTE format('CREATE TABLE cost_m%s (id int PRIMARY KEY)', i);
    EXECUTE format('INSERT INTO cost_m%s VALUES (1)', i);
    EXECUTE format('SELECT count(*) FROM dlock_claim(NULL::cost_m%s, %L, 1)', i, 'h');
  END LOOP;
END $$;
SELECT count(DISTINCT relid) > 60 AS tables_with_claims FROM dlock.claim;

SELECT pg_temp.scans_of('ALTER TABLE cost_u ADD COLUMN b int') AS unrelated,
       pg_temp.scans_of('ALTER TABLE cost_c ADD COLUMN b int') AS claimed_table;
SELECT pg_temp.scans_of('ALTER TABLE cost_p ATTACH PARTITION cost_x FOR VALUES FROM (100) TO (200)')
       = :attach_1 AS attach_same_work;
SELECT pg_temp.scans_of('ALTER TABLE cost_p DETACH PARTITION cost_x')
       = :detach_1 AS detach_same_work;
-- and the claims followed
SELECT relid::regclass, key, holder FROM dlock.claim
 WHERE relid IN ('cost_p'::regclass, 'cost_x'::regclass) ORDER BY 1, 2;

-- failed ALTER TABLE statements in subtransactions: nothing kept
CREATE FUNCTION pg_temp.top_bytes() RETURNS bigint LANGUAGE sql AS $$
  SELECT total_bytes FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext'
$$;
CREATE FUNCTION pg_temp.failed_alters(n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..n LOOP
    BEGIN
      ALTER TABLE cost_u ADD COLUMN id int;
    EXCEPTION WHEN duplicate_column THEN NULL;
    END;
  END LOOP;
END $$;
SELECT pg_temp.failed_alters(10);
SELECT pg_temp.top_bytes() AS top0 \gset
SELECT pg_temp.failed_alters(5000);
SELECT pg_temp.top_bytes() - :top0 < 256 * 1024 AS failed_alters_kept_nothing;
-- and the next ALTER TABLE still follows its claims
ALTER TABLE cost_p ATTACH PARTITION cost_x FOR VALUES FROM (100) TO (200);
SELECT relid::regclass, key, holder FROM dlock.claim
 WHERE relid IN ('cost_p'::regclass, 'cost_x'::regclass) ORDER BY 1, 2;

DO $$
BEGIN
  FOR i IN 1..60 LOOP
    EXECUTE format('DROP TABLE cost_m%s', i);
  END LOOP;
END $$;
DROP TABLE cost_u, cost_p, cost_c;
SELECT count(*) AS claim_rows_left FROM dlock.claim
 WHERE NOT EXISTS (SELECT FROM pg_class r WHERE r.oid = relid);
