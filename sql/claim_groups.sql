--
-- claim_groups: dlock_claim's group_by, per_group and fair (issue 38), in
-- one session: caps per group across claimers (holders), the NULL group,
-- errors, fair ordering, order within a group, and the group expression
-- evaluated as the caller.  Races between sessions: specs/claim_group_cap.spec.
--
CREATE TABLE grp_jobs (id int PRIMARY KEY, tenant text, acct int, seq int);
INSERT INTO grp_jobs
SELECT i, CASE WHEN i <= 20 THEN 'big' WHEN i <= 26 THEN 'small' END,
       i % 3, 100 - i
  FROM generate_series(1, 30) i;

-- per_group 3: at most 3 live claims per tenant, across holders
SELECT tenant, count(*) FROM dlock_claim(NULL::grp_jobs, 'h1', 100,
    group_by => 'tenant', per_group => 3) GROUP BY tenant ORDER BY tenant;
-- the NULL tenant (rows 27-30) is one group: 3 of its 4 rows
SELECT tenant, count(*) FROM dlock_claim(NULL::grp_jobs, 'h2', 100,
    group_by => 'tenant', per_group => 3) GROUP BY tenant ORDER BY tenant;
-- the claim rows keep their group's text
SELECT grp, count(*) FROM dlock.claim WHERE relid = 'grp_jobs'::regclass
 GROUP BY grp ORDER BY grp;
-- a bigger cap lets 2 more of each through
SELECT tenant, count(*) FROM dlock_claim(NULL::grp_jobs, 'h3', 100,
    group_by => 'tenant', per_group => 5) GROUP BY tenant ORDER BY tenant;
-- a given back claim frees its place in the group
SELECT dlock_unclaim('grp_jobs', 'h1', ARRAY(SELECT id FROM grp_jobs WHERE tenant = 'big' ORDER BY id LIMIT 1));
SELECT id, tenant FROM dlock_claim(NULL::grp_jobs, 'h4', 100,
    group_by => 'tenant', per_group => 5);
-- a row waiting out a backoff (retry_at ahead) still occupies its group
SELECT dlock_unclaim('grp_jobs', 'h4', ARRAY[1]);
UPDATE dlock.claim SET retry_at = clock_timestamp() + interval '1 hour'
 WHERE relid = 'grp_jobs'::regclass AND key = '1';
SELECT id, tenant FROM dlock_claim(NULL::grp_jobs, 'h6', 100,
    group_by => 'tenant', per_group => 5);
-- a row claimed again is counted in the group of its new claim
SELECT dlock_unclaim('grp_jobs', 'h1', ARRAY[2]);
SELECT id, acct FROM dlock_claim(NULL::grp_jobs, 'h7', 1, filter => 'id = 2',
    group_by => 'acct * 10', per_group => 1);
SELECT key, grp, attempts FROM dlock.claim WHERE relid = 'grp_jobs'::regclass AND key = '2';
-- a claim without group_by ignores groups
SELECT count(*) FROM dlock_claim(NULL::grp_jobs, 'h5', 100);
SELECT dlock_reset_claims('grp_jobs', ARRAY(SELECT id FROM grp_jobs)) > 0 AS reset;

-- per_group 1 with order_by: one at a time per group, in order
SELECT id, acct, seq FROM dlock_claim(NULL::grp_jobs, 'l1', 100,
    group_by => 'acct', per_group => 1, order_by => 'seq DESC') ORDER BY acct;
SELECT count(*) FROM dlock_claim(NULL::grp_jobs, 'l2', 100,
    group_by => 'acct', per_group => 1, order_by => 'seq DESC');
SELECT dlock_unclaim('grp_jobs', 'l1', ARRAY[1, 2, 3]);
SELECT id, acct FROM dlock_claim(NULL::grp_jobs, 'l2', 100,
    group_by => 'acct', per_group => 1, order_by => 'seq DESC') ORDER BY acct;
SELECT dlock_reset_claims('grp_jobs', ARRAY(SELECT id FROM grp_jobs)) > 0 AS reset;

