/*-------------------------------------------------------------------------
 *
 * watch/watch.h
 *		What the watch family offers the higher layers: its setting and
 *		shared memory, its callbacks (dlock.c), and the release of an
 *		abandoned grant, sent to its key's watchers (maint_worker.c).  What
 *		only the watch files share is in watch_int.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WATCH_H
#define DLOCK_WATCH_H

#include "datatype/timestamp.h"
#include "fmgr.h"

/* ----------------
 * watch_registry.c
 *		The registry's settings and shared memory (dlock.c).
 * ----------------
 */
extern void dlock_watch_init(void);
extern void dlock_watch_shmem_request(void);
extern void dlock_watch_shmem_startup(void);

/* ----------------
 * watch_join.c
 *		The shared memory of the commits a joining watcher waits for
 *		(dlock.c).
 * ----------------
 */
extern void dlock_watch_join_shmem_request(void);
extern void dlock_watch_join_shmem_startup(void);

/* ----------------
 * watch_notify.c
 *		Sending at commit: the callbacks of the lease family's changes
 *		(dlock.c), and an abandoned grant's release (maint_worker.c).
 * ----------------
 */
extern void dlock_watch_abandoned(text *key, text *holder, Oid owner,
								  int64 token, TimestampTz expires_at);
extern void dlock_watch_notify_init(void);

/* ----------------
 * watch_session.c
 *		A session's transaction callbacks (dlock.c).
 * ----------------
 */
extern void dlock_watch_session_init(void);

/* ----------------
 * watch_worker.c
 *		The shared memory of the expiry workers' slots (dlock.c).
 * ----------------
 */
extern void dlock_watch_worker_shmem_request(void);
extern void dlock_watch_worker_shmem_startup(void);

#endif							/* DLOCK_WATCH_H */
