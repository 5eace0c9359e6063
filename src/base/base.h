/*-------------------------------------------------------------------------
 *
 * base/base.h
 *		What the base layer offers every family: limits, arguments, key lock
 *		tags, keys, settings, SPI as dlock's owner, counters, direct heap and
 *		index access, fencing tokens, and the notes of this transaction's
 *		fences.  Nothing in base/ calls up into a
 *		family.  What only base/ files share is in base_int.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_BASE_H
#define DLOCK_BASE_H

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "nodes/nodes.h"
#include "storage/dsm.h"
#include "storage/lockdefs.h"
#include "access/skey.h"
#include "executor/tuptable.h"
#include "utils/relcache.h"

/* ----------------
 *		The limits of dlock, the rules of slots, and its schema name (its settings are
 *		below, under base_settings.c).
 * ----------------
 */
/* ---- documented limits ---- */
#define DLOCK_MAX_KEY_BYTES		1024
#define DLOCK_MAX_HOLDER_BYTES	256
#define DLOCK_MAX_TTL_US		(30 * USECS_PER_DAY)
#define DLOCK_MAX_WAIT_US		USECS_PER_DAY
#define DLOCK_MAX_CLAIM_BATCH	1000
#define DLOCK_MAX_SLOTS			1000	/* holders of one semaphore */

/*
 * The slots of shared leases (dlock_acquire_shared): up to DLOCK_MAX_SLOTS
 * shared holders at once, or one holder of the lease (slots 1).
 */
#define DLOCK_SLOTS_SHARED		(-1)

/*
 * Whether acquires asking for slots a and b may hold or wait for one key:
 * the same slots, or a lease and shared leases (which exclude each other
 * by taking turns, not by an error).
 */
static inline bool
dlock_slots_compatible(int a, int b)
{
	return a == b || (a <= 1 && b <= 1);
}

/*
 * Rows one dlock_cleanup() call deletes at most, of leases and of claims
 * each, so that one call stays short: its deletes keep writers of those
 * keys waiting until they commit.
 */
#define DLOCK_CLEANUP_MAX_ROWS	1000

/* rows of dlock.history one sweep drawn by a grant deletes at most */
#define DLOCK_HISTORY_SWEEP_ROWS	64

/* Name of dlock's internal schema; every internal query names it. */
#define DLOCK_SCHEMA			"dlock"

/* ----------------
 * base_args.c
 *		Argument checks shared by the SQL-callable functions (base_args.c).
 * ----------------
 */
extern void dlock_arg_writes_allowed(const char *fn);
extern struct EventTriggerData *dlock_arg_event_trigger(FunctionCallInfo fcinfo,
														const char *fn);
extern void dlock_arg_not_null(FunctionCallInfo fcinfo, int argno,
							   const char *what);
extern text *dlock_arg_key(FunctionCallInfo fcinfo, int argno);
extern text *dlock_check_key(text *key);
extern text *dlock_arg_holder(FunctionCallInfo fcinfo, int argno);
extern int64 dlock_arg_ttl(FunctionCallInfo fcinfo, int argno, bool null_ok);
extern int64 dlock_arg_wait(FunctionCallInfo fcinfo, int argno);
extern int64 dlock_arg_delay(FunctionCallInfo fcinfo, int argno,
							 const char *what);
extern int	dlock_arg_slots(FunctionCallInfo fcinfo, int argno);
extern bool dlock_arg_token(FunctionCallInfo fcinfo, int argno, bool null_ok,
							int64 *token);
extern int64 dlock_interval_usecs(const Interval *iv);

/* ----------------
 * base_fence.c
 *		The fences of this transaction (dlock_validate's keys and tokens,
 *		dlock_claimed's rows), noted by the lease and claim layers and asked
 *		about by the guard (base_fence.c).
 * ----------------
 */
extern void dlock_fence_note_key(text *key, int64 token);
extern void dlock_fence_note_row(Oid relid, text *key);
extern bool dlock_fence_find_key(const char *data, int len, int64 *token);
extern bool dlock_fence_find_row(Oid relid, text *key);
extern bool dlock_fence_any_rows(void);

