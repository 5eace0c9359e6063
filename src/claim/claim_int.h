/*-------------------------------------------------------------------------
 *
 * claim/claim_int.h
 *		What the files of claim/ share and no other family sees.  The claim
 *		protocol is in claim/README.md.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_INT_H
#define DLOCK_CLAIM_INT_H

#include "datatype/timestamp.h"
#include "access/attnum.h"
#include "nodes/nodes.h"
#include "nodes/pg_list.h"
#include "utils/tuplestore.h"
#include "access/tupdesc.h"

#include "base/base.h"
#include "claim/claim.h"
#include "history/history.h"

/* ----------------
 * claim_target.c
 *		A table that rows can be claimed from (claim_target.c).
 * ----------------
 */
extern const ClaimTarget *dlock_claim_target_for_type(Oid rowtype,
													  const char *fn);
extern bool dlock_claim_type_io_stable(Oid type);
extern List *dlock_claim_partition_ancestors(Oid relid);

/* ----------------
 * claim_store.c
 *		Every read and write of dlock.claim: the claim query's per-row
 *		check (claim_store_probe.c), a claim batch's lookup and write and
 *		the other hot paths (claim_store.c), the holders' writes and the
 *		sweeps of many rows as SQL (claim_store_spi.c).  Only these three
 *		files use the columns.
 * ----------------
 */
/* columns of dlock.claim, as dlock--0.1.sql creates it and 0.4 and 0.5 extend it */
enum
{
	Anum_relid = 1,
	Anum_key,
	Anum_holder,
	Anum_owner,
	Anum_token,
	Anum_ttl_us,
	Anum_claimed_at,
	Anum_expires_at,
	Anum_attempts,
	Anum_poisoned_at,
	Anum_long_key,				/* 0.4: the key text of a digest key */
	Anum_retry_at,				/* 0.5: claimable again from (NULL: expires_at) */
	Anum_grp,					/* 0.5: the claim's group_by value */
	Natts_claim_table = Anum_grp,
	Natts_claim_table_04 = Anum_long_key,
	Natts_claim_table_03 = Anum_poisoned_at
};

/* claim_store_probe.c */
typedef struct DlockClaimProbe DlockClaimProbe;

extern DlockClaimProbe *dlock_claim_probe_begin(Oid relid);
extern bool dlock_claim_probe_held(DlockClaimProbe *p, text *key,
								   TimestampTz *settled_until);
extern void dlock_claim_probe_end(DlockClaimProbe *p);
extern int	dlock_claim_store_group_count(Oid relid, text *grp, bool dirty,
										  TimestampTz now);

/* claim_store.c */

/* what one claim batch's write does with a key (dlock_claim_store_write) */
typedef enum DlockClaimAction
{
	DLOCK_CLAIM_SKIP = 0,		/* nothing: it is not claimable */
	DLOCK_CLAIM_INSERT,			/* no claim row: a first claim */
	DLOCK_CLAIM_AGAIN,			/* a free or expired claim: claim it again */
	DLOCK_CLAIM_POISON			/* claimed max_attempts times: poison it */
} DlockClaimAction;

/* who writes one claim batch, on which table, until when */
typedef struct DlockClaimWrite
{
	Oid			relid;			/* the table the claims are on */
	text	   *holder;
	Oid			role;
	int64		token;
	int64		ttl_us;
	TimestampTz now;			/* claimed_at; they expire at now + ttl_us */
	text	  **grps;			/* each key's group (dlock_claim_group_id),
								 * or NULL: no group_by */
	int64		backoff_us;		/* the request's backoff (0: none) */
	int64		backoff_max_us; /* its cap, doubling per attempt (0: fixed) */
} DlockClaimWrite;

extern void dlock_claim_store_open(DlockStore *s);
extern TimestampTz dlock_claim_slot_free_at(TupleTableSlot *slot);
extern bool dlock_claim_store_has_long_key(void);
/*
 * The columns of an ended claim that dlock.history records, after a
 * claim's table (column 1): the key text (of a digest key, the text in
 * long_key), holder, owner, token, claimed_at, expires_at, attempts.
 */
#define DLOCK_CLAIM_ENDED_COLUMNS \
	"relid, COALESCE(long_key, key), holder, owner, token, claimed_at," \
	" expires_at, attempts"
extern void dlock_claim_store_note_ended(uint64 n, DlockHistoryEnd how);
extern bool dlock_claim_store_has_05(void);
extern uint64 dlock_claim_store_run_on_keys(DlockQuery *q, Oid relid,
											text **keys, int n, Datum *values);
