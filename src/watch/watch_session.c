/*-------------------------------------------------------------------------
 *
 * watch_session.c
 *		A session watching keys: its channel, dlock_watch and dlock_unwatch
 *		as transactional changes of the registry (watch_registry.c), the session's
 *		end, and the read of a key's leader.
 *
 * Each watching session has one notification channel, a random name drawn
 * from pg_strong_random ("dlock_" and 32 hex digits) that dlock_watch
 * LISTENs on for it, so that the client never names the channel in a
 * statement of its own.  NOTIFY channels are not access-controlled: anyone
 * who knows a name can listen on it, or send on it.  A random name known
 * only to its session keeps both out; dlock never sends on a shared or
 * guessable channel.
 *
 * Transactions.  dlock_watch puts its registry entry in at once, so that a
 * change committing from then on finds it, and takes it out again if its
 * (sub)transaction rolls back; dlock_unwatch takes entries out at commit.
 * A change committing as a watcher joins is waited for (watch_join.c).
 * This file's own transaction callbacks do that; PREPARE TRANSACTION
 * cannot keep a watch (nor can it keep a LISTEN).  A session's entries go
 * when it ends (a before_shmem_exit callback).
 *
 * A pooler's reset.  The watches follow the session's LISTEN: UNLISTEN *,
 * UNLISTEN of the session's channel and DISCARD ALL (what a pooler runs
 * between two clients of one connection) unwatch every key of the session
 * at commit, as dlock_unwatch() does, freeing their entries; dlock's
 * ProcessUtility hook (base_xact.c) sees them.  Once no key is watched
 * after such a reset, the session draws a new channel at its next
 * dlock_watch, so that the next client of the connection never learns the
 * one before.
 *
 * dlock_watch needs the registry in shared memory, so dlock must be in
 * shared_preload_libraries; it also needs the primary (nothing can send a
 * notification on a standby).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/async.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/ipc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "compat.h"
#include "lease/lease.h"
#include "watch/watch_int.h"

/* one dlock_watch or dlock_unwatch of this transaction */
typedef struct WatchOp
{
	bool		add;			/* dlock_watch: the key is watched from here */
	bool		readd;			/* ... again, after an unwatch (the entry
								 * was there already: a rollback keeps it) */
	SubTransactionId subid;
	int			len;
	char		key[FLEXIBLE_ARRAY_MEMBER];
} WatchOp;

static char channel[NAMEDATALEN];
static bool exit_callback_registered = false;
static List *pending_ops = NIL;	/* in TopTransactionContext */
/* the (sub)transaction that unlistened the channel, or none */
static SubTransactionId reset_subid = InvalidSubTransactionId;

/*
 * This session's channel, made on first use: "dlock_" and 32 hex digits
 * from pg_strong_random, known only to this session.
 */
