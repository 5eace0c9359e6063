/*-------------------------------------------------------------------------
 *
 * claim_group.c
 *		Groups of a claim (group_by, per_group, fair): a row's group as
 *		dlock.claim keeps it, what a claim call knows of its groups (a
 *		backend-local hash, counted once per group per scan of the claim
 *		query), the per-row check's part (claim_unheld.c calls it) and a
 *		batch's part (claim_batch.c): the group's lock and its recount.
 *
 * The cap, per_group, is kept by the batch: for each group among its
 * candidates, in the order of the groups' texts, it takes the group's lock
 * (class DG, on the table and the group's text), counts the group's
 * occupying claims with a dirty snapshot (committed ones, and those other
 * transactions are writing or deleting right now: a claim written under
 * the lock and not yet committed counts), and lets through at most
 * per_group minus that count, in the order of the candidates (the
 * caller's order_by).  The lock is held only while the batch counts and
 * writes, and given back once its claims are written (not at the end of
 * the transaction): the next holder's dirty count sees those claims,
 * committed or not, so the count and the claims written on it are
 * serialized.  A claim being written that then rolls back was counted
 * while it lasted: the cap errs on the safe side.  Held to the end of the
 * transaction instead, the locks made claimers of a table with few groups
 * take turns (16 workers over 100 groups: 0.03x the rows per second of
 * claims without groups).  The locks are taken in one order, that of the
 * groups' texts, and nothing else is waited for while they are held but
 * the row lock of a sweep's short transaction: claimers cannot wait for
 * each other in a cycle.

 * The scan's part is an estimate that saves work: a group whose
 * occupying claims (dirty snapshot: claims being written count too) reach
 * per_group has its rows rejected by the per-row check with one hash
 * look-up each, so a full group's backlog costs no index probes.  With
 * fair, the check also lets at most a round's cap of rows of each group
 * through (counting the rows this call has claimed of it and the rows
 * this scan passed), so a batch is filled round-robin across groups in
 * the order of their first rows; the caller raises the cap and scans
 * again while the batch is not full and some group was capped.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "claim/claim_int.h"
#include "claim/claim.h"

/* one group of a claim call */
typedef struct ClaimGroupEntry
{
	text	   *grp;			/* the hash key: its dlock_claim_group_id */
	uint64		scan;			/* the scan that last counted it */
	int			occupied;		/* its occupying claims, as that scan counted */
	int			passed;			/* rows that scan let through */
	int			taken;			/* rows this call claimed of it */
	uint64		capped;			/* the last scan that turned a row away at
								 * the round's cap (fair) */
} ClaimGroupEntry;

/* the group text of NULL values: the digest mark alone (digests are longer) */
static const char null_group[1] = {DLOCK_CLAIM_KEY_DIGEST_MARK};

/*
 * A row's group as dlock.claim's grp keeps it, from the text form of its
 * group_by value (NULL: the value was NULL, and all NULL values form one
 * group): the text itself, or the mark and its digest when it is long or
 * begins with the mark, as claim keys are made (dlock_claim_key_id); the
 * NULL group is the mark alone, which no other group can be.
 */
text *
dlock_claim_group_id(text *value)
{
	if (value == NULL)
		return cstring_to_text_with_len(null_group, 1);
	return dlock_claim_key_id(value);
}

static uint32
group_hash(const void *key, Size keysize)
{
	text	   *t = *(text *const *) key;

	return hash_bytes((const unsigned char *) VARDATA_ANY(t),
					  VARSIZE_ANY_EXHDR(t));
}

static int
group_match(const void *key1, const void *key2, Size keysize)
{
	return dlock_text_cmp(key1, key2);
}

/*
 * The groups of a claim call, in the current memory context, or NULL
 * for a claim without group_by.
 */
