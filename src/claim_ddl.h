/*-------------------------------------------------------------------------
 *
 * claim_ddl.h
 *		What claim_ddl.c and claim_ddl_type.c share: the facts that name a
 *		table's rows, and forgetting a table's claims.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_DDL_H
#define DLOCK_CLAIM_DDL_H

#include "access/attnum.h"

/* what names the rows of a table */
typedef struct KeyFacts
{
	Oid			relid;
	bool		exists;
	Oid			root;			/* its partition root (itself if none) */
	AttrNumber	attnum;			/* its primary key column, 0: none */
	Oid			type;
	int32		typmod;
	char		attname[NAMEDATALEN];
} KeyFacts;

extern Oid	dlock_claim_ddl_root_of(Oid relid);
extern void dlock_claim_ddl_read_facts(Oid relid, KeyFacts *f);
extern void dlock_claim_ddl_forget(Oid relid);

#endif							/* DLOCK_CLAIM_DDL_H */
