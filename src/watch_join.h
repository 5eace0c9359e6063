/*-------------------------------------------------------------------------
 *
 * watch_join.h
 *		The changes a joining watcher waits for (watch_join.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WATCH_JOIN_H
#define DLOCK_WATCH_JOIN_H

#include "fmgr.h"

extern void dlock_watch_publish_commit(uint32 xid, uint64 hash, bool many);
extern void dlock_watch_clear_commit(void);
extern void dlock_watch_after_add(text *key);
extern void dlock_watch_join_shmem_request(void);
extern void dlock_watch_join_shmem_startup(void);

#endif							/* DLOCK_WATCH_JOIN_H */
