/*-------------------------------------------------------------------------
 *
 * watch_registry.c
 *		The registry of watched keys in shared memory: which session watches
 *		which key, on which channel, as which role, and up to when its key's
 *		expiries were sent to it.  The lowest layer of the watch family:
 *		it calls no other watch file; they call it.
 *
 * One entry per (session, key) holds the key, the session's notification
 * channel (a random name: watch_session.c), the role that called
 * dlock_watch, and the time up to which the expiries of its key's holders
 * were sent to it (so that an expiry goes out once per entry, whichever
 * holder of a semaphore it was: watch_notify.c moves that mark).  The
 * session puts its entries in and takes them out (watch_session.c, which
 * makes that transactional); the changing transactions (watch_notify.c)
 * and the expiry worker (watch_worker.c, watch_expiry.c) read them.  Who
 * may be told of a lease is decided here too (dlock_watch_role_sees), for
 * the notifications and for dlock_leader alike.
 *
 * The whole registry lives in shared memory: it needs dlock in
 * shared_preload_libraries.  Entries go when their session ends, or all at
 * once when a crash resets shared memory (the sessions are gone too).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "compat.h"
#include "watch/watch_int.h"

/* one (session, key) */
typedef struct WatchEntry
{
	bool		in_use;
	uint32		generation;		/* changes each time the entry is reused */
	Oid			dboid;
	int			procno;			/* the watching backend */
	int			pid;
	Oid			role;			/* the role that called dlock_watch */
	uint64		hash;			/* the key's lock hash (base_keylock.c) */
	pg_atomic_uint64 expired_through;	/* expiries up to this time are sent */
	char		channel[NAMEDATALEN];
	int			keylen;
	char		key[DLOCK_MAX_KEY_BYTES];
} WatchEntry;

/* how many abandoned grants' releases the registry remembers */
#define RELEASES_KEPT	64

/* an abandoned hand-over grant whose release went to its key's watchers */
typedef struct SentRelease
{
	Oid			dboid;
	int64		token;
} SentRelease;

typedef struct WatchRegistry
{
	LWLock	   *lock;			/* protects all but the atomics */
	pg_atomic_uint32 nentries;	/* entries in use; read without the lock */
	uint32		next_generation;
	int			max_entries;
	int			next_release;	/* the oldest in released[], overwritten next */
	SentRelease released[RELEASES_KEPT];
} WatchRegistry;

#define DLOCK_WATCH_TRANCHE "dlock watch"

static int	dlock_max_watches = 1024;
static int	dlock_max_watches_per_role = 256;
static int	dlock_superuser_reserved_watches = 16;

/* NULL without shared memory (dlock not preloaded) */
static WatchRegistry *reg = NULL;
static WatchEntry *entries = NULL;

bool
dlock_watch_available(void)
{
	return reg != NULL;
}

static bool
entry_is(const WatchEntry *e, Oid dboid, uint64 hash, const char *key, int len)
{
	return e->in_use && e->dboid == dboid && e->hash == hash &&
		e->keylen == len && memcmp(e->key, key, len) == 0;
}

static bool
entry_is_mine(const WatchEntry *e)
{
	return e->in_use && e->procno == dlock_my_procno() && e->pid == MyProcPid;
}

/* this session's entry for key, or -1; caller holds the lock */
static int
my_entry_locked(const char *key, int len)
{
	uint64		hash = dlock_key_for_text(DLOCK_CLASS_LEASE, key, len).hash;

	for (int i = 0; i < reg->max_entries; i++)
		if (entry_is(&entries[i], MyDatabaseId, hash, key, len) &&
			entry_is_mine(&entries[i]))
			return i;
	return -1;
}

static void
free_entry_locked(int i)
{
	entries[i].in_use = false;
	pg_atomic_fetch_sub_u32(&reg->nentries, 1);
}

/* ---- this session's entries (watch_session.c) ---- */

/*
 * How many entries role has; caller holds the lock.
 */
static int
role_count_locked(Oid role)
{
	int			taken = 0;

	for (int i = 0; i < reg->max_entries; i++)
		if (entries[i].in_use && entries[i].role == role)
			taken++;
	return taken;
}

/*
 * The error of a role that may not take one more entry (the check is in
 * dlock_watch_entry_add): nfree entries are unused, and the role has taken
 * of them.  Called without the lock.
 */
