/*-------------------------------------------------------------------------
 *
 * claim_unheld.h
 *		The per-row check of claims, and the scan of a claim query that
 *		runs it (claim_unheld.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_UNHELD_H
#define DLOCK_CLAIM_UNHELD_H

#include "datatype/timestamp.h"

#include "claim_hint.h"
#include "claim_store.h"
#include "claim_target.h"

/*
 * A claim query running now (a filter may claim from another table): the
 * probe its rows are checked through, and what its scan has found at the
 * head of its order.
 */
typedef struct ClaimScan
{
	const ClaimTarget *target;
	DlockClaimProbe *probe;
	MemoryContext cxt;			/* the claim's, for lead_last */
	ClaimHint	hint;			/* its query's step hint, as this run sees it
								 * (not enabled: its order cannot step) */
	bool		leading;		/* every row checked so far was held */
	int64		nlead;			/* how many */
	TimestampTz lead_until;		/* the first of their claims to lapse */
	Datum		lead_last;		/* the last one's primary key */
	struct ClaimScan *next;
} ClaimScan;

extern int64 dlock_claim_ticket(void);
extern bool dlock_claim_scan_begin(ClaimScan *s, const ClaimTarget *t,
								   ClaimHint *kept, int dir, const char *sql);
extern void dlock_claim_scan_end(ClaimScan *s, bool failed);
extern bool dlock_claim_row_held(Oid relid, Datum value, Oid type);
extern bool dlock_claim_row_held_in_claim(Oid relid, Datum value, Oid type,
										  int64 ticket);

#endif							/* DLOCK_CLAIM_UNHELD_H */