/* ----------------
 * base_keylock.c
 *		The heavyweight locks of lease keys and claimed rows (base_keylock.c).
 * ----------------
 */
/* lock classes; they keep leases and claims apart in the lock table */
typedef enum DlockKeyClass
{
	DLOCK_CLASS_LEASE = 0x444c, /* "DL" */
	DLOCK_CLASS_CLAIM = 0x4443, /* "DC" */
	DLOCK_CLASS_TOKEN = 0x4454,	/* "DT" */
	DLOCK_CLASS_SLOT = 0x4453,	/* "DS": one holder's slot of a semaphore
								 * or of shared leases */
	DLOCK_CLASS_GROUP = 0x4447,	/* "DG": one group of a table's claims
								 * (group_by, per_group) */
	DLOCK_CLASS_CLAIM_WAIT = 0x4457 /* "DW": the queue of claims waiting
									 * for rows of a table (never locked) */
} DlockKeyClass;

typedef struct DlockKeyLock
{
	uint64		hash;			/* 64-bit hash of the key */
	DlockKeyClass klass;
} DlockKeyLock;

extern DlockKeyLock dlock_key_for_text(DlockKeyClass klass, const char *data,
									   int len);
extern DlockKeyLock dlock_key_for_slot(const char *data, int len, int slot);
extern DlockKeyLock dlock_key_for_row(Oid relid, const char *data, int len);
extern DlockKeyLock dlock_key_for_group(Oid relid, const char *data, int len);
extern bool dlock_key_trylock(const DlockKeyLock *key, LOCKMODE mode);
extern void dlock_key_lock(const DlockKeyLock *key, LOCKMODE mode);
extern void dlock_key_unlock(const DlockKeyLock *key, LOCKMODE mode);

/* ----------------
 * base_keys.c
 *		Lists of key texts: arrays, sorting, and columns of SPI results
 *		(base_keys.c).
 * ----------------
 */
extern Datum dlock_text_array(text **keys, int n);
extern int	dlock_text_cmp(const void *a, const void *b);
extern int	dlock_sort_unique_keys(text **keys, int n);
extern text **dlock_copy_key_column(uint64 n);
extern Oid *dlock_copy_oid_column(uint64 n, int col);

/* ----------------
 * base_settings.c
 *		dlock's settings (dlock.*), defined in base_settings.c.
 * ----------------
 */
extern int	dlock_poll_interval_ms;
extern int	dlock_safety_wake_ms;
extern int	dlock_debug_queue_delay_ms;
extern int	dlock_idle_key_lifetime_s;
extern int	dlock_history_retention_s;	/* 0: forever */
extern bool dlock_handoff_yield;

extern void dlock_settings_define(void);

/* the WARNING of a backend that finds dlock not preloaded */
extern void dlock_warn_not_preloaded(void);

/* ----------------
 * base_spi.c
 *		Running dlock's internal SQL as its owner, with pinned settings and
 *		kept plans (base_spi.c).
 * ----------------
 */
/* equality in dlock's internal SQL, immune to search_path */
#define EQ " OPERATOR(pg_catalog.=) "

typedef struct DlockSpi
{
	Oid			caller;			/* the role that called us: lease owner */
	Oid			owner;			/* owner of dlock's schema */
	int			sec_context;
	int			nestlevel;		/* GUC nest level of dlock's settings, or 0 */
} DlockSpi;

struct _SPI_plan;

/*
 * One of dlock's internal queries, a static next to the code that runs it
 * (dlock_spi_query): its text, the types of its arguments $1, $2, ... (as
 * many as come before the first InvalidOid), the SPI result it answers
 * with, and its plan, prepared on first use in this backend and kept.
 */
#define DLOCK_QUERY_MAX_ARGS	12

typedef struct DlockQuery
{
	const char *sql;
	int			expect_rc;		/* SPI_OK_SELECT, SPI_OK_UPDATE, ... */
	Oid			argtypes[DLOCK_QUERY_MAX_ARGS];
	struct _SPI_plan *plan;		/* NULL until its first run */
} DlockQuery;