extern bool dlock_claim_store_held(Oid relid, text *key, text *holder,
								   Oid role);
extern void dlock_claim_store_held_keys(Oid relid, text **keys, int n,
										text *holder, Oid role, bool *held);
extern void dlock_claim_store_lookup(Oid relid, text **keys, int n,
									 bool *found, bool *live, int *attempts,
									 bool *poisoned);
extern int	dlock_claim_store_delete_held(Oid relid, text **keys, int n,
										  text *holder, Oid role, bool *done);
extern int	dlock_claim_store_write(const DlockClaimWrite *w, text **keys,
									text **fulls,
									const DlockClaimAction *action, int n,
									int *attempts);

/* claim_store_spi.c */
extern text **dlock_claim_store_holder_keys(Oid relid, text *holder, Oid role,
											text **among, int namong, int *n);
extern text **dlock_claim_store_existing_keys(Oid relid, text **keys,
											  int nkeys, int *n);
extern text **dlock_claim_store_holder_page(Oid relid, text *holder, Oid role,
											text *after, int limit, int *n);
extern int	dlock_claim_store_holder_all_page(text *holder, Oid role,
											  Oid after_relid, text *after_key,
											  int limit, text ***keys,
											  Oid **relids);
extern int64 dlock_claim_store_give_back(Oid relid, text **keys, int n,
										 text *holder, Oid role,
										 DlockHistoryEnd how);
extern int64 dlock_claim_store_give_back_failed(Oid relid, text **keys, int n,
												text *holder, Oid role,
												int64 retry_us);
extern int64 dlock_claim_store_renew(Oid relid, text **keys, int n,
									 text *holder, Oid role, int64 ttl_us);
extern int64 dlock_claim_store_delete(Oid relid, text **keys, int n);
extern uint64 dlock_claim_store_keys_of(Oid relid, text ***keys,
										text ***fulls);
extern int64 dlock_claim_store_move(Oid from, Oid to, text **keys, int n);
extern int64 dlock_claim_store_forget(Oid *relids, int n);
extern bool dlock_claim_store_rekey(Oid relid, text *from, text *to,
									text *to_full);
extern TimestampTz dlock_claim_store_next_lapse(Oid relid);

/* ----------------
 * claim_hint.c
 *		Step hints over the held rows at the head of a claim query's order,
 *		shared by all backends (claim_hint.c).
 * ----------------
 */
/*
 * One claim query text's step hint: its key, made once and kept with the
 * plan, and, in a copy per run (dlock_claim_hint_begin), what the run has
 * read of it.
 */
typedef struct ClaimHint
{
	bool		ready;			/* the key is made */
	bool		enabled;		/* shared memory, a step direction, a key */
	int			dir;			/* 1: primary key ascending, -1: descending */
	Oid			relid;
	Oid			pk_type;
	uint64		text_hash;		/* of the query text */
	int16		typlen;
	bool		byval;
	FmgrInfo   *cmp;			/* the key type's btree comparison */
	Oid			collation;		/* the key column's */
	/* per run (dlock_claim_hint_start) */
	uint64		returns;		/* give-backs counted before the query ran */
	bool		have;			/* the shared hint as last read: every row */
	Datum		bound;			/* up to bound (in the order) was held, */
	TimestampTz until;			/* and stays held until then */
	int			reads;			/* rows checked since it was read */
} ClaimHint;

extern bool dlock_claim_hint_begin(ClaimHint *run, ClaimHint *kept,
								   const ClaimTarget *t, int dir,
								   const char *sql);
extern void dlock_claim_hint_learn(ClaimHint *h, int64 nlead, Datum last,
								   TimestampTz until);
extern bool dlock_claim_hint_covers(ClaimHint *h, Datum value,
									TimestampTz *until);
extern void dlock_claim_returns_bump(void);

/* ----------------
 * claim_key.c
 *		The claim key of a row: its primary key as text (claim_key.c).
 * ----------------
 */
/*
 * Key texts longer than this are kept in dlock.claim's primary key as a
 * digest: any key the user's primary key accepts can be claimed, whatever
 * the limit of an index entry of dlock.claim.
 */
#define DLOCK_CLAIM_KEY_INLINE_BYTES	1024
#define DLOCK_CLAIM_KEY_DIGEST_MARK		'\x7f'

extern text *dlock_claim_key_id(text *key);
extern text *dlock_claim_key_text(const ClaimTarget *t, Datum value, Oid type);
extern text *dlock_claim_key_text_of_arg(const ClaimTarget *t, Datum value,
										 Oid type, bool *exists);
