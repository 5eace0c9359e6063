/*-------------------------------------------------------------------------
 *
 * claim_hint.c
 *		Step hints: where the stretch of held rows at the head of a claim
 *		query's order ends, learned by one backend's claim and used by the
 *		claims of every backend; and the count of give-backs that ends them.
 *		Owns both in shared memory.
 *
 * A claim query in the primary key's order (claim_query.c) whose scan
 * meets at least DLOCK_STEP_MIN_ROWS rows held by settled claims before
 * the first row it can take publishes the last of them, with the time the
 * first of their claims lapses: the next claims of any backend with the
 * same query text on the same table start after it (a bound on the primary
 * key), as long as none of those claims can have changed: until that time
 * (and at most DLOCK_STEP_HORIZON_US after it was learned), no claim has
 * been given back (dlock_unclaim, dlock_reset_claims, dlock_release_all,
 * and the DDL that moves claims: the give-back count), and no transaction
 * that published a hint rolled back or was prepared (its own claims may
 * have been in the stretch: its rollback, or its PREPARE, which may yet be
 * rolled back, counts as a give-back).  Rows that come to match
 * the filter inside such a stretch (inserted, or updated back) are found
 * once the hint lapses.
 *
 * A learning scan publishes as it goes (every HINT_PUBLISH_EVERY rows of
 * its stretch), and answers a row inside the stretch another backend has
 * published without probing dlock.claim: claims that start together over
 * a long stretch (workers that come back after a crash) check each held
 * row about once between them, not once each.
 *
 * The table has HINT_SLOTS slots, each found by its query text's hash
 * among HINT_PROBE places; a key longer than HINT_MAX_BOUND bytes has no
 * hint.  Without shared memory (dlock not preloaded) there are no hints.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "claim/claim.h"
#include "claim/claim_int.h"
#include "compat.h"

#define DLOCK_STEP_MIN_ROWS		1000
#define DLOCK_STEP_HORIZON_US	(10 * USECS_PER_SEC)
#define HINT_SLOTS				64
#define HINT_PROBE				4
#define HINT_MAX_BOUND			128
#define HINT_PUBLISH_EVERY		128
#define HINT_READ_EVERY			64

typedef struct HintSlot
{
	slock_t		mutex;
	bool		used;
	Oid			dbid;
	Oid			relid;
	Oid			pk_type;
	int			dir;
	uint64		text_hash;
	uint64		returns;		/* the give-back count it was learned under */
	TimestampTz until;
	TimestampTz learned_at;
	int			len;			/* bytes of a by-reference bound */
	Datum		value;			/* a by-value bound */
	char		bytes[HINT_MAX_BOUND];
} HintSlot;

typedef struct HintShared
{
	pg_atomic_uint64 returns;
	HintSlot	slots[HINT_SLOTS];
} HintShared;

static HintShared *shared = NULL;

/* this transaction published a hint: its rollback is a give-back */
static bool published_in_xact = false;
static bool callbacks_registered = false;

/* A claim was given back: every hint lapses. */
void
dlock_claim_returns_bump(void)
{
	if (shared != NULL)
		pg_atomic_fetch_add_u64(&shared->returns, 1);
}

/*
 * A transaction that published a hint ends.  If it rolls back, its own
 * claims in the stretch vanish: a give-back.  If it is prepared, they may
 * still vanish (ROLLBACK PREPARED, from any session or after a restart,
 * runs no callback of this backend), so its hints lapse at PREPARE too:
 * conservative, a COMMIT PREPARED just has them learned again.
 */
static void
hint_xact_callback(XactEvent event, void *arg)
{
	if (published_in_xact &&
		(event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE))
		dlock_claim_returns_bump();
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
		published_in_xact = false;
}

/* a savepoint rolled back: the claims it made are gone */
static void
hint_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && published_in_xact)
		dlock_claim_returns_bump();
}

/* shmem_request_hook (dlock.c) */
void
dlock_claim_hint_shmem_request(void)
{
	RequestAddinShmemSpace(sizeof(HintShared));
}

/* shmem_startup_hook (dlock.c), under AddinShmemInitLock */
void
dlock_claim_hint_shmem_startup(void)
{
	bool		found;

	shared = ShmemInitStruct("dlock claim step hints", sizeof(HintShared),
							 &found);
	if (!found)
	{
		pg_atomic_init_u64(&shared->returns, 0);
		for (int i = 0; i < HINT_SLOTS; i++)
		{
			SpinLockInit(&shared->slots[i].mutex);
			shared->slots[i].used = false;
		}
	}
}

/*
 * The hint of a kept claim plan: query text sql on table t, stepping in
 * direction dir (0: its order cannot step; then it never has a hint).
 */
static void
hint_init(ClaimHint *h, const ClaimTarget *t, int dir, const char *sql)
{
	TypeCacheEntry *tce = lookup_type_cache(t->pk_type,
											TYPECACHE_CMP_PROC_FINFO);
	Oid			typid;
	int32		typmod;

	memset(h, 0, sizeof(ClaimHint));
	h->ready = true;
	h->dir = dir;
	h->relid = t->relid;
	h->pk_type = t->pk_type;
	h->text_hash = hash_bytes_extended((const unsigned char *) sql,
									   strlen(sql), t->relid);
	h->typlen = t->pk_typlen;
	h->byval = t->pk_byval;
	h->cmp = OidIsValid(tce->cmp_proc) ? &tce->cmp_proc_finfo : NULL;
	get_atttypetypmodcoll(t->relid, t->pk_attnum, &typid, &typmod,
						  &h->collation);
	h->enabled = shared != NULL && dir != 0 && h->cmp != NULL &&
		(h->byval || h->typlen == -1);
	if (h->enabled && !callbacks_registered)
	{
		RegisterXactCallback(hint_xact_callback, NULL);
		RegisterSubXactCallback(hint_subxact_callback, NULL);
		callbacks_registered = true;
	}
}

