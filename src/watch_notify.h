/*-------------------------------------------------------------------------
 *
 * watch_notify.h
 *		What a transaction changed, sent at its commit to the keys'
 *		watchers (watch_notify.c).  The lease code reports its changes
 *		here, each holder as plain values.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WATCH_NOTIFY_H
#define DLOCK_WATCH_NOTIFY_H

#include "datatype/timestamp.h"
#include "fmgr.h"

/* how a grant came about */
typedef enum DlockWatchCause
{
	DLOCK_CAUSE_NONE,
	DLOCK_CAUSE_ACQUIRE,		/* an acquire of a free key */
	DLOCK_CAUSE_HANDOVER,		/* a release granted it to its head waiter */
	DLOCK_CAUSE_TAKEOVER		/* an acquire over an expired lease */
} DlockWatchCause;

extern void dlock_watch_granted(text *key, DlockWatchCause cause, text *holder,
								Oid owner, int64 token, TimestampTz expires_at);
extern void dlock_watch_released(text *key, text *holder, Oid owner,
								 int64 token, TimestampTz expires_at);
extern void dlock_watch_abandoned(text *key, text *holder, Oid owner,
								  int64 token, TimestampTz expires_at);
extern void dlock_watch_grant_withdrawn(text *key, int64 token);
extern void dlock_watch_expired(text *key, text *holder, Oid owner,
								int64 token, TimestampTz expires_at);
extern void dlock_watch_read_through(text *key, TimestampTz now);
extern void dlock_watch_notify_init(void);

#endif							/* DLOCK_WATCH_NOTIFY_H */
