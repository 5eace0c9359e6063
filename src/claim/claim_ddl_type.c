/*-------------------------------------------------------------------------
 *
 * claim_ddl_type.c
 *		Claims through DDL, with claim_ddl.c: enum labels renamed (ALTER TYPE
 *		... RENAME VALUE) and tables dropped (sql_drop).
 *
 * After a label of an enum is renamed, the rows keyed by it have another
 * key text: the tables whose primary key is the enum (or a domain over it)
 * rename their claim keys, under an ExclusiveLock on the table and its
 * partitions (no claimer with the old label in its caches runs until the
 * DDL commits); the tables whose key type only contains it (an array, a
 * composite type, a range) forget their claims, whose keys cannot be
 * followed.  A dropped table's claims are deleted with it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "base/base.h"
#include "claim/claim_int.h"
#include "claim/claim.h"

/* whether type is, or contains, the type part (domains, arrays, rows, ranges) */
static bool
type_contains(Oid type, Oid part, int depth)
{
	check_stack_depth();
	if (type == part)
		return true;
	if (depth > 16)
		return true;			/* unlikely; err on the safe side */
	switch (get_typtype(type))
	{
		case TYPTYPE_DOMAIN:
			return type_contains(getBaseType(type), part, depth + 1);
		case TYPTYPE_RANGE:
			return type_contains(get_range_subtype(type), part, depth + 1);
		case TYPTYPE_MULTIRANGE:
			return type_contains(get_multirange_range(type), part, depth + 1);
		case TYPTYPE_COMPOSITE:
			{
				/* NULL: dropped meanwhile (its table is not locked yet) */
				TupleDesc	td = lookup_rowtype_tupdesc_noerror(type, -1, true);
				bool		found = false;

				if (td == NULL)
					return false;
				for (int i = 0; i < td->natts && !found; i++)
				{
					Form_pg_attribute att = TupleDescAttr(td, i);

					if (!att->attisdropped)
						found = type_contains(att->atttypid, part, depth + 1);
				}
				ReleaseTupleDesc(td);
				return found;
			}
		default:
			if (OidIsValid(get_element_type(type)))
				return type_contains(get_element_type(type), part, depth + 1);
			return false;
	}
}

/*
 * The first column of a query of the catalogs, as oids.  Run as dlock's
 * owner: the event triggers need no privilege of the role running the DDL
 * (an administrator may have revoked EXECUTE on
 * pg_event_trigger_dropped_objects() from PUBLIC, say).
 */
static int
oid_query(const char *sql, Oid **oids)
{
	MemoryContext cxt = CurrentMemoryContext;
	DlockSpi	spi;
	int			n;

	dlock_spi_begin(&spi);
	if (SPI_execute(sql, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "dlock query failed: %s", sql);
	n = (int) SPI_processed;
	*oids = MemoryContextAlloc(cxt, sizeof(Oid) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		(*oids)[i] = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
													SPI_tuptable->tupdesc, 1,
													&isnull));
	}
	dlock_spi_end(&spi);
	return n;
}

/*
 * ddl_command_end of ALTER TYPE ... RENAME VALUE: a label of an enum type
 * (the one pg_event_trigger_ddl_commands() names) was renamed from oldval
 * to newval.  The tables keyed by the enum rename their claim keys; those
 * whose key type only contains it forget their claims.
 */
void
dlock_claim_ddl_enum_renamed(const char *oldval, const char *newval)
{
	Oid		   *types;
	Oid		   *relids;
	int			n;

	if (oid_query("SELECT objid FROM pg_catalog.pg_event_trigger_ddl_commands()"
				  " WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass",
				  &types) != 1)
		return;
	/* the roots of partition trees, and plain tables, with a primary key */
	n = oid_query("SELECT i.indrelid FROM pg_catalog.pg_index i"
				  "  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indrelid"
				  " WHERE i.indisprimary AND NOT c.relispartition"
				  "   AND i.indnkeyatts OPERATOR(pg_catalog.=) 1"
				  " ORDER BY 1",
				  &relids);
	for (int i = 0; i < n; i++)
	{
		KeyFacts	f;

		CHECK_FOR_INTERRUPTS();
		dlock_claim_ddl_read_facts(relids[i], &f);
		if (!f.exists || f.attnum == 0 || !type_contains(f.type, types[0], 0))
			continue;

		/* every claim of the tree is committed, and none starts, until we end */
		if (get_rel_relkind(f.relid) == RELKIND_PARTITIONED_TABLE)
			list_free(find_all_inheritors(f.relid, ExclusiveLock, NULL));
		else
			LockRelationOid(f.relid, ExclusiveLock);
		if (getBaseType(f.type) == types[0])
		{
			text	   *from = dlock_claim_key_id(cstring_to_text(oldval));
			text	   *to_full = cstring_to_text(newval);
			text	   *to = dlock_claim_key_id(to_full);
			DlockKeyLock a = dlock_claim_keylock(f.relid, from);
			DlockKeyLock b = dlock_claim_keylock(f.relid, to);
			DlockSpi	spi;

			dlock_key_lock(&a, ExclusiveLock);
			dlock_key_lock(&b, ExclusiveLock);
			dlock_spi_begin(&spi);
			(void) dlock_claim_store_rekey(f.relid, from, to,
										   to == to_full ? NULL : to_full);
			dlock_spi_end(&spi);
			dlock_claim_returns_bump();
		}
		else
			dlock_claim_ddl_forget(f.relid);
	}
}

/* sql_drop: the dropped tables forget their claims */
void
dlock_claim_ddl_dropped(void)
{
	Oid		   *relids;
	int			n;
	DlockSpi	spi;

	/* DROP EXTENSION dlock (or DROP SCHEMA dlock CASCADE) */
	if (!OidIsValid(get_relname_relid("claim",
									  get_namespace_oid(DLOCK_SCHEMA, true))))
		return;
	n = oid_query("SELECT objid FROM pg_catalog.pg_event_trigger_dropped_objects()"
				  " WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
				  "   AND objsubid OPERATOR(pg_catalog.=) 0"
				  "   AND object_type IN ('table', 'partitioned table')",
				  &relids);
	if (n == 0)
		return;
	dlock_spi_begin(&spi);
	(void) dlock_claim_store_forget(relids, n);
	dlock_spi_end(&spi);
}
