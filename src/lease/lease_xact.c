/*-------------------------------------------------------------------------
 *
 * lease_xact.c
 *		What dlock does when a transaction ends: wake the waiters of the
 *		keys it touched, let a transaction that only released leases
 *		commit without waiting for its WAL flush, and abandon the
 *		hand-over grants it received if it rolls back.
 *
 * Wake-ups.  The keys a transaction locked for writing or validating are
 * noted; once its locks are gone (top-level commit or abort), the head
 * waiter of each is woken.  A rolled-back subtransaction gives back the
 * key locks it took at once, so it wakes the noted keys too (a head woken
 * while the key is still locked by the outer transaction tries once and
 * sleeps again).  A prepared transaction keeps its locks past this
 * backend's transaction; COMMIT PREPARED and ROLLBACK PREPARED (which may
 * run in any backend, and do not know its keys) wake the head of every
 * queue in the database, through dlock's ProcessUtility hook
 * (base_xact.c).
 *
 * Asynchronous release.  A release that is lost in a crash only keeps the
 * key until its ttl runs out, and the next holder's durable acquire
 * flushes the release's WAL anyway (WAL is flushed in order).  So a
 * transaction whose only WAL is dlock freeing leases commits with
 * synchronous_commit = off, which halves the flushes of an
 * acquire+release pair.  "Only" is checked, not assumed: the transaction
 * must have had no transaction id before the first release, must not be
 * an explicit or multi-statement transaction block, and nothing may have
 * written WAL after the last release (XactLastRecEnd is unchanged at
 * commit).  Anything else commits as the user configured it.
 *
 * Clients that went away.  A transaction that issued a new token checks at
 * pre-commit that its client is still connected; if not, the backend ends
 * (as PostgreSQL ends one that finds its client gone) and the grant rolls
 * back, instead of staying held by nobody until its ttl runs out.
 *
 * Abandoned grants.  A grant that a release handed over to a waiter (in
 * the releaser's transaction: lease_handover.c) is the waiter's only if
 * the waiter's transaction commits too.  The grants a transaction received
 * are kept here until it ends; if it rolls back (a later error in the
 * statement, a cancel, a ROLLBACK, a termination), each is abandoned.
 * dlock_abandon is the one way to abandon a grant, for every caller (this
 * file, a waiter leaving its queue on an error or its exit:
 * lease_acquire.c, a releaser whose waiter left: lease_handover.c): it
 * records the grant in the shared list that makes it read as a free key
 * (wait_abandon.c), wakes the key's head waiter (wait_queue.c), and starts the
 * background worker that deletes its row (maint_worker.c).  Those three
 * files call nothing back: the list, the queue and the worker do not know
 * each other.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "wait/wait.h"
#include "base/base.h"
#include "lease/lease_int.h"
#include "lease/lease.h"

/*
 * keys this transaction locked for writing: their waiters wake at its end.
 * Past MAX_NOTED_KEYS of them (a dlock_release_all of many leases), the
 * head of every queue in the database is woken instead (touched_many).
 */
#define MAX_NOTED_KEYS	1024

static List *touched_keys = NIL;
static bool touched_many = false;

/* this transaction acquired a new token: its client must still be there */
static bool new_token = false;

/* the asynchronous release state of the current transaction */
static bool async_candidate = false;
static bool async_pending = false;
static XLogRecPtr async_lsn = InvalidXLogRecPtr;
/* synchronous_commit as it was before an asynchronous release's commit */
static int	async_saved_sync = -1;

static bool callback_registered = false;

/* grants this transaction received from a release, in TopTransactionContext */
typedef struct ReceivedGrant
{
	char	   *key;
	char	   *holder;
	Oid			owner;
	int64		token;
	TimestampTz expires_at;
} ReceivedGrant;

static List *received = NIL;
static bool received_callback_registered = false;

static void dlock_xact_callback(XactEvent event, void *arg);
static void dlock_resowner_callback(ResourceReleasePhase phase, bool isCommit,
									bool isTopLevel, void *arg);

static void
ensure_callback(void)
{
	if (!callback_registered)
	{
		RegisterXactCallback(dlock_xact_callback, NULL);
		RegisterResourceReleaseCallback(dlock_resowner_callback, NULL);
		callback_registered = true;
	}
}

/*
 * True when the running statement is its transaction as a whole: not in a
 * transaction block (explicit, or several statements in one query
 * message) nor in a subtransaction.  Its outcome is then known when the
 * statement ends, and cannot be a PREPARE.  The hand-over between a
 * release and a waiter needs both of them to be so.
 */
bool
dlock_xact_alone(void)
{
	return !IsTransactionBlock() && GetCurrentTransactionNestLevel() == 1;
}

