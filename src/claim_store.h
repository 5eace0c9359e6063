/*-------------------------------------------------------------------------
 *
 * claim_store.h
 *		Every read and write of dlock.claim: the claim query's per-row
 *		check (claim_store_probe.c), a claim batch's lookup and write and
 *		the other hot paths (claim_store.c), the holders' writes and the
 *		sweeps of many rows as SQL (claim_store_spi.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_STORE_H
#define DLOCK_CLAIM_STORE_H

#include "datatype/timestamp.h"

/* claim_store_probe.c */
typedef struct DlockClaimProbe DlockClaimProbe;

extern DlockClaimProbe *dlock_claim_probe_begin(Oid relid);
extern bool dlock_claim_probe_held(DlockClaimProbe *p, text *key,
								   TimestampTz *settled_until);
extern void dlock_claim_probe_end(DlockClaimProbe *p);

/* claim_store.c */

/* what one claim batch's write does with a key (dlock_claim_store_write) */
typedef enum DlockClaimAction
{
	DLOCK_CLAIM_SKIP = 0,		/* nothing: it is not claimable */
	DLOCK_CLAIM_INSERT,			/* no claim row: a first claim */
	DLOCK_CLAIM_AGAIN,			/* a free or expired claim: claim it again */
	DLOCK_CLAIM_POISON			/* claimed max_attempts times: poison it */
} DlockClaimAction;

/* who writes one claim batch, on which table, until when */
typedef struct DlockClaimWrite
{
	Oid			relid;			/* the table the claims are on */
	text	   *holder;
	Oid			role;
	int64		token;
	int64		ttl_us;
	TimestampTz now;			/* claimed_at; they expire at now + ttl_us */
} DlockClaimWrite;

extern bool dlock_claim_store_has_long_key(void);
extern bool dlock_claim_store_held(Oid relid, text *key, text *holder,
								   Oid role);
extern void dlock_claim_store_held_keys(Oid relid, text **keys, int n,
										text *holder, Oid role, bool *held);
extern void dlock_claim_store_lookup(Oid relid, text **keys, int n,
									 bool *found, bool *live, int *attempts,
									 bool *poisoned);
extern int	dlock_claim_store_delete_held(Oid relid, text **keys, int n,
										  text *holder, Oid role, bool *done);
extern int	dlock_claim_store_write(const DlockClaimWrite *w, text **keys,
									text **fulls,
									const DlockClaimAction *action, int n,
									int *attempts);

/* claim_store_spi.c */
extern text **dlock_claim_store_holder_keys(Oid relid, text *holder, Oid role,
											text **among, int namong, int *n);
extern text **dlock_claim_store_existing_keys(Oid relid, text **keys,
											  int nkeys, int *n);
extern text **dlock_claim_store_holder_page(Oid relid, text *holder, Oid role,
											text *after, int limit, int *n);
extern int	dlock_claim_store_holder_all_page(text *holder, Oid role,
											  Oid after_relid, text *after_key,
											  int limit, text ***keys,
											  Oid **relids);
extern int64 dlock_claim_store_give_back(Oid relid, text **keys, int n,
										 text *holder, Oid role);
extern int64 dlock_claim_store_renew(Oid relid, text **keys, int n,
									 text *holder, Oid role, int64 ttl_us);
extern int64 dlock_claim_store_delete(Oid relid, text **keys, int n);
extern int64 dlock_claim_store_delete_idle(TimestampTz before, int limit);
extern uint64 dlock_claim_store_read_live(void);
extern uint64 dlock_claim_store_read_dead(void);
extern uint64 dlock_claim_store_relids(Oid **relids);
extern uint64 dlock_claim_store_keys_of(Oid relid, text ***keys,
										text ***fulls);
extern int64 dlock_claim_store_move(Oid from, Oid to, text **keys, int n);
extern int64 dlock_claim_store_forget(Oid *relids, int n);
extern bool dlock_claim_store_rekey(Oid relid, text *from, text *to,
									text *to_full);

#endif							/* DLOCK_CLAIM_STORE_H */