static void
report_no_room(Oid role, int nfree, int taken)
{
	if (taken >= dlock_max_watches_per_role)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many watched keys for role \"%s\"",
						GetUserNameFromId(role, false)),
				 errdetail("Role \"%s\" watches %d keys, the most dlock.max_watches_per_role (%d) allows one role.",
						   GetUserNameFromId(role, false), taken,
						   dlock_max_watches_per_role),
				 errhint("Unwatch keys, or raise dlock.max_watches_per_role.")));
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("too many watched keys"),
			 errdetail("All sessions together watch %d keys of the %d dlock.max_watches allows; the last %d are reserved for superusers (dlock.superuser_reserved_watches).",
					   reg->max_entries - nfree, reg->max_entries,
					   dlock_superuser_reserved_watches),
			 errhint("Unwatch keys, or raise dlock.max_watches (needs a restart).")));
}

/*
 * Put this session's entry for key in: on channel, as the current role,
 * with leases that ran out up to expired_through no news to it.  False
 * when the session has an entry for key already.  A registry that is full,
 * or a role over its share, is an error.
 */
bool
dlock_watch_entry_add(const char *key, int len, const char *channel,
					  TimestampTz expired_through)
{
	uint64		hash = dlock_key_for_text(DLOCK_CLASS_LEASE, key, len).hash;
	WatchEntry *e = NULL;
	int			nfree = 0;
	Oid			role = GetUserId();
	bool		bound = !superuser_arg(role);
	int			taken = 0;

	LWLockAcquire(reg->lock, LW_EXCLUSIVE);
	if (my_entry_locked(key, len) >= 0)
	{
		LWLockRelease(reg->lock);
		return false;
	}
	for (int i = 0; i < reg->max_entries; i++)
		if (!entries[i].in_use)
		{
			if (e == NULL)
				e = &entries[i];
			nfree++;
		}
	if (e == NULL)
	{
		LWLockRelease(reg->lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many watched keys"),
				 errdetail("All sessions together watch %d keys, the most dlock.max_watches allows.",
						   reg->max_entries),
				 errhint("Unwatch keys, or raise dlock.max_watches (needs a restart).")));
	}
	/*
	 * Other roles than superusers: at most dlock.max_watches_per_role
	 * each, and none of the last dlock.superuser_reserved_watches (as
	 * superuser_reserved_connections).
	 */
	if (bound &&
		((taken = role_count_locked(role)) >= dlock_max_watches_per_role ||
		 nfree <= dlock_superuser_reserved_watches))
	{
		LWLockRelease(reg->lock);
		report_no_room(role, nfree, taken);
	}
	e->in_use = true;
	e->generation = ++reg->next_generation;
	e->dboid = MyDatabaseId;
	e->procno = dlock_my_procno();
	e->pid = MyProcPid;
	e->role = role;
	e->hash = hash;
	pg_atomic_write_u64(&e->expired_through, (uint64) Max(expired_through, 0));
	memcpy(e->channel, channel, NAMEDATALEN);
	e->keylen = len;
	memcpy(e->key, key, len);
	pg_atomic_fetch_add_u32(&reg->nentries, 1);
	LWLockRelease(reg->lock);
	return true;
}

/* Does this session have an entry for key? */
bool
dlock_watch_entry_exists(const char *key, int len)
{
	int			i;

	if (reg == NULL)
		return false;
	LWLockAcquire(reg->lock, LW_SHARED);
	i = my_entry_locked(key, len);
	LWLockRelease(reg->lock);
	return i >= 0;
}

/* Take this session's entry for key out, if it has one. */
void
dlock_watch_entry_remove(const char *key, int len)
{
	int			i;

	if (reg == NULL)
		return;
	LWLockAcquire(reg->lock, LW_EXCLUSIVE);
	i = my_entry_locked(key, len);
	if (i >= 0)
		free_entry_locked(i);
	LWLockRelease(reg->lock);
}

/* Take every entry of this session out; true if it had any. */
bool
dlock_watch_entry_remove_all(void)
{
	bool		had = false;

	if (reg == NULL)
		return false;
	LWLockAcquire(reg->lock, LW_EXCLUSIVE);
	for (int i = 0; i < reg->max_entries; i++)
		if (entry_is_mine(&entries[i]))
		{
			free_entry_locked(i);
			had = true;
		}
	LWLockRelease(reg->lock);
	return had;
}

/* Does this session have any entry?  (No allocation: runs at commit.) */
bool
dlock_watch_entry_any(void)
{
	bool		any = false;

	if (reg == NULL)
		return false;
	LWLockAcquire(reg->lock, LW_SHARED);
	for (int i = 0; i < reg->max_entries && !any; i++)
		any = entry_is_mine(&entries[i]);
	LWLockRelease(reg->lock);
	return any;
}

/* The keys this session watches in this database: a List of text. */
List *
dlock_watch_entry_keys(void)
{
	List	   *keys = NIL;

	if (reg == NULL)
		return NIL;
	LWLockAcquire(reg->lock, LW_SHARED);
	for (int i = 0; i < reg->max_entries; i++)
		if (entry_is_mine(&entries[i]) && entries[i].dboid == MyDatabaseId)
			keys = lappend(keys, cstring_to_text_with_len(entries[i].key,
														  entries[i].keylen));
	LWLockRelease(reg->lock);
	return keys;
}