void
dlock_xact_note_key(const DlockKeyLock *key)
{
	MemoryContext old;
	uint64	   *h;

	ensure_callback();
	if (touched_many || list_length(touched_keys) >= MAX_NOTED_KEYS)
	{
		touched_many = true;
		return;
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	h = palloc(sizeof(uint64));
	*h = key->hash;
	touched_keys = lappend(touched_keys, h);
	MemoryContextSwitchTo(old);
}

/*
 * A new token was issued in this transaction (a grant, a takeover, or a
 * hand-over received).  It commits only while the client that is to
 * receive it is still connected: a client that went away while its
 * backend waited or worked would never see the token, and the lease would
 * stay, held by nobody, until its ttl ran out.
 */
void
dlock_xact_note_new_token(void)
{
	ensure_callback();
	new_token = true;
}


void
dlock_release_async_begin(void)
{
	ensure_callback();
	async_candidate = !IsTransactionBlock() &&
		(!TransactionIdIsValid(GetTopTransactionIdIfAny()) ||
		 (async_pending && XactLastRecEnd == async_lsn));
	if (!async_candidate)
		async_pending = false;
}

void
dlock_release_async_end(void)
{
	if (async_candidate)
	{
		async_pending = true;
		async_lsn = XactLastRecEnd;
	}
}

static void
dlock_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			/* a token for a client that is gone: roll back (wait_client.c) */
			if (new_token)
			{
				new_token = false;
				if (dlock_client_gone())
					dlock_client_lost();
			}
			/*
			 * The setting's variable is set for this one commit and put back
			 * at transaction end, rather than through set_config_option:
			 * a GUC_ACTION_LOCAL setting makes the transaction's end walk
			 * every setting (AtEOXact_GUC), a cost on every release.
			 * RecordTransactionCommit and SyncRepWaitForLSN read it; nothing
			 * else runs in between.
			 */
			if (async_pending && XactLastRecEnd == async_lsn &&
				synchronous_commit > SYNCHRONOUS_COMMIT_OFF)
			{
				async_saved_sync = synchronous_commit;
				synchronous_commit = SYNCHRONOUS_COMMIT_OFF;
			}
			break;
		case XACT_EVENT_PRE_PREPARE:
			/* the key locks go to the prepared transaction */
			touched_keys = NIL;
			touched_many = false;
			async_pending = false;
			new_token = false;
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			if (async_saved_sync >= 0)
				synchronous_commit = async_saved_sync;
			async_saved_sync = -1;
			async_candidate = false;
			async_pending = false;
			new_token = false;
			break;
		default:
			break;
	}
}

/*
 * Waiters are woken once the transaction's locks are gone, so that the
 * woken backend finds the key lock free; then this backend yields the CPU
 * to them (see dlock_wait_yield).
 */
static void
dlock_resowner_callback(ResourceReleasePhase phase, bool isCommit,
						bool isTopLevel, void *arg)
{
	ListCell   *lc;
	bool		woke = false;

	if (phase != RESOURCE_RELEASE_AFTER_LOCKS ||
		(touched_keys == NIL && !touched_many))
		return;
	/* a subtransaction's commit passes its locks on to its parent */
	if (!isTopLevel && isCommit)
		return;
	foreach(lc, touched_keys)
		woke |= dlock_wait_wake_key(*(uint64 *) lfirst(lc));
	if (touched_many)
	{
		dlock_wait_wake_all_heads();
		woke = true;
	}
	if (isTopLevel)
	{
		touched_keys = NIL;		/* memory goes with TopTransactionContext */
		touched_many = false;
	}
	if (woke)
		dlock_wait_yield();
}

/*
 * COMMIT PREPARED / ROLLBACK PREPARED: once the prepared transaction's
 * locks are gone, wake the head of every queue in this database
 * (dlock_wait_wake_all_heads, run after the statement: base_xact.c).
 */
static bool
finishes_prepared(Node *stmt)
{
	TransactionStmtKind kind;

	if (!IsA(stmt, TransactionStmt))
		return false;
	kind = ((TransactionStmt *) stmt)->kind;
	return kind == TRANS_STMT_COMMIT_PREPARED ||
		kind == TRANS_STMT_ROLLBACK_PREPARED;
}

/* ---- abandoned grants ---- */

/*
 * Abandon a committed hand-over grant that nobody will return: from now on
 * it reads as a free key (wait_abandon.c), the key's head waiter is woken
 * to take it, and a worker deletes the row (maint_worker.c).  Safe in
 * transaction callbacks, also while a transaction aborts or the backend
 * exits: it takes LWLocks and allocates nothing.
 */
void
dlock_abandon(const char *key, const char *holder, Oid owner, int64 token,
			  TimestampTz expires_at)
{
	if (!dlock_abandoned_add(key, holder, owner, token, expires_at))
		return;
	(void) dlock_wait_wake_key(dlock_key_for_text(DLOCK_CLASS_LEASE, key,
												  strlen(key)).hash);
	dlock_worker_start_undo();
}

static void
received_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (received == NIL)
		return;
	switch (event)
	{
		case XACT_EVENT_ABORT:
			foreach(lc, received)
			{
				ReceivedGrant *r = lfirst(lc);

				dlock_abandon(r->key, r->holder, r->owner, r->token,
							  r->expires_at);
			}
			received = NIL;		/* the memory goes with the transaction */
			break;
		case XACT_EVENT_PRE_PREPARE:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot prepare a transaction that received a lease from another transaction's release"),
					 errdetail("Key \"%s\" was handed over to holder \"%s\" by a release that committed already.",
							   ((ReceivedGrant *) linitial(received))->key,
							   ((ReceivedGrant *) linitial(received))->holder)));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			received = NIL;
			break;
		default:
			break;
	}
}

/*
 * A waiter returns a grant that a release handed over to it (committed in
 * the releaser's transaction): it stands only if this transaction commits.
 * Should it roll back (a later error in the statement, a cancel, a
 * ROLLBACK, a termination), the grant is abandoned then.
 */
void
dlock_abandon_unless_committed(text *key, text *holder, Oid owner,
							   int64 token, TimestampTz expires_at)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	ReceivedGrant *r = palloc(sizeof(ReceivedGrant));

	r->key = text_to_cstring(key);
	r->holder = text_to_cstring(holder);
	r->owner = owner;
	r->token = token;
	r->expires_at = expires_at;
	received = lappend(received, r);
	MemoryContextSwitchTo(old);
	if (!received_callback_registered)
	{
		RegisterXactCallback(received_xact_callback, NULL);
		received_callback_registered = true;
	}
}

/* called from _PG_init */
void
dlock_xact_init(void)
{
	dlock_utility_hook_add(finishes_prepared, dlock_wait_wake_all_heads);
}
