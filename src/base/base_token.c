/*-------------------------------------------------------------------------
 *
 * base_token.c
 *		Fencing tokens that only grow, across crash, restart, promotion of
 *		a standby, point-in-time recovery, dump and restore, pg_upgrade, and
 *		DROP / CREATE EXTENSION.
 *
 * A token is a value of the sequence dlock.token_seq, kept at or above the
 * server's clock: the clock in microseconds since 1970, less at most
 * DLOCK_TOKEN_SLACK_US.  Two rules make that work:
 *
 *	- Floor.  When the next value is more than the slack below the clock,
 *	  the sequence is first moved up to the clock (under a lock, so that two
 *	  backends cannot move it back past each other).  At a steady rate this
 *	  happens at most once per slack, so it costs a sequence WAL record now
 *	  and then.  A sequence that lost values (a dropped and re-created
 *	  extension, a promoted standby that was behind, a point-in-time
 *	  recovery, a restore) starts again at the clock, which is past every
 *	  token handed out before, as long as that happened more than the slack
 *	  ago on a clock that did not go back.
 *	- Flush.  Before a token leaves the server, the WAL record of the
 *	  sequence that covers it is flushed: by the commit, when the token is
 *	  returned by a single-statement transaction that commits with its
 *	  flush, else right away (a no-op unless the sequence just logged).  A
 *	  crash therefore never hands a token out twice, under any
 *	  synchronous_commit setting and independently of the clock.
 *
 * Tokens of dlock 0.1 and 0.2 were (timeline << 47) + n, below the clock
 * for every timeline up to 12, so the first token after an upgrade is moved
 * up to the clock and stays greater than all of them.  The sequence is
 * dumped by pg_dump (pg_extension_config_dump).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"

#include "base/base.h"
#include "base/base_int.h"

/* how far below the clock a token may fall before the floor moves it up */
#define DLOCK_TOKEN_SLACK_US	(10 * 1000)

/* microseconds from 1970-01-01 to PostgreSQL's epoch, 2000-01-01 */
#define DLOCK_UNIX_EPOCH_OFFSET_US \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

static Oid
token_seq_oid(void)
{
	Oid			nsp = get_namespace_oid(DLOCK_SCHEMA, false);
	Oid			relid = get_relname_relid("token_seq", nsp);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("sequence %s.token_seq is missing", DLOCK_SCHEMA),
				 errhint("Drop and re-create the extension dlock.")));
	return relid;
}

/*
 * The clock in microseconds since 1970: no token is more than the slack
 * below it (the floor rule above).
 */
static int64
clock_floor(void)
{
	return (int64) GetCurrentTimestamp() + DLOCK_UNIX_EPOCH_OFFSET_US;
}

/* setval(seq, v) as the owner of dlock's objects */
static void
setval_as_owner(Oid seq, int64 v)
{
	/*
	 * setval checks privileges, and the caller has none on dlock's sequence.
	 * An error restores the caller's identity through transaction abort.
	 */
	Oid			save_user;
	int			save_sec;

	GetUserIdAndSecContext(&save_user, &save_sec);
	SetUserIdAndSecContext(dlock_schema_owner(),
						   save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	DirectFunctionCall2(setval_oid, ObjectIdGetDatum(seq), Int64GetDatum(v));
	SetUserIdAndSecContext(save_user, save_sec);
}

/*
 * Flush the WAL that records the sequence past the value just drawn: the
 * LSN of its page covers the last nextval or setval record.  XLogFlush
 * returns at once when that is flushed already.
 */
static void
flush_sequence_wal(Oid seq)
{
	Relation	rel = relation_open(seq, AccessShareLock);
	Buffer		buf = ReadBuffer(rel, 0);
	XLogRecPtr	lsn;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	lsn = PageGetLSN(BufferGetPage(buf));
	UnlockReleaseBuffer(buf);
	relation_close(rel, AccessShareLock);
	XLogFlush(lsn);
}

/*
 * Whether this transaction's commit flushes the WAL before the token can
 * reach the client: a single-statement transaction that commits with its
 * flush (synchronous_commit local or higher) sends its result after the
 * commit.  Then the flush of the sequence's WAL is left to the commit,
 * rather than paid twice.  (A statement that returns so many rows that
 * some are sent before it ends is the exception, see the README.)
 */
static bool
commit_flushes_first(void)
{
	return !IsTransactionBlock() &&
		synchronous_commit >= SYNCHRONOUS_COMMIT_LOCAL_FLUSH;
}

/*
 * The next fencing token.  The sequence is not readable by ordinary roles;
 * nextval_internal is called without a privilege check.
 */
int64
dlock_next_token(void)
{
	Oid			seq = token_seq_oid();
	int64		v;

	v = nextval_internal(seq, false);
	if (v < clock_floor() - DLOCK_TOKEN_SLACK_US)
	{
		/*
		 * Below the clock: move the sequence up under a lock, so that two
		 * backends cannot both do it (a second setval could move it back
		 * under a value already handed out).
		 */
		DlockKeyLock bump = {0, DLOCK_CLASS_TOKEN};

		dlock_key_lock(&bump, ExclusiveLock);
		v = nextval_internal(seq, false);
		if (v < clock_floor() - DLOCK_TOKEN_SLACK_US)
		{
			setval_as_owner(seq, clock_floor());
			v = nextval_internal(seq, false);
		}
		dlock_key_unlock(&bump, ExclusiveLock);
	}
	if (!commit_flushes_first())
		flush_sequence_wal(seq);
	return v;
}