extern bool dlock_claim_key_in(const ClaimTarget *t, Oid relid, text *key);
extern DlockKeyLock dlock_claim_keylock(Oid relid, text *key);

/* ----------------
 * claim_manage.c
 *		What is done to claims after they are made (claim_manage.c).
 * ----------------
 */
extern bool dlock_claim_check(const ClaimTarget *t, text *key, text *holder);
extern int64 dlock_claim_unclaim(const ClaimTarget *t, text *holder,
								 text **keys, int nkeys);
extern int64 dlock_claim_unclaim_failed(const ClaimTarget *t, text *holder,
										text **keys, int nkeys,
										int64 retry_us);
extern int	dlock_claim_complete(const ClaimTarget *t, text *holder,
								 text **keys, int nkeys, bool *done);
extern int64 dlock_claim_renew(const ClaimTarget *t, text *holder,
							   int64 ttl_us);
extern int64 dlock_claim_reset(const ClaimTarget *t, text **keys, int nkeys);

/* ----------------
 * claim_query.c
 *		A call of dlock_claim, and the query it runs on the user's table
 *		(claim_query.c).
 * ----------------
 */
/* A call of dlock_claim. */
typedef struct ClaimRequest
{
	const ClaimTarget *target;
	text	   *holder;
	int			n;
	int64		ttl_us;
	const char *filter;
	const char *order_by;
	int			max_attempts;	/* 0: no limit */
	const char *fn_schema;		/* quoted schema of dlock_claim_unheld, or
								 * NULL: not installed (extension 0.1, 0.2) */
	int			step_dir;		/* claims can step over held rows at the
								 * head of the order: 1 (the primary key
								 * ascending), -1 (descending), 0: cannot */
	int64		wait_us;		/* wait up to this for a claimable row (0:
								 * do not wait) */
	int64		backoff_us;		/* a lapsed claim's row waits this before
								 * it is claimable again (0: none) */
	int64		backoff_max_us; /* with backoff: doubling per attempt up to
								 * this (0: a fixed delay) */
	const char *group_by;		/* the caller's group expression, or NULL */
	int			per_group;		/* at most this many live claims per
								 * group (0: no limit) */
	bool		fair;			/* fill the batch round-robin by group */
	struct ClaimGroups *groups; /* with group_by: the call's groups
								 * (claim_group.c), else NULL */
} ClaimRequest;

extern uint64 dlock_claim_query_run(const ClaimRequest *req, Datum tried,
									int need);

/* ----------------
 * claim_group.c
 *		Groups of a claim: group_by, per_group, fair (claim_group.c).
 * ----------------
 */
/* what a claim call knows of its groups */
typedef struct ClaimGroups
{
	MemoryContext cxt;
	struct HTAB *tab;			/* group text -> its counts */
	Oid			relid;			/* the claims' table (claim_relid) */
	int			per_group;		/* 0: no cap */
	int			cap;			/* fair: this round's rows per group in the
								 * call (0: not fair) */
	uint64		scan;			/* scans of the claim query so far */
	int			ncapped;		/* groups this scan turned away at cap */
	TimestampTz now;			/* this scan's time */
} ClaimGroups;

struct ClaimCandidate;
extern text *dlock_claim_group_id(text *value);
extern ClaimGroups *dlock_claim_groups_begin(const ClaimRequest *req);
extern void dlock_claim_groups_scan_begin(ClaimGroups *g);
extern bool dlock_claim_group_admits(ClaimGroups *g, text *grp, void **entry);
extern void dlock_claim_group_passed(void *entry);
extern void dlock_claim_groups_taken(ClaimGroups *g,
									 struct ClaimCandidate *c, int n);
extern bool dlock_claim_groups_next_round(ClaimGroups *g, int need);
extern DlockKeyLock *dlock_claim_group_limit(const ClaimRequest *req,
											 struct ClaimCandidate *c, int n,
											 int *nlocks);
extern void dlock_claim_group_unlock(DlockKeyLock *locks, int nlocks);

/* ----------------
 * claim_unheld.c
 *		The per-row check of claims, and the scan of a claim query that
 *		runs it (claim_unheld.c).
 * ----------------
 */
/*
 * A claim query running now (a filter may claim from another table): the
 * probe its rows are checked through, and what its scan has found at the
 * head of its order.
 */
typedef struct ClaimScan
{
	const ClaimTarget *target;
	DlockClaimProbe *probe;
	MemoryContext cxt;			/* the claim's, for lead_last */
	ClaimHint	hint;			/* its query's step hint, as this run sees it
								 * (not enabled: its order cannot step) */
	bool		leading;		/* every row checked so far was held */
	int64		nlead;			/* how many */
	TimestampTz lead_until;		/* the first of their claims to lapse */
	Datum		lead_last;		/* the last one's primary key */
	ClaimGroups *groups;		/* with group_by: the call's groups */
	struct ClaimScan *next;
} ClaimScan;

