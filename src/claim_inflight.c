/*-------------------------------------------------------------------------
 *
 * claim_inflight.c
 *		Claims in flight: the key runs each backend's open claim is taking,
 *		and those of claims that committed a moment ago, in shared memory,
 *		so that other claimers read around them instead of fetching and
 *		skipping every one of those rows.
 *
 * Claimers take rows in key order, so while a claim's transaction is
 * open its rows (a run of consecutive keys, typically its whole batch)
 * sit right where every other claimer's scan starts.  FOR UPDATE SKIP
 * LOCKED skips them, but only after fetching each row from the heap and
 * trying its row lock.  Worse, once that claim commits its rows are
 * unlocked, and a claimer that read the live claims before the commit
 * locks them, only to find them taken when it looks their claims up; it
 * then holds their row locks to its own end, and the holder completing
 * them waits.  At 16 claimers on two cores a third of the candidates of
 * each claim were such rows.
 *
 * So a claim publishes, in its backend's slot, the runs of at least
 * DLOCK_MIN_SKIPPED_RUN consecutive integer keys among the rows it is
 * about to claim: rows its query locked FOR UPDATE and whose key locks it
 * holds, both to the end of its transaction.  At commit the runs move to
 * a ring of recent runs, numbered in commit order.  A claim takes the
 * ring's number (dlock_inflight_mark) before it reads the live claims,
 * and before each of its queries reads the runs in the slots and the
 * runs committed since that number: together with the live claims it
 * read, that covers every claim committed or being written.  A run of
 * consecutive integers holds no other key, and every row in it is taken,
 * so leaving it out returns exactly what reading it would have: nothing
 * from it.
 *
 * A slot is emptied when its transaction aborts, rolls back any
 * subtransaction or is prepared.  Emptying it early, a reader using runs
 * that went since, or the ring overwriting runs a slow claimer still
 * wanted, only means rows are read that need not have been, or skipped
 * that were taken a moment ago (what SKIP LOCKED itself does).  Nothing
 * here is needed for correctness, and none of it exists without
 * preloading.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"

#include "claim.h"
#include "shmem.h"

#define DLOCK_INFLIGHT_RUNS	4	/* per backend: a claim that read around
								 * others' batches holds a few runs */
#define DLOCK_RECENT_RUNS	512 /* runs of claims committed a moment ago */

typedef struct InflightSlot
{
	slock_t		mutex;
	Oid			dboid;			/* InvalidOid: empty */
	Oid			relid;
	int			nruns;
	DlockKeyRun runs[DLOCK_INFLIGHT_RUNS];
} InflightSlot;

/* the runs of a claim that committed, numbered in commit order */
typedef struct RecentRun
{
	uint64		seq;
	Oid			dboid;
	Oid			relid;
	DlockKeyRun run;
} RecentRun;

typedef struct InflightShared
{
	slock_t		recent_mutex;	/* protects next_seq and recent[] */
	uint64		next_seq;
	RecentRun	recent[DLOCK_RECENT_RUNS];
	int			nslots;
	InflightSlot slots[FLEXIBLE_ARRAY_MEMBER];
} InflightShared;

static InflightShared *inflight = NULL;

/* this backend's slot holds runs that must go when the transaction ends */
static bool published = false;
static bool callbacks_registered = false;

Size
dlock_inflight_shmem_size(void)
{
	return add_size(offsetof(InflightShared, slots),
					mul_size(MaxBackends, sizeof(InflightSlot)));
}

/* from the shmem_startup_hook, under AddinShmemInitLock */
void
dlock_inflight_shmem_startup(void)
{
	bool		found;

	inflight = ShmemInitStruct("dlock claims in flight",
							   dlock_inflight_shmem_size(), &found);
	if (!found)
	{
		SpinLockInit(&inflight->recent_mutex);
		inflight->next_seq = 1;
		memset(inflight->recent, 0, sizeof(inflight->recent));
		inflight->nslots = MaxBackends;
		for (int i = 0; i < inflight->nslots; i++)
		{
			SpinLockInit(&inflight->slots[i].mutex);
			inflight->slots[i].dboid = InvalidOid;
			inflight->slots[i].relid = InvalidOid;
			inflight->slots[i].nruns = 0;
		}
	}
}

static InflightSlot *
my_slot(void)
{
	if (inflight == NULL || MyProc == NULL ||
		dlock_my_procno() < 0 || dlock_my_procno() >= inflight->nslots)
		return NULL;
	return &inflight->slots[dlock_my_procno()];
}

/*
 * Empty this backend's slot; at commit, its runs go to the recent runs
 * first, for claimers that read the live claims before this commit.
 */
