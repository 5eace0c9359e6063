/*-------------------------------------------------------------------------
 *
 * token.h
 *		Fencing tokens (token.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_TOKEN_H
#define DLOCK_TOKEN_H



extern int64 dlock_next_token(void);

#endif							/* DLOCK_TOKEN_H */
