/*-------------------------------------------------------------------------
 *
 * watch/watch.h
 *		What the watch family offers the others: its shared memory, the
 *		registry joined by sessions, sending at commit, and the expiry worker.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WATCH_H
#define DLOCK_WATCH_H

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "nodes/pg_list.h"

#include "lease/lease.h"

/* ----------------
 * watch_registry.c
 *		The registry of watching sessions in shared memory (watch_registry.c): the
 *		lowest layer of the watch family, which every other watch file
 *		calls.
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

/* ----------------
 * watch_join.c
 *		The changes a joining watcher waits for (watch_join.c).
 * ----------------
 */
extern void dlock_watch_publish_commit(uint32 xid, uint64 hash, bool many);
extern void dlock_watch_clear_commit(void);
extern void dlock_watch_after_add(text *key);
extern void dlock_watch_join_shmem_request(void);
extern void dlock_watch_join_shmem_startup(void);

/* ----------------
 * watch_notify.c
 *		What a transaction changed, sent at its commit to the keys'
 *		watchers (watch_notify.c).  The lease family reports its changes
 *		here through dlock_lease_events (lease.h), each holder as plain
 *		values.
 * ----------------
 */
extern void dlock_watch_granted(text *key, DlockGrantCause cause, text *holder,
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
extern void dlock_watch_session_init(void);

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
extern void dlock_watch_worker_shmem_request(void);
extern void dlock_watch_worker_shmem_startup(void);

#endif							/* DLOCK_WATCH_H */
