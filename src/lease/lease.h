/*-------------------------------------------------------------------------
 *
 * lease/lease.h
 *		What the lease family offers the others: a lease row as read, the
 *		reads and sweeps of dlock.lease that the watch, maint and views
 *		families make, the set-up of the transaction-end bookkeeping, and
 *		the events of lease changes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_LEASE_H
#define DLOCK_LEASE_H

#include "datatype/timestamp.h"
#include "storage/itemptr.h"

#include "base/base.h"

/* ----------------
 * lease_store.c
 *		Every read and write of dlock.lease (lease_store.c).
 * ----------------
 */
/* What one lease row says, read at the latest committed state. */
typedef struct DlockLease
{
	bool		found;			/* a row exists for the key */
	bool		held;			/* holder is not null */
	text	   *holder;			/* palloc'd copy, or NULL when free */
	Oid			owner;			/* role that holds it */
	int64		token;
	int64		ttl_us;			/* ttl it was granted with */
	TimestampTz acquired_at;
	TimestampTz expires_at;
	int			slot;			/* its slot (0 for a lease) */
	int			slots;			/* the key's slots when granted (1: a lease) */
	ItemPointerData tid;		/* the row version read */
	TransactionId changing;		/* another transaction in progress that
								 * updated that version (a bulk release: see
								 * lease_decide.c), or InvalidTransactionId */
	bool		uncommitted;	/* another transaction's write, not yet
								 * committed (dlock_lease_store_scan_pending
								 * only): changing is that transaction */
	text	   *abandoned_by;	/* an abandoned hand-over grant (reads as
								 * free): its holder, else NULL */
	Oid			abandoned_owner;	/* and its role */
} DlockLease;

/* the lease in *l is unexpired at now */
static inline bool
dlock_lease_live(const DlockLease *l, TimestampTz now)
{
	return l->held && l->expires_at > now;
}

/* dlock.lease, opened for one call (base_store.c) */
extern void dlock_lease_store_open(DlockStore *s);
extern DlockLease *dlock_lease_store_fetch_all(DlockStore *s, text *key,
											   int *n);
extern int64 dlock_lease_store_delete_idle(TimestampTz before, int limit,
										   bool whole_table);
extern bool dlock_lease_store_delete_grant(text *key, text *holder,
										   Oid owner, int64 token);


/* the rows of dlock_locks, into SPI_tuptable (between dlock_spi_begin/_end) */
extern uint64 dlock_lease_store_read_live(void);

/* ----------------
 * lease_xact.c
 *		What dlock does when a transaction ends (lease_xact.c): set up at
 *		load.
 * ----------------
 */
extern void dlock_xact_init(void);

/* ----------------
 * lease_decide.c, lease_grant.c, lease_handover.c
 *		What the lease family tells a higher layer of its changes.  Calls
 *		run down the layers only, so the watch family, which reads leases,
 *		is not called by name: at load it sets dlock_lease_events
 *		(dlock_watch_notify_init, watch_notify.c), and the lease files call
 *		through it, each holder as plain values, in the transaction that
 *		makes the change.  NULL: nobody is told.
 * ----------------
 */
/* how a grant came about */
typedef enum DlockGrantCause
{
	DLOCK_CAUSE_NONE,
	DLOCK_CAUSE_ACQUIRE,		/* an acquire of a free key */
	DLOCK_CAUSE_HANDOVER,		/* a release granted it to its head waiter */
	DLOCK_CAUSE_TAKEOVER		/* an acquire over an expired lease */
} DlockGrantCause;

typedef struct DlockLeaseEvents
{
	/* a lease or slot granted */
	void		(*granted) (text *key, DlockGrantCause cause, text *holder,
							Oid owner, int64 token, TimestampTz expires_at);
	/* a holding released, or freed when its grant was abandoned */
	void		(*released) (text *key, text *holder, Oid owner,
							 int64 token, TimestampTz expires_at);
	void		(*abandoned) (text *key, text *holder, Oid owner,
							  int64 token, TimestampTz expires_at);
	/* a hand-over grant whose waiter withdrew before it committed */
	void		(*grant_withdrawn) (text *key, int64 token);
	/* a holding found run out by the grant that takes its place */
	void		(*expired) (text *key, text *holder, Oid owner,
							int64 token, TimestampTz expires_at);
} DlockLeaseEvents;

extern PGDLLIMPORT const DlockLeaseEvents *dlock_lease_events;

#endif							/* DLOCK_LEASE_H */