/* ---- what changing transactions and the expiry worker read ---- */

/*
 * May role see (and so be told about) a lease owned by owner?  The rule of
 * the views (views_sql.c, role_sees): keep the two alike.
 */
bool
dlock_watch_role_sees(Oid role, Oid owner)
{
	return superuser_arg(role) ||
		has_privs_of_role(role, ROLE_PG_READ_ALL_STATS) ||
		(OidIsValid(owner) && has_privs_of_role(role, owner));
}

/* True when any session of the cluster watches any key (no lock). */
bool
dlock_watch_any(void)
{
	return reg != NULL && pg_atomic_read_u32(&reg->nentries) > 0;
}

/*
 * The watchers of key in database dboid, copied into *out (palloc'd);
 * returns how many.
 */
int
dlock_watch_find(Oid dboid, const char *key, int len, DlockWatcher **out)
{
	uint64		hash = dlock_key_for_text(DLOCK_CLASS_LEASE, key, len).hash;
	DlockWatcher *w = NULL;
	int			n = 0;
	int			room = 0;

	*out = NULL;
	if (!dlock_watch_any())
		return 0;
	LWLockAcquire(reg->lock, LW_SHARED);
	for (int i = 0; i < reg->max_entries; i++)
	{
		WatchEntry *e = &entries[i];

		if (!entry_is(e, dboid, hash, key, len))
			continue;
		if (n == room)
		{
			room = room == 0 ? 4 : room * 2;
			w = w ? repalloc(w, sizeof(DlockWatcher) * room) :
				palloc(sizeof(DlockWatcher) * room);
		}
		w[n].index = i;
		w[n].generation = e->generation;
		w[n].role = e->role;
		memcpy(w[n].channel, e->channel, NAMEDATALEN);
		n++;
	}
	LWLockRelease(reg->lock);
	*out = w;
	return n;
}

/*
 * The expiry worker read watcher w's key, every holder of it, at time
 * through: from now on, leases of the key that ran out up to then are no
 * news to w (the worker sends them in this transaction).  True, with the
 * time claimed before in *previous, if that moved the mark forward; false
 * if it was there already, or the entry is gone.
 */
bool
dlock_watch_claim_expiry(const DlockWatcher *w, TimestampTz through,
						 int64 *previous)
{
	WatchEntry *e = &entries[w->index];
	bool		claimed = false;

	LWLockAcquire(reg->lock, LW_SHARED);
	if (e->in_use && e->generation == w->generation)
	{
		uint64		cur = pg_atomic_read_u64(&e->expired_through);

		while (cur < (uint64) through && !claimed)
			claimed = pg_atomic_compare_exchange_u64(&e->expired_through, &cur,
													 (uint64) through);
		*previous = (int64) cur;
	}
	LWLockRelease(reg->lock);
	return claimed;
}

/* Give a claim back: the transaction that made it rolled back. */
void
dlock_watch_unclaim_expiry(const DlockWatcher *w, TimestampTz through,
						   int64 previous)
{
	WatchEntry *e = &entries[w->index];

	LWLockAcquire(reg->lock, LW_SHARED);
	if (e->in_use && e->generation == w->generation)
	{
		uint64		cur = (uint64) through;

		(void) pg_atomic_compare_exchange_u64(&e->expired_through, &cur,
											  (uint64) previous);
	}
	LWLockRelease(reg->lock);
}

/*
 * Watcher w's mark: a lease of its key that ran out up to then was sent to
 * it, or was no news (before the watch).  A gone entry: the latest time.
 */
TimestampTz
dlock_watch_expired_through(const DlockWatcher *w)
{
	WatchEntry *e = &entries[w->index];
	TimestampTz t = DT_NOEND;

	LWLockAcquire(reg->lock, LW_SHARED);
	if (e->in_use && e->generation == w->generation)
		t = (TimestampTz) pg_atomic_read_u64(&e->expired_through);
	LWLockRelease(reg->lock);
	return t;
}

/*
 * The release of an abandoned hand-over grant (token, in database dboid)
 * is reported twice when a grant reads its row (as free) while dlock's
 * worker deletes it: the grant's write waits for the delete and writes the
 * key's row anew, and both transactions report the release.  The first of
 * them to send it claims it here at its pre-commit; the other, whose
 * pre-commit comes after that commit, finds it claimed and sends nothing.
 * True if this claim is the first; a claim is given back if its
 * transaction rolls back.  The last RELEASES_KEPT claims are remembered,
 * plenty for the two transactions' short overlap.
 */
