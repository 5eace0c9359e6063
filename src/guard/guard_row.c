/*-------------------------------------------------------------------------
 *
 * guard_row.c
 *		What the guard's trigger decides: a row's insert, update or delete
 *		is allowed when this transaction fenced the row's key (a
 *		dlock_validate of that key that returned true) or, on a table that
 *		rows are claimed from, the row's claim (a dlock_claimed of it that
 *		returned true); anything else is refused with SQLSTATE LK001.
 *
 * The key of an insert is the new row's, of a delete the old row's; an
 * update needs the fence of the old row's key and, when the update
 * changes it, of the new row's too (moving a row from one key to another
 * writes both).  The fences are the notes base_fence.c keeps for the
 * transaction: a fence made in a subtransaction that rolled back is gone.
 *
 * With a token column, a write allowed by a lease fence stamps the new
 * row's column with that fence's token, and is refused when the row
 * already holds a higher token (an update by a holder the key has since
 * moved past; the fence alone cannot tell, when the lease was released and
 * taken again under the same holder name).  A write allowed by a claim
 * alone leaves the column as it is.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "base/base.h"
#include "claim/claim.h"
#include "compat.h"
#include "guard/guard.h"

/* what allowed a write of one row */
typedef struct Fence
{
	bool		by_lease;		/* a lease fence (token is its token) */
	int64		token;
} Fence;

static char *
qualified_name(Relation rel)
{
	return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
									  RelationGetRelationName(rel));
}

/* whether rel is a table rows can be claimed from: a one-column primary key */
static bool
claimable(Relation rel)
{
	Oid			pk = dlock_primary_key_index(rel);
	Relation	idx;
	bool		one;

	if (!OidIsValid(pk))
		return false;
	idx = index_open(pk, AccessShareLock);
	one = IndexRelationGetNumberOfKeyAttributes(idx) == 1 &&
		idx->rd_index->indkey.values[0] != 0;
	index_close(idx, AccessShareLock);
	return one;
}

/* whether this transaction fenced tup's claim (rel rows can be claimed from) */
static bool
claim_fenced(Relation rel, HeapTuple tup)
{
	Oid			claim_relid;
	text	   *key;

	if (!dlock_fence_any_rows() || !claimable(rel))
		return false;
	key = dlock_claim_row_key(RelationGetRelid(rel), tup,
							  RelationGetDescr(rel), &claim_relid);
	return key != NULL && dlock_fence_find_row(claim_relid, key);
}

/*
 * The fence of tup's key (of the old row when old): found, or an error
 * naming the table, the key and what is missing.
 */
static Fence
fence_of(Relation rel, const char *expr, HeapTuple tup)
{
	text	   *key = dlock_guard_key_of(rel, expr, tup);
	Fence		f = {false, 0};

	if (key != NULL &&
		dlock_fence_find_key(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
							 &f.token))
	{
		f.by_lease = true;
		return f;
	}
	if (claim_fenced(rel, tup))
		return f;
	if (key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DLOCK_GUARD_REFUSED),
				 errmsg("write to guarded table %s refused: the row's key is null",
						qualified_name(rel)),
				 errdetail("The guard's key expression gave NULL for this row, and no dlock_claimed of the row returned true in this transaction."),
				 errhint("Give the row a key, or call dlock_claimed(tbl, key, holder) in the same transaction before the write.")));
	ereport(ERROR,
			(errcode(ERRCODE_DLOCK_GUARD_REFUSED),
			 errmsg("write to guarded table %s refused for key \"%s\"",
					qualified_name(rel), text_to_cstring(key)),
			 errdetail("This transaction holds no fence of key \"%s\": no dlock_validate of it returned true in this transaction (or in a savepoint that was kept), and no dlock_claimed of the row did.",
					   text_to_cstring(key)),
			 errhint("Call dlock_validate(key, holder, token) in the same transaction before the write.")));
	return f;					/* not reached */
}

/*
 * Stamp newtup's token column with the fence's token, refusing a row that
 * already holds a higher one (oldtup's, or NULL for an insert).
 */
static HeapTuple
stamp(Relation rel, const char *column, Fence f, HeapTuple oldtup,
	  HeapTuple newtup)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			attnum = SPI_fnumber(desc, column);
	Datum		value;
	bool		isnull = false;

	if (attnum <= 0 || TupleDescAttr(desc, attnum - 1)->atttypid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("token column \"%s\" of guarded table %s is not a bigint column",
						column, qualified_name(rel)),
				 errhint("Call dlock_guard again with a token_column of type bigint, or none.")));
	if (!f.by_lease)
		return newtup;
	if (oldtup != NULL)
	{
		value = heap_getattr(oldtup, attnum, desc, &isnull);
		if (!isnull && DatumGetInt64(value) > f.token)
			ereport(ERROR,
					(errcode(ERRCODE_DLOCK_GUARD_REFUSED),
					 errmsg("write to guarded table %s refused: the fence's token is lower than the row's",
							qualified_name(rel)),
					 errdetail("Column \"%s\" holds token %lld, written under a later lease of the key; the fence's token is %lld.",
							   column, (long long) DatumGetInt64(value),
							   (long long) f.token),
					 errhint("Acquire the lease again and call dlock_validate(key, holder, token) with its new token.")));
	}
	value = Int64GetDatum(f.token);
	isnull = false;
	return heap_modify_tuple_by_cols(newtup, desc, 1, &attnum, &value,
									 &isnull);
}

/*
 * The row trigger: the row to write (the new row, stamped when the guard
 * has a token column; the old row of a delete), or an error.  Its
 * arguments are the key expression and the token column ('' for none).
 */
HeapTuple
dlock_guard_row(TriggerData *td)
{
	Relation	rel = td->tg_relation;
	Trigger    *tg = td->tg_trigger;
	const char *expr;
	const char *column = NULL;
	HeapTuple	oldtup = NULL;
	HeapTuple	newtup = NULL;
	Fence		f;

	if (tg->tgnargs < 1)
		elog(ERROR, "dlock_guard_trigger: the row trigger needs the key expression");
	expr = tg->tgargs[0];
	if (tg->tgnargs > 1 && tg->tgargs[1][0] != '\0')
		column = tg->tgargs[1];
	if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
		newtup = td->tg_trigtuple;
	else if (TRIGGER_FIRED_BY_DELETE(td->tg_event))
		oldtup = td->tg_trigtuple;
	else
	{
		oldtup = td->tg_trigtuple;
		newtup = td->tg_newtuple;
	}
	/* an update: the old key's fence, then the new key's */
	f = fence_of(rel, expr, oldtup != NULL ? oldtup : newtup);
	if (oldtup != NULL && newtup != NULL)
		f = fence_of(rel, expr, newtup);
	if (newtup == NULL)
		return oldtup;
	if (column != NULL)
		return stamp(rel, column, f, oldtup, newtup);
	return newtup;
}
