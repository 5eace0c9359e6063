/*-------------------------------------------------------------------------
 *
 * claim.h
 *		Claiming rows of the user's own tables (claim.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_H
#define DLOCK_CLAIM_H

#include "access/tupdesc.h"
#include "utils/tuplestore.h"

#include "claim_query.h"

extern void dlock_claim_rows(const ClaimRequest *req,
							 Tuplestorestate *out, TupleDesc outdesc);

#endif							/* DLOCK_CLAIM_H */
