/*-------------------------------------------------------------------------
 *
 * base_store.h
 *		Direct access to dlock's own tables (base_store.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_BASE_STORE_H
#define DLOCK_BASE_STORE_H

#include "access/skey.h"
#include "executor/tuptable.h"
#include "utils/relcache.h"

/* one of dlock's tables, opened for one call */
typedef struct DlockStore
{
	Relation	rel;
	Relation	idx;			/* its primary key */
	TupleTableSlot *slot;		/* the row last fetched */
	struct IndexScanDescData *scan; /* a batch's scan, or NULL */
	struct SnapshotData *snap;	/* and its snapshot */
	struct IndexInfo *index_info;	/* lease_store.c: built on first insert */
} DlockStore;

extern void dlock_store_open(DlockStore *s, const char *name, int natts);
extern void dlock_store_open_either(DlockStore *s, const char *name,
									int natts, int older_natts);
extern void dlock_store_close(DlockStore *s);
extern bool dlock_store_fetch(DlockStore *s, ScanKey keys, int nkeys);
extern void dlock_store_batch_begin(DlockStore *s, int nkeys);
extern void dlock_store_batch_end(DlockStore *s);

#endif							/* DLOCK_BASE_STORE_H */
