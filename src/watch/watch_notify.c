/*-------------------------------------------------------------------------
 *
 * watch_notify.c
 *		What a transaction did to leases, sent at its commit as
 *		notifications to the sessions that watch those keys and may see
 *		them.
 *
 * The lease code reports each change as it writes it (a grant, with the
 * expiry of the lease it replaced if it took one over; a release; an
 * expiry the worker found); the change is kept, with its subtransaction,
 * until the transaction ends.  A rolled-back subtransaction's changes go
 * with it.  At pre-commit (after the hand-over's own pre-commit, which may
 * turn a grant back into a plain release: dlock_watch_grant_withdrawn),
 * each change is looked up in the registry (watch_registry.c) and sent with
 * PostgreSQL's Async_Notify to the channel of every watcher whose role may
 * see the lease: superusers, members of pg_read_all_stats, and roles with
 * the privileges of the lease's owner (the rule of the dlock_locks view).
 * PostgreSQL delivers them when the transaction commits, and never when it
 * rolls back.  An expiry is sent to a watcher once, whichever holder of
 * the key (a lease, a semaphore's slot, a shared holder) it was: the
 * watcher's entry remembers the time up to which its key's expiries were
 * sent.  The expiry worker reads every holder of the key under the key's
 * lock and moves that mark to the time it read at once (given back if its
 * transaction rolls back); it sends the expiries between the mark before
 * and then.  An acquire that takes over a holder that ran out (under the
 * key's lock, so not while the worker reads it, nor before the worker's
 * round that found it has ended: watch_expiry.c) sends that expiry only if
 * it is past the mark.  The release of an abandoned hand-over grant may be
 * reported by two transactions (dlock's worker deleting its row, and a
 * grant that read that row as free); the first to send it claims it in
 * the registry (given back if its transaction rolls back), and the other
 * sends nothing.
 *
 * A transaction that is prepared (PREPARE TRANSACTION) sends nothing: its
 * changes are dropped at PREPARE, since PostgreSQL cannot keep a NOTIFY
 * across it (and COMMIT PREPARED runs where the changes are not known).
 *
 * The payload is JSON: {"key", "event" (granted, released or expired),
 * "cause" (for a grant: acquire, handover or takeover), "holder",
 * "token", "expires_at", "at" (when it happened)}, with times in UTC.  A
 * notification payload must stay under 8000 bytes (with the default block
 * size): keys of 1024 bytes and holders of 256 bytes fit even when every
 * byte is escaped; with smaller blocks, holder and then key are left out
 * of a payload that would not fit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "compat.h"
#include "watch/watch_int.h"

/* PostgreSQL's own limit (commands/async.c) */
#define NOTIFY_PAYLOAD_LIMIT	(BLCKSZ - NAMEDATALEN - 128)

/* what happened to a key */
typedef enum DlockWatchKind
{
	DLOCK_WATCH_GRANTED,		/* a new grant: new holder or new token */
	DLOCK_WATCH_RELEASED,		/* freed: release, release_all, force_release */
	DLOCK_WATCH_EXPIRED			/* ran out with nobody releasing it */
} DlockWatchKind;

/* one change of this transaction */
typedef struct WatchEvent
{
	DlockWatchKind kind;
	DlockGrantCause cause;
	SubTransactionId subid;
	bool		withdrawn;		/* a hand-over that did not happen */
	bool		abandoned;		/* the release of an abandoned grant */
	text	   *key;
	text	   *holder;
	Oid			owner;
	int64		token;
	TimestampTz expires_at;
	TimestampTz at;
} WatchEvent;

/* a watcher's mark moved forward by this transaction (the expiry worker) */
typedef struct ExpiryClaim
{
	DlockWatcher w;
	TimestampTz through;
	int64		previous;
} ExpiryClaim;

/* in TopTransactionContext */
static List *events = NIL;
static List *claims = NIL;
static List *released = NIL;	/* tokens of abandoned grants claimed */
static bool granted_watched = false;	/* a watched key got a new lease */

