/*-------------------------------------------------------------------------
 *
 * watch_session.h
 *		A session watching keys (watch_session.c): dlock_watch and
 *		dlock_unwatch as transactional changes of the registry, and the
 *		read of a key's leader.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WATCH_SESSION_H
#define DLOCK_WATCH_SESSION_H

#include "fmgr.h"

#include "lease_store.h"

extern const char *dlock_watch_key(text *key);
extern bool dlock_watch_drop(const char *key, int len);
extern int64 dlock_watch_drop_all(void);
extern bool dlock_watch_leader(text *key, DlockLease *l);
extern void dlock_watch_session_init(void);

#endif							/* DLOCK_WATCH_SESSION_H */
