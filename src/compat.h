/*-------------------------------------------------------------------------
 *
 * compat.h
 *		The one place for PostgreSQL version differences in dlock.
 *
 * dlock targets PostgreSQL 15 (Debian 12).  Anything that depends on the
 * server version goes here, behind PG_VERSION_NUM, so that the rest of the
 * code can be read as plain PostgreSQL 15 code.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_COMPAT_H
#define DLOCK_COMPAT_H

#if PG_VERSION_NUM < 150000
#error "dlock requires PostgreSQL 15 or later"
#endif

#ifndef HAVE_INT128
#error "dlock needs a compiler with 128-bit integers (interval arithmetic in args.c)"
#endif

#if PG_VERSION_NUM >= 160000
/* PostgreSQL 16 moved the ownership checks to object_ownercheck() */
#define DLOCK_HAS_OBJECT_ACLCHECK 1
#endif

#endif							/* DLOCK_COMPAT_H */
