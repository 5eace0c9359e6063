/*-------------------------------------------------------------------------
 *
 * claim_hint.h
 *		Step hints over the held rows at the head of a claim query's order,
 *		shared by all backends (claim_hint.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_HINT_H
#define DLOCK_CLAIM_HINT_H

#include "datatype/timestamp.h"
#include "fmgr.h"

#include "claim_target.h"

/*
 * One claim query text's step hint: its key, made once and kept with the
 * plan, and, in a copy per run (dlock_claim_hint_begin), what the run has
 * read of it.
 */
typedef struct ClaimHint
{
	bool		ready;			/* the key is made */
	bool		enabled;		/* shared memory, a step direction, a key */
	int			dir;			/* 1: primary key ascending, -1: descending */
	Oid			relid;
	Oid			pk_type;
	uint64		text_hash;		/* of the query text */
	int16		typlen;
	bool		byval;
	FmgrInfo   *cmp;			/* the key type's btree comparison */
	Oid			collation;		/* the key column's */
	/* per run (dlock_claim_hint_start) */
	uint64		returns;		/* give-backs counted before the query ran */
	bool		have;			/* the shared hint as last read: every row */
	Datum		bound;			/* up to bound (in the order) was held, */
	TimestampTz until;			/* and stays held until then */
	int			reads;			/* rows checked since it was read */
} ClaimHint;

extern bool dlock_claim_hint_begin(ClaimHint *run, ClaimHint *kept,
								   const ClaimTarget *t, int dir,
								   const char *sql);
extern void dlock_claim_hint_learn(ClaimHint *h, int64 nlead, Datum last,
								   TimestampTz until);
extern bool dlock_claim_hint_covers(ClaimHint *h, Datum value,
									TimestampTz *until);
extern void dlock_claim_returns_bump(void);
extern void dlock_claim_hint_shmem_request(void);
extern void dlock_claim_hint_shmem_startup(void);

#endif							/* DLOCK_CLAIM_HINT_H */