/*
 * A run of the query begins, in the memory context it runs in: count the
 * give-backs before it runs, and make room for a by-reference bound.
 */
static void
hint_start(ClaimHint *h)
{
	h->have = false;
	h->reads = 0;
	h->bound = (Datum) 0;
	if (!h->enabled)
		return;
	h->returns = pg_atomic_read_u64(&shared->returns);
	if (!h->byval)
		h->bound = PointerGetDatum(palloc(HINT_MAX_BOUND));
}

static bool
slot_is(const HintSlot *s, const ClaimHint *h)
{
	return s->used && s->dbid == MyDatabaseId && s->relid == h->relid &&
		s->pk_type == h->pk_type && s->dir == h->dir &&
		s->text_hash == h->text_hash;
}

/* Read the shared hint of h's query into h: true if one holds. */
static bool
hint_read(ClaimHint *h)
{
	int			home;
	TimestampTz now;

	h->reads = 0;
	if (!h->enabled)
		return false;
	home = (int) (h->text_hash % HINT_SLOTS);
	now = GetCurrentTimestamp();
	for (int i = 0; i < HINT_PROBE; i++)
	{
		HintSlot   *s = &shared->slots[(home + i) % HINT_SLOTS];
		bool		found = false;

		SpinLockAcquire(&s->mutex);
		if (slot_is(s, h) && s->returns == h->returns && s->until > now)
		{
			found = true;
			h->until = s->until;
			if (h->byval)
				h->bound = s->value;
			else
				memcpy(DatumGetPointer(h->bound), s->bytes, s->len);
		}
		SpinLockRelease(&s->mutex);
		if (found)
		{
			/* a give-back since the run began ends it too */
			h->have = pg_atomic_read_u64(&shared->returns) == h->returns;
			return h->have;
		}
	}
	h->have = false;
	return false;
}

/*
 * A run of the claim query with text sql on table t, in order dir (0: it
 * cannot step), begins: run becomes its view of the hint whose key kept
 * holds (made on the first run).  True when the hint holds: every row up
 * to run->bound in the order was held, until run->until.
 */
bool
dlock_claim_hint_begin(ClaimHint *run, ClaimHint *kept, const ClaimTarget *t,
					   int dir, const char *sql)
{
	if (!kept->ready)
		hint_init(kept, t, dir, sql);
	*run = *kept;
	hint_start(run);
	return hint_read(run);
}

/* a against b in the query's order: < 0 if a comes first */
static int
order_cmp(const ClaimHint *h, Datum a, Datum b)
{
	int32		c = DatumGetInt32(FunctionCall2Coll(h->cmp, h->collation, a, b));

	return h->dir > 0 ? c : -c;
}

/*
 * The run's scan has checked nlead held rows at the head of its order
 * (after the bound it started from, if any), the last with primary key
 * last, all held until at least until: publish that stretch, if it is
 * long enough and reaches further than the hint last read.
 */
void
dlock_claim_hint_learn(ClaimHint *h, int64 nlead, Datum last,
					   TimestampTz until)
{
	TimestampTz now;
	int			len = 0;
	int			home;
	HintSlot   *pick = NULL;

	if (!h->enabled || nlead < DLOCK_STEP_MIN_ROWS)
		return;
	if (h->have && order_cmp(h, last, h->bound) <= 0)
		return;
	if (!h->byval)
	{
		len = VARSIZE_ANY(DatumGetPointer(last));
		if (len > HINT_MAX_BOUND)
			return;
	}
	now = GetCurrentTimestamp();
	until = Min(until, now + DLOCK_STEP_HORIZON_US);
	home = (int) (h->text_hash % HINT_SLOTS);
	/* its own slot, else a free or lapsed one, else the oldest */
	for (int i = 0; i < HINT_PROBE; i++)
	{
		HintSlot   *s = &shared->slots[(home + i) % HINT_SLOTS];

		if (slot_is(s, h))
		{
			pick = s;
			break;
		}
		if (pick == NULL || !s->used || s->until <= now ||
			(pick->used && pick->until > now && s->learned_at < pick->learned_at))
			pick = s;
	}
	SpinLockAcquire(&pick->mutex);
	pick->used = true;
	pick->dbid = MyDatabaseId;
	pick->relid = h->relid;
	pick->pk_type = h->pk_type;
	pick->dir = h->dir;
	pick->text_hash = h->text_hash;
	pick->returns = h->returns;
	pick->until = until;
	pick->learned_at = now;
	pick->len = len;
	if (h->byval)
		pick->value = last;
	else
		memcpy(pick->bytes, DatumGetPointer(last), len);
	SpinLockRelease(&pick->mutex);
	published_in_xact = true;
}

/*
 * Whether the row with primary key value, met by a scan still in the held
 * stretch at the head of its order, lies inside the stretch another
 * backend has published (read again every HINT_READ_EVERY rows): then it
 * is held, until *until, without looking it up.
 */
bool
dlock_claim_hint_covers(ClaimHint *h, Datum value, TimestampTz *until)
{
	if (!h->enabled)
		return false;
	if (++h->reads >= HINT_READ_EVERY)
		(void) hint_read(h);
	if (!h->have || order_cmp(h, value, h->bound) > 0)
		return false;
	*until = h->until;
	return true;
}