static const char *const kind_names[] = {"granted", "released", "expired"};
static const char *const cause_names[] = {NULL, "acquire", "handover", "takeover"};

static WatchEvent *
record(DlockWatchKind kind, DlockGrantCause cause, text *key, text *holder,
	   Oid owner, int64 token, TimestampTz expires_at)
{
	MemoryContext old;
	WatchEvent *ev;

	/* without shared memory nobody can watch */
	if (!dlock_watch_available())
		return NULL;
	old = MemoryContextSwitchTo(TopTransactionContext);
	ev = palloc(sizeof(WatchEvent));
	ev->kind = kind;
	ev->cause = cause;
	ev->subid = GetCurrentSubTransactionId();
	ev->withdrawn = false;
	ev->abandoned = false;
	ev->key = DatumGetTextPCopy(PointerGetDatum(key));
	ev->holder = holder ? DatumGetTextPCopy(PointerGetDatum(holder)) : NULL;
	ev->owner = owner;
	ev->token = token;
	ev->expires_at = expires_at;
	ev->at = GetCurrentTimestamp();
	events = lappend(events, ev);
	MemoryContextSwitchTo(old);
	return ev;
}

/*
 * A new grant of key to holder (as owner, with token until expires_at),
 * come about as cause says.  The grant reports what it replaced first: a
 * lease it took over, as expired; an abandoned hand-over grant, as
 * released (lease_grant.c).
 */
static void
dlock_watch_granted(text *key, DlockGrantCause cause, text *holder, Oid owner,
					int64 token, TimestampTz expires_at)
{
	(void) record(DLOCK_WATCH_GRANTED, cause, key, holder, owner, token,
				  expires_at);
}

/*
 * key's live lease (holder, owner, token, expires_at) was freed, or handed
 * over (a grant follows)
 */
static void
dlock_watch_released(text *key, text *holder, Oid owner, int64 token,
					 TimestampTz expires_at)
{
	(void) record(DLOCK_WATCH_RELEASED, DLOCK_CAUSE_NONE, key, holder, owner,
				  token, expires_at);
}

/* key's lease (holder, owner, token, expires_at) has run out */
void
dlock_watch_expired(text *key, text *holder, Oid owner, int64 token,
					TimestampTz expires_at)
{
	(void) record(DLOCK_WATCH_EXPIRED, DLOCK_CAUSE_NONE, key, holder, owner,
				  token, expires_at);
}

/* the hand-over of key with token did not happen: the key was freed */
static void
dlock_watch_grant_withdrawn(text *key, int64 token)
{
	ListCell   *lc;

	foreach(lc, events)
	{
		WatchEvent *ev = lfirst(lc);

		if (ev->kind == DLOCK_WATCH_GRANTED && ev->token == token &&
			VARSIZE_ANY_EXHDR(ev->key) == VARSIZE_ANY_EXHDR(key) &&
			memcmp(VARDATA_ANY(ev->key), VARDATA_ANY(key),
				   VARSIZE_ANY_EXHDR(key)) == 0)
			ev->withdrawn = true;
	}
}

/*
 * The hand-over grant of key to holder (as owner, with token until
 * expires_at) was abandoned by its waiter, and dlock's worker freed its row
 * (wait_abandon.c), or a grant took it (lease_grant.c): the key is free again, a
 * release to its watchers, sent once if both report it (send_event).
 */
void
dlock_watch_abandoned(text *key, text *holder, Oid owner, int64 token,
					  TimestampTz expires_at)
{
	WatchEvent *ev = record(DLOCK_WATCH_RELEASED, DLOCK_CAUSE_NONE, key,
							holder, owner, token, expires_at);

	if (ev != NULL)
		ev->abandoned = true;
}

/*
 * The expiry worker read every holder of key at time now, holding the
 * key's lock: it reports (dlock_watch_expired) each that had run out by
 * then.  Every watcher of key is marked as told of those expiries at
 * once, before the lock is given back, so that an acquire that takes one
 * of those holders over later does not send it again; the marks before
 * are kept to choose what this transaction sends, and given back if it
 * rolls back.
 */
