/*-------------------------------------------------------------------------
 *
 * token.c
 *		Fencing tokens that only grow, across crash, restart, promotion of
 *		a standby, and dump and restore.
 *
 * A token is a value of the sequence dlock.token_seq.  A bare sequence is
 * not enough: after promotion of an asynchronous standby, values the old
 * primary had handed out can be handed out again.  So the sequence value
 * always carries the WAL timeline it was issued on in its high bits:
 *
 *		token = (timeline << 47) + n
 *
 * The first token issued on a new timeline finds the sequence below
 * (timeline << 47) and moves it up there, once, under a lock.  Timelines
 * only grow along a cluster's history, so every token issued after a
 * promotion is greater than every token issued before it on the old
 * timeline, whatever the standby had replayed.  A crash is covered by the
 * sequence itself (its WAL record runs ahead of the values handed out and
 * is flushed by the acquire's commit).  The sequence is dumped by pg_dump
 * (pg_extension_config_dump), so a restored database goes on from there.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"

#include "dlock.h"

#define DLOCK_TOKEN_SEQ_BITS	47
#define DLOCK_MAX_TIMELINE		((1 << 16) - 1)

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
 * The next fencing token.  The caller has switched to the owner of dlock's
 * objects; the sequence is not readable by ordinary roles.
 */
int64
dlock_next_token(void)
{
	Oid			seq = token_seq_oid();
	TimeLineID	tli = GetWALInsertionTimeLine();
	int64		base;
	int64		v;

	if (tli > DLOCK_MAX_TIMELINE)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("timeline %u is too high for dlock fencing tokens", tli)));
	base = (int64) tli << DLOCK_TOKEN_SEQ_BITS;

	v = nextval_internal(seq, false);
	if (v <= base)
	{
		/*
		 * First token on this timeline.  Move the sequence up under a lock
		 * so that two backends cannot both do it (a second setval could move
		 * it back under a value already handed out).
		 */
		DlockKeyLock bump = {0, DLOCK_CLASS_TOKEN};

		dlock_key_lock(&bump, ExclusiveLock);
		v = nextval_internal(seq, false);
		if (v <= base)
		{
			/*
			 * setval checks privileges, and the caller has none on dlock's
			 * sequence: do it as the owner of dlock's objects, as the SQL
			 * paths do (spi_access.c).  An error restores the caller's
			 * identity through transaction abort.
			 */
			Oid			save_user;
			int			save_sec;

			GetUserIdAndSecContext(&save_user, &save_sec);
			SetUserIdAndSecContext(dlock_schema_owner(),
								   save_sec | SECURITY_LOCAL_USERID_CHANGE |
								   SECURITY_RESTRICTED_OPERATION);
			DirectFunctionCall2(setval_oid, ObjectIdGetDatum(seq),
								Int64GetDatum(base));
			SetUserIdAndSecContext(save_user, save_sec);
			v = nextval_internal(seq, false);
		}
		dlock_key_unlock(&bump, ExclusiveLock);
	}
	return v;
}
