/*-------------------------------------------------------------------------
 *
 * base_keys.h
 *		Lists of key texts: arrays, sorting, and columns of SPI results
 *		(base_keys.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_BASE_KEYS_H
#define DLOCK_BASE_KEYS_H

#include "fmgr.h"

extern Datum dlock_text_array(text **keys, int n);
extern int	dlock_text_cmp(const void *a, const void *b);
extern int	dlock_sort_unique_keys(text **keys, int n);
extern text **dlock_copy_key_column(uint64 n);
extern Oid *dlock_copy_oid_column(uint64 n, int col);

#endif							/* DLOCK_BASE_KEYS_H */
