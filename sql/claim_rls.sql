--
-- claim_rls: no claim function tells a role anything about rows it cannot
-- see.  Table rt has row-level security: each of the roles
-- regress_dlock_rls_a, _b and _c sees the rows of its own tenant (the last
-- letter of its name), and _c is a member of _b (it has _b's privileges,
-- but not its rows).  _b claims its rows; then _a asks about them with
-- every claim function, directly and from a claim's filter, and the
-- answers must be the same whether those rows are claimed or not, or do
-- not exist at all.  Waiting (a fence that would wait for another role's
-- work on a hidden row) is in the isolation test claim_rls_wait.
--
\set VERBOSITY terse

CREATE ROLE regress_dlock_rls_a NOLOGIN;
CREATE ROLE regress_dlock_rls_b NOLOGIN;
CREATE ROLE regress_dlock_rls_c NOLOGIN IN ROLE regress_dlock_rls_b;
CREATE TABLE rt (id int PRIMARY KEY, tenant text NOT NULL, status int NOT NULL DEFAULT 0);
INSERT INTO rt SELECT g, CASE WHEN g <= 10 THEN 'a' ELSE 'b' END, 0
  FROM generate_series(1, 20) g;
ALTER TABLE rt ENABLE ROW LEVEL SECURITY;
CREATE POLICY by_tenant ON rt USING (tenant = right(current_user::text, 1));
GRANT SELECT, UPDATE ON rt TO regress_dlock_rls_a, regress_dlock_rls_b, regress_dlock_rls_c;
GRANT EXECUTE ON FUNCTION dlock_reset_claims(regclass, anyarray) TO regress_dlock_rls_a;

-- what role _a learns about rows 11 (claimed by _b), 12 (not claimed), 99
-- (no such row), and its own rows 1 (claimed by _a) and 2 (free)
CREATE FUNCTION pg_temp.probe_as_a() RETURNS TABLE (id int, unheld bool,
                                                    claimed bool, completed int,
                                                    via_filter int)
LANGUAGE sql AS $$
  SELECT k,
         dlock_claim_unheld('rt', k),
         dlock_claimed('rt', k, 'b'),
         (SELECT count(*)::int FROM dlock_complete('rt', 'b', ARRAY[k])),
         (SELECT count(*)::int FROM dlock_claim(NULL::rt, 'a-probe', 1, '1 min',
                   format('id = 3 AND dlock_claim_unheld(''rt''::regclass, %s)', k)))
    FROM unnest(ARRAY[11, 12, 99, 1, 2]) k
$$;

SET ROLE regress_dlock_rls_b;
SELECT array_agg(id ORDER BY id) AS b_got FROM dlock_claim(NULL::rt, 'b', 1, '1 hour');
SET ROLE regress_dlock_rls_a;
SELECT array_agg(id ORDER BY id) AS a_got FROM dlock_claim(NULL::rt, 'a', 1, '1 hour');
SELECT * FROM pg_temp.probe_as_a();
SELECT dlock_unclaim('rt', 'a-probe') AS a_probe_back;
-- a ticket that is not dlock_claim's own is refused, whatever the row
SELECT dlock_claim_unheld('rt', 11, 12345);
SELECT dlock_claim_unheld('rt', 1, NULL);
SELECT count(*) FROM dlock_claim(NULL::rt, 'a-probe', 1, '1 min',
                                 'id = 3 AND dlock_claim_unheld(''rt''::regclass, 11, 12345)');
-- the same when _b has claimed row 12 as well, and given back 11
SET ROLE regress_dlock_rls_b;
SELECT array_agg(id ORDER BY id) AS b_got FROM dlock_claim(NULL::rt, 'b', 1, '1 hour', 'id = 12');
SELECT dlock_unclaim('rt', 'b', ARRAY[11]) AS b_gave_back;
SET ROLE regress_dlock_rls_a;
SELECT * FROM pg_temp.probe_as_a();
SELECT dlock_unclaim('rt', 'a-probe') AS a_probe_back;
-- give-back, renewal and resets count only what the caller holds or sees
SELECT dlock_unclaim('rt', 'b') AS unclaim_b, dlock_unclaim('rt', 'b', ARRAY[11, 12]) AS unclaim_b_keys,
       dlock_renew_claims('rt', 'b') AS renew_b;
SELECT dlock_reset_claims('rt', ARRAY[11, 12, 99]) AS reset_hidden;
SELECT dlock_reset_claims('rt', ARRAY[1, 2]) AS reset_own;

-- the views: _c has _b's privileges, so it may see _b's claims, but not
-- on rows it cannot see; _b sees its own
SELECT array_agg(id ORDER BY id) AS a_claims_again FROM dlock_claim(NULL::rt, 'a', 2, '1 hour');
SET ROLE regress_dlock_rls_b;
-- row 13: claimed for 1 ms and left to expire, then set aside on its second
-- delivery (max_attempts 1), still _b's
SELECT array_agg(id ORDER BY id) AS b_poison_1
  FROM dlock_claim(NULL::rt, 'b', 1, '1 ms', 'id = 13', NULL, 1);
SELECT pg_sleep(0.05);
SELECT array_agg(id ORDER BY id) AS b_poison_2
  FROM dlock_claim(NULL::rt, 'b', 1, '1 hour', 'id = 13', NULL, 1);
SELECT table_name, key, holder FROM dlock_claims ORDER BY key::int;
SELECT table_name, key, attempts FROM dlock_dead_claims;
SET ROLE regress_dlock_rls_c;
SELECT table_name, key, holder FROM dlock_claims ORDER BY key::int;
SELECT count(*) AS dead_seen_by_c FROM dlock_dead_claims;
SET ROLE regress_dlock_rls_a;
SELECT table_name, key, holder FROM dlock_claims ORDER BY key::int;
RESET ROLE;
-- superusers see everything
SELECT table_name, key, holder FROM dlock_claims ORDER BY key::int;
SELECT table_name, key, attempts FROM dlock_dead_claims;

-- without row-level security, _c sees _b's claims as before
ALTER TABLE rt DISABLE ROW LEVEL SECURITY;
SET ROLE regress_dlock_rls_c;
SELECT table_name, key, holder FROM dlock_claims WHERE holder = 'b' ORDER BY key::int;
RESET ROLE;

DROP TABLE rt;
REVOKE EXECUTE ON FUNCTION dlock_reset_claims(regclass, anyarray) FROM regress_dlock_rls_a;
DROP ROLE regress_dlock_rls_a, regress_dlock_rls_b, regress_dlock_rls_c;
