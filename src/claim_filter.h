/*-------------------------------------------------------------------------
 *
 * claim_filter.h
 *		The caller's filter and order_by of a claim (claim_filter.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_FILTER_H
#define DLOCK_CLAIM_FILTER_H

#include "claim_target.h"

extern void dlock_check_filter(const char *filter);
extern void dlock_check_order_by(const char *order_by);
extern int	dlock_claim_order_step(const ClaimTarget *t, const char *order_by);

#endif							/* DLOCK_CLAIM_FILTER_H */
