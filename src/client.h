/*-------------------------------------------------------------------------
 *
 * client.h
 *		The backend's client connection: is it still there? (client.c)
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLIENT_H
#define DLOCK_CLIENT_H

#include "port.h"

extern pgsocket dlock_client_socket(void);
extern bool dlock_client_gone(void);
extern void dlock_client_lost(void) pg_attribute_noreturn();

#endif							/* DLOCK_CLIENT_H */
