/*-------------------------------------------------------------------------
 *
 * base_token.h
 *		Fencing tokens (base_token.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_BASE_TOKEN_H
#define DLOCK_BASE_TOKEN_H



extern int64 dlock_next_token(void);

#endif							/* DLOCK_BASE_TOKEN_H */
