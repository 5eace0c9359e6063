/*-------------------------------------------------------------------------
 *
 * lease_handover.c
 *		A release that frees a key with a waiter at the head of its queue
 *		grants the lease to that waiter in its own transaction.
 *
 * A release (or release_all, force_release) in a transaction of its own
 * that frees a key whose head waiter takes grants (one waiting in a
 * single-statement transaction) writes that waiter's grant, with a new
 * token, in the same row update, instead of freeing the key: a hand-off
 * then costs one commit, not a release commit followed by the waiter's
 * own (leases only: a semaphore's slot is freed, and its head waiter woken
 * at the commit).  The offer and its outcome go through the waiter's queue slot
 * (wait_queue.c, "Hand-off"); this file keeps the transaction's offers and
 * settles them when it ends: at pre-commit, an offer whose waiter withdrew
 * frees the key instead; at commit the waiter is told its token, at abort
 * that nothing came of it.  A grant whose waiter left while it committed,
 * or whose waiter's own transaction then does not commit, is abandoned
 * (dlock_abandon, lease_xact.c): it reads as a free key from then on.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "lease/lease_int.h"
#include "wait/wait.h"

/* one offer made by this transaction */
typedef struct PendingOffer
{
	DlockOffer	offer;
	text	   *key;
	bool		committing;		/* settled: goes on to commit */
} PendingOffer;

/* this transaction's offers, in TopTransactionContext */
static List *pending_offers = NIL;
static bool offer_callback_registered = false;

static void lease_offer_xact_callback(XactEvent event, void *arg);

static PendingOffer *
remember_offer(const DlockOffer *o, text *key)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	PendingOffer *p = palloc(sizeof(PendingOffer));

	p->offer = *o;
	p->offer.holder = DatumGetTextPCopy(PointerGetDatum(o->holder));
	p->key = DatumGetTextPCopy(PointerGetDatum(key));
	p->committing = false;
	pending_offers = lappend(pending_offers, p);
	MemoryContextSwitchTo(old);
	if (!offer_callback_registered)
	{
		RegisterXactCallback(lease_offer_xact_callback, NULL);
		offer_callback_registered = true;
	}
	return p;
}

/*
 * Free the lease of the key k (read under its exclusive lock as *l), or
 * grant it to the head of its queue when a waiter there takes grants.
 * Its tenure ends now, as how says (dlock.history, if its key is tracked).
 */
void
dlock_lease_free_or_hand_over(DlockStore *s, const DlockLeaseKey *k,
							  const DlockLease *l, TimestampTz now,
							  DlockHistoryEnd how)
{
	text	   *key = k->key;
	DlockOffer	o;

	dlock_history_lease_ended(key, l->holder, l->owner, l->token,
							  l->acquired_at, now, how);

	if (dlock_lease_events != NULL)
		dlock_lease_events->released(key, l->holder, l->owner, l->token,
									 l->expires_at);

	/*
	 * Only a release that is its transaction as a whole: the waiter learns
	 * the outcome at this transaction's end, which a transaction block could
	 * put off indefinitely or make a PREPARE.  Only a lease: a semaphore's
	 * (or shared lease's) freed slot goes to its head waiter, woken at this
	 * commit (lease_xact.c).
	 */
	if (l->slots == 1 && dlock_xact_alone() && dlock_wait_offer(k->lock.hash, &o))
	{
		/* remembered first: an error from here on must reach the waiter */
		PendingOffer *p = remember_offer(&o, key);

		p->offer.token = dlock_next_token();
		p->offer.expires_at = now + o.ttl_us;
		dlock_lease_store_grant(s, key, l, o.holder, o.owner, p->offer.token,
								o.ttl_us, now, p->offer.expires_at);
		if (dlock_lease_events != NULL)
			dlock_lease_events->granted(key, DLOCK_CAUSE_HANDOVER, o.holder,
										o.owner, p->offer.token,
										p->offer.expires_at);
	}
	else
		dlock_lease_store_free(s, key, l, now);
	dlock_xact_note_key(&k->lock);
}

/*
 * Pre-commit: each offer goes on to commit if its grant still stands and
 * its waiter is still there.  A waiter that withdrew (its wait ran out,
 * or it was cancelled) gets nothing: the key is freed instead, and its
 * queue's next head is woken when this transaction's locks go.
 */
static void
settle_offers(void)
{
	ListCell   *lc;
	DlockStore	s;

	dlock_lease_store_open(&s);
	foreach(lc, pending_offers)
	{
		PendingOffer *p = lfirst(lc);
		DlockLease	l;
		bool		stands;

		dlock_lease_store_fetch(&s, p->key, &l);
		stands = l.held && l.token == p->offer.token &&
			l.owner == p->offer.owner;
		p->committing = dlock_wait_offer_settle(&p->offer, stands);
		if (!p->committing && stands)
		{
			dlock_lease_store_free(&s, p->key, &l, GetCurrentTimestamp());
			if (dlock_lease_events != NULL)
				dlock_lease_events->grant_withdrawn(p->key, p->offer.token);
		}
	}
	dlock_store_close(&s);
}

/*
 * At commit or abort: tell the waiter.  A grant that committed while its
 * waiter stopped waiting (cancelled while this transaction wrote its
 * commit record or waited for synchronous standbys) has no taker: it is
 * abandoned, and reads as a free key from now on (lease_xact.c).
 */
static void
end_offer(PendingOffer *p, bool committed)
{
	if (!dlock_wait_offer_end(&p->offer, committed, XactLastCommitEnd) &&
		committed && p->committing)
	{
		char		key[DLOCK_MAX_KEY_BYTES + 1];
		char		holder[DLOCK_MAX_HOLDER_BYTES + 1];

		text_to_cstring_buffer(p->key, key, sizeof(key));
		text_to_cstring_buffer(p->offer.holder, holder, sizeof(holder));
		dlock_abandon(key, holder, p->offer.owner, p->offer.token,
					  p->offer.expires_at);
	}
}

static void
lease_offer_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (pending_offers == NIL)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			settle_offers();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
			foreach(lc, pending_offers)
				end_offer(lfirst(lc), event == XACT_EVENT_COMMIT);
			/* the memory goes with TopTransactionContext */
			pending_offers = NIL;
			break;
		case XACT_EVENT_PRE_PREPARE:
			/* dlock_xact_alone() rules this out */
			elog(ERROR, "dlock: a transaction that handed a lease over cannot be prepared");
			break;
		default:
			break;
	}
}
