/*-------------------------------------------------------------------------
 *
 * claim_key.h
 *		The claim key of a row: its primary key as text (claim_key.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_KEY_H
#define DLOCK_CLAIM_KEY_H

#include "base_keylock.h"
#include "claim_target.h"

/*
 * Key texts longer than this are kept in dlock.claim's primary key as a
 * digest: any key the user's primary key accepts can be claimed, whatever
 * the limit of an index entry of dlock.claim.
 */
#define DLOCK_CLAIM_KEY_INLINE_BYTES	1024
#define DLOCK_CLAIM_KEY_DIGEST_MARK		'\x7f'

extern text *dlock_claim_key_id(text *key);
extern text *dlock_claim_key_text(const ClaimTarget *t, Datum value, Oid type);
extern text *dlock_claim_key_text_of_arg(const ClaimTarget *t, Datum value,
										 Oid type, bool *exists);
extern Datum dlock_claim_key_value(const ClaimTarget *t, text *key);
extern bool dlock_claim_key_in(const ClaimTarget *t, Oid relid, text *key);
extern bool dlock_claim_row_visible(const ClaimTarget *t, Datum value,
									Oid type);
extern DlockKeyLock dlock_claim_keylock(Oid relid, text *key);
extern int	dlock_claim_io_begin(const ClaimTarget *t, Oid other_type);
extern void dlock_claim_io_end(int nestlevel);

#endif							/* DLOCK_CLAIM_KEY_H */
