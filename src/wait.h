/*-------------------------------------------------------------------------
 *
 * wait.h
 *		Blocking acquires: the FIFO queue of each key and sleeping (wait.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WAIT_H
#define DLOCK_WAIT_H

#include "datatype/timestamp.h"

#include "dlock.h"

/* one row of dlock_waiters: a copy of a waiting backend's slot */
typedef struct DlockWaiter
{
	int			pid;
	Oid			owner;			/* the waiting role */
	TimestampTz since;
	int			position;		/* in its key's queue; 1 is the head */
	char		key[DLOCK_MAX_KEY_BYTES + 1];
	char		holder[DLOCK_MAX_HOLDER_BYTES + 1];
} DlockWaiter;

extern bool dlock_wait_wake_key(uint64 hash);
extern void dlock_wait_wake_all_heads(void);
extern void dlock_wait_yield(void);
extern bool dlock_wait_queue_blocks(uint64 hash);
extern void dlock_wait_enqueue(uint64 hash, text *key, text *holder);
extern void dlock_wait_leave(void);
extern bool dlock_wait_sleep(int64 timeout_us);
extern int	dlock_wait_list(DlockWaiter **out);
extern void dlock_wait_shmem_request(void);
extern void dlock_wait_shmem_startup(void);

#endif							/* DLOCK_WAIT_H */
