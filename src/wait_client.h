/*-------------------------------------------------------------------------
 *
 * wait_client.h
 *		The backend's client connection: is it still there? (wait_client.c)
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WAIT_CLIENT_H
#define DLOCK_WAIT_CLIENT_H

#include "port.h"

#include "compat.h"

extern pgsocket dlock_client_socket(void);
extern bool dlock_client_gone(void);
DLOCK_NORETURN_BEFORE extern void dlock_client_lost(void) DLOCK_NORETURN_AFTER;

#endif							/* DLOCK_WAIT_CLIENT_H */