extern void dlock_spi_begin(DlockSpi *ctx);
extern void dlock_spi_end(DlockSpi *ctx);
extern void dlock_spi_as_caller(DlockSpi *ctx);
extern void dlock_spi_as_owner(DlockSpi *ctx);
extern struct _SPI_plan *dlock_spi_plan(struct _SPI_plan **cache, const char *sql,
										int nargs, Oid *argtypes);
extern uint64 dlock_spi_run(struct _SPI_plan *plan, Datum *values,
							const char *nulls, long tcount, int expect_rc);
extern uint64 dlock_spi_query(DlockQuery *q, Datum *values, const char *nulls);

/* ----------------
 * base_stats.c
 *		Counters of what dlock did since the server started (base_stats.c).
 * ----------------
 */
/* the columns of dlock_stats(), in order */
typedef enum DlockCounter
{
	DLOCK_STAT_ACQUIRED,		/* new grants (not extensions) */
	DLOCK_STAT_EXTENDED,		/* re-acquires by the holder */
	DLOCK_STAT_CONTENDED,		/* attempts that found the key taken */
	DLOCK_STAT_WAITS,			/* acquires that had to wait */
	DLOCK_STAT_WAIT_US,			/* total time spent waiting */
	DLOCK_STAT_WAIT_TIMEOUTS,	/* waits that ran out */
	DLOCK_STAT_HANDOFFS,		/* grants to a waiter */
	DLOCK_STAT_TAKEOVERS,		/* grants over an expired lease */
	DLOCK_STAT_RELEASES,
	DLOCK_STAT_RENEWALS,
	DLOCK_STAT_VALIDATE_FAIL,	/* fenced-off writes */
	DLOCK_STAT_CLAIMS,			/* rows claimed */
	DLOCK_STAT_REDELIVERIES,	/* rows claimed again after a claim expired */
	DLOCK_STAT_CLAIM_WAITS,		/* claims that slept waiting for rows */
	DLOCK_STAT_CLAIM_WAKEUPS,	/* attempts of waiting claims after a sleep */
	DLOCK_NUM_COUNTERS
} DlockCounter;

extern void dlock_count(DlockCounter c, uint64 n);
extern bool dlock_stats_read(uint64 *values);
extern void dlock_stats_shmem_request(void);
extern void dlock_stats_shmem_startup(void);

/* ----------------
 * base_store.c
 *		Direct access to dlock's own tables (base_store.c).
 * ----------------
 */
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

/* ----------------
 * base_token.c
 *		Fencing tokens (base_token.c).
 * ----------------
 */
extern int64 dlock_next_token(void);

/* ----------------
 * base_worker.c
 *		Asking dlock's maintenance (the maint family, a higher layer) for
 *		work without calling it: the background worker's start, and the
 *		sweeps a transaction draws.
 * ----------------
 */
typedef enum DlockWorkerTask
{
	DLOCK_TASK_UNDO = 1,		/* free the rows of abandoned grants */
	DLOCK_TASK_CLEANUP			/* dlock_cleanup()'s deletes */
} DlockWorkerTask;

/* what a worker is told, in bgw_extra */
typedef struct DlockWorkerArgs
{
	Oid			dboid;
	dsm_handle	seg;			/* cleanup: its request (maint_worker.c) */
} DlockWorkerArgs;

struct BackgroundWorkerHandle;
extern bool dlock_worker_launch(DlockWorkerTask task, const char *name,
								dsm_handle seg,
								struct BackgroundWorkerHandle **handle);
extern void dlock_worker_start_undo(void);
extern void dlock_sweep_maybe(void);
extern void dlock_claim_sweep_maybe(void);
extern void dlock_sweeps_drawn(bool *leases, bool *claims);

/* ----------------
 * base_xact.c
 *		An internal subtransaction whose error the caller handles, and the
 *		families' checks around utility statements (base_xact.c).
 * ----------------
 */
typedef bool (*DlockSubxactFn) (void *arg);
extern ErrorData *dlock_subxact_run(DlockSubxactFn fn, void *arg, bool *kept);

/* before: does the family act after stmt?  after: what it does */
typedef bool (*DlockUtilityBefore) (Node *stmt);
typedef void (*DlockUtilityAfter) (void);
extern void dlock_utility_hook_add(DlockUtilityBefore before,
								   DlockUtilityAfter after);

#endif							/* DLOCK_BASE_H */
