/*-------------------------------------------------------------------------
 *
 * claim_ddl_type.h
 *		Claims through DDL on types: a renamed enum value, a dropped
 *		object (claim_ddl_type.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_DDL_TYPE_H
#define DLOCK_CLAIM_DDL_TYPE_H

extern void dlock_claim_ddl_enum_renamed(const char *oldval,
										 const char *newval);
extern void dlock_claim_ddl_dropped(void);

#endif							/* DLOCK_CLAIM_DDL_TYPE_H */
