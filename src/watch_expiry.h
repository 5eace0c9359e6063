/*-------------------------------------------------------------------------
 *
 * watch_expiry.h
 *		The expiry worker's rounds (watch_expiry.c): its entry point.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WATCH_EXPIRY_H
#define DLOCK_WATCH_EXPIRY_H

#include "fmgr.h"

extern PGDLLEXPORT void dlock_watch_worker_main(Datum main_arg);

#endif							/* DLOCK_WATCH_EXPIRY_H */