static void
clear_my_slot(bool committed)
{
	InflightSlot *s;
	DlockKeyRun runs[DLOCK_INFLIGHT_RUNS];
	int			nruns;
	Oid			dboid;
	Oid			relid;

	if (!published)
		return;
	published = false;
	s = my_slot();
	if (s == NULL)
		return;
	SpinLockAcquire(&s->mutex);
	nruns = s->nruns;
	dboid = s->dboid;
	relid = s->relid;
	memcpy(runs, s->runs, sizeof(DlockKeyRun) * nruns);
	SpinLockRelease(&s->mutex);

	/* into the ring before out of the slot: a reader never misses them */
	if (committed && nruns > 0)
	{
		SpinLockAcquire(&inflight->recent_mutex);
		for (int i = 0; i < nruns; i++)
		{
			RecentRun  *r = &inflight->recent[inflight->next_seq % DLOCK_RECENT_RUNS];

			r->seq = inflight->next_seq++;
			r->dboid = dboid;
			r->relid = relid;
			r->run = runs[i];
		}
		SpinLockRelease(&inflight->recent_mutex);
	}

	SpinLockAcquire(&s->mutex);
	s->dboid = InvalidOid;
	s->relid = InvalidOid;
	s->nruns = 0;
	SpinLockRelease(&s->mutex);
}

static void
inflight_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
			clear_my_slot(true);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PRE_PREPARE:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			clear_my_slot(false);
			break;
		default:
			break;
	}
}

/* a rolled back savepoint releases the row locks taken inside it */
static void
inflight_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		clear_my_slot(false);
}

/*
 * Publish runs[0..n-1] (consecutive integer keys of relid whose rows this
 * transaction holds FOR UPDATE) in this backend's slot, after those it
 * already published for the same table in this transaction; runs that do
 * not fit are left out.
 */
void
dlock_inflight_publish(Oid relid, const DlockKeyRun *runs, int n)
{
	InflightSlot *s = my_slot();

	if (s == NULL || n == 0)
		return;
	if (!callbacks_registered)
	{
		RegisterXactCallback(inflight_xact_callback, NULL);
		RegisterSubXactCallback(inflight_subxact_callback, NULL);
		callbacks_registered = true;
	}

	SpinLockAcquire(&s->mutex);
	if (s->relid != relid || s->dboid != MyDatabaseId)
	{
		/* one table at a time: another table's runs are dropped */
		s->nruns = 0;
		s->dboid = MyDatabaseId;
		s->relid = relid;
	}
	for (int i = 0; i < n && s->nruns < DLOCK_INFLIGHT_RUNS; i++)
		s->runs[s->nruns++] = runs[i];
	SpinLockRelease(&s->mutex);
	published = true;
}

/*
 * Where the recent runs are now: a claim takes this mark before it reads
 * the live claims, and later asks for the runs committed since.
 */
uint64
dlock_inflight_mark(void)
{
	uint64		seq;

	if (inflight == NULL)
		return 0;
	SpinLockAcquire(&inflight->recent_mutex);
	seq = inflight->next_seq;
	SpinLockRelease(&inflight->recent_mutex);
	return seq;
}

/*
 * The runs of relid that other transactions (and this one) hold in
 * flight, and those of claims that committed since mark (they may be
 * missing from live claims read after the mark was taken), into runs
 * (room for dlock_inflight_max()); returns how many.  Unordered, and
 * they may overlap.  Recent runs overwritten since are left out.
 */
int
dlock_inflight_read(Oid relid, uint64 mark, DlockKeyRun *runs)
{
	int			n = 0;

	if (inflight == NULL)
		return 0;
	for (int i = 0; i < inflight->nslots; i++)
	{
		InflightSlot *s = &inflight->slots[i];

		/* an unlocked look first: most slots are empty or another table's */
		if (s->relid != relid)
			continue;
		SpinLockAcquire(&s->mutex);
		if (s->relid == relid && s->dboid == MyDatabaseId)
		{
			memcpy(&runs[n], s->runs, sizeof(DlockKeyRun) * s->nruns);
			n += s->nruns;
		}
		SpinLockRelease(&s->mutex);
	}

	SpinLockAcquire(&inflight->recent_mutex);
	for (uint64 seq = Max(mark, inflight->next_seq > DLOCK_RECENT_RUNS ?
						  inflight->next_seq - DLOCK_RECENT_RUNS : 1);
		 seq < inflight->next_seq; seq++)
	{
		RecentRun  *r = &inflight->recent[seq % DLOCK_RECENT_RUNS];

		if (r->relid == relid && r->dboid == MyDatabaseId)
			runs[n++] = r->run;
	}
	SpinLockRelease(&inflight->recent_mutex);
	return n;
}

/* the most runs dlock_inflight_read can return */
int
dlock_inflight_max(void)
{
	return inflight == NULL ? 0 :
		inflight->nslots * DLOCK_INFLIGHT_RUNS + DLOCK_RECENT_RUNS;
}
