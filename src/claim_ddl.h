/*-------------------------------------------------------------------------
 *
 * claim_ddl.h
 *		Claims through DDL on tables (claim_ddl.c): its event trigger
 *		entry points, and what claim_ddl_type.c uses of it: the facts that
 *		name a table's rows, and forgetting a table's claims.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_DDL_H
#define DLOCK_CLAIM_DDL_H

#include "access/attnum.h"
#include "nodes/nodes.h"

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

extern void dlock_claim_ddl_start(Node *parsetree);
extern void dlock_claim_ddl_end(Node *parsetree);
extern Oid	dlock_claim_ddl_root_of(Oid relid);
extern void dlock_claim_ddl_read_facts(Oid relid, KeyFacts *f);
extern void dlock_claim_ddl_forget(Oid relid);

#endif							/* DLOCK_CLAIM_DDL_H */
