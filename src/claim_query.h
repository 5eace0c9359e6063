/*-------------------------------------------------------------------------
 *
 * claim_query.h
 *		A call of dlock_claim, and the query it runs on the user's table
 *		(claim_query.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_QUERY_H
#define DLOCK_CLAIM_QUERY_H

#include "claim_target.h"

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
	int			step_dir;		/* claims can step over held rows at the
								 * head of the order: 1 (the primary key
								 * ascending), -1 (descending), 0: cannot */
} ClaimRequest;

extern uint64 dlock_claim_query_run(const ClaimRequest *req, Datum tried,
									int need);

#endif							/* DLOCK_CLAIM_QUERY_H */