-- fair: round-robin across groups in the order of their first rows
-- (without it, the big group's rows come first)
SELECT string_agg(coalesce(tenant, '-'), ',') FROM dlock_claim(NULL::grp_jobs, 'f0', 6);
SELECT dlock_reset_claims('grp_jobs', ARRAY(SELECT id FROM grp_jobs)) > 0 AS reset;
SELECT string_agg(coalesce(tenant, '-'), ',') FROM dlock_claim(NULL::grp_jobs, 'f1', 6,
    group_by => 'tenant', fair => true);
SELECT string_agg(coalesce(tenant, '-'), ',') FROM dlock_claim(NULL::grp_jobs, 'f2', 6,
    group_by => 'tenant', fair => true);
SELECT dlock_reset_claims('grp_jobs', ARRAY(SELECT id FROM grp_jobs)) > 0 AS reset;
-- fair with per_group: both apply
SELECT tenant, count(*) FROM dlock_claim(NULL::grp_jobs, 'f3', 100,
    group_by => 'tenant', fair => true, per_group => 4) GROUP BY tenant ORDER BY tenant;
SELECT dlock_reset_claims('grp_jobs', ARRAY(SELECT id FROM grp_jobs)) > 0 AS reset;
-- a batch larger than the groups: the rounds go on until it is full
SELECT count(*) FROM dlock_claim(NULL::grp_jobs, 'f4', 25, group_by => 'tenant', fair => true);
SELECT dlock_reset_claims('grp_jobs', ARRAY(SELECT id FROM grp_jobs)) > 0 AS reset;

-- a big group's backlog beside many small groups: with fair, every small
-- group's rows are delivered within the first 5% of all deliveries
CREATE TABLE grp_backlog (id int PRIMARY KEY, tenant int);
INSERT INTO grp_backlog SELECT i, 0 FROM generate_series(1, 4000) i;
INSERT INTO grp_backlog SELECT 4000 + i, 1 + i % 20 FROM generate_series(1, 100) i;
CREATE TABLE grp_delivered (n serial, id int);
DO $$
BEGIN
  LOOP
    INSERT INTO grp_delivered (id)
    SELECT id FROM dlock_claim(NULL::grp_backlog, 'fb', 10, group_by => 'tenant', fair => true);
    EXIT WHEN NOT FOUND OR (SELECT count(*) FROM grp_delivered) >= 400;
  END LOOP;
END $$;
SELECT count(*) AS small_rows, max(n) AS last_small_delivery,
       max(n) <= 0.05 * 4100 AS within_5_percent
  FROM grp_delivered d JOIN grp_backlog b USING (id) WHERE b.tenant > 0;
DROP TABLE grp_backlog, grp_delivered;

-- errors
SELECT * FROM dlock_claim(NULL::grp_jobs, 'e', 1, per_group => 2);
SELECT * FROM dlock_claim(NULL::grp_jobs, 'e', 1, fair => true);
SELECT * FROM dlock_claim(NULL::grp_jobs, 'e', 1, group_by => 'tenant', per_group => 0);
SELECT * FROM dlock_claim(NULL::grp_jobs, 'e', 1, group_by => 'no_such_column');
SELECT * FROM dlock_claim(NULL::grp_jobs, 'e', 1, group_by => '1/(id - id)');
SELECT * FROM dlock_claim(NULL::grp_jobs, 'e', 1, group_by => 'tenant) OR (true');
-- a row of several expressions is one group_by too: its groups are the pairs
SELECT count(*) FROM dlock_claim(NULL::grp_jobs, 'e', 100, group_by => 'tenant, acct', per_group => 1);
SELECT grp, count(*) FROM dlock.claim WHERE relid = 'grp_jobs'::regclass
 GROUP BY grp ORDER BY grp;
SELECT dlock_reset_claims('grp_jobs', ARRAY(SELECT id FROM grp_jobs)) > 0 AS reset;
-- the per-row check with a group is only for the claim's own query
SELECT dlock_claim_unheld('grp_jobs', 1, 42, 'big');

-- the group expression runs as the caller: RLS applies, and a function it
-- calls needs the caller's EXECUTE
CREATE ROLE regress_dlock_grp NOLOGIN;
GRANT SELECT, UPDATE ON grp_jobs TO regress_dlock_grp;
CREATE FUNCTION grp_secret(int) RETURNS int LANGUAGE sql AS 'SELECT $1 % 2';
REVOKE EXECUTE ON FUNCTION grp_secret(int) FROM PUBLIC;
ALTER TABLE grp_jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY grp_small ON grp_jobs TO regress_dlock_grp USING (tenant = 'small');
SET ROLE regress_dlock_grp;
SELECT * FROM dlock_claim(NULL::grp_jobs, 'r', 1, group_by => 'grp_secret(acct)');
SELECT tenant, count(*) FROM dlock_claim(NULL::grp_jobs, 'r', 100, group_by => 'tenant', per_group => 2)
 GROUP BY tenant;
SELECT id, tenant FROM dlock_claim(NULL::grp_jobs, 'r', 100, group_by => 'tenant', per_group => 3);
RESET ROLE;
SELECT grp, count(*) FROM dlock.claim WHERE relid = 'grp_jobs'::regclass
 GROUP BY grp ORDER BY grp;
SELECT dlock_reset_claims('grp_jobs', ARRAY(SELECT id FROM grp_jobs)) > 0 AS reset;
DROP TABLE grp_jobs;
DROP FUNCTION grp_secret(int);
DROP ROLE regress_dlock_grp;
