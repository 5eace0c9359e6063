/*-------------------------------------------------------------------------
 *
 * wait_abandon.h
 *		The list of hand-over grants that their waiter never took, in
 *		shared memory (wait_abandon.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WAIT_ABANDON_H
#define DLOCK_WAIT_ABANDON_H

#include "datatype/timestamp.h"

#include "base_limits.h"

/* one abandoned grant, as the worker that frees it reads it */
typedef struct DlockAbandoned
{
	int			slot;			/* its place in the list */
	Oid			owner;
	int64		token;
	TimestampTz expires_at;
	char		key[DLOCK_MAX_KEY_BYTES + 1];
	char		holder[DLOCK_MAX_HOLDER_BYTES + 1];
} DlockAbandoned;

extern bool dlock_abandoned_add(const char *key, const char *holder,
								Oid owner, int64 token,
								TimestampTz expires_at);
extern bool dlock_abandoned(int64 token);
extern bool dlock_abandoned_take(DlockAbandoned *a);
extern void dlock_abandoned_done(const DlockAbandoned *a, bool done);

extern void dlock_abandon_shmem_request(void);
extern void dlock_abandon_shmem_startup(void);

#endif							/* DLOCK_WAIT_ABANDON_H */
