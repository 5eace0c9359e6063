/*-------------------------------------------------------------------------
 *
 * claim_unheld.c
 *		dlock_claim_unheld: whether a live claim holds a row, checked by a
 *		claim query's scan on every row it reaches (or by the caller's
 *		own SQL), and what that scan found at the head of its order.
 *
 * The check is one probe of dlock.claim's primary key (claim_store_probe.c),
 * before the row lock, so a claim costs what its scan costs, whatever the
 * number of live claims on the table.  It reads with a dirty snapshot: a
 * claim being written or given back by an open transaction counts as
 * held, and its row is stepped over without a row lock or a wait.  A
 * claim query (claim_query.c) passes its ticket, and its rows are checked
 * through the probe its ClaimScan keeps open for the query; held rows met
 * at the head of its order are noted and published for the step hints
 * (claim_hint.c), and rows inside a stretch another backend has published
 * are held without a probe.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/datum.h"
#include "utils/timestamp.h"

#include "claim/claim.h"
#include "claim/claim_int.h"

/* the claims running their query now, innermost first */
static ClaimScan *active_claims = NULL;

/* the claim's scan checked the row with primary key value: note it */
static void
note_checked(ClaimScan *a, bool held, TimestampTz settled_until,
			 Datum value)
{
	const ClaimTarget *t = a->target;
	MemoryContext old;

	if (!a->leading)
		return;
	if (!held || settled_until == 0)
	{
		a->leading = false;
		return;
	}
	a->nlead++;
	a->lead_until = Min(a->lead_until, settled_until);
	if (!t->pk_byval && a->nlead > 1)
		pfree(DatumGetPointer(a->lead_last));
	old = MemoryContextSwitchTo(a->cxt);
	a->lead_last = datumCopy(value, t->pk_byval, t->pk_typlen);
	MemoryContextSwitchTo(old);
	/* claims scanning the same stretch now need not check these rows */
	if (a->nlead % 128 == 0)
		dlock_claim_hint_learn(&a->hint, a->nlead, a->lead_last, a->lead_until);
}

/*
 * The ticket of this backend's claim queries: a secret that dlock_claim's
 * own query passes dlock_claim_unheld as a parameter ($2), which SQL in a
 * caller's filter cannot name (filters may not refer to parameters).
 */
