/*-------------------------------------------------------------------------
 *
 * claim_batch.h
 *		Claiming one batch of candidate rows (claim_batch.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_BATCH_H
#define DLOCK_CLAIM_BATCH_H

#include "utils/tuplestore.h"

#include "base_keylock.h"
#include "claim_query.h"

/* one candidate row of a claim: claim.c reads it, claim_batch.c claims it */
typedef struct ClaimCandidate
{
	text	   *key;			/* its claim key (dlock_claim_key_id) */
	text	   *full;			/* its key text */
	Datum		row;			/* whole-row datum from the user's table */
	bool		fresh;			/* no claim row: claimable without a key lock */
	bool		locked;			/* we took its key lock, kl */
	DlockKeyLock kl;
	bool		claimed;
} ClaimCandidate;

extern int	dlock_claim_batch(const ClaimRequest *req, ClaimCandidate *c, int n,
							  Oid role, int64 *token, int64 *redelivered,
							  Tuplestorestate *out);

#endif							/* DLOCK_CLAIM_BATCH_H */
