/*-------------------------------------------------------------------------
 *
 * watch.h
 *		The registry of watching sessions in shared memory (watch.c): the
 *		ground floor of the watch_* files.  The files above it each have a
 *		header of their own: watch_join.h, watch_worker.h, watch_session.h,
 *		watch_notify.h, watch_expiry.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WATCH_H
#define DLOCK_WATCH_H

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "nodes/pg_list.h"

/* one watcher of a key, copied out of the registry */
typedef struct DlockWatcher
{
	int			index;			/* its entry in the registry */
	uint32		generation;		/* and the entry's generation */
	Oid			role;			/* the role that called dlock_watch */
	char		channel[NAMEDATALEN];
} DlockWatcher;

extern int	dlock_max_watches;
extern int	dlock_max_watches_per_role;
extern int	dlock_superuser_reserved_watches;

/* what shared memory holds (any backend) */
extern bool dlock_watch_available(void);
extern bool dlock_watch_any(void);
extern int	dlock_watch_find(Oid dboid, const char *key, int len,
							 DlockWatcher **out);
extern text **dlock_watch_db_keys(Oid dboid, int *n);
extern int	dlock_watch_db_count(Oid dboid);
extern bool dlock_watch_role_sees(Oid role, Oid owner);

/* this session's entries (watch_session.c) */
extern bool dlock_watch_entry_add(const char *key, int len,
								  const char *channel,
								  TimestampTz expired_through);
extern bool dlock_watch_entry_exists(const char *key, int len);
extern void dlock_watch_entry_remove(const char *key, int len);
extern bool dlock_watch_entry_remove_all(void);
extern bool dlock_watch_entry_any(void);
extern List *dlock_watch_entry_keys(void);

/* a watcher's expiry mark (watch_notify.c) */
extern bool dlock_watch_claim_expiry(const DlockWatcher *w,
									 TimestampTz through, int64 *previous);
extern void dlock_watch_unclaim_expiry(const DlockWatcher *w,
									   TimestampTz through, int64 previous);
extern TimestampTz dlock_watch_expired_through(const DlockWatcher *w);

/* an abandoned grant's release, sent once (watch_notify.c) */
extern bool dlock_watch_claim_release(Oid dboid, int64 token);
extern void dlock_watch_unclaim_release(Oid dboid, int64 token);

/* the setting and shared memory (dlock.c) */
extern void dlock_watch_init(void);
extern void dlock_watch_shmem_request(void);
extern void dlock_watch_shmem_startup(void);

#endif							/* DLOCK_WATCH_H */
