/*-------------------------------------------------------------------------
 *
 * claim_store_int.h
 *		What the files that read and write dlock.claim share, and no other
 *		file sees: its columns, and opening it (claim_store.c).  Included
 *		by claim_store.c and claim_store_probe.c only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_STORE_INT_H
#define DLOCK_CLAIM_STORE_INT_H

#include "base_store.h"

/* columns of dlock.claim, as dlock--0.1.sql creates it and 0.4 extends it */
enum
{
	Anum_relid = 1,
	Anum_key,
	Anum_holder,
	Anum_owner,
	Anum_token,
	Anum_ttl_us,
	Anum_claimed_at,
	Anum_expires_at,
	Anum_attempts,
	Anum_poisoned_at,
	Anum_long_key,				/* 0.4: the key text of a digest key */
	Natts_claim_table = Anum_long_key,
	Natts_claim_table_03 = Anum_poisoned_at
};

extern void dlock_claim_store_open(DlockStore *s);

#endif							/* DLOCK_CLAIM_STORE_INT_H */
