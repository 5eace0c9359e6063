/*-------------------------------------------------------------------------
 *
 * lease_xact.h
 *		What dlock does when a transaction ends: wake the waiters of the keys
 *		it wrote, let a lone release commit without waiting for its flush,
 *		and abandon the hand-over grants nobody took (lease_xact.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_LEASE_XACT_H
#define DLOCK_LEASE_XACT_H

#include "datatype/timestamp.h"

#include "base_keylock.h"

extern bool dlock_xact_alone(void);
extern void dlock_xact_note_key(const DlockKeyLock *key);
extern void dlock_xact_note_new_token(void);
extern void dlock_release_async_begin(void);
extern void dlock_release_async_end(void);
extern void dlock_abandon(const char *key, const char *holder, Oid owner,
						  int64 token, TimestampTz expires_at);
extern void dlock_abandon_unless_committed(text *key, text *holder, Oid owner,
										   int64 token,
										   TimestampTz expires_at);

extern void dlock_xact_init(void);

#endif							/* DLOCK_LEASE_XACT_H */
