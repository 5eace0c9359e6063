/*-------------------------------------------------------------------------
 *
 * wait_sleep.h
 *		How a waiting backend sleeps, and the waits around a hand-over
 *		(wait_sleep.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WAIT_SLEEP_H
#define DLOCK_WAIT_SLEEP_H

#include "access/xlogdefs.h"

extern bool dlock_sleep(int64 timeout_us);
extern void dlock_sleep_briefly(long ms);
extern void dlock_wait_yield(void);
extern void dlock_wait_durable(XLogRecPtr lsn);

#endif							/* DLOCK_WAIT_SLEEP_H */
