/*-------------------------------------------------------------------------
 *
 * dlock.h
 *		Shared declarations of the dlock extension: limits, the per-key
 *		heavyweight locks, lease table access, tokens and argument checks.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_H
#define DLOCK_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "storage/itemptr.h"
#include "storage/lockdefs.h"
#include "utils/timestamp.h"

#include "compat.h"

/* ---- documented limits ---- */
#define DLOCK_MAX_KEY_BYTES		1024
#define DLOCK_MAX_HOLDER_BYTES	256
#define DLOCK_MAX_TTL_US		(30 * USECS_PER_DAY)
#define DLOCK_MAX_WAIT_US		USECS_PER_DAY

/* Name of dlock's internal schema; every internal query names it. */
#define DLOCK_SCHEMA			"dlock"
/* equality in dlock's internal SQL, immune to search_path */
#define EQ " OPERATOR(pg_catalog.=) "

/* ---- args.c: argument checks shared by every entry point ---- */
extern void dlock_arg_writes_allowed(const char *fn);
extern void dlock_arg_not_null(FunctionCallInfo fcinfo, int argno,
							   const char *what);
extern text *dlock_arg_key(FunctionCallInfo fcinfo, int argno);
extern text *dlock_arg_holder(FunctionCallInfo fcinfo, int argno);
extern int64 dlock_arg_ttl(FunctionCallInfo fcinfo, int argno, bool null_ok);
extern int64 dlock_arg_wait(FunctionCallInfo fcinfo, int argno);
extern bool dlock_arg_token(FunctionCallInfo fcinfo, int argno, bool null_ok,
							int64 *token);
extern int64 dlock_interval_usecs(const Interval *iv);


typedef struct DlockSpi
{
	Oid			caller;			/* the role that called us: lease owner */
	Oid			owner;			/* owner of dlock's schema */
	int			sec_context;
	int			nestlevel;		/* GUC nest level of dlock's settings, or 0 */
} DlockSpi;

struct _SPI_plan;
extern Oid	dlock_schema_owner(void);
extern void dlock_spi_begin(DlockSpi *ctx);
extern void dlock_spi_end(DlockSpi *ctx);
extern void dlock_spi_as_caller(DlockSpi *ctx);
extern void dlock_spi_as_owner(DlockSpi *ctx);
extern struct _SPI_plan *dlock_spi_plan(struct _SPI_plan **cache, const char *sql,
										int nargs, Oid *argtypes);
extern uint64 dlock_spi_run(struct _SPI_plan *plan, Datum *values,
							const char *nulls, long tcount, int expect_rc);

/* ---- keys.c: lists of key texts ---- */
extern Datum dlock_text_array(text **keys, int n);
extern int	dlock_text_cmp(const void *a, const void *b);
extern int	dlock_sort_unique_keys(text **keys, int n);
extern text **dlock_copy_key_column(uint64 n);
extern Oid *dlock_copy_oid_column(uint64 n, int col);

/* ---- keylock.c: per-key heavyweight locks in the lock manager ---- */

/* lock classes; they keep leases and claims apart in the lock table */
typedef enum DlockKeyClass
{
	DLOCK_CLASS_LEASE = 0x444c,	/* "DL" */
	DLOCK_CLASS_CLAIM = 0x4443,	/* "DC" */
	DLOCK_CLASS_TOKEN = 0x4454	/* "DT" */
} DlockKeyClass;

typedef struct DlockKeyLock
{
	uint64		hash;			/* 64-bit hash of the key */
	DlockKeyClass klass;
} DlockKeyLock;

extern DlockKeyLock dlock_key_for_text(DlockKeyClass klass, const char *data,
									   int len);
extern DlockKeyLock dlock_key_for_row(Oid relid, const char *data, int len);
extern bool dlock_key_trylock(const DlockKeyLock *key, LOCKMODE mode);
extern void dlock_key_lock(const DlockKeyLock *key, LOCKMODE mode);
extern void dlock_key_unlock(const DlockKeyLock *key, LOCKMODE mode);

/* ---- token.c: fencing tokens ---- */
extern int64 dlock_next_token(void);

/* ---- lease.c: lease table access ---- */

/* What one lease row says, read at the latest committed state. */
typedef struct DlockLease
{
	bool		found;			/* a row exists for the key */
	bool		held;			/* holder is not null */
	text	   *holder;			/* palloc'd copy, or NULL when free */
	Oid			owner;			/* role that holds it */
	int64		token;
	int64		ttl_us;			/* ttl it was granted with */
	TimestampTz acquired_at;
	TimestampTz expires_at;
	ItemPointerData tid;		/* the row version read */
} DlockLease;

/* Result of one acquire attempt. */
typedef enum DlockAcquireResult
{
	DLOCK_ACQ_GRANTED,			/* new grant, new token */
	DLOCK_ACQ_TAKEOVER,			/* new grant over an expired lease */
	DLOCK_ACQ_EXTENDED,			/* same holder already held it */
	DLOCK_ACQ_BUSY,				/* held by someone else until *expires_at */
	DLOCK_ACQ_LOCKED,			/* another open transaction touches the key */
	DLOCK_ACQ_QUEUED			/* free, but earlier waiters come first */
} DlockAcquireResult;

#define DLOCK_ACQ_OK(r) ((r) <= DLOCK_ACQ_EXTENDED)

extern DlockAcquireResult dlock_lease_try_acquire(text *key, text *holder,
												  int64 ttl_us,
												  bool queue_blocks,
												  bool woken,
												  int64 *token,
												  TimestampTz *expires_at);
extern bool dlock_lease_release(text *key, text *holder, bool has_token,
								int64 token);
extern bool dlock_lease_renew(text *key, text *holder, int64 ttl_us,
							  bool has_token, int64 token);
extern bool dlock_lease_validate(text *key, text *holder, int64 token);
extern int64 dlock_lease_release_all(text *holder);
extern bool dlock_lease_force_release(text *key);
extern int64 dlock_lease_cleanup(int64 idle_us, int limit);

/* ---- views.c: what a role may see of others' leases, waits and claims ---- */
extern bool dlock_sees_role(Oid owner);

/* ---- acquire.c: one attempt, or a wait in the key's queue ---- */
extern bool dlock_acquire(text *key, text *holder, int64 ttl_us,
						  int64 wait_us, int64 *token);

/* ---- wait.c: FIFO queues and sleeping ---- */
extern bool dlock_wait_wake_key(uint64 hash);
extern void dlock_wait_wake_all_heads(void);
extern void dlock_wait_yield(void);
extern bool dlock_wait_queue_blocks(uint64 hash);
extern void dlock_wait_enqueue(uint64 hash, text *key, text *holder);
extern void dlock_wait_leave(void);
extern bool dlock_wait_sleep(int64 timeout_us);

/* ---- xact.c: transaction ends ---- */
extern void dlock_xact_init(void);

/* ---- dlock.c: GUCs ---- */
extern int	dlock_poll_interval_ms;
extern int	dlock_safety_wake_ms;
extern int	dlock_debug_queue_delay_ms;
extern int	dlock_idle_key_lifetime_s;
extern bool dlock_handoff_yield;

#endif							/* DLOCK_H */
