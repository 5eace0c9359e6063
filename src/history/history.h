/*-------------------------------------------------------------------------
 *
 * history/history.h
 *		What the history family offers the others: whether a lease key or
 *		a claim table is tracked, the writing of one ended tenure into
 *		dlock.history in the transaction that ends it, the reads of the
 *		view, the retention sweep, and the tracking changes.
 *
 * The family sits just above base (base < history < wait < claim < lease
 * ...): the lease and claim families call it where a tenure ends, and it
 * calls only base.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_HISTORY_H
#define DLOCK_HISTORY_H

#include "datatype/timestamp.h"

#include "base/base.h"

/* how a tenure ended: the values of dlock.history.ended, in order */
typedef enum DlockHistoryEnd
{
	DLOCK_END_RELEASED,			/* dlock_release by its holder */
	DLOCK_END_EXPIRED,			/* ran out; a sweep deleted its row */
	DLOCK_END_TAKEN_OVER,		/* ran out; an acquire or claim took it */
	DLOCK_END_FORCE_RELEASED,	/* dlock_force_release */
	DLOCK_END_RELEASED_ALL,		/* dlock_release_all */
	DLOCK_END_COMPLETED,		/* a claim completed */
	DLOCK_END_GIVEN_BACK,		/* a claim given back */
	DLOCK_END_DEAD_LETTERED		/* a claim given back failed, for good */
} DlockHistoryEnd;

/* one ended tenure, as the lease and claim families know it */
typedef struct DlockTenure
{
	bool		claim;			/* a claim (relid and attempts) or a lease */
	text	   *key;			/* the lease key, or the claim row's key text */
	Oid			relid;			/* claims: the table */
	text	   *holder;
	Oid			owner;			/* the role that held it */
	int64		token;
	TimestampTz granted_at;
	TimestampTz ended_at;
	DlockHistoryEnd ended;
	int			attempts;		/* claims: times claimed */
} DlockTenure;

/* ----------------
 * history_track.c
 *		dlock.history_keys and dlock.history_tables: what is tracked, and
 *		this backend's copy of them.
 * ----------------
 */
extern bool dlock_history_tracks_key(text *key);
extern bool dlock_history_tracks_table(Oid relid);
extern bool dlock_history_tracks_any_table(void);
extern bool dlock_history_set_key(text *prefix, bool track);
extern bool dlock_history_set_table(Oid relid, bool track);

/* ----------------
 * history_store.c
 *		dlock.history: its one writer, its reads and its sweep.
 * ----------------
 */
extern void dlock_history_write(const DlockTenure *t);
extern void dlock_history_lease_ended(text *key, text *holder, Oid owner,
									  int64 token, TimestampTz granted_at,
									  TimestampTz ended_at,
									  DlockHistoryEnd ended);
extern const char *dlock_history_end_name(DlockHistoryEnd ended);
/* the rows of the view, into SPI_tuptable (between dlock_spi_begin/_end) */
extern uint64 dlock_history_store_read(text *key);
extern int64 dlock_history_store_sweep(TimestampTz before, int limit);

#endif							/* DLOCK_HISTORY_H */
