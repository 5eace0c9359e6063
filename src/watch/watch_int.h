/*-------------------------------------------------------------------------
 *
 * watch/watch_int.h
 *		What the files of watch/ share and no other family sees.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WATCH_INT_H
#define DLOCK_WATCH_INT_H

#include "fmgr.h"

#include "watch/watch.h"

/* ----------------
 * watch_expiry.c
 *		The expiry worker's rounds (watch_expiry.c): its entry point.
 * ----------------
 */
extern PGDLLEXPORT void dlock_watch_worker_main(Datum main_arg);

#endif							/* DLOCK_WATCH_INT_H */
