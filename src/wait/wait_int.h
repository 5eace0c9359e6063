/*-------------------------------------------------------------------------
 *
 * wait/wait_int.h
 *		What the files of wait/ share and no other family sees.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WAIT_INT_H
#define DLOCK_WAIT_INT_H

#include "port.h"

#include "wait/wait.h"

/* ----------------
 * wait_client.c
 *		The client's socket, which a waiter watches (wait_client.c).
 * ----------------
 */
extern pgsocket dlock_client_socket(void);

/* ----------------
 * wait_sleep.c
 *		How a waiting backend sleeps (wait_sleep.c).
 * ----------------
 */
extern bool dlock_sleep(int64 timeout_us);
extern void dlock_sleep_briefly(long ms);

#endif							/* DLOCK_WAIT_INT_H */
