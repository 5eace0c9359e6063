/*-------------------------------------------------------------------------
 *
 * watch_session.c
 *		A session watching keys: its channel, dlock_watch and dlock_unwatch
 *		as transactional changes of the registry (watch.c), the session's
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
#include "storage/ipc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base_store.h"
#include "compat.h"
#include "lease_store.h"
#include "watch.h"
#include "watch_join.h"
#include "watch_session.h"
#include "watch_worker.h"

/* one dlock_watch or dlock_unwatch of this transaction */
typedef struct WatchOp
{
	bool		add;			/* dlock_watch put the entry in */
	SubTransactionId subid;
	int			len;
	char		key[FLEXIBLE_ARRAY_MEMBER];
} WatchOp;

static char channel[NAMEDATALEN];
static bool exit_callback_registered = false;
static List *pending_ops = NIL;	/* in TopTransactionContext */

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
note_op(bool add, const char *key, int len)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	WatchOp    *op = palloc(offsetof(WatchOp, key) + len);

	op->add = add;
	op->subid = GetCurrentSubTransactionId();
	op->len = len;
	memcpy(op->key, key, len);
	pending_ops = lappend(pending_ops, op);
	MemoryContextSwitchTo(old);
}

/* an unwatch of key pending in this transaction, or NULL */
static ListCell *
pending_removal(const char *key, int len)
{
	ListCell   *lc;

	foreach(lc, pending_ops)
	{
		WatchOp    *op = lfirst(lc);

		if (!op->add && op->len == len && memcmp(op->key, key, len) == 0)
			return lc;
	}
	return NULL;
}

/*
 * The end of a (sub)transaction: at commit the unwatched keys go, at a
 * rollback the watched ones (the LISTEN goes with it, in PostgreSQL's own
 * machinery).  Never fails: it may run after the commit record.
 */
static void
ops_end(bool commit, bool top, SubTransactionId subid,
		SubTransactionId parent)
{
	List	   *keep = NIL;
	ListCell   *lc;
	bool		changed = false;
	MemoryContext old;

	if (pending_ops == NIL || !dlock_watch_available())
	{
		if (top)
			pending_ops = NIL;
		return;
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	foreach(lc, pending_ops)
	{
		WatchOp    *op = lfirst(lc);

		if (!top && op->subid != subid)
			keep = lappend(keep, op);
		else if (!top && commit)
		{
			op->subid = parent;
			keep = lappend(keep, op);
		}
		else if (op->add != commit)
		{
			/* a committed unwatch, or a rolled-back watch */
			dlock_watch_entry_remove(op->key, op->len);
			changed = true;
		}
		else if (op->add && top)
			changed = true;		/* a new key for the worker to schedule */
	}
	MemoryContextSwitchTo(old);
	pending_ops = top ? NIL : keep;
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

/* Called from _PG_init (dlock.c). */
void
dlock_watch_session_init(void)
{
	RegisterXactCallback(session_xact_callback, NULL);
	RegisterSubXactCallback(session_subxact_callback, NULL);
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
	ListCell   *unwatch;

	if (!exit_callback_registered)
	{
		before_shmem_exit(watch_exit_callback, (Datum) 0);
		exit_callback_registered = true;
	}
	if (!dlock_watch_entry_add(k, len, session_channel(), expired_through))
	{
		/* watching it again undoes an unwatch earlier in this transaction */
		if ((unwatch = pending_removal(k, len)) != NULL)
			pending_ops = list_delete_cell(pending_ops, unwatch);
		return false;
	}
	note_op(true, k, len);
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
	if (!dlock_watch_entry_exists(key, len) ||
		pending_removal(key, len) != NULL)
		return false;
	note_op(false, key, len);
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