static const char *
session_channel(void)
{
	if (channel[0] == '\0')
	{
		uint8		rnd[16];
		char	   *p = channel;

		if (!pg_strong_random(rnd, sizeof(rnd)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random channel name")));
		p += snprintf(p, NAMEDATALEN, "dlock_");
		for (int i = 0; i < (int) sizeof(rnd); i++)
			p += snprintf(p, 3, "%02x", rnd[i]);
	}
	return channel;
}

/* before_shmem_exit: the session's entries go with it */
static void
watch_exit_callback(int code, Datum arg)
{
	bool		had = dlock_watch_entry_remove_all();

	dlock_watch_clear_commit();
	if (had && OidIsValid(MyDatabaseId))
		dlock_watch_poke_worker(MyDatabaseId);
}

/* ---- this transaction's dlock_watch and dlock_unwatch calls ---- */

static void
note_op(bool add, bool readd, const char *key, int len)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	WatchOp    *op = palloc(offsetof(WatchOp, key) + len);

	op->add = add;
	op->readd = readd;
	op->subid = GetCurrentSubTransactionId();
	op->len = len;
	memcpy(op->key, key, len);
	pending_ops = lappend(pending_ops, op);
	MemoryContextSwitchTo(old);
}

static bool
op_is(const WatchOp *op, const char *key, int len)
{
	return op->len == len && memcmp(op->key, key, len) == 0;
}

/*
 * Is an unwatch of key pending in this transaction (the last of its calls
 * for key that still count was dlock_unwatch)?
 */
static bool
pending_removal(const char *key, int len)
{
	bool		pending = false;
	ListCell   *lc;

	foreach(lc, pending_ops)
	{
		WatchOp    *op = lfirst(lc);

		if (op_is(op, key, len))
			pending = !op->add;
	}
	return pending;
}

/* is key watched again by a call after the one at lc? */
static bool
rewatched_after(const char *key, int len, ListCell *lc)
{
	for (int i = list_cell_number(pending_ops, lc) + 1;
		 i < list_length(pending_ops); i++)
	{
		WatchOp    *op = list_nth(pending_ops, i);

		if (op->add && op_is(op, key, len))
			return true;
	}
	return false;
}

/*
 * Apply one call of the ending top transaction (commit or not), the cell
 * lc of pending_ops; true if the registry changed.  At commit an unwatch
 * takes the entry out unless a later call watched the key again; at a
 * rollback a watch that put the entry in takes it out.
 */
static bool
op_end_top(WatchOp *op, ListCell *lc, bool commit)
{
	if (commit ? (!op->add && !rewatched_after(op->key, op->len, lc))
		: (op->add && !op->readd))
	{
		dlock_watch_entry_remove(op->key, op->len);
		return true;
	}
	return commit && op->add && !op->readd;	/* a new key for the worker */
}

/*
 * The end of a (sub)transaction: at commit the unwatched keys go, at a
 * rollback the watched ones (the LISTEN goes with it, in PostgreSQL's own
 * machinery).  A committed reset (reset_subid) that left no key watched
 * forgets the channel.  Never fails: it may run after the commit record.
 */
static void
ops_end(bool commit, bool top, SubTransactionId subid,
		SubTransactionId parent)
{
	List	   *keep = NIL;
	ListCell   *lc;
	bool		changed = false;
	bool		reset = false;
	MemoryContext old;

	if (top)
	{
		reset = commit && reset_subid != InvalidSubTransactionId;
		reset_subid = InvalidSubTransactionId;
	}
	else if (reset_subid == subid)
		reset_subid = commit ? parent : InvalidSubTransactionId;
	if (!dlock_watch_available())
		pending_ops = NIL;
	old = MemoryContextSwitchTo(TopTransactionContext);
	foreach(lc, pending_ops)
	{
		WatchOp    *op = lfirst(lc);

		if (top)
			changed |= op_end_top(op, lc, commit);
		else if (op->subid != subid)
			keep = lappend(keep, op);
		else if (commit)
		{
			op->subid = parent;
			keep = lappend(keep, op);
		}
		else if (op->add && !op->readd)
		{
			/* a rolled-back watch */
			dlock_watch_entry_remove(op->key, op->len);
			changed = true;
		}
	}
	MemoryContextSwitchTo(old);
	pending_ops = top ? NIL : keep;
	if (reset && !dlock_watch_entry_any())
		channel[0] = '\0';
	if (changed)
		dlock_watch_poke_worker(MyDatabaseId);
}

static void
session_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			if (pending_ops != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot prepare a transaction that called dlock_watch or dlock_unwatch")));
			break;
		case XACT_EVENT_COMMIT:
			ops_end(true, true, InvalidSubTransactionId,
					InvalidSubTransactionId);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			ops_end(false, true, InvalidSubTransactionId,
					InvalidSubTransactionId);
			break;
		default:
			break;
	}
}

static void
session_subxact_callback(SubXactEvent event, SubTransactionId subid,
						 SubTransactionId parent, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB || event == SUBXACT_EVENT_COMMIT_SUB)
		ops_end(event == SUBXACT_EVENT_COMMIT_SUB, false, subid, parent);
}

/*
 * Does stmt unlisten this session's channel?  UNLISTEN *, UNLISTEN of the
 * channel, and DISCARD ALL (which runs UNLISTEN *); never before the
 * session has a channel.
 */
static bool
unlistens_channel(Node *stmt)
{
	if (channel[0] == '\0')
		return false;
	if (IsA(stmt, DiscardStmt))
		return ((DiscardStmt *) stmt)->target == DISCARD_ALL;
	if (IsA(stmt, UnlistenStmt))
	{
		const char *name = ((UnlistenStmt *) stmt)->conditionname;

		return name == NULL || strcmp(name, channel) == 0;
	}
	return false;
}

