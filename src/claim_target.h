/*-------------------------------------------------------------------------
 *
 * claim_target.h
 *		A table that rows can be claimed from (claim_target.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_TARGET_H
#define DLOCK_CLAIM_TARGET_H

#include "access/attnum.h"
#include "fmgr.h"
#include "nodes/pg_list.h"

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

extern const ClaimTarget *dlock_claim_target_for_type(Oid rowtype,
													  const char *fn);
extern const ClaimTarget *dlock_claim_target_for_rel(Oid relid,
													 const char *fn);
extern void dlock_claim_check_access(const ClaimTarget *t, const char *fn);
extern bool dlock_claim_type_io_stable(Oid type);
extern List *dlock_claim_partition_ancestors(Oid relid);

#endif							/* DLOCK_CLAIM_TARGET_H */
