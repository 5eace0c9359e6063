/*-------------------------------------------------------------------------
 *
 * wait_sleep.c
 *		How a waiting backend sleeps: on its latch and its client's socket,
 *		under the wait event "DlockWait"; and the other waits around a
 *		hand-over: the waker yielding its CPU, and a grant received made
 *		durable before its token is returned.
 *
 * The queue (wait_queue.c) says who waits and who is woken; this file only
 * waits.  A sleep ends when the latch is set (a wake-up, or a signal:
 * query cancel, statement_timeout and termination set it, and are raised
 * here), when the time is up, or when the client closes its connection
 * (wait_client.c): a waiter whose client is gone must not get the key.
 * It calls no other file of the queue.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sched.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "access/xlog.h"
#include "replication/syncrep.h"
#include "storage/latch.h"
#include "utils/wait_event.h"

#include "base/base.h"
#include "compat.h"
#include "wait/wait.h"
#include "wait/wait_int.h"

/*
 * The wait event of a waiting acquire, "DlockWait" (type Extension) where
 * PostgreSQL lets an extension name one (compat.h); looked up once per
 * backend, before the first sleep.  Until then (and on an error path that
 * waits before any sleep) the generic one.
 */
static uint32 dlock_wait_event = PG_WAIT_EXTENSION;
static bool dlock_wait_event_known = false;

static uint32
wait_event(void)
{
	if (!dlock_wait_event_known)
	{
		dlock_wait_event = dlock_wait_event_new("DlockWait");
		dlock_wait_event_known = true;
	}
	return dlock_wait_event;
}

/*
 * Sleep up to timeout_us, or until woken; true when woken (the latch was
 * set) rather than timed out.  Query cancel, statement_timeout and
 * termination end the sleep at once (their signal handlers set the
 * latch) and are raised here; so does the client closing its connection
 * (wait_client.c): a waiter whose client is gone must not get the key.
 */
bool
dlock_sleep(int64 timeout_us)
{
	long		ms;
	int			rc = 0;
	pgsocket	sock = dlock_client_socket();

	ms = (long) ((timeout_us + 999) / 1000);
	if (ms > 0)
	{
		rc = WaitLatchOrSocket(MyLatch,
							   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH |
							   (sock != PGINVALID_SOCKET ? WL_SOCKET_CLOSED : 0),
							   sock, ms, wait_event());
		ResetLatch(MyLatch);
	}
	CHECK_FOR_INTERRUPTS();
	if (rc & WL_SOCKET_CLOSED)
		dlock_client_lost();
	return (rc & WL_LATCH_SET) != 0;
}

/*
 * Sleep up to ms, or until the latch is set; interrupts are not taken
 * here (the caller checks what it needs).  It looks up no wait event: it
 * may run on an error path, before any sleep did.
 */
void
dlock_sleep_briefly(long ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 ms, dlock_wait_event);
	ResetLatch(MyLatch);
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

/*
 * Make a grant received from a releaser as durable as this waiter's own
 * commit would have made it (flushed, and replicated as its
 * synchronous_commit asks) before its token is returned.  lsn: the end of
 * the releaser's commit record.  A no-op when the releaser's commit did
 * that already.
 */
void
dlock_wait_durable(XLogRecPtr lsn)
{
	XLogFlush(lsn);
	if (synchronous_commit > SYNCHRONOUS_COMMIT_LOCAL_FLUSH)
		SyncRepWaitForLSN(lsn, false);
}
