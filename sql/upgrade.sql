--
-- upgrade: ALTER EXTENSION dlock UPDATE from every released version (0.1,
-- 0.2, 0.3, 0.4) reaches the default version with the same objects as a fresh
-- install, which runs the default version's own full script
-- (dlock--X.Y.sql): functions with their definitions, volatility, parallel
-- safety, settings, ACLs and comments; tables, views, sequences and
-- indexes with their columns (in their order: C code reads them by
-- number), constraints, options, ACLs, definitions and comments; event
-- triggers with their events, tags, functions and states; the schema; the
-- tables and sequences pg_dump dumps, with their conditions.  Differences
-- are listed (none is expected), and the extension is left installed at
-- the default version.
--
\set VERBOSITY default

CREATE FUNCTION pg_temp.dlock_fingerprint() RETURNS SETOF text
LANGUAGE sql AS $$
WITH ext AS (SELECT oid, extconfig, extcondition FROM pg_extension WHERE extname = 'dlock'),
members AS (
  SELECT d.classid, d.objid FROM pg_depend d, ext
   WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'),
rels AS (
  SELECT c.oid FROM pg_class c
   WHERE c.oid IN (SELECT objid FROM members WHERE classid = 'pg_class'::regclass)
      OR c.oid IN (SELECT i.indexrelid FROM pg_index i
                    WHERE i.indrelid IN (SELECT objid FROM members
                                          WHERE classid = 'pg_class'::regclass)))
SELECT 'member ' || pg_describe_object(classid, objid, 0) FROM members
UNION ALL
SELECT format('function %s volatile=%s parallel=%s strict=%s config=%s acl=%s comment=%s def=%s',
              p.oid::regprocedure, p.provolatile, p.proparallel, p.proisstrict,
              p.proconfig, p.proacl, obj_description(p.oid, 'pg_proc'),
              md5(pg_get_functiondef(p.oid)))
  FROM pg_proc p WHERE p.oid IN (SELECT objid FROM members WHERE classid = 'pg_proc'::regclass)
UNION ALL
SELECT format('relation %s kind=%s persistence=%s acl=%s options=%s comment=%s view=%s index=%s',
              c.oid::regclass, c.relkind, c.relpersistence, c.relacl, c.reloptions,
              obj_description(c.oid, 'pg_class'),
              CASE WHEN c.relkind = 'v' THEN md5(pg_get_viewdef(c.oid)) END,
              CASE WHEN c.relkind = 'i' THEN pg_get_indexdef(c.oid) END)
  FROM pg_class c WHERE c.oid IN (SELECT oid FROM rels)
UNION ALL
SELECT format('column %s.%s number=%s type=%s notnull=%s default=%s collation=%s acl=%s comment=%s',
              a.attrelid::regclass, a.attname, a.attnum, format_type(a.atttypid, a.atttypmod),
              a.attnotnull, pg_get_expr(ad.adbin, ad.adrelid), a.attcollation::regcollation,
              a.attacl, col_description(a.attrelid, a.attnum))
  FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
 WHERE a.attrelid IN (SELECT oid FROM rels) AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT format('constraint %s on %s type=%s def=%s comment=%s',
              co.conname, co.conrelid::regclass, co.contype, pg_get_constraintdef(co.oid),
              obj_description(co.oid, 'pg_constraint'))
  FROM pg_constraint co WHERE co.conrelid IN (SELECT oid FROM rels)
UNION ALL
SELECT format('event trigger %s event=%s tags=%s function=%s enabled=%s comment=%s',
              e.evtname, e.evtevent, e.evttags, e.evtfoid::regprocedure, e.evtenabled,
              obj_description(e.oid, 'pg_event_trigger'))
  FROM pg_event_trigger e
 WHERE e.oid IN (SELECT objid FROM members WHERE classid = 'pg_event_trigger'::regclass)
UNION ALL
SELECT format('sequence %s start=%s increment=%s min=%s max=%s cache=%s cycle=%s',
              s.seqrelid::regclass, s.seqstart, s.seqincrement, s.seqmin, s.seqmax,
              s.seqcache, s.seqcycle)
  FROM pg_sequence s WHERE s.seqrelid IN (SELECT oid FROM rels)
UNION ALL
SELECT format('schema %s acl=%s comment=%s', n.nspname, n.nspacl,
              obj_description(n.oid, 'pg_namespace'))
  FROM pg_namespace n WHERE n.oid IN (SELECT objid FROM members WHERE classid = 'pg_namespace'::regclass)
UNION ALL
SELECT format('dumped %s condition=%s', c.rel::regclass, c.cond)
  FROM ext, unnest(ext.extconfig, ext.extcondition) AS c(rel, cond)
$$;

-- every version that can be installed is tested below, from each released
-- one (a new version: add its path here)
SELECT string_agg(version, ', ' ORDER BY version) AS versions
  FROM pg_available_extension_versions WHERE name = 'dlock';

-- a fresh install runs the default version's full script, not the upgrade
-- chain from 0.1 (which it would, were the script missing): it exists in
-- the installation, next to dlock.control
SELECT (pg_stat_file(c.setting || '/extension/dlock--' || v.default_version || '.sql',
                     true)).size > 0 AS full_script_installed
  FROM pg_config c, pg_available_extensions v
 WHERE c.name = 'SHAREDIR' AND v.name = 'dlock';

-- a fresh install at the default version
DROP EXTENSION dlock;
CREATE EXTENSION dlock;
CREATE TEMP TABLE fp_fresh AS SELECT * FROM pg_temp.dlock_fingerprint() f;
SELECT count(*) > 40 AS fingerprint_has_objects FROM fp_fresh;

-- from 0.1
DROP EXTENSION dlock;
CREATE EXTENSION dlock VERSION '0.1';
ALTER EXTENSION dlock UPDATE;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'dlock')
       AS at_default_version
  FROM pg_extension WHERE extname = 'dlock';