bool
dlock_watch_claim_release(Oid dboid, int64 token)
{
	bool		first = true;

	LWLockAcquire(reg->lock, LW_EXCLUSIVE);
	for (int i = 0; i < RELEASES_KEPT && first; i++)
		first = !(reg->released[i].token == token &&
				  reg->released[i].dboid == dboid);
	if (first)
	{
		reg->released[reg->next_release].dboid = dboid;
		reg->released[reg->next_release].token = token;
		reg->next_release = (reg->next_release + 1) % RELEASES_KEPT;
	}
	LWLockRelease(reg->lock);
	return first;
}

/* Give a claim back: the transaction that made it rolled back. */
void
dlock_watch_unclaim_release(Oid dboid, int64 token)
{
	LWLockAcquire(reg->lock, LW_EXCLUSIVE);
	for (int i = 0; i < RELEASES_KEPT; i++)
		if (reg->released[i].token == token && reg->released[i].dboid == dboid)
			reg->released[i].dboid = InvalidOid;
	LWLockRelease(reg->lock);
}

/* The distinct keys watched in database dboid (for its worker). */
text	  **
dlock_watch_db_keys(Oid dboid, int *n)
{
	text	  **keys = NULL;

	*n = 0;
	if (!dlock_watch_any())
		return NULL;
	LWLockAcquire(reg->lock, LW_SHARED);
	for (int i = 0; i < reg->max_entries; i++)
	{
		WatchEntry *e = &entries[i];
		bool		seen = false;

		if (!e->in_use || e->dboid != dboid)
			continue;
		for (int j = 0; j < i && !seen; j++)
			seen = entry_is(&entries[j], dboid, e->hash, e->key, e->keylen);
		if (seen)
			continue;
		if (keys == NULL)
			keys = palloc(sizeof(text *) * reg->max_entries);
		keys[(*n)++] = cstring_to_text_with_len(e->key, e->keylen);
	}
	LWLockRelease(reg->lock);
	return keys;
}

/* How many entries database dboid has (0 or more). */
int
dlock_watch_db_count(Oid dboid)
{
	int			n = 0;

	if (!dlock_watch_any())
		return 0;
	LWLockAcquire(reg->lock, LW_SHARED);
	for (int i = 0; i < reg->max_entries; i++)
		if (entries[i].in_use && entries[i].dboid == dboid)
			n++;
	LWLockRelease(reg->lock);
	return n;
}

/* ---- setting, shared memory ---- */

/*
 * Called from _PG_init (dlock.c).  dlock.max_watches sizes shared memory:
 * the settings exist only when dlock is preloaded (a PGC_POSTMASTER
 * setting cannot be defined once the server runs, and without the
 * registry the others mean nothing).
 */
void
dlock_watch_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomIntVariable("dlock.max_watches",
							"How many keys all sessions together may watch at once.",
							"Each session's watch of a key takes one entry in shared "
							"memory (about 1.2 kB); needs dlock in shared_preload_libraries.",
							&dlock_max_watches,
							1024, 1, 100000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.max_watches_per_role",
							"How many keys the sessions of one role together may watch at once.",
							"Superusers are not bound by it.  Set it per role with "
							"ALTER ROLE ... SET.",
							&dlock_max_watches_per_role,
							256, 0, 100000,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.superuser_reserved_watches",
							"How many of dlock.max_watches only superusers may take.",
							NULL,
							&dlock_superuser_reserved_watches,
							16, 0, 100000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
}

static Size
entries_size(void)
{
	return mul_size(dlock_max_watches, sizeof(WatchEntry));
}

/* shmem_request_hook (dlock.c) */
void
dlock_watch_shmem_request(void)
{
	RequestAddinShmemSpace(add_size(sizeof(WatchRegistry), entries_size()));
	RequestNamedLWLockTranche(DLOCK_WATCH_TRANCHE, 1);
}

/* shmem_startup_hook (dlock.c), under AddinShmemInitLock */
void
dlock_watch_shmem_startup(void)
{
	bool		found;

	reg = ShmemInitStruct("dlock watch registry", sizeof(WatchRegistry), &found);
	entries = ShmemInitStruct("dlock watch entries", entries_size(), &found);
	if (!found)
	{
		memset(entries, 0, entries_size());
		for (int i = 0; i < dlock_max_watches; i++)
			pg_atomic_init_u64(&entries[i].expired_through, 0);
		reg->lock = &(GetNamedLWLockTranche(DLOCK_WATCH_TRANCHE))->lock;
		pg_atomic_init_u32(&reg->nentries, 0);
		reg->next_generation = 0;
		reg->max_entries = dlock_max_watches;
		reg->next_release = 0;
		memset(reg->released, 0, sizeof(reg->released));
	}
}