/*
 * After a statement that unlistened the channel (it takes effect at
 * commit, as the UNLISTEN does; base_xact.c runs this after it), every
 * key of this session is unwatched at commit, and the channel is
 * forgotten (end_reset).  A dlock_watch later in the same transaction
 * watches its key again, on the channel it LISTENs on anew.
 */
static void
unwatch_all_at_commit(void)
{
	if (!dlock_watch_available())
		return;
	(void) dlock_watch_drop_all();
	if (reset_subid == InvalidSubTransactionId)
		reset_subid = GetCurrentSubTransactionId();
}

/* Called from _PG_init (dlock.c). */
void
dlock_watch_session_init(void)
{
	RegisterXactCallback(session_xact_callback, NULL);
	RegisterSubXactCallback(session_subxact_callback, NULL);
	dlock_utility_hook_add(unlistens_channel, unwatch_all_at_commit);
}

/* ---- dlock_watch and dlock_unwatch ---- */

/*
 * Put this session's entry for key in (leases that ran out up to
 * expired_through are no news to it).  False when the session watches it
 * already.
 */
static bool
watch_add(text *key, TimestampTz expired_through)
{
	const char *k = VARDATA_ANY(key);
	int			len = VARSIZE_ANY_EXHDR(key);
	if (!exit_callback_registered)
	{
		before_shmem_exit(watch_exit_callback, (Datum) 0);
		exit_callback_registered = true;
	}
	if (!dlock_watch_entry_add(k, len, session_channel(), expired_through))
	{
		/*
		 * watching it again undoes an unwatch earlier in this transaction,
		 * unless this subtransaction rolls back
		 */
		if (pending_removal(k, len))
			note_op(true, true, k, len);
		return false;
	}
	note_op(true, false, k, len);
	return true;
}

/*
 * Watch key from this session (until dlock_unwatch or the session's end);
 * returns the channel the notifications come on.  Once the calling
 * transaction has committed, every change of key either shows in a read
 * of it or comes as a notification.
 */
const char *
dlock_watch_key(text *key)
{
	const char *ch;

	if (!dlock_watch_available())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("watching a key needs dlock in shared_preload_libraries"),
				 errhint("Add dlock to shared_preload_libraries in postgresql.conf and restart the server.")));
	PreventCommandDuringRecovery("dlock_watch()");

	ch = session_channel();
	Async_Listen(ch);
	/* a lease that ran out before the watch is no news */
	if (watch_add(key, GetCurrentTimestamp()))
	{
		dlock_watch_ensure_worker();
		dlock_watch_after_add(key);
	}
	return ch;
}

/* Unwatch key at commit; false when this session does not watch it. */
bool
dlock_watch_drop(const char *key, int len)
{
	if (!dlock_watch_entry_exists(key, len) || pending_removal(key, len))
		return false;
	note_op(false, false, key, len);
	return true;
}

/* Unwatch every key of this session at commit; returns how many. */
int64
dlock_watch_drop_all(void)
{
	List	   *keys = dlock_watch_entry_keys();
	ListCell   *lc;
	int64		n = 0;

	foreach(lc, keys)
	{
		text	   *k = lfirst(lc);

		if (dlock_watch_drop(VARDATA_ANY(k), VARSIZE_ANY_EXHDR(k)))
			n++;
	}
	return n;
}

/* ---- a key's leader ---- */

/*
 * The live lease of key into *l, if the current role may see it; false
 * when the key is free, its lease has run out, or it belongs to a role
 * whose privileges the current role does not have.  A semaphore's or
 * shared leases' key: its live holder in the lowest slot (the one that
 * has held it longest, unless an earlier slot was freed and taken again).
 */
bool
dlock_watch_leader(text *key, DlockLease *l)
{
	DlockStore	s;
	DlockLease *ls;
	int			n;
	bool		found = false;
	TimestampTz now;

	dlock_lease_store_open(&s);
	ls = dlock_lease_store_fetch_all(&s, key, &n);
	dlock_store_close(&s);
	now = GetCurrentTimestamp();
	for (int i = 0; i < n && !found; i++)
	{
		if (!dlock_lease_live(&ls[i], now))
			continue;
		*l = ls[i];
		found = true;
	}
	return found && dlock_watch_role_sees(GetUserId(), l->owner);
}
