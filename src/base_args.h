/*-------------------------------------------------------------------------
 *
 * base_args.h
 *		Argument checks shared by the SQL-callable functions (base_args.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_BASE_ARGS_H
#define DLOCK_BASE_ARGS_H

#include "datatype/timestamp.h"
#include "fmgr.h"

extern void dlock_arg_writes_allowed(const char *fn);
extern void dlock_arg_not_null(FunctionCallInfo fcinfo, int argno,
							   const char *what);
extern text *dlock_arg_key(FunctionCallInfo fcinfo, int argno);
extern text *dlock_check_key(text *key);
extern text *dlock_arg_holder(FunctionCallInfo fcinfo, int argno);
extern int64 dlock_arg_ttl(FunctionCallInfo fcinfo, int argno, bool null_ok);
extern int64 dlock_arg_wait(FunctionCallInfo fcinfo, int argno);
extern int	dlock_arg_slots(FunctionCallInfo fcinfo, int argno);
extern bool dlock_arg_token(FunctionCallInfo fcinfo, int argno, bool null_ok,
							int64 *token);
extern int64 dlock_interval_usecs(const Interval *iv);

#endif							/* DLOCK_BASE_ARGS_H */