extern int64 dlock_claim_ticket(void);
extern bool dlock_claim_scan_begin(ClaimScan *s, const ClaimTarget *t,
								   ClaimHint *kept, int dir, const char *sql);
extern void dlock_claim_scan_end(ClaimScan *s, bool failed);
extern bool dlock_claim_row_held(Oid relid, Datum value, Oid type);
extern bool dlock_claim_row_held_in_claim(Oid relid, Datum value, Oid type,
										  int64 ticket);
extern bool dlock_claim_row_held_in_group(Oid relid, Datum value, Oid type,
										  int64 ticket, text *grp);

/* ----------------
 * claim_filter.c
 *		The caller's filter and order_by of a claim (claim_filter.c).
 * ----------------
 */
extern void dlock_check_filter(const char *filter);
extern void dlock_check_order_by(const char *order_by);
extern void dlock_check_group_by(const char *group_by);
extern int	dlock_claim_order_step(const ClaimTarget *t, const char *order_by);

/* ----------------
 * claim_ddl.c
 *		Claims through DDL on tables (claim_ddl.c): its event trigger
 *		entry points, and what claim_ddl_type.c uses of it: the facts that
 *		name a table's rows, and forgetting a table's claims.
 * ----------------
 */
/* what names the rows of a table */
typedef struct KeyFacts
{
	Oid			relid;
	bool		exists;
	Oid			root;			/* its partition root (itself if none) */
	AttrNumber	attnum;			/* its primary key column, 0: none */
	Oid			type;
	int32		typmod;
	char		attname[NAMEDATALEN];
} KeyFacts;

extern void dlock_claim_ddl_start(Node *parsetree);
extern void dlock_claim_ddl_end(Node *parsetree);
extern void dlock_claim_ddl_read_facts(Oid relid, KeyFacts *f);
extern void dlock_claim_ddl_forget(Oid relid);

/* ----------------
 * claim_ddl_type.c
 *		Claims through DDL on types: a renamed enum value, a dropped
 *		object (claim_ddl_type.c).
 * ----------------
 */
extern void dlock_claim_ddl_enum_renamed(const char *oldval,
										 const char *newval);
extern void dlock_claim_ddl_dropped(void);

/* ----------------
 * claim_batch.c
 *		Claiming one batch of candidate rows (claim_batch.c).
 * ----------------
 */
/* one candidate row of a claim: claim_take.c reads it, claim_batch.c claims it */
typedef struct ClaimCandidate
{
	text	   *key;			/* its claim key (dlock_claim_key_id) */
	text	   *grp;			/* with group_by: its group
								 * (dlock_claim_group_id) */
	bool		dropped;		/* over its group's cap: not claimed */
	text	   *full;			/* its key text */
	Datum		row;			/* whole-row datum from the user's table */
	bool		fresh;			/* no claim row: claimable without a key lock */
	bool		locked;			/* we took its key lock, kl */
	DlockKeyLock kl;
	bool		claimed;
} ClaimCandidate;

extern int	dlock_claim_batch(const ClaimRequest *req, ClaimCandidate *c, int n,
							  Oid role, int64 *token, int64 *redelivered,
							  Tuplestorestate *out);

/* ----------------
 * claim_take.c
 *		Claiming rows of the user's own tables (claim_take.c).
 * ----------------
 */
extern int	dlock_claim_rows(const ClaimRequest *req,
							 Tuplestorestate *out, TupleDesc outdesc);

/* ----------------
 * claim_wake.c
 *		What wakes claims that wait for rows: the queue of a table's
 *		waiting claims, the changes noted per subtransaction and woken at
 *		commit, dlock_claim_wakeup's trigger.
 * ----------------
 */
extern uint64 dlock_claim_wait_queue(Oid relid);
extern void dlock_claim_wait_note_change(Oid relid);
extern void dlock_claim_wait_note_claimed(Oid relid);
extern void dlock_claim_wakeup_install(Oid relid, Oid nsp);

/* ----------------
 * claim_wait.c
 *		Claims that wait for rows: the waiter's loop in its table's queue.
 * ----------------
 */
extern void dlock_claim_wait(const ClaimRequest *req, Tuplestorestate *out,
							 TupleDesc outdesc);

#endif							/* DLOCK_CLAIM_INT_H */