void
dlock_watch_read_through(text *key, TimestampTz now)
{
	DlockWatcher *w;
	int			n;
	MemoryContext old;

	if (!dlock_watch_available())
		return;
	n = dlock_watch_find(MyDatabaseId, VARDATA_ANY(key),
						 VARSIZE_ANY_EXHDR(key), &w);
	old = MemoryContextSwitchTo(TopTransactionContext);
	for (int i = 0; i < n; i++)
	{
		ExpiryClaim *c = palloc(sizeof(ExpiryClaim));

		if (!dlock_watch_claim_expiry(&w[i], now, &c->previous))
		{
			pfree(c);
			continue;
		}
		c->w = w[i];
		c->through = now;
		claims = lappend(claims, c);
	}
	MemoryContextSwitchTo(old);
}

/*
 * Watcher w's mark as it was before this transaction: an expiry up to it
 * was sent already (or happened before the watch).
 */
static TimestampTz
expired_through_before(const DlockWatcher *w)
{
	ListCell   *lc;

	foreach(lc, claims)
	{
		ExpiryClaim *c = lfirst(lc);

		if (c->w.index == w->index && c->w.generation == w->generation)
			return c->previous;
	}
	return dlock_watch_expired_through(w);
}

/* ---- the payload ---- */

static void
append_time(StringInfo buf, TimestampTz t)
{
	char		s[MAXDATELEN + 1];
	const int	utc = 0;

	appendStringInfoChar(buf, '"');
	appendStringInfoString(buf, JsonEncodeDateTime(s, TimestampTzGetDatum(t),
												   TIMESTAMPTZOID, &utc));
	appendStringInfoChar(buf, '"');
}

static void
append_text(StringInfo buf, text *t, bool keep)
{
	if (t == NULL || !keep)
		appendStringInfoString(buf, "null");
	else
		escape_json(buf, text_to_cstring(t));
}

static char *
build_payload(const WatchEvent *ev, bool with_holder, bool with_key)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"key\":");
	append_text(&buf, ev->key, with_key);
	appendStringInfo(&buf, ",\"event\":\"%s\"", kind_names[ev->kind]);
	if (cause_names[ev->cause] != NULL)
		appendStringInfo(&buf, ",\"cause\":\"%s\"", cause_names[ev->cause]);
	appendStringInfoString(&buf, ",\"holder\":");
	append_text(&buf, ev->holder, with_holder);
	appendStringInfo(&buf, ",\"token\":" INT64_FORMAT ",\"expires_at\":",
					 ev->token);
	append_time(&buf, ev->expires_at);
	appendStringInfoString(&buf, ",\"at\":");
	append_time(&buf, ev->at);
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/* the payload of ev, made to fit PostgreSQL's limit */
static char *
payload(const WatchEvent *ev)
{
	char	   *p = build_payload(ev, true, true);

	if (strlen(p) >= NOTIFY_PAYLOAD_LIMIT)
		p = build_payload(ev, false, true);
	if (strlen(p) >= NOTIFY_PAYLOAD_LIMIT)
		p = build_payload(ev, false, false);
	return p;
}

/* ---- sending at pre-commit ---- */

