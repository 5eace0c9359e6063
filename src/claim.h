/*-------------------------------------------------------------------------
 *
 * claim.h
 *		Declarations for claims: leases on rows of the user's own tables.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_H
#define DLOCK_CLAIM_H

#include "access/attnum.h"
#include "access/tupdesc.h"
#include "utils/tuplestore.h"

#include "dlock.h"

#define DLOCK_MAX_CLAIM_BATCH	1000

/* A table that rows can be claimed from, and how to name its rows. */
typedef struct ClaimTarget
{
	Oid			relid;
	Oid			claim_relid;	/* the relation its rows' claims are keyed by
								 * (dlock.claim.relid, key locks) */
	Oid			rowtype;
	char		relkind;
	char	   *relname;		/* quoted, unqualified: the whole-row name */
	char	   *qualname;		/* quoted, schema-qualified */
	AttrNumber	pk_attnum;
	char	   *pk_colname;		/* quoted */
	Oid			pk_type;
	Oid			pk_array_type;
	char	   *pk_eq_op;		/* OPERATOR(schema.=) of the primary key */
	Oid			pk_out_fn;
	Oid			pk_in_fn;
	Oid			pk_ioparam;
	bool		io_needs_pin;	/* its text form depends on settings */
	bool		stale;			/* invalidated: rebuild on next lookup */
} ClaimTarget;

/* claim_target.c */
extern const ClaimTarget *dlock_claim_target_for_type(Oid rowtype);
extern const ClaimTarget *dlock_claim_target_for_rel(Oid relid);
extern void dlock_claim_check_access(const ClaimTarget *t, const char *fn);
extern text *dlock_claim_key_text(const ClaimTarget *t, Datum value, Oid type);
extern Datum dlock_claim_key_value(const ClaimTarget *t, text *key);
extern DlockKeyLock dlock_claim_keylock(Oid relid, text *key);
extern int	dlock_claim_io_begin(const ClaimTarget *t, Oid other_type);
extern void dlock_claim_io_end(int nestlevel);

/* claim_query.c */
extern void dlock_check_filter(const char *filter);
extern void dlock_check_order_by(const char *order_by);
extern bool dlock_claim_query_ranged(const ClaimTarget *t,
									 const char *order_by);
extern struct _SPI_plan *dlock_claim_user_plan(const ClaimTarget *t,
											   const char *filter,
											   const char *order_by);
extern void dlock_claim_user_plan_done(struct _SPI_plan *plan);
extern void dlock_claim_query_rethrow(MemoryContext cxt, const ClaimTarget *t,
									  const char *filter, const char *order_by);

/* claim_runs.c: runs of consecutive integer keys a claim reads around */
#define DLOCK_MIN_SKIPPED_RUN	32

typedef struct DlockKeyRun
{
	int64		lo;				/* first and last key of the run */
	int64		hi;
} DlockKeyRun;

extern int64 dlock_int_key(Oid type, Datum d);
extern Datum dlock_int_key_datum(Oid type, int64 v);
extern int	dlock_claim_long_runs(Oid type, Datum *vals, int *n,
								  DlockKeyRun **runs);
extern int	dlock_claim_merge_runs(DlockKeyRun *runs, int n);
extern void dlock_claim_next_range(const DlockKeyRun *runs, int n,
								   bool *has_lo, int64 *lo, bool *has_hi,
								   int64 *hi, int64 *after_hi);

/* claim_inflight.c */
extern Size dlock_inflight_shmem_size(void);
extern void dlock_inflight_shmem_startup(void);
extern void dlock_inflight_publish(Oid relid, const DlockKeyRun *runs, int n);
extern uint64 dlock_inflight_mark(void);
extern int	dlock_inflight_read(Oid relid, uint64 mark, DlockKeyRun *runs);
extern int	dlock_inflight_max(void);

/* claim_store.c */
extern bool dlock_claim_store_held(Oid relid, text *key, text *holder,
								   Oid role);
extern void dlock_claim_store_lookup(Oid relid, text **keys, int n,
									 bool *found, bool *live, int *attempts,
									 bool *poisoned);
extern int	dlock_claim_store_delete_held(Oid relid, text **keys, int n,
										  text *holder, Oid role, bool *done);
extern void dlock_claim_store_insert(Oid relid, text **keys, int n,
									 text *holder, Oid role, int64 token,
									 int64 ttl_us, TimestampTz now,
									 TimestampTz expires);

/* claim.c */
typedef struct ClaimRequest
{
	const ClaimTarget *target;
	text	   *holder;
	int			n;
	int64		ttl_us;
	const char *filter;
	const char *order_by;
	int			max_attempts;	/* 0: no limit */
} ClaimRequest;

extern void dlock_claim_rows(const ClaimRequest *req,
							 Tuplestorestate *out, TupleDesc outdesc);
extern bool dlock_claim_check(const ClaimTarget *t, text *key, text *holder);
extern int64 dlock_claim_unclaim(const ClaimTarget *t, text *holder,
								 text **keys, int nkeys);
extern int	dlock_claim_complete(const ClaimTarget *t, text *holder,
								 text **keys, int nkeys, bool *done);
extern int64 dlock_claim_renew(const ClaimTarget *t, text *holder,
							   int64 ttl_us);
extern int64 dlock_claim_reset(const ClaimTarget *t, text **keys, int nkeys);
extern int64 dlock_claim_release_all(text *holder);
extern void dlock_claim_maybe_cleanup(void);
extern int64 dlock_claim_cleanup(int64 idle_us, int limit);

#endif							/* DLOCK_CLAIM_H */
