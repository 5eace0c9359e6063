/*-------------------------------------------------------------------------
 *
 * watch_join.c
 *		A watcher joining while a change of its key commits: the committing
 *		transactions, published in shared memory, that dlock_watch waits for.
 *
 * A change looks for the key's watchers at its pre-commit (watch_notify.c);
 * its commit becomes visible a little later.  A watcher that put its entry
 * in between would neither be notified of the change nor see it in its
 * next read of the key.  So every transaction that changed leases publishes
 * its transaction id and key (or "several keys") in a slot of its own, from
 * its pre-commit to its end, before it looks for watchers; the watcher,
 * after putting its entry in, waits for every transaction published for its
 * key.  With a full memory barrier on each side, either the change sees the
 * entry or the watcher sees the slot.  So once dlock_watch has committed,
 * every change of the key either shows in a read of it or comes as a
 * notification.  The wait is short: those transactions are past their
 * pre-commit.  It calls no other watch_* file.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lmgr.h"
#include "storage/shmem.h"

#include "base/base.h"
#include "compat.h"
#include "watch/watch_int.h"

/* a committing transaction that changed leases, one slot per backend */
typedef struct WatchCommit
{
	pg_atomic_uint32 xid;		/* InvalidTransactionId: none */
	pg_atomic_uint32 many;		/* it changed more than one key */
	pg_atomic_uint64 hash;		/* else the one key it changed */
} WatchCommit;

/* NULL without shared memory */
static WatchCommit *commits = NULL;

/*
 * A transaction that changed leases, from its pre-commit to its end:
 * xid, and the key's hash (or many keys).  Followed by a full barrier.
 */
void
dlock_watch_publish_commit(uint32 xid, uint64 hash, bool many)
{
	WatchCommit *c;

	if (commits == NULL || dlock_my_procno() >= MaxBackends)
		return;
	c = &commits[dlock_my_procno()];
	pg_atomic_write_u64(&c->hash, hash);
	pg_atomic_write_u32(&c->many, many ? 1 : 0);
	pg_atomic_write_u32(&c->xid, xid);
	pg_memory_barrier();
}

void
dlock_watch_clear_commit(void)
{
	if (commits == NULL || dlock_my_procno() >= MaxBackends)
		return;
	pg_atomic_write_u32(&commits[dlock_my_procno()].xid, InvalidTransactionId);
}

/*
 * After putting key's entry in: wait for the transactions that are
 * committing a change of key and may have looked for watchers before the
 * entry was there.
 */
void
dlock_watch_after_add(text *key)
{
	uint64		hash = dlock_key_for_text(DLOCK_CLASS_LEASE, VARDATA_ANY(key),
										  VARSIZE_ANY_EXHDR(key)).hash;
	TransactionId *xids = palloc(sizeof(TransactionId) * MaxBackends);
	int			n = 0;

	pg_memory_barrier();
	for (int i = 0; i < MaxBackends; i++)
	{
		WatchCommit *c = &commits[i];
		TransactionId xid = pg_atomic_read_u32(&c->xid);

		if (i == dlock_my_procno() || !TransactionIdIsValid(xid))
			continue;
		if (pg_atomic_read_u32(&c->many) || pg_atomic_read_u64(&c->hash) == hash)
			xids[n++] = xid;
	}
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		XactLockTableWait(xids[i], NULL, NULL, XLTW_None);
	}
	pfree(xids);
}

/* ---- shared memory (dlock.c asks) ---- */

static Size
commits_size(void)
{
	return mul_size(MaxBackends, sizeof(WatchCommit));
}

void
dlock_watch_join_shmem_request(void)
{
	RequestAddinShmemSpace(commits_size());
}

void
dlock_watch_join_shmem_startup(void)
{
	bool		found;

	commits = ShmemInitStruct("dlock watch commits", commits_size(), &found);
	if (!found)
		for (int i = 0; i < MaxBackends; i++)
		{
			pg_atomic_init_u32(&commits[i].xid, InvalidTransactionId);
			pg_atomic_init_u32(&commits[i].many, 0);
			pg_atomic_init_u64(&commits[i].hash, 0);
		}
}
