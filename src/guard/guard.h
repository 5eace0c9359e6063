/*-------------------------------------------------------------------------
 *
 * guard/guard.h
 *		The guard: tables whose writes are refused unless the writing
 *		transaction fenced the row's key (dlock_validate) or its claim
 *		(dlock_claimed).  A layer above lease and claim, whose fences it
 *		reads from base_fence.c; nothing calls into it but its own SQL entry
 *		points (guard_sql.c) and dlock.c (dlock_guard_init), so this header
 *		declares what those call.
 *
 * A guard is two triggers on the table, both running
 * dlock_guard_trigger(): a BEFORE row trigger for the guarded operations,
 * whose arguments are the key expression and the token column (the whole
 * configuration: cloned onto partitions with the trigger, dumped and
 * restored with it, read back by the view dlock_guards), and a BEFORE
 * TRUNCATE statement trigger that refuses TRUNCATE.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_GUARD_H
#define DLOCK_GUARD_H

#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "utils/array.h"
#include "fmgr.h"

/* the names of the guard's triggers; the row trigger's sorts last among
 * ASCII names, so that it checks the row the other BEFORE triggers made */
#define DLOCK_GUARD_ROW_TRIGGER			"zz_dlock_guard"
#define DLOCK_GUARD_TRUNCATE_TRIGGER	"zz_dlock_guard_truncate"

/*
 * The SQLSTATE of a write the guard refuses: class LK, dlock's own (an
 * implementation-defined class: its first letter is after H), 001.
 */
#define ERRCODE_DLOCK_GUARD_REFUSED		MAKE_SQLSTATE('L','K','0','0','1')

/* guarded operations, as the bits of a trigger's type */
#define DLOCK_GUARD_OPS_ALL	(TRIGGER_TYPE_INSERT | TRIGGER_TYPE_UPDATE | \
							 TRIGGER_TYPE_DELETE)

/* ----------------
 * guard_ddl.c
 *		Putting a guard on a table and taking it off.
 * ----------------
 */
extern int	dlock_guard_ops(ArrayType *operations);
extern void dlock_guard_put(Oid relid, Oid fn_nsp, text *key, int ops,
							const char *token_column);
extern bool dlock_guard_remove(Oid relid);

/* ----------------
 * guard_key.c
 *		A row's key: the key expression evaluated over the row.
 * ----------------
 */
extern void dlock_guard_key_check(Relation rel, const char *expr);
extern text *dlock_guard_key_of(Relation rel, const char *expr,
								HeapTuple tup);

/* ----------------
 * guard_row.c
 *		The trigger: a row's write allowed, stamped, or refused.
 * ----------------
 */
extern HeapTuple dlock_guard_row(TriggerData *td);

/* ----------------
 * guard_truncate.c
 *		TRUNCATE refused: the statement trigger's error, and the check
 *		through dlock's ProcessUtility hook.
 * ----------------
 */
extern void dlock_guard_refuse_truncate(Relation rel);
extern void dlock_guard_init(void);

#endif							/* DLOCK_GUARD_H */
