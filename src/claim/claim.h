/*-------------------------------------------------------------------------
 *
 * claim/claim.h
 *		What the claim family offers the others: the claim target of a
 *		table and its rows' keys (the views), the reads and the sweep of
 *		dlock.claim (the views, maint_sweep.c), the step hints' shared
 *		memory (dlock.c) and dlock_release_all's part (lease_sql.c).  What
 *		only claim/ shares is in claim_int.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_H
#define DLOCK_CLAIM_H

#include "access/attnum.h"
#include "fmgr.h"
#include "datatype/timestamp.h"
#include "access/htup.h"
#include "access/tupdesc.h"

/* ----------------
 * claim_target.c
 *		A table that rows can be claimed from (claim_target.c).
 * ----------------
 */
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

extern const ClaimTarget *dlock_claim_target_for_rel(Oid relid,
													 const char *fn);

/* ----------------
 * claim_store_spi.c
 *		The sweep of idle claim rows, and the rows of the dlock_claims and
 *		dlock_dead_claims views (claim_store_spi.c).
 * ----------------
 */
extern int64 dlock_claim_store_delete_idle(TimestampTz before, int limit);
extern uint64 dlock_claim_store_read_live(void);
extern uint64 dlock_claim_store_read_dead(void);

/* ----------------
 * claim_hint.c
 *		The step hints' shared memory (claim_hint.c).
 * ----------------
 */
extern void dlock_claim_hint_shmem_request(void);
extern void dlock_claim_hint_shmem_startup(void);

/* ----------------
 * claim_key.c
 *		A claim key's row, and reading it as the caller (claim_key.c).
 * ----------------
 */
extern Datum dlock_claim_key_value(const ClaimTarget *t, text *key);
extern bool dlock_claim_row_visible(const ClaimTarget *t, Datum value,
									Oid type);
extern int	dlock_claim_io_begin(const ClaimTarget *t, Oid other_type);
extern void dlock_claim_io_end(int nestlevel);
/* the guard's (src/guard/): a row's claim key */
extern text *dlock_claim_row_key(Oid relid, HeapTuple tup,
								 TupleDesc desc, Oid *claim_relid);

/* ----------------
 * claim_manage.c
 *		dlock_release_all's part: every live claim of a holder
 *		(claim_manage.c).
 * ----------------
 */
extern int64 dlock_claim_release_all(text *holder);

#endif							/* DLOCK_CLAIM_H */
