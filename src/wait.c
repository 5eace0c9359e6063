/*-------------------------------------------------------------------------
 *
 * wait.c
 *		Blocking acquires: a FIFO queue per key in shared memory, and
 *		sleeping on the backend's latch until a release commits, the lease
 *		runs out, or the wait does.
 *
 * Each waiting backend has a slot with the key's hash and a ticket drawn
 * in arrival order.  Only the waiter with the lowest ticket for a key (the
 * head) may take the key; every other acquire of that key, waiting or not,
 * finds it taken while the queue is not empty, so a new arrival never
 * jumps the queue.  The head is woken by setting its latch:
 *
 *  - when a transaction that wrote or validated the key ends (xact.c calls
 *    dlock_wait_wake_key after the transaction's locks are gone), so a
 *    release wakes the head when it commits, and a rolled-back release
 *    wakes it only to find the lease still held;
 *  - by the head that leaves the queue without the key (wait ran out,
 *    query cancelled), for the next one.
 *  - by COMMIT PREPARED and ROLLBACK PREPARED (xact.c), which wake the head
 *    of every queue in the database: the prepared transaction's keys are
 *    not known there;
 *  - by the rollback of a subtransaction that locked a key (xact.c).
 * A waiter also wakes by itself when the lease it waits on expires, and
 * at the latest every dlock.safety_wake (default one second) as a safety
 * net; the tests run with that set very long, so nothing depends on it.
 *
 * Without shared memory (dlock not preloaded), waits poll every
 * dlock.poll_interval milliseconds instead; there is no queue.
 *
 * A backend that dies while waiting: a FATAL exit clears its slot in a
 * before_shmem_exit callback; a crash resets all of shared memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sched.h>

#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/wait_event.h"

#include "dlock.h"
#include "shmem.h"

static int	my_slot = -1;
static bool exit_callback_registered = false;

static void
leave_slot_locked(void)
{
	dlock_shared->slots[my_slot].in_use = false;
	pg_atomic_fetch_sub_u32(&dlock_shared->nwaiters, 1);
	my_slot = -1;
}

/* the head waiter's slot for a key, or -1; caller holds the LWLock */
static int
queue_head_locked(uint64 hash)
{
	int			head = -1;

	for (int i = 0; i < dlock_shared->nslots; i++)
	{
		DlockWaitSlot *s = &dlock_shared->slots[i];

		if (s->in_use && s->key_hash == hash && s->dboid == MyDatabaseId &&
			(head < 0 || s->ticket < dlock_shared->slots[head].ticket))
			head = i;
	}
	return head;
}

static bool
wake_head_locked(uint64 hash)
{
	int			head = queue_head_locked(hash);

	/* a waiter giving back a key lock of its own need not wake itself */
	if (head < 0 || head == my_slot)
		return false;
	SetLatch(&ProcGlobal->allProcs[dlock_shared->slots[head].procno].procLatch);
	return true;
}

/* Wake the head waiter of a key, if anyone waits for it; true if woken. */
bool
dlock_wait_wake_key(uint64 hash)
{
	bool		woke;

	if (dlock_shared == NULL || pg_atomic_read_u32(&dlock_shared->nwaiters) == 0)
		return false;
	LWLockAcquire(dlock_shared->lock, LW_SHARED);
	woke = wake_head_locked(hash);
	LWLockRelease(dlock_shared->lock);
	return woke;
}

/*
 * Wake the head of every queue in this database.  For the ends of prepared
 * transactions, whose keys are not known to the backend that finishes
 * them; a head woken for nothing tries once and sleeps again.
 */
void
dlock_wait_wake_all_heads(void)
{
	if (dlock_shared == NULL || pg_atomic_read_u32(&dlock_shared->nwaiters) == 0)
		return;
	LWLockAcquire(dlock_shared->lock, LW_SHARED);
	for (int i = 0; i < dlock_shared->nslots; i++)
	{
		DlockWaitSlot *s = &dlock_shared->slots[i];

		if (s->in_use && s->dboid == MyDatabaseId &&
			queue_head_locked(s->key_hash) == i)
			SetLatch(&ProcGlobal->allProcs[s->procno].procLatch);
	}
	LWLockRelease(dlock_shared->lock);
}

/*
 * Give the CPU to a waiter just woken (dlock.handoff_yield).  The kernel
 * often queues the woken backend on the waker's own CPU, where it would
 * wait until the waker has finished its commit and answered its client;
 * yielding lets it run now.  When nothing else is runnable on this CPU
 * the call returns at once.
 */
void
dlock_wait_yield(void)
{
	if (dlock_handoff_yield)
		(void) sched_yield();
}

