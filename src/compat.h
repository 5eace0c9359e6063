/*-------------------------------------------------------------------------
 *
 * compat.h
 *		The one place for PostgreSQL version differences in dlock.
 *
 * dlock supports PostgreSQL 15, 16, 17 and 18 (15, 17 and 18 are tested;
 * 16 is covered by the same shims).  Code elsewhere calls the dlock_*
 * names below and reads as plain PostgreSQL code of any of them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_COMPAT_H
#define DLOCK_COMPAT_H

#include "access/genam.h"
#include "access/heapam.h"
#include "access/xact.h"
#include "catalog/pg_namespace.h"
#include "executor/executor.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/relcache.h"
#include "utils/wait_event.h"

#if PG_VERSION_NUM < 150000
#error "dlock requires PostgreSQL 15 or later"
#endif

#ifndef HAVE_INT128
#error "dlock needs a compiler with 128-bit integers (interval arithmetic in base_args.c)"
#endif

/*
 * The varlena macros (VARSIZE_ANY_EXHDR, VARDATA_ANY, ...): PostgreSQL 16
 * moved them from postgres.h into varatt.h.
 */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/*
 * heap_update of one row, waiting for a transaction that is changing it:
 * PostgreSQL 16 added an output argument saying which indexes need new
 * entries.  dlock decides that itself (a HOT update needs none), so the
 * answer is not used.
 */
static inline TM_Result
dlock_heap_update_waiting(Relation rel, ItemPointer otid, HeapTuple tup,
						  TM_FailureData *tmfd)
{
	LockTupleMode lockmode;
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update_indexes;

	return heap_update(rel, otid, tup, GetCurrentCommandId(true),
					   InvalidSnapshot, true, tmfd, &lockmode, &update_indexes);
#else
	return heap_update(rel, otid, tup, GetCurrentCommandId(true),
					   InvalidSnapshot, true, tmfd, &lockmode);
#endif
}

/*
 * ExecInsertIndexTuples: PostgreSQL 16 added onlySummarizing (false: all
 * indexes), for a new row.
 */
#if PG_VERSION_NUM >= 160000
#define dlock_insert_index_tuples(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL, false)
#else
#define dlock_insert_index_tuples(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL)
#endif

/* PostgreSQL 16 replaced pg_class_ownercheck by object_ownercheck */
#if PG_VERSION_NUM >= 160000
#define dlock_class_ownercheck(relid, role) \
	object_ownercheck(RelationRelationId, (relid), (role))
#else
#define dlock_class_ownercheck(relid, role) \
	pg_class_ownercheck((relid), (role))
#endif

/* PostgreSQL 16 replaced pg_namespace_aclcheck by object_aclcheck */
#if PG_VERSION_NUM >= 160000
#define dlock_namespace_aclcheck(nsp, role, mode) \
	object_aclcheck(NamespaceRelationId, (nsp), (role), (mode))
#else
#define dlock_namespace_aclcheck(nsp, role, mode) \
	pg_namespace_aclcheck((nsp), (role), (mode))
#endif

/* PostgreSQL 16 replaced pg_class_ownercheck by object_ownercheck */
#if PG_VERSION_NUM >= 160000
#define dlock_table_ownercheck(relid, role) \
	object_ownercheck(RelationRelationId, (relid), (role))
#else
#define dlock_table_ownercheck(relid, role) \
	pg_class_ownercheck((relid), (role))
#endif

/*
 * PostgreSQL 18: RelationGetPrimaryKeyIndex takes deferrable_ok (a
 * deferrable primary key is no key to look rows up by), and
 * index_beginscan takes scan instrumentation (none here).
 */
#if PG_VERSION_NUM >= 180000
#define dlock_primary_key_index(rel)	RelationGetPrimaryKeyIndex((rel), false)
#define dlock_index_beginscan(heap, idx, snap, nkeys) \
	index_beginscan((heap), (idx), (snap), NULL, (nkeys), 0)
#else
#define dlock_primary_key_index(rel)	RelationGetPrimaryKeyIndex(rel)
#define dlock_index_beginscan(heap, idx, snap, nkeys) \
	index_beginscan((heap), (idx), (snap), (nkeys), 0)
#endif

/*
 * PostgreSQL 18 marks a function that does not return with pg_noreturn
 * before its declaration; earlier versions with pg_attribute_noreturn()
 * after it.
 */
#if PG_VERSION_NUM >= 180000
#define DLOCK_NORETURN_BEFORE	pg_noreturn
#define DLOCK_NORETURN_AFTER
#else
#define DLOCK_NORETURN_BEFORE
#define DLOCK_NORETURN_AFTER	pg_attribute_noreturn()
#endif

/* PostgreSQL 17 numbers backends by ProcNumber, no longer PGPROC.pgprocno */
#if PG_VERSION_NUM >= 170000
#define dlock_my_procno()	((int) MyProcNumber)
#else
#define dlock_my_procno()	(MyProc->pgprocno)
#endif

/*
 * The wait event a waiting acquire reports (pg_stat_activity.wait_event_type
 * and wait_event): PostgreSQL 17 lets an extension name its own, of type
 * Extension (WaitEventExtensionNew, also listed in pg_wait_events); before
 * that, every extension's wait shows as Extension / Extension.
 */
#if PG_VERSION_NUM >= 170000
#define dlock_wait_event_new(name)	WaitEventExtensionNew(name)
#else
#define dlock_wait_event_new(name)	PG_WAIT_EXTENSION
#endif

#endif							/* DLOCK_COMPAT_H */