static bool
same_key(text *a, text *b)
{
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

/*
 * Say which key (or that several) this transaction changed, for the
 * watchers that join while it commits (watch_join.c).
 */
static void
publish(void)
{
	TransactionId xid = GetTopTransactionIdIfAny();
	WatchEvent *first = linitial(events);
	bool		many = false;
	ListCell   *lc;

	/* the worker's expiries change nothing: no transaction id */
	if (!TransactionIdIsValid(xid))
		return;
	foreach(lc, events)
		many |= !same_key(first->key, ((WatchEvent *) lfirst(lc))->key);
	dlock_watch_publish_commit(xid,
							   dlock_key_for_text(DLOCK_CLASS_LEASE,
												  VARDATA_ANY(first->key),
												  VARSIZE_ANY_EXHDR(first->key)).hash,
							   many);
}

/*
 * Claim the release of the abandoned grant token for this transaction
 * (watch_registry.c, dlock_watch_claim_release); false if another sent it.
 */
static bool
claim_release(int64 token)
{
	MemoryContext old;
	int64	   *t;

	if (!dlock_watch_claim_release(MyDatabaseId, token))
		return false;
	old = MemoryContextSwitchTo(TopTransactionContext);
	t = palloc(sizeof(int64));
	*t = token;
	released = lappend(released, t);
	MemoryContextSwitchTo(old);
	return true;
}

/* send ev to its watchers that may see it */
static void
send_event(const WatchEvent *ev)
{
	DlockWatcher *w;
	int			n = dlock_watch_find(MyDatabaseId, VARDATA_ANY(ev->key),
									 VARSIZE_ANY_EXHDR(ev->key), &w);
	char	   *p = NULL;

	if (n > 0 && ev->kind == DLOCK_WATCH_GRANTED)
		granted_watched = true;
	/* an abandoned grant's release: unless another transaction sent it */
	if (n > 0 && ev->abandoned && !claim_release(ev->token))
		return;
	for (int i = 0; i < n; i++)
	{
		/* once per holder: unless the worker or an acquire sent it */
		if (ev->kind == DLOCK_WATCH_EXPIRED &&
			ev->expires_at <= expired_through_before(&w[i]))
			continue;
		if (!dlock_watch_role_sees(w[i].role, ev->owner))
			continue;
		if (p == NULL)
			p = payload(ev);
		Async_Notify(w[i].channel, p);
	}
}

static void
send_pending(void)
{
	ListCell   *lc;

	publish();
	if (!dlock_watch_any())
		return;
	foreach(lc, events)
	{
		WatchEvent *ev = lfirst(lc);

		if (!ev->withdrawn)
			send_event(ev);
	}
}

/* ---- transaction ends ---- */

static void
forget_all(void)
{
	/* the memory goes with TopTransactionContext */
	events = NIL;
	claims = NIL;
	released = NIL;
	granted_watched = false;
}

static void
watch_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			if (events != NIL)
				send_pending();
			break;
		case XACT_EVENT_PRE_PREPARE:
			forget_all();
			break;
		case XACT_EVENT_COMMIT:
			dlock_watch_clear_commit();
			/* the worker learns the new expiry */
			if (granted_watched)
				dlock_watch_poke_worker(MyDatabaseId);
			forget_all();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			dlock_watch_clear_commit();
			foreach(lc, claims)
			{
				ExpiryClaim *c = lfirst(lc);

				dlock_watch_unclaim_expiry(&c->w, c->through, c->previous);
			}
			foreach(lc, released)
				dlock_watch_unclaim_release(MyDatabaseId,
											*(int64 *) lfirst(lc));
			forget_all();
			break;
		default:
			break;
	}
}

static void
watch_subxact_callback(SubXactEvent event, SubTransactionId subid,
					   SubTransactionId parent, void *arg)
{
	ListCell   *lc;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	foreach(lc, events)
	{
		WatchEvent *ev = lfirst(lc);

		if (ev->subid != subid)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			ev->subid = parent;
		else
		{
			/* freed too: a loop of savepoints must not grow the transaction */
			events = foreach_delete_current(events, lc);
			pfree(ev->key);
			if (ev->holder != NULL)
				pfree(ev->holder);
			pfree(ev);
		}
	}
}

/*
 * Called from _PG_init (dlock.c), before the other parts of dlock register
 * theirs: PostgreSQL calls the callback registered last first, so this runs
 * after the hand-over's pre-commit (lease_handover.c).
 */
void
dlock_watch_notify_init(void)
{
	static const DlockLeaseEvents events = {
		.granted = dlock_watch_granted,
		.released = dlock_watch_released,
		.abandoned = dlock_watch_abandoned,
		.grant_withdrawn = dlock_watch_grant_withdrawn,
		.expired = dlock_watch_expired,
	};

	dlock_lease_events = &events;
	RegisterXactCallback(watch_xact_callback, NULL);
	RegisterSubXactCallback(watch_subxact_callback, NULL);
}
