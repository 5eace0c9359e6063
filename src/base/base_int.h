/*-------------------------------------------------------------------------
 *
 * base/base_int.h
 *		What the files of base/ share and no other family sees.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_BASE_INT_H
#define DLOCK_BASE_INT_H

#include "base/base.h"

/* ----------------
 * base_spi.c
 *		Whom dlock's own work runs as (base_spi.c; base_token.c's setval).
 * ----------------
 */
extern Oid	dlock_schema_owner(void);

/* ----------------
 * base_settings.c
 *		The setting only base_worker.c reads (base_settings.c).
 * ----------------
 */
extern int	dlock_debug_sweep_every;

#endif							/* DLOCK_BASE_INT_H */