ClaimGroups *
dlock_claim_groups_begin(const ClaimRequest *req)
{
	ClaimGroups *g;
	HASHCTL		ctl;

	if (req->group_by == NULL)
		return NULL;
	g = palloc0(sizeof(ClaimGroups));
	g->cxt = CurrentMemoryContext;
	g->relid = req->target->claim_relid;
	g->per_group = req->per_group;
	g->cap = req->fair ? 1 : 0;
	ctl.keysize = sizeof(text *);
	ctl.entrysize = sizeof(ClaimGroupEntry);
	ctl.hash = group_hash;
	ctl.match = group_match;
	ctl.hcxt = g->cxt;
	g->tab = hash_create("dlock claim groups", 64, &ctl,
						 HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
	return g;
}

/* A scan of the claim query starts: every group is counted anew. */
void
dlock_claim_groups_scan_begin(ClaimGroups *g)
{
	g->scan++;
	g->ncapped = 0;
	g->now = GetCurrentTimestamp();
}

static ClaimGroupEntry *
group_entry(ClaimGroups *g, text *grp)
{
	bool		found;
	ClaimGroupEntry *e = hash_search(g->tab, &grp, HASH_ENTER, &found);

	if (!found)
	{
		MemoryContext old = MemoryContextSwitchTo(g->cxt);

		e->grp = DatumGetTextPCopy(PointerGetDatum(grp));
		MemoryContextSwitchTo(old);
		e->scan = 0;
		e->taken = 0;
		e->capped = 0;
	}
	return e;
}

/*
 * The per-row check's part (claim_unheld.c), before the row's probe:
 * whether a row of group grp may pass in this scan; if so, *entry is its
 * group, to be given to dlock_claim_group_passed if the row is unheld.
 */
bool
dlock_claim_group_admits(ClaimGroups *g, text *grp, void **entry)
{
	ClaimGroupEntry *e = group_entry(g, grp);

	*entry = e;
	if (e->scan != g->scan)
	{
		e->scan = g->scan;
		e->passed = 0;
		e->occupied = g->per_group > 0 ?
			dlock_claim_store_group_count(g->relid, e->grp, true, g->now) : 0;
	}
	if (g->per_group > 0 && e->occupied >= g->per_group)
		return false;
	if (g->cap > 0 && e->taken + e->passed >= g->cap)
	{
		/* this group has more rows: a next round may take them */
		if (e->capped != g->scan)
		{
			e->capped = g->scan;
			g->ncapped++;
		}
		return false;
	}
	return true;
}

/* the row of that group was unheld: it passed */
void
dlock_claim_group_passed(void *entry)
{
	((ClaimGroupEntry *) entry)->passed++;
}

/*
 * The rows of the batch c[0..n-1] that were claimed count for their
 * groups' shares (fair).
 */
void
dlock_claim_groups_taken(ClaimGroups *g, ClaimCandidate *c, int n)
{
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (c[i].claimed)
			group_entry(g, c[i].grp)->taken++;
	}
}

/*
 * fair: a scan that returned fewer rows than the need turned some groups
 * away at the round's cap: raise the cap by need shared among those
 * groups (at least 1), and say whether to scan again.  Each round reads
 * the rows in order before the batch is full once, so a call costs
 * about rounds times that: round 1 lets one row per group through, and
 * the rounds after it grow the cap from how many groups were capped.
 */
bool
dlock_claim_groups_next_round(ClaimGroups *g, int need)
{
	if (g == NULL || g->cap == 0 || g->ncapped == 0 || need <= 0)
		return false;
	g->cap += Max(1, (need + g->ncapped - 1) / g->ncapped);
	return true;
}

static int
candidate_group_cmp(const void *a, const void *b, void *arg)
{
	ClaimCandidate *c = (ClaimCandidate *) arg;
	int			i = *(const int *) a;
	int			j = *(const int *) b;
	int			cmp = dlock_text_cmp(&c[i].grp, &c[j].grp);

	return cmp != 0 ? cmp : (i > j) - (i < j);
}

/*
 * The batch's part, before its first look (claim_batch.c): per group of
 * the candidates c[0..n-1], its lock taken (in the groups' order), its
 * occupying claims counted with a dirty snapshot, and at most per_group
 * minus that many of its candidates kept, the first in the candidates'
 * order; the others are dropped (c[i].dropped).  Returns the locks held,
 * *nlocks of them, which the batch gives back with
 * dlock_claim_group_unlock once its claims are written.
 */
DlockKeyLock *
dlock_claim_group_limit(const ClaimRequest *req, ClaimCandidate *c, int n,
						int *nlocks)
{
	Oid			relid = req->target->claim_relid;
	int		   *order;
	int			k = 0;
	DlockKeyLock *locks;

	*nlocks = 0;
	if (req->group_by == NULL || req->per_group <= 0 || n == 0)
		return NULL;
	locks = palloc(sizeof(DlockKeyLock) * n);
	order = palloc(sizeof(int) * n);
	for (int i = 0; i < n; i++)
		order[i] = i;
	qsort_arg(order, n, sizeof(int), candidate_group_cmp, c);
	while (k < n)
	{
		text	   *grp = c[order[k]].grp;
		DlockKeyLock kl = dlock_key_for_group(relid, VARDATA_ANY(grp),
											  VARSIZE_ANY_EXHDR(grp));
		int			room;

		CHECK_FOR_INTERRUPTS();
		dlock_key_lock(&kl, ExclusiveLock);
		room = req->per_group -
			dlock_claim_store_group_count(relid, grp, true,
										  GetCurrentTimestamp());
		/* nothing will be written in it: no need to keep it */
		if (room <= 0)
			dlock_key_unlock(&kl, ExclusiveLock);
		else
			locks[(*nlocks)++] = kl;
		for (; k < n && dlock_text_cmp(&c[order[k]].grp, &grp) == 0; k++)
			c[order[k]].dropped = room-- <= 0;
	}
	pfree(order);
	return locks;
}

/* Give back the group locks dlock_claim_group_limit took. */
void
dlock_claim_group_unlock(DlockKeyLock *locks, int nlocks)
{
	for (int i = 0; i < nlocks; i++)
		dlock_key_unlock(&locks[i], ExclusiveLock);
}
