/*-------------------------------------------------------------------------
 *
 * watch.h
 *		Watching keys: the registry of watching sessions in shared memory
 *		(watch.c), the changes a joining watcher waits for (watch_join.c),
 *		a session's side (watch_session.c), the notifications a changing
 *		transaction sends (watch_notify.c) and the expiry worker
 *		(watch_worker.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WATCH_H
#define DLOCK_WATCH_H

#include "datatype/timestamp.h"
#include "fmgr.h"

#include "lease_store.h"

/* what happened to a key */
typedef enum DlockWatchKind
{
	DLOCK_WATCH_GRANTED,		/* a new grant: new holder or new token */
	DLOCK_WATCH_RELEASED,		/* freed: release, release_all, force_release */
	DLOCK_WATCH_EXPIRED			/* ran out with nobody releasing it */
} DlockWatchKind;

/* how a grant came about */
typedef enum DlockWatchCause
{
	DLOCK_CAUSE_NONE,
	DLOCK_CAUSE_ACQUIRE,		/* an acquire of a free key */
	DLOCK_CAUSE_HANDOVER,		/* a release granted it to its head waiter */
	DLOCK_CAUSE_TAKEOVER		/* an acquire over an expired lease */
} DlockWatchCause;

/* one watcher of a key, copied out of the registry */
typedef struct DlockWatcher
{
	int			index;			/* its entry in the registry */
	uint32		generation;		/* and the entry's generation */
	Oid			role;			/* the role that called dlock_watch */
	char		channel[NAMEDATALEN];
} DlockWatcher;

/* ---- watch.c: the registry ---- */
extern int	dlock_max_watches;
extern bool dlock_watch_available(void);
extern bool dlock_watch_add(text *key, TimestampTz expired_through);
extern bool dlock_watch_drop(const char *key, int len);
extern int64 dlock_watch_drop_all(void);
extern void dlock_watch_note_op(bool add, const char *key, int len);
extern void dlock_watch_ops_end(bool commit, bool top, SubTransactionId subid,
								SubTransactionId parent);
extern void dlock_watch_ops_prepare(void);
extern bool dlock_watch_any(void);
extern int	dlock_watch_find(Oid dboid, const char *key, int len,
							 DlockWatcher **out);
extern bool dlock_watch_claim_expiry(const DlockWatcher *w,
									 TimestampTz through, int64 *previous);
extern void dlock_watch_unclaim_expiry(const DlockWatcher *w,
									   TimestampTz through, int64 previous);
extern TimestampTz dlock_watch_expired_through(const DlockWatcher *w);
extern text **dlock_watch_db_keys(Oid dboid, int *n);
extern int	dlock_watch_db_count(Oid dboid);
extern void dlock_watch_init(void);
extern void dlock_watch_shmem_request(void);
extern void dlock_watch_shmem_startup(void);

/* ---- watch_join.c: the changes a joining watcher waits for ---- */
extern void dlock_watch_publish_commit(uint32 xid, uint64 hash, bool many);
extern void dlock_watch_clear_commit(void);
extern void dlock_watch_after_add(text *key);
extern void dlock_watch_join_shmem_request(void);
extern void dlock_watch_join_shmem_startup(void);

/* ---- watch_session.c: a session's watches, a key's leader ---- */
extern const char *dlock_watch_channel(void);
extern const char *dlock_watch_key(text *key);
extern bool dlock_watch_leader(text *key, DlockLease *l);

/* ---- watch_notify.c: what a transaction changed, sent at its commit ---- */
extern void dlock_watch_granted(text *key, const DlockLease *old, text *holder,
								Oid owner, int64 token, TimestampTz expires_at,
								bool handover);
extern void dlock_watch_released(text *key, const DlockLease *old);
extern void dlock_watch_abandoned(text *key, text *holder, Oid owner,
								  int64 token, TimestampTz expires_at);
extern void dlock_watch_grant_withdrawn(text *key, int64 token);
extern void dlock_watch_expired(text *key, const DlockLease *l);
extern void dlock_watch_read_through(text *key, TimestampTz now);
extern bool dlock_watch_role_sees(Oid role, Oid owner);
extern void dlock_watch_notify_init(void);

/* ---- watch_worker.c: the expiry worker of each database ---- */
extern void dlock_watch_ensure_worker(void);
extern void dlock_watch_poke_worker(Oid dboid);
extern void dlock_watch_worker_shmem_request(void);
extern void dlock_watch_worker_shmem_startup(void);
extern PGDLLEXPORT void dlock_watch_worker_main(Datum main_arg);

#endif							/* DLOCK_WATCH_H */