int64
dlock_claim_ticket(void)
{
	static int64 ticket = 0;

	while (ticket == 0)
	{
		if (!pg_strong_random(&ticket, sizeof(ticket)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random number")));
	}
	return ticket;
}

/*
 * The running claim scan of table relid, key type type, that ticket names;
 * a ticket that is not this backend's claim ticket, or a table no claim of
 * this backend is scanning, is an error: only the claim query can pass it.
 */
static ClaimScan *
scan_of_ticket(Oid relid, Oid type, int64 ticket)
{
	ClaimScan  *a = NULL;

	if (ticket == dlock_claim_ticket())
		for (a = active_claims; a != NULL; a = a->next)
			if (a->target->claim_relid == relid && a->target->pk_type == type)
				break;
	if (a == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dlock_claim_unheld with a ticket is only for dlock_claim's own query"),
				 errhint("Call dlock_claim_unheld(tbl, key) without a ticket.")));
	return a;
}

/* whether a live or poisoned claim holds the row value of scan a */
static bool
scan_row_held(ClaimScan *a, Datum value, Oid type)
{
	const ClaimTarget *t = a->target;
	TimestampTz settled_until;
	text	   *key;
	int			io;
	bool		held;

	if (a->leading && dlock_claim_hint_covers(&a->hint, value, &settled_until))
	{
		note_checked(a, true, settled_until, value);
		return true;
	}
	if (!t->io_needs_pin)
		key = dlock_claim_key_id(dlock_claim_key_text(t, value, type)); /* the hot path */
	else
	{
		io = dlock_claim_io_begin(t, type);
		key = dlock_claim_key_id(dlock_claim_key_text(t, value, type));
		dlock_claim_io_end(io);
	}
	held = dlock_claim_probe_held(a->probe, key, &settled_until);
	note_checked(a, held, settled_until, value);
	return held;
}

/*
 * Whether a live or poisoned claim holds the row of table relid whose
 * primary key is value (of type type), asked by dlock_claim's own query with
 * its ticket (dlock_claim_unheld(tbl, key, ticket)): the check its scan runs
 * on every row it reaches, through the claim's open probe.  Runs no SQL.
 */
bool
dlock_claim_row_held_in_claim(Oid relid, Datum value, Oid type, int64 ticket)
{
	return scan_row_held(scan_of_ticket(relid, type, ticket), value, type);
}

/*
 * The same for a claim with group_by (dlock_claim_unheld(tbl, key, ticket,
 * grp)), grp the text of the row's group_by value (NULL: a NULL value): a
 * row of a group that is full, or that has had its share of this round
 * (fair), counts as held, without a probe (claim_group.c).  Runs no SQL
 * but the first time a scan meets a group: one scan of dlock.claim's
 * claim_group index.
 */
bool
dlock_claim_row_held_in_group(Oid relid, Datum value, Oid type, int64 ticket,
							  text *grp)
{
	ClaimScan  *a = scan_of_ticket(relid, type, ticket);
	void	   *entry;

	if (a->groups == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dlock_claim_unheld with a group is only for dlock_claim's own query with group_by")));
	if (!dlock_claim_group_admits(a->groups, dlock_claim_group_id(grp), &entry))
	{
		/* not a held stretch the step hints could skip */
		note_checked(a, false, 0, value);
		return true;
	}
	if (scan_row_held(a, value, type))
		return true;
	dlock_claim_group_passed(entry);
	return false;
}

/*
 * Whether a live or poisoned claim holds the row of table relid whose
 * primary key is value (of type type), asked from SQL of the caller's
 * (dlock_claim_unheld(tbl, key)): it needs what dlock_claim needs of the
 * caller, and tells only of rows the caller can see: a row it cannot see
 * (row-level security), or that does not exist, is "held".
 */
bool
dlock_claim_row_held(Oid relid, Datum value, Oid type)
{
	const ClaimTarget *t;
	DlockClaimProbe *probe;
	TimestampTz settled_until;
	text	   *key;
	int			io;
	bool		held;

	/* called from SQL by the user, with a key written their way */
	t = dlock_claim_target_for_rel(relid, "dlock_claim_unheld()");
	if (!dlock_claim_row_visible(t, value, type))
		return true;
	io = dlock_claim_io_begin(t, type);
	key = dlock_claim_key_text_of_arg(t, value, type, NULL);
	dlock_claim_io_end(io);
	probe = dlock_claim_probe_begin(t->claim_relid);
	held = dlock_claim_probe_held(probe, key, &settled_until);
	dlock_claim_probe_end(probe);
	return held;
}

/*
 * The claim query of a claim on table t starts: its rows are checked
 * through s until dlock_claim_scan_end.  kept is the step hint of its
 * query text sql in order dir (claim_query.c keeps it with the plan; dir
 * 0: its order cannot step over held rows).  Returns true when the hint
 * holds: then the query runs after s->hint.bound, and the stretch its scan
 * finds continues the one the hint vouches for.
 */
bool
dlock_claim_scan_begin(ClaimScan *s, const ClaimTarget *t, ClaimHint *kept,
					   int dir, const char *sql)
{
	bool		bounded;

	s->target = t;
	s->probe = dlock_claim_probe_begin(t->claim_relid);
	s->cxt = CurrentMemoryContext;
	bounded = dlock_claim_hint_begin(&s->hint, kept, t, dir, sql);
	s->leading = s->hint.enabled;
	s->nlead = 0;
	s->lead_until = bounded ? s->hint.until : DT_NOEND;
	s->lead_last = (Datum) 0;
	s->groups = NULL;
	s->next = active_claims;
	active_claims = s;
	return bounded;
}

/*
 * The claim query ended; failed: with an error, whose (sub)transaction
 * abort closes the probe's scan and relations.
 */
void
dlock_claim_scan_end(ClaimScan *s, bool failed)
{
	active_claims = s->next;
	if (failed)
		return;
	/* a stretch long enough at the head of the order: publish it */
	if (s->nlead > 0)
		dlock_claim_hint_learn(&s->hint, s->nlead, s->lead_last, s->lead_until);
	dlock_claim_probe_end(s->probe);
}
