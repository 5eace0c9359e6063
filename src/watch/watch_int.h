/*-------------------------------------------------------------------------
 *
 * watch/watch_int.h
 *		What the files of watch/ share and no other family sees.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WATCH_INT_H
#define DLOCK_WATCH_INT_H

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "nodes/pg_list.h"

#include "lease/lease.h"
#include "watch/watch.h"

/* ----------------
 * watch_registry.c
 *		The registry of watching sessions in shared memory
 *		(watch_registry.c): the lowest layer of the watch family, which
 *		calls no other watch file; they call it.
 * ----------------
 */
/* one watcher of a key, copied out of the registry */
typedef struct DlockWatcher
{
	int			index;			/* its entry in the registry */
	uint32		generation;		/* and the entry's generation */
	Oid			role;			/* the role that called dlock_watch */
	char		channel[NAMEDATALEN];
} DlockWatcher;

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

/* ----------------
 * watch_join.c
 *		The changes a joining watcher waits for (watch_join.c).
 * ----------------
 */
extern void dlock_watch_publish_commit(uint32 xid, uint64 hash, bool many);
extern void dlock_watch_clear_commit(void);
extern void dlock_watch_after_add(text *key);

/* ----------------
 * watch_notify.c
 *		What a transaction changed, sent at its commit to the keys'
 *		watchers (watch_notify.c): the expiries the worker finds.  The
 *		lease family reports its changes through dlock_lease_events
 *		(lease.h), each holder as plain values.
 * ----------------
 */
extern void dlock_watch_expired(text *key, text *holder, Oid owner,
								int64 token, TimestampTz expires_at);
extern void dlock_watch_read_through(text *key, TimestampTz now);

/* ----------------
 * watch_session.c
 *		A session watching keys (watch_session.c): dlock_watch and
 *		dlock_unwatch as transactional changes of the registry, and the
 *		read of a key's leader.
 * ----------------
 */
extern const char *dlock_watch_key(text *key);
extern bool dlock_watch_drop(const char *key, int len);
extern int64 dlock_watch_drop_all(void);
extern bool dlock_watch_leader(text *key, DlockLease *l);

/* ----------------
 * watch_worker.c
 *		The expiry workers' slots in shared memory (watch_worker.c): one
 *		worker per database with watchers, started, woken and left.
 * ----------------
 */
extern void dlock_watch_ensure_worker(void);
extern void dlock_watch_poke_worker(Oid dboid);
extern bool dlock_watch_worker_attach(Oid dboid);
extern bool dlock_watch_worker_may_exit(Oid dboid);

/* ----------------
 * watch_expiry.c
 *		The expiry worker's rounds (watch_expiry.c): its entry point, which
 *		watch_worker.c names to start it.
 * ----------------
 */
extern PGDLLEXPORT void dlock_watch_worker_main(Datum main_arg);

#endif							/* DLOCK_WATCH_INT_H */
