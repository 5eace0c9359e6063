--
-- include/hostile_cleanup.sql: gives back the leases and claims of
-- include/hostile_setup.sql and drops its roles and everything they own
-- (read with \i, after each test has dropped its own pg_temp objects).
--
SET ROLE regress_dlock_hostile_a;
SELECT dlock_release_all('a') + dlock_release_all('keep') AS released;
RESET ROLE;
SELECT count(*) AS hostile_leases_left FROM dlock_locks WHERE key LIKE 'hostile:%';
DROP TABLE pg_temp.cases;
DROP FUNCTION pg_temp.try(text), pg_temp.fingerprint(), pg_temp.session_state();
DROP OWNED BY regress_dlock_hostile_a, regress_dlock_hostile_b, regress_dlock_hostile_m;
DROP ROLE regress_dlock_hostile_m, regress_dlock_hostile_a, regress_dlock_hostile_b;
