/*-------------------------------------------------------------------------
 *
 * lease_acquire.c
 *		dlock_acquire as a whole: one attempt (lease_grant.c), and with
 *		wait > 0, a place in the key's queue and sleeps between attempts
 *		until the key can be taken, a release grants it to this waiter, or
 *		the wait runs out.
 *
 * A waiter leaves its queue (wait_queue.c) on every path: when it has the key or
 * its wait ran out, on an error (a cancel, statement_timeout), and when
 * its backend exits (a before_shmem_exit callback).  On an error or its
 * exit no token is returned, so a grant that a release committed for it
 * meanwhile is abandoned (dlock_abandon, lease_xact.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "compat.h"
#include "lease/lease_int.h"
#include "wait/wait.h"
#include "lease/lease.h"

static bool exit_callback_registered = false;

/*
 * Leave the queue for good, on an error or the backend's exit: nobody sees
 * the token of a grant that came meanwhile, so it is abandoned.
 */
static void
leave_for_good(void)
{
	DlockGrant	g;

	if (dlock_wait_leave(&g, true))
		dlock_abandon(g.key, g.holder, g.owner, g.token, g.expires_at);
}

static void
wait_exit_callback(int code, Datum arg)
{
	leave_for_good();
}

/*
 * Wait in the key's queue until the key is taken, or granted to this
 * waiter by a release, or wait runs out.
 */
static DlockAcquireResult
wait_in_queue(const DlockLeaseKey *k, text *holder, int64 ttl_us, int slots,
			  TimestampTz deadline, int64 *token)
{
	TimestampTz expires_at = 0;
	DlockAcquireResult r = DLOCK_ACQ_BUSY;
	DlockGrant	g;
	Oid			role = GetUserId();
	bool		woken = false;
	bool		granted;
	int			other_slots;

	/* a FATAL exit (a termination, a lost client) takes no PG_CATCH */
	if (!exit_callback_registered)
	{
		before_shmem_exit(wait_exit_callback, (Datum) 0);
		exit_callback_registered = true;
	}

	/*
	 * A release may grant the lease to this waiter in its own transaction
	 * (lease_handover.c) only when the acquire is its transaction as a whole: a
	 * grant committed by another backend cannot roll back with this one.
	 * Semaphores take no grants: a freed slot wakes their head waiter.
	 */
	other_slots = dlock_wait_enqueue(k->lock.hash, k->key, holder, ttl_us,
									 slots, slots == 1 && dlock_xact_alone());
	if (other_slots != 0)
		dlock_slots_mismatch(other_slots, slots);
	PG_TRY();
	{
		for (;;)
		{
			TimestampTz now;
			TimestampTz wake_at = deadline;
			bool		pending;

			if (dlock_wait_granted(&pending))
				break;

			/*
			 * Try again once in the queue before the first sleep: a release
			 * that committed after the first attempt but before this backend
			 * joined the queue woke nobody.  Not while a release is handing
			 * the key over to this waiter: it holds the key.
			 */
			if (!pending)
			{
				r = dlock_lease_attempt(k, holder, ttl_us, slots, woken, token,
										&expires_at);
				if (DLOCK_ACQ_OK(r))
					break;
			}
			now = GetCurrentTimestamp();
			if (now >= deadline)
				break;
			/* a lease nobody releases: wake when it runs out */
			if (!pending && r == DLOCK_ACQ_BUSY && expires_at > now &&
				expires_at < wake_at)
				wake_at = expires_at;
			woken = dlock_wait_sleep(wake_at - now);
		}
	}
	PG_CATCH();
	{
		leave_for_good();
		PG_RE_THROW();
	}
	PG_END_TRY();

	/* an offer still pending at the deadline is withdrawn, or taken */
	granted = dlock_wait_leave(&g, false);
	if (granted && !DLOCK_ACQ_OK(r))
	{
		/* the grant is this waiter's only if its transaction commits */
		dlock_abandon_unless_committed(k->key, holder, role, g.token,
									   g.expires_at);
		dlock_wait_durable(g.lsn);
		*token = g.token;
		r = DLOCK_ACQ_GRANTED;
	}
	return r;
}

/*
 * Try to acquire key for holder, one of slots holders at most (1: a
 * lease); with wait_us > 0, wait up to that long.  Returns true and the
 * fencing token when acquired.
 */
bool
dlock_acquire(text *key, text *holder, int64 ttl_us, int64 wait_us,
			  int slots, int64 *token)
{
	DlockLeaseKey k = dlock_lease_key(key);
	TimestampTz expires_at = 0;
	bool		waited = false;
	DlockAcquireResult r;

	r = dlock_lease_attempt(&k, holder, ttl_us, slots, false, token,
							&expires_at);
	if (!DLOCK_ACQ_OK(r))
	{
		TimestampTz start;

		dlock_count(DLOCK_STAT_CONTENDED, 1);
		if (wait_us == 0)
			return false;
		start = GetCurrentTimestamp();
		dlock_count(DLOCK_STAT_WAITS, 1);
		if (dlock_debug_queue_delay_ms > 0)
			pg_usleep((long) dlock_debug_queue_delay_ms * 1000L);
		r = wait_in_queue(&k, holder, ttl_us, slots, start + wait_us, token);
		dlock_count(DLOCK_STAT_WAIT_US, GetCurrentTimestamp() - start);
		if (!DLOCK_ACQ_OK(r))
		{
			dlock_count(DLOCK_STAT_WAIT_TIMEOUTS, 1);
			return false;
		}
		waited = true;
	}

	/* acquired, at once or after waiting */
	if (r == DLOCK_ACQ_EXTENDED)
		dlock_count(DLOCK_STAT_EXTENDED, 1);
	else
	{
		dlock_count(DLOCK_STAT_ACQUIRED, 1);
		if (r == DLOCK_ACQ_TAKEOVER)
			dlock_count(DLOCK_STAT_TAKEOVERS, 1);
		if (waited)
			dlock_count(DLOCK_STAT_HANDOFFS, 1);
		dlock_xact_note_new_token();
	}
	return true;
}
