/*-------------------------------------------------------------------------
 *
 * lease_sweep.h
 *		The sweep that acquires run now and then (lease_sweep.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_LEASE_SWEEP_H
#define DLOCK_LEASE_SWEEP_H

#include "datatype/timestamp.h"

extern int64 dlock_lease_sweep(int64 idle_us, int limit);

#endif							/* DLOCK_LEASE_SWEEP_H */