SELECT 'only after upgrade from 0.1' AS side, f FROM pg_temp.dlock_fingerprint() f
EXCEPT SELECT 'only after upgrade from 0.1', f FROM fp_fresh
UNION ALL
(SELECT 'only in a fresh install', f FROM fp_fresh
 EXCEPT SELECT 'only in a fresh install', f FROM pg_temp.dlock_fingerprint() f)
ORDER BY 1, 2;

-- from 0.2
DROP EXTENSION dlock;
CREATE EXTENSION dlock VERSION '0.2';
ALTER EXTENSION dlock UPDATE;
SELECT 'only after upgrade from 0.2' AS side, f FROM pg_temp.dlock_fingerprint() f
EXCEPT SELECT 'only after upgrade from 0.2', f FROM fp_fresh
UNION ALL
(SELECT 'only in a fresh install', f FROM fp_fresh
 EXCEPT SELECT 'only in a fresh install', f FROM pg_temp.dlock_fingerprint() f)
ORDER BY 1, 2;

-- from 0.3
DROP EXTENSION dlock;
CREATE EXTENSION dlock VERSION '0.3';
ALTER EXTENSION dlock UPDATE;
SELECT 'only after upgrade from 0.3' AS side, f FROM pg_temp.dlock_fingerprint() f
EXCEPT SELECT 'only after upgrade from 0.3', f FROM fp_fresh
UNION ALL
(SELECT 'only in a fresh install', f FROM fp_fresh
 EXCEPT SELECT 'only in a fresh install', f FROM pg_temp.dlock_fingerprint() f)
ORDER BY 1, 2;

-- from 0.4
DROP EXTENSION dlock;
CREATE EXTENSION dlock VERSION '0.4';
ALTER EXTENSION dlock UPDATE;
SELECT 'only after upgrade from 0.4' AS side, f FROM pg_temp.dlock_fingerprint() f
EXCEPT SELECT 'only after upgrade from 0.4', f FROM fp_fresh
UNION ALL
(SELECT 'only in a fresh install', f FROM fp_fresh
 EXCEPT SELECT 'only in a fresh install', f FROM pg_temp.dlock_fingerprint() f)
ORDER BY 1, 2;

-- a difference is found: a comment changed by hand shows up
COMMENT ON FUNCTION dlock_release(text, text, bigint) IS 'changed';
SELECT count(*) AS differences_after_a_change
  FROM (SELECT f FROM pg_temp.dlock_fingerprint() f EXCEPT SELECT f FROM fp_fresh) d;

-- leave the extension as a fresh install has it
DROP EXTENSION dlock;
CREATE EXTENSION dlock;