/* True when waiters queue for this key and this backend is not their head. */
bool
dlock_wait_queue_blocks(uint64 hash)
{
	int			head;

	if (dlock_shared == NULL || pg_atomic_read_u32(&dlock_shared->nwaiters) == 0)
		return false;
	LWLockAcquire(dlock_shared->lock, LW_SHARED);
	head = queue_head_locked(hash);
	LWLockRelease(dlock_shared->lock);
	return head >= 0 && head != my_slot;
}

static void
wait_exit_callback(int code, Datum arg)
{
	dlock_wait_leave();
}

/* Join the queue for a key.  Without shared memory there is no queue. */
void
dlock_wait_enqueue(uint64 hash, text *key, text *holder)
{
	DlockWaitSlot *s = NULL;

	if (dlock_shared == NULL)
		return;
	Assert(my_slot < 0);
	if (!exit_callback_registered)
	{
		before_shmem_exit(wait_exit_callback, (Datum) 0);
		exit_callback_registered = true;
	}

	LWLockAcquire(dlock_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < dlock_shared->nslots; i++)
	{
		if (!dlock_shared->slots[i].in_use)
		{
			my_slot = i;
			s = &dlock_shared->slots[i];
			break;
		}
	}
	if (s != NULL)
	{
		s->in_use = true;
		s->pid = MyProcPid;
		s->procno = dlock_my_procno();
		s->key_hash = hash;
		s->ticket = dlock_shared->next_ticket++;
		s->since = GetCurrentTimestamp();
		s->dboid = MyDatabaseId;
		s->owner = GetUserId();
		text_to_cstring_buffer(key, s->key, sizeof(s->key));
		text_to_cstring_buffer(holder, s->holder, sizeof(s->holder));
		pg_atomic_fetch_add_u32(&dlock_shared->nwaiters, 1);
	}
	LWLockRelease(dlock_shared->lock);
	/* no free slot cannot happen (one per backend); then we just poll */
}

/*
 * Leave the queue, if in it.  If this backend was the head, the next
 * waiter becomes head and is woken: the key may be free now.
 */
void
dlock_wait_leave(void)
{
	uint64		hash;

	if (dlock_shared == NULL || my_slot < 0)
		return;
	LWLockAcquire(dlock_shared->lock, LW_EXCLUSIVE);
	hash = dlock_shared->slots[my_slot].key_hash;
	leave_slot_locked();
	wake_head_locked(hash);
	LWLockRelease(dlock_shared->lock);
}

/*
 * Sleep up to timeout_us, or until woken; true when woken (the latch was
 * set) rather than timed out.  Query cancel, statement_timeout and
 * termination end the sleep at once (their signal handlers set the
 * latch) and are raised here.
 */
bool
dlock_wait_sleep(int64 timeout_us)
{
	long		ms;
	int			rc = 0;

	if (dlock_shared == NULL)
		timeout_us = Min(timeout_us, (int64) dlock_poll_interval_ms * 1000);
	else
		timeout_us = Min(timeout_us, (int64) dlock_safety_wake_ms * 1000);
	ms = (long) ((timeout_us + 999) / 1000);
	if (ms > 0)
	{
		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					   ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	CHECK_FOR_INTERRUPTS();
	return (rc & WL_LATCH_SET) != 0;
}

/*
 * dlock_waiters() RETURNS SETOF record
 *		(pid int, key text, holder text, waiting_since timestamptz,
 *		 queue_position int)
 *
 * Backends waiting in dlock_acquire in the current database; position 1
 * is the head of its key's queue.  A role sees only the waits of roles
 * whose privileges it has (dlock_sees_role, views.c).  Empty without
 * shared memory.
 */
PG_FUNCTION_INFO_V1(dlock_waiters);
Datum
dlock_waiters(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	if (dlock_shared == NULL)
		PG_RETURN_VOID();

	LWLockAcquire(dlock_shared->lock, LW_SHARED);
	for (int i = 0; i < dlock_shared->nslots; i++)
	{
		DlockWaitSlot *s = &dlock_shared->slots[i];
		Datum		values[5];
		bool		nulls[5] = {0};
		int			pos = 1;

		if (!s->in_use || s->dboid != MyDatabaseId ||
			!dlock_sees_role(s->owner))
			continue;
		for (int j = 0; j < dlock_shared->nslots; j++)
		{
			DlockWaitSlot *o = &dlock_shared->slots[j];

			if (o->in_use && o->dboid == s->dboid && o->key_hash == s->key_hash &&
				o->ticket < s->ticket)
				pos++;
		}
		values[0] = Int32GetDatum(s->pid);
		values[1] = CStringGetTextDatum(s->key);
		values[2] = CStringGetTextDatum(s->holder);
		values[3] = TimestampTzGetDatum(s->since);
		values[4] = Int32GetDatum(pos);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(dlock_shared->lock);
	PG_RETURN_VOID();
}
