/*-------------------------------------------------------------------------
 *
 * claim_manage.h
 *		What is done to claims after they are made (claim_manage.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_MANAGE_H
#define DLOCK_CLAIM_MANAGE_H

#include "claim_target.h"

extern bool dlock_claim_check(const ClaimTarget *t, text *key, text *holder);
extern int64 dlock_claim_unclaim(const ClaimTarget *t, text *holder,
								 text **keys, int nkeys);
extern int	dlock_claim_complete(const ClaimTarget *t, text *holder,
								 text **keys, int nkeys, bool *done);
extern int64 dlock_claim_renew(const ClaimTarget *t, text *holder,
							   int64 ttl_us);
extern int64 dlock_claim_reset(const ClaimTarget *t, text **keys, int nkeys);
extern int64 dlock_claim_release_all(text *holder);

#endif							/* DLOCK_CLAIM_MANAGE_H */
