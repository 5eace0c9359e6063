--
-- security_pins: which dlock functions run without a pinned search_path.
--
-- Every dlock function pins search_path (SET search_path = pg_catalog,
-- pg_temp) except the ones listed in src/no_search_path.h, which run no SQL
-- and resolve no name through search_path, and dlock_claim, which runs the
-- caller's filter and order_by in the caller's search_path on purpose.
-- This test reads that list and fails when a dlock function without the pin
-- is not on it, when a function on it still has the pin (a stale list), or
-- when its C symbol is not the one the list names.  (t/092_no_search_path.pl
-- checks the listed symbols' code for SPI and name look-ups.)
-- A new function without the pin shows below as NOT LISTED: pin it, or
-- list it in src/no_search_path.h (CONTRIBUTING.md, "Adding a function").
--
CREATE TEMP TABLE pin_list_lines (line text);
\copy pin_list_lines FROM 'src/no_search_path.h' WITH (FORMAT csv, DELIMITER E'\x01', QUOTE E'\x02')
CREATE TEMP VIEW pin_list AS
SELECT m[1] AS signature, m[2] AS symbol
  FROM pin_list_lines,
       regexp_match(line, '^DLOCK_NO_SEARCH_PATH\("([^"]+)", *([A-Za-z0-9_]+)\)$') AS m
 WHERE m IS NOT NULL;
CREATE TEMP VIEW dlock_funcs AS
SELECT p.proname || '(' || oidvectortypes(p.proargtypes) || ')' AS signature,
       p.prosrc AS symbol,
       EXISTS (SELECT 1 FROM unnest(p.proconfig) c
                WHERE c LIKE 'search\_path=%') AS pinned
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                  AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'dlock';

-- the list as read (a parse that found nothing would hide everything below)
SELECT signature, symbol FROM pin_list ORDER BY signature;

-- every dlock function without the pin: on the list, or dlock_claim
SELECT f.signature, f.symbol,
       CASE WHEN l.signature IS NOT NULL THEN 'listed in src/no_search_path.h'
            WHEN f.symbol = 'dlock_claim_sql' THEN 'the caller''s SQL, by design'
            ELSE 'NOT LISTED: add SET search_path = pg_catalog, pg_temp to it, '
                 'or (it runs no SQL and looks no name up) an entry with its '
                 'reason in src/no_search_path.h (CONTRIBUTING.md, "Adding a function")'
       END AS why
  FROM dlock_funcs f LEFT JOIN pin_list l USING (signature)
 WHERE NOT f.pinned
 ORDER BY f.signature;

-- problems: listed but pinned or missing, or listed with another C symbol
SELECT l.signature,
       CASE WHEN f.signature IS NULL THEN 'listed, but no such dlock function'
            WHEN f.pinned THEN 'listed, but still pinned: a stale list'
            ELSE 'listed as ' || l.symbol || ', but its C symbol is ' || f.symbol
       END AS problem
  FROM pin_list l LEFT JOIN dlock_funcs f USING (signature)
 WHERE f.signature IS NULL OR f.pinned OR f.symbol <> l.symbol
 ORDER BY l.signature;

-- every other dlock function pins exactly pg_catalog, pg_temp
SELECT count(*) FILTER (WHERE pinned) > 0 AS some_pinned,
       bool_and(p.proconfig = '{"search_path=pg_catalog, pg_temp"}')
         FILTER (WHERE pinned) AS pins_are_pg_catalog_pg_temp
  FROM dlock_funcs f
  JOIN pg_proc p ON p.proname || '(' || oidvectortypes(p.proargtypes) || ')' = f.signature
                AND p.prosrc = f.symbol;

-- without the pin they still resolve nothing through search_path: a role
-- that plants look-alikes of dlock's objects early in its search_path
-- changes nothing
CREATE SCHEMA pin_trap;
CREATE TABLE pin_trap.lease (key text);
CREATE TABLE pin_trap.claim (key text);
CREATE SEQUENCE pin_trap.token_seq;
CREATE FUNCTION pin_trap.texteq(text, text) RETURNS boolean
  LANGUAGE sql AS 'SELECT true';
CREATE OPERATOR pin_trap.= (LEFTARG = text, RIGHTARG = text, FUNCTION = pin_trap.texteq);
CREATE TABLE pin_jobs (id int PRIMARY KEY);
INSERT INTO pin_jobs VALUES (1), (2);
SET search_path = pin_trap, public;
SELECT dlock_acquire('pin:k', 'h', '1 min') AS token \gset
SELECT :token > 0 AS acquired;
SELECT dlock_validate('pin:k', 'h', :token) AS fenced,
       dlock_renew('pin:k', 'h') AS renewed,
       dlock_release('pin:k', 'h', :token) AS released,
       dlock_validate('pin:k', 'h', :token) AS fenced_after_release;
SELECT id FROM dlock_claim(NULL::pin_jobs, 'w', 1, '1 min');
SELECT dlock_claimed('pin_jobs', 1, 'w') AS claimed_1,
       dlock_claimed('pin_jobs', 2, 'w') AS claimed_2,
       dlock_claim_unheld('pin_jobs', 1) AS unheld_1,
       dlock_claim_unheld('pin_jobs', 2) AS unheld_2;
SELECT count(*) AS trap_rows
  FROM (SELECT key FROM pin_trap.lease UNION ALL SELECT key FROM pin_trap.claim) t;
SELECT last_value = 1 AND NOT is_called AS trap_sequence_untouched FROM pin_trap.token_seq;
RESET search_path;
SELECT dlock_unclaim('pin_jobs', 'w') AS gave_back;
DROP TABLE pin_jobs;
DROP SCHEMA pin_trap CASCADE;
