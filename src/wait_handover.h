/*-------------------------------------------------------------------------
 *
 * wait_handover.h
 *		Freeing a lease, or handing it over to the head waiter of its key
 *		(wait_handover.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WAIT_HANDOVER_H
#define DLOCK_WAIT_HANDOVER_H

#include "datatype/timestamp.h"

#include "base_keylock.h"
#include "lease_store.h"

extern void dlock_lease_free_or_hand_over(DlockStore *s, text *key,
										  const DlockLease *l,
										  TimestampTz now,
										  const DlockKeyLock *kl);

#endif							/* DLOCK_WAIT_HANDOVER_H */
