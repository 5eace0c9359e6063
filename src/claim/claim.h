/*-------------------------------------------------------------------------
 *
 * claim/claim.h
 *		What the claim family offers the others: targets, the store of
 *		dlock.claim (its one owner), hints, claim keys and maintenance.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLAIM_H
#define DLOCK_CLAIM_H

#include "access/attnum.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "datatype/timestamp.h"

#include "base/base.h"

/* ----------------
 * claim_target.c
 *		A table that rows can be claimed from (claim_target.c).
 * ----------------
 */
/* A table that rows can be claimed from, and how to name its rows. */
typedef struct ClaimTarget
{
	Oid			relid;
	Oid			claim_relid;	/* the relation its rows' claims are keyed by
								 * (dlock.claim.relid, key locks) */
	Oid			rowtype;
	char		relkind;
	char	   *relname;		/* quoted, unqualified: the whole-row name */
	char	   *qualname;		/* quoted, schema-qualified */
	AttrNumber	pk_attnum;
	char	   *pk_colname;		/* quoted */
	Oid			pk_type;
	bool		pk_spellings;	/* equal keys can be written differently */
	Oid			pk_array_type;
	char	   *pk_eq_op;		/* OPERATOR(schema.=) of the primary key */
	Oid			pk_eq_proc;		/* and its function */
	char	   *pk_lt_op;		/* its type's default < and > (NULL: none) */
	char	   *pk_gt_op;
	char	   *pk_attname;		/* unquoted names, as order_by spells them */
	char	   *plain_relname;
	int16		pk_typlen;
	bool		pk_byval;
	Oid			pk_out_fn;
	FmgrInfo	pk_out_finfo;	/* pk_out_fn, looked up once */
	Oid			pk_in_fn;
	Oid			pk_ioparam;
	bool		io_needs_pin;	/* its text form depends on settings */
	uint64		generation;		/* unique to this build of the target */
	Oid		   *ancestors;		/* its partition ancestors, root last */
	int			nancestors;
	struct
	{
		int			cacheid;	/* a syscache entry it was built from */
		uint32		hashvalue;
	}			deps[8];
	int			ndeps;
	bool		stale;			/* invalidated: rebuild on next lookup */
} ClaimTarget;

extern const ClaimTarget *dlock_claim_target_for_type(Oid rowtype,
													  const char *fn);
extern const ClaimTarget *dlock_claim_target_for_rel(Oid relid,
													 const char *fn);
extern void dlock_claim_check_access(const ClaimTarget *t, const char *fn);
extern bool dlock_claim_type_io_stable(Oid type);
extern List *dlock_claim_partition_ancestors(Oid relid);

/* ----------------
 * claim_store.c
 *		Every read and write of dlock.claim: the claim query's per-row
 *		check (claim_store_probe.c), a claim batch's lookup and write and
 *		the other hot paths (claim_store.c), the holders' writes and the
 *		sweeps of many rows as SQL (claim_store_spi.c).
 * ----------------
 */
/* claim_store_probe.c */
typedef struct DlockClaimProbe DlockClaimProbe;

extern DlockClaimProbe *dlock_claim_probe_begin(Oid relid);
extern bool dlock_claim_probe_held(DlockClaimProbe *p, text *key,
								   TimestampTz *settled_until);
extern void dlock_claim_probe_end(DlockClaimProbe *p);

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
} DlockClaimWrite;

extern bool dlock_claim_store_has_long_key(void);
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
										 text *holder, Oid role);
extern int64 dlock_claim_store_renew(Oid relid, text **keys, int n,
									 text *holder, Oid role, int64 ttl_us);
extern int64 dlock_claim_store_delete(Oid relid, text **keys, int n);
extern int64 dlock_claim_store_delete_idle(TimestampTz before, int limit);
extern uint64 dlock_claim_store_read_live(void);
extern uint64 dlock_claim_store_read_dead(void);
extern uint64 dlock_claim_store_relids(Oid **relids);
extern uint64 dlock_claim_store_keys_of(Oid relid, text ***keys,
										text ***fulls);
extern int64 dlock_claim_store_move(Oid from, Oid to, text **keys, int n);
extern int64 dlock_claim_store_forget(Oid *relids, int n);
extern bool dlock_claim_store_rekey(Oid relid, text *from, text *to,
									text *to_full);

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
extern void dlock_claim_hint_shmem_request(void);
extern void dlock_claim_hint_shmem_startup(void);

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
extern Datum dlock_claim_key_value(const ClaimTarget *t, text *key);
extern bool dlock_claim_key_in(const ClaimTarget *t, Oid relid, text *key);
extern bool dlock_claim_row_visible(const ClaimTarget *t, Datum value,
									Oid type);
extern DlockKeyLock dlock_claim_keylock(Oid relid, text *key);
extern int	dlock_claim_io_begin(const ClaimTarget *t, Oid other_type);
extern void dlock_claim_io_end(int nestlevel);

/* ----------------
 * claim_manage.c
 *		What is done to claims after they are made (claim_manage.c).
 * ----------------
 */
extern bool dlock_claim_check(const ClaimTarget *t, text *key, text *holder);
extern int64 dlock_claim_unclaim(const ClaimTarget *t, text *holder,
								 text **keys, int nkeys);
extern int	dlock_claim_complete(const ClaimTarget *t, text *holder,
								 text **keys, int nkeys, bool *done);
extern int64 dlock_claim_renew(const ClaimTarget *t, text *holder,
							   int64 ttl_us);
extern int64 dlock_claim_reset(const ClaimTarget *t, text **keys, int nkeys);
extern int64 dlock_claim_release_all(text *holder);

#endif							/* DLOCK_CLAIM_H */
