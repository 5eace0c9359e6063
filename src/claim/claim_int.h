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
#include "utils/tuplestore.h"
#include "access/tupdesc.h"

#include "base/base.h"
#include "claim/claim.h"

/* ----------------
 *		What the files that read and write dlock.claim share, and no other
 *		file sees: its columns, and opening it (claim_store.c).  Included
 *		by claim_store.c and claim_store_probe.c only.
 * ----------------
 */
/* columns of dlock.claim, as dlock--0.1.sql creates it and 0.4 extends it */
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
	Natts_claim_table = Anum_long_key,
	Natts_claim_table_03 = Anum_poisoned_at
};

extern void dlock_claim_store_open(DlockStore *s);
extern uint64 dlock_claim_store_run_on_keys(DlockQuery *q, Oid relid,
											text **keys, int n, Datum *values);

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
} ClaimRequest;

extern uint64 dlock_claim_query_run(const ClaimRequest *req, Datum tried,
									int need);

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
	struct ClaimScan *next;
} ClaimScan;

extern int64 dlock_claim_ticket(void);
extern bool dlock_claim_scan_begin(ClaimScan *s, const ClaimTarget *t,
								   ClaimHint *kept, int dir, const char *sql);
extern void dlock_claim_scan_end(ClaimScan *s, bool failed);
extern bool dlock_claim_row_held(Oid relid, Datum value, Oid type);
extern bool dlock_claim_row_held_in_claim(Oid relid, Datum value, Oid type,
										  int64 ticket);

/* ----------------
 * claim_filter.c
 *		The caller's filter and order_by of a claim (claim_filter.c).
 * ----------------
 */
extern void dlock_check_filter(const char *filter);
extern void dlock_check_order_by(const char *order_by);
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
extern Oid	dlock_claim_ddl_root_of(Oid relid);
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
extern void dlock_claim_rows(const ClaimRequest *req,
							 Tuplestorestate *out, TupleDesc outdesc);

#endif							/* DLOCK_CLAIM_INT_H */
