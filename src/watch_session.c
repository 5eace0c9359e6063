/*-------------------------------------------------------------------------
 *
 * watch_session.c
 *		A session watching keys: its channel, dlock_watch and dlock_unwatch
 *		as a whole, and the read of a key's leader.
 *
 * dlock_watch needs the registry in shared memory, so dlock must be in
 * shared_preload_libraries; it also needs the primary (nothing can send a
 * notification on a standby).  It LISTENs on the session's channel itself,
 * so that the client never names the channel in a statement of its own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/async.h"
#include "miscadmin.h"
#include "utils/timestamp.h"

#include "base_store.h"
#include "lease_store.h"
#include "watch.h"

static char channel[NAMEDATALEN];

/*
 * This session's channel, made on first use: "dlock_" and 32 hex digits
 * from pg_strong_random, known only to this session.
 */
const char *
dlock_watch_channel(void)
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

	ch = dlock_watch_channel();
	Async_Listen(ch);
	/* a lease that ran out before the watch is no news */
	if (dlock_watch_add(key, GetCurrentTimestamp()))
	{
		dlock_watch_ensure_worker();
		dlock_watch_after_add(key);
	}
	return ch;
}

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
