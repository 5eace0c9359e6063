/*-------------------------------------------------------------------------
 *
 * base_fence.c
 *		The fences this transaction holds: a note of each lease key that
 *		dlock_validate found held (with its token), and of each claimed row
 *		that dlock_claimed found held, for the guard's trigger (src/guard/)
 *		to ask about.
 *
 * A fence is a key lock (base_keylock.c) kept to the end of the
 * transaction; its note lives exactly as long.  The notes are a list in
 * TopTransactionContext, newest first, each with the subtransaction level
 * that made it: a rolled-back subtransaction (ROLLBACK TO SAVEPOINT, an
 * exception block) gave its key locks back, so its notes go too; a
 * committed one hands them to its parent, as it hands over its locks.  At
 * the end of the transaction the list is forgotten (its memory goes with
 * TopTransactionContext).
 *
 * The lease and claim layers note (lease_decide.c, claim_manage.c); the
 * guard, a higher layer, asks.  Nothing here runs SQL: dlock_validate and
 * dlock_claimed stay on src/no_search_path.h's list.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "base/base.h"

typedef struct FenceNote
{
	struct FenceNote *next;		/* older note */
	Oid			relid;			/* a claimed row's claim relid; InvalidOid
								 * for a lease key */
	int64		token;			/* a lease's token (0 for a claimed row) */
	int			level;			/* subtransaction nest level that made it */
	int			len;
	char		data[FLEXIBLE_ARRAY_MEMBER];	/* the key text */
} FenceNote;

static FenceNote *notes = NULL;	/* newest first; NULL outside a transaction */
static int	n_row_notes = 0;	/* how many notes are of claimed rows */
static bool callbacks_registered = false;

static void
fence_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/* the memory went (or goes) with TopTransactionContext */
			notes = NULL;
			n_row_notes = 0;
			break;
		default:
			break;
	}
}

static void
fence_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	FenceNote  *n;

	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		/* its key locks were given back: its notes (the newest) go */
		while (notes != NULL && notes->level >= level)
		{
			n = notes;
			notes = n->next;
			if (OidIsValid(n->relid))
				n_row_notes--;
			pfree(n);
		}
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		/* its locks go to the parent: so do its notes */
		for (n = notes; n != NULL && n->level >= level; n = n->next)
			n->level = level - 1;
	}
}

static void
note(Oid relid, const char *data, int len, int64 token)
{
	FenceNote  *n;

	if (!callbacks_registered)
	{
		RegisterXactCallback(fence_xact_callback, NULL);
		RegisterSubXactCallback(fence_subxact_callback, NULL);
		callbacks_registered = true;
	}
	n = MemoryContextAlloc(TopTransactionContext,
						   offsetof(FenceNote, data) + len);
	n->relid = relid;
	n->token = token;
	n->level = GetCurrentTransactionNestLevel();
	n->len = len;
	memcpy(n->data, data, len);
	n->next = notes;
	notes = n;
	if (OidIsValid(relid))
		n_row_notes++;
}

/* dlock_validate found key held with token: note the fence. */
void
dlock_fence_note_key(text *key, int64 token)
{
	note(InvalidOid, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), token);
}

/*
 * dlock_claimed found the row of claim relid relid whose claim key is key
 * held: note the fence.
 */
void
dlock_fence_note_row(Oid relid, text *key)
{
	Assert(OidIsValid(relid));
	note(relid, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), 0);
}

static const FenceNote *
find(Oid relid, const char *data, int len)
{
	for (const FenceNote *n = notes; n != NULL; n = n->next)
	{
		CHECK_FOR_INTERRUPTS();
		if (n->relid == relid && n->len == len &&
			memcmp(n->data, data, len) == 0)
			return n;
	}
	return NULL;
}

/*
 * Whether this transaction fenced lease key data[0..len-1]; *token is the
 * token of the latest fence of it (a key validated twice: its latest).
 */
bool
dlock_fence_find_key(const char *data, int len, int64 *token)
{
	const FenceNote *n = find(InvalidOid, data, len);

	if (n == NULL)
		return false;
	*token = n->token;
	return true;
}

/* Whether this transaction fenced the claimed row of relid with key key. */
bool
dlock_fence_find_row(Oid relid, text *key)
{
	return find(relid, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key)) != NULL;
}

/* Whether this transaction fenced any claimed row (of any table). */
bool
dlock_fence_any_rows(void)
{
	return n_row_notes > 0;
}
