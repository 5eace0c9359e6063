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
#include "fmgr.h"
#include "access/tupdesc.h"
#include "nodes/nodes.h"
#include "utils/tuplestore.h"

#include "dlock.h"
#include "keylock.h"

#define DLOCK_MAX_CLAIM_BATCH	1000

/*
 * Key texts longer than this are kept in dlock.claim's primary key as a
 * digest (claim_key.c): any key the user's primary key accepts can be
 * claimed, whatever the limit of an index entry of dlock.claim.
 */
#define DLOCK_CLAIM_KEY_INLINE_BYTES	1024
#define DLOCK_CLAIM_KEY_DIGEST_MARK		'\x7f'

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
	bool		pk_spellings;	/* equal keys can be written differently */
	Oid			pk_array_type;
	char	   *pk_eq_op;		/* OPERATOR(schema.=) of the primary key */
	Oid			pk_eq_proc;		/* and its function */
	char	   *pk_lt_op;		/* its type's default < and > (NULL: none) */
	char	   *pk_gt_op;
	char	   *pk_attname;		/* unquoted names, as order_by spells them */
	char	   *plain_relname;
	int16		pk_typlen;
	bool		pk_byval;
	Oid			pk_out_fn;
	FmgrInfo	pk_out_finfo;	/* pk_out_fn, looked up once */
	Oid			pk_in_fn;
	Oid			pk_ioparam;
	bool		io_needs_pin;	/* its text form depends on settings */
	uint64		generation;		/* unique to this build of the target */
	Oid		   *ancestors;		/* its partition ancestors, root last */
	int			nancestors;
	struct
	{
		int			cacheid;	/* a syscache entry it was built from */
		uint32		hashvalue;
	}			deps[8];
	int			ndeps;
	bool		stale;			/* invalidated: rebuild on next lookup */
} ClaimTarget;

/* claim_target.c */
extern const ClaimTarget *dlock_claim_target_for_type(Oid rowtype,
													  const char *fn);
extern const ClaimTarget *dlock_claim_target_for_rel(Oid relid,
													 const char *fn);
extern void dlock_claim_check_access(const ClaimTarget *t, const char *fn);

/* claim_key.c */
extern bool dlock_claim_type_io_stable(Oid type);
extern text *dlock_claim_key_id(text *key);
extern text *dlock_claim_key_text(const ClaimTarget *t, Datum value, Oid type);
extern text *dlock_claim_key_text_of_arg(const ClaimTarget *t, Datum value,
										 Oid type, bool *exists);
extern Datum dlock_claim_key_value(const ClaimTarget *t, text *key);
extern bool dlock_claim_key_in(const ClaimTarget *t, Oid relid, text *key);
extern bool dlock_claim_row_visible(const ClaimTarget *t, Datum value,
									Oid type);
extern DlockKeyLock dlock_claim_keylock(Oid relid, text *key);
extern int	dlock_claim_io_begin(const ClaimTarget *t, Oid other_type);
extern void dlock_claim_io_end(int nestlevel);

/* A call of dlock_claim. */
typedef struct ClaimRequest
{
	const ClaimTarget *target;
	text	   *holder;
	int			n;
	int64		ttl_us;
	const char *filter;
	const char *order_by;
	int			max_attempts;	/* 0: no limit */
	const char *fn_schema;		/* quoted schema of dlock_claim_unheld, or
								 * NULL: not installed (extension 0.1, 0.2) */
} ClaimRequest;

/* claim_query.c */
extern void dlock_check_filter(const char *filter);
extern void dlock_check_order_by(const char *order_by);
extern char *dlock_claim_query_sql(const ClaimRequest *req, int bound_dir);
extern int	dlock_claim_query_step(const ClaimRequest *req);
extern void dlock_claim_query_rethrow(MemoryContext cxt,
									  const ClaimRequest *req);

/* claim_plan.c */
typedef struct ClaimPlan ClaimPlan;

extern ClaimPlan *dlock_claim_plan(const ClaimRequest *req);
extern bool dlock_claim_plan_steps(ClaimPlan *cp);
extern struct _SPI_plan *dlock_claim_plan_choose(ClaimPlan *cp,
												 const ClaimRequest *req,
												 Datum *bound, bool *bounded,
												 uint64 *returns);
extern void dlock_claim_plan_learn(ClaimPlan *cp, bool bounded,
								   uint64 returns, Datum last,
								   TimestampTz until);
extern void dlock_claim_plan_done(ClaimPlan *cp);
extern void dlock_claim_returns_bump(void);
extern void dlock_claim_plan_shmem_request(void);
extern void dlock_claim_plan_shmem_startup(void);

/* claim_ddl.c */
extern void dlock_claim_ddl_start(Node *parsetree);
extern void dlock_claim_ddl_end(Node *parsetree);
extern void dlock_claim_ddl_enum_renamed(const char *oldval,
										 const char *newval);
extern void dlock_claim_ddl_dropped(void);

/* claim.c */
extern bool dlock_claim_row_held(Oid relid, Datum value, Oid type);
extern bool dlock_claim_row_held_in_claim(Oid relid, Datum value, Oid type,
										  int64 ticket);
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

#endif							/* DLOCK_CLAIM_H */
