/*-------------------------------------------------------------------------
 *
 * watch_worker.h
 *		The expiry workers' slots in shared memory (watch_worker.c): one
 *		worker per database with watchers, started, woken and left.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WATCH_WORKER_H
#define DLOCK_WATCH_WORKER_H

extern void dlock_watch_ensure_worker(void);
extern void dlock_watch_poke_worker(Oid dboid);
extern bool dlock_watch_worker_attach(Oid dboid);
extern bool dlock_watch_worker_may_exit(Oid dboid);
extern void dlock_watch_worker_shmem_request(void);
extern void dlock_watch_worker_shmem_startup(void);

#endif							/* DLOCK_WATCH_WORKER_H */
