/*-------------------------------------------------------------------------
 *
 * base_keys.c
 *		Lists of key texts: as SQL text[] arguments, sorted bytewise, and
 *		read out of SPI results.  Shared by leases and claims.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"

#include "base/base.h"
#include "compat.h"

Datum
dlock_text_array(text **keys, int n)
{
	return PointerGetDatum(construct_array((Datum *) keys, n, TEXTOID,
										   -1, false, TYPALIGN_INT));
}

int
dlock_text_cmp(const void *a, const void *b)
{
	text	   *x = *(text *const *) a;
	text	   *y = *(text *const *) b;
	int			lx = VARSIZE_ANY_EXHDR(x);
	int			ly = VARSIZE_ANY_EXHDR(y);
	int			c = memcmp(VARDATA_ANY(x), VARDATA_ANY(y), Min(lx, ly));

	return c != 0 ? c : (lx > ly) - (lx < ly);
}

/* sort keys bytewise (as COLLATE "C" does) and drop duplicates */
int
dlock_sort_unique_keys(text **keys, int n)
{
	int			m = 0;

	if (n <= 1)
		return n;
	qsort(keys, n, sizeof(text *), dlock_text_cmp);
	for (int i = 0; i < n; i++)
		if (m == 0 || dlock_text_cmp(&keys[m - 1], &keys[i]) != 0)
			keys[m++] = keys[i];
	return m;
}

/* the first column of SPI_tuptable, as text keys */
text	  **
dlock_copy_key_column(uint64 n)
{
	text	  **keys = palloc(sizeof(text *) * Max(n, 1));

	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;

		keys[i] = DatumGetTextPCopy(SPI_getbinval(SPI_tuptable->vals[i],
												  SPI_tuptable->tupdesc, 1,
												  &isnull));
	}
	return keys;
}


/* column col of SPI_tuptable, as oids */
Oid *
dlock_copy_oid_column(uint64 n, int col)
{
	Oid		   *oids = palloc(sizeof(Oid) * Max(n, 1));

	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;

		oids[i] = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
												 SPI_tuptable->tupdesc, col,
												 &isnull));
	}
	return oids;
}
