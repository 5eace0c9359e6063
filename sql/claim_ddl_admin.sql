--
-- claim_ddl_admin: an administrator changing dlock's own objects (their
-- owners, their privileges) does not break other roles' DDL, nor their
-- claims following it (issue 35).  dlock's queries run as the owner of
-- the extension, not of schema dlock (whose owner may be changed to a role
-- with no right on dlock's tables), and its event triggers need no
-- privilege of the role running the DDL: not EXECUTE on dlock's trigger
-- functions, nor on pg_event_trigger_ddl_commands() or
-- pg_event_trigger_dropped_objects().
--
-- In a database of its own: what the administrator changes stays there.
\set VERBOSITY terse

CREATE DATABASE regress_dlock_adm;
\c regress_dlock_adm
\set VERBOSITY terse
CREATE EXTENSION dlock;
CREATE ROLE regress_dlock_adm_new NOLOGIN;
CREATE ROLE regress_dlock_adm_user NOLOGIN;
GRANT CREATE ON SCHEMA public TO regress_dlock_adm_user;

-- what a role with no other right does: tables of its own, claims, DDL
CREATE FUNCTION pg_temp.user_ddl(tag text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  out text := '';
  r record;
BEGIN
  EXECUTE format('CREATE TABLE adm_%s (id int PRIMARY KEY, v text) PARTITION BY RANGE (id)', tag);
  EXECUTE format('CREATE TABLE adm_%s_1 PARTITION OF adm_%s FOR VALUES FROM (1) TO (100)', tag, tag);
  EXECUTE format('CREATE TABLE adm_%s_x (id int PRIMARY KEY)', tag);
  EXECUTE format('INSERT INTO adm_%s SELECT g FROM generate_series(1, 3) g', tag);
  EXECUTE format('INSERT INTO adm_%s_x SELECT g FROM generate_series(101, 103) g', tag);
  EXECUTE format('SELECT count(*) FROM dlock_claim(NULL::adm_%s, ''h'', 1, ''1 hour'', ''id = 1'')', tag);
  EXECUTE format('SELECT count(*) FROM dlock_claim(NULL::adm_%s_x, ''h'', 1, ''1 hour'', ''id = 101'')', tag);
  EXECUTE format('ALTER TABLE adm_%s ADD COLUMN w int', tag);
  EXECUTE format('ALTER TABLE adm_%s DETACH PARTITION adm_%s_1', tag, tag);
  EXECUTE format('SELECT dlock_claimed(''adm_%s_1'', 1, ''h'')', tag) INTO r;
  out := out || 'detach:' || r.dlock_claimed;
  EXECUTE format('ALTER TABLE adm_%s_x ADD COLUMN w int, ADD COLUMN v text', tag);
  EXECUTE format('ALTER TABLE adm_%s ATTACH PARTITION adm_%s_x FOR VALUES FROM (100) TO (200)', tag, tag);
  EXECUTE format('SELECT dlock_claimed(''adm_%s'', 101, ''h'')', tag) INTO r;
  out := out || ' attach:' || r.dlock_claimed;
  EXECUTE format('ALTER TABLE adm_%s_1 ALTER COLUMN id TYPE bigint', tag);
  EXECUTE format('SELECT dlock_claimed(''adm_%s_1'', 1, ''h'')', tag) INTO r;
  out := out || ' retyped:' || r.dlock_claimed;
  EXECUTE format('CREATE TYPE adm_%s_t AS ENUM (''a'', ''b'')', tag);
  EXECUTE format('CREATE TABLE adm_%s_e (id adm_%s_t PRIMARY KEY)', tag, tag);
  EXECUTE format('INSERT INTO adm_%s_e VALUES (''a'')', tag);
  EXECUTE format('SELECT count(*) FROM dlock_claim(NULL::adm_%s_e, ''h'', 1, ''1 hour'')', tag);
  EXECUTE format('ALTER TYPE adm_%s_t RENAME VALUE ''a'' TO ''z''', tag);
  EXECUTE format('SELECT dlock_claimed(''adm_%s_e'', ''z''::adm_%s_t, ''h'')', tag, tag) INTO r;
  out := out || ' relabel:' || r.dlock_claimed;
  EXECUTE format('DROP TABLE adm_%s, adm_%s_1, adm_%s_e', tag, tag, tag);
  EXECUTE format('DROP TYPE adm_%s_t', tag);
  RETURN out;
END $$;

-- before any change
SET ROLE regress_dlock_adm_user;
SELECT pg_temp.user_ddl('a') AS as_installed;
RESET ROLE;

-- schema dlock given to a role with no right on dlock's tables
ALTER SCHEMA dlock OWNER TO regress_dlock_adm_new;
SET ROLE regress_dlock_adm_user;
SELECT pg_temp.user_ddl('b') AS schema_owner_changed;
RESET ROLE;

-- dlock's trigger functions: no EXECUTE for PUBLIC, another owner;
-- PostgreSQL's event trigger functions: no EXECUTE for PUBLIC
REVOKE EXECUTE ON FUNCTION dlock_claim_ddl_start(), dlock_claim_ddl_end(),
                           dlock_claim_ddl_drop() FROM PUBLIC;
ALTER FUNCTION dlock_claim_ddl_end() OWNER TO regress_dlock_adm_new;
REVOKE EXECUTE ON FUNCTION pg_event_trigger_ddl_commands(),
                           pg_event_trigger_dropped_objects() FROM PUBLIC;
SET ROLE regress_dlock_adm_user;
SELECT pg_temp.user_ddl('c') AS functions_revoked;
RESET ROLE;

-- dlock's table given to that role too
ALTER TABLE dlock.claim OWNER TO regress_dlock_adm_new;
SET ROLE regress_dlock_adm_user;
SELECT pg_temp.user_ddl('d') AS table_owner_changed;
RESET ROLE;

-- schema dlock renamed: ALTER TABLE fails (claims cannot be followed), saying why
CREATE TABLE adm_r (id int PRIMARY KEY);
ALTER SCHEMA dlock RENAME TO dlock_renamed;
\set VERBOSITY default
ALTER TABLE adm_r ADD COLUMN v int;
\set VERBOSITY terse
ALTER SCHEMA dlock_renamed RENAME TO dlock;
ALTER TABLE adm_r ADD COLUMN v int;
DROP TABLE adm_r;

SELECT count(*) AS claim_rows_left FROM dlock.claim
 WHERE NOT EXISTS (SELECT FROM pg_class r WHERE r.oid = relid);
\c contrib_regression
DROP DATABASE regress_dlock_adm;
DROP ROLE regress_dlock_adm_user, regress_dlock_adm_new;
