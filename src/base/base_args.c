/*-------------------------------------------------------------------------
 *
 * base_args.c
 *		Argument checks shared by dlock's SQL-callable functions.
 *
 * dlock's functions are not STRICT: a NULL result means "not acquired",
 * so a NULL argument must be an error, not a NULL.  Every check here
 * raises an ERROR with a proper SQLSTATE before anything is changed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/event_trigger.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "compat.h"

/*
 * fn (its name, for the message) writes: not on a standby, not in a
 * read-only transaction
 */
void
dlock_arg_writes_allowed(const char *fn)
{
	PreventCommandDuringRecovery(fn);
	PreventCommandIfReadOnly(fn);
}

/*
 * fn (its name, for the message) is an event trigger's function: an error
 * when called otherwise.  Returns the trigger's data.
 */
EventTriggerData *
dlock_arg_event_trigger(FunctionCallInfo fcinfo, const char *fn)
{
	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s must be called as an event trigger", fn)));
	return (EventTriggerData *) fcinfo->context;
}

/* what: the argument's name in the message */
void
dlock_arg_not_null(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
}

/* a non-empty text of at most maxbytes bytes */
static text *
check_name(text *t, const char *what, int maxbytes)
{
	int			len = VARSIZE_ANY_EXHDR(t);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	if (len > maxbytes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", what),
				 errdetail("A %s may be at most %d bytes; this one has %d bytes.",
						   what, maxbytes, len)));
	return t;
}

/* a non-empty text argument of at most maxbytes bytes */
static text *
check_name_arg(FunctionCallInfo fcinfo, int argno, const char *what,
			   int maxbytes)
{
	dlock_arg_not_null(fcinfo, argno, what);
	return check_name(PG_GETARG_TEXT_PP(argno), what, maxbytes);
}

text *
dlock_arg_key(FunctionCallInfo fcinfo, int argno)
{
	return check_name_arg(fcinfo, argno, "key", DLOCK_MAX_KEY_BYTES);
}

/* a key that is not an argument of its own (an element of an array) */
text *
dlock_check_key(text *key)
{
	return check_name(key, "key", DLOCK_MAX_KEY_BYTES);
}

text *
dlock_arg_holder(FunctionCallInfo fcinfo, int argno)
{
	return check_name_arg(fcinfo, argno, "holder", DLOCK_MAX_HOLDER_BYTES);
}

/*
 * An interval as microseconds, a month counting as 30 days, computed in
 * 128 bits so that large parts of opposite signs still add up right; a
 * total beyond 64 bits comes back clamped, which every caller rejects.
 */
int64
dlock_interval_usecs(const Interval *iv)
{
	int128		us = ((int128) iv->month * DAYS_PER_MONTH + iv->day) * USECS_PER_DAY +
	iv->time;

	if (us > PG_INT64_MAX)
		return PG_INT64_MAX;
	if (us < PG_INT64_MIN)
		return PG_INT64_MIN;
	return (int64) us;
}

/*
 * An interval argument as microseconds, not NULL, up to max_us (max_text
 * in the message): zero_ok, from zero; else greater than zero.
 */
static int64
interval_arg(FunctionCallInfo fcinfo, int argno, const char *what,
			 bool zero_ok, int64 max_us, const char *max_text)
{
	int64		us;

	dlock_arg_not_null(fcinfo, argno, what);
	us = dlock_interval_usecs(PG_GETARG_INTERVAL_P(argno));
	if (us < 0 || (us == 0 && !zero_ok))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 zero_ok ?
				 errmsg("%s must not be negative", what) :
				 errmsg("%s must be greater than zero", what)));
	if (us > max_us)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be at most %s", what, max_text)));
	return us;
}

/*
 * ttl: greater than zero and at most 30 days.  With null_ok, a NULL comes
 * back as -1 ("use the ttl the lease was granted with").
 */
int64
dlock_arg_ttl(FunctionCallInfo fcinfo, int argno, bool null_ok)
{
	if (null_ok && PG_ARGISNULL(argno))
		return -1;
	return interval_arg(fcinfo, argno, "ttl", false, DLOCK_MAX_TTL_US,
						"30 days");
}

/* wait: zero (do not wait) up to one day */
int64
dlock_arg_wait(FunctionCallInfo fcinfo, int argno)
{
	return interval_arg(fcinfo, argno, "wait", true, DLOCK_MAX_WAIT_US,
						"1 day");
}

/*
 * A delay (a claim's backoff, a give-back's retry_after): zero up to 30
 * days, named what in the messages; NULL comes back as -1.
 */
int64
dlock_arg_delay(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		return -1;
	return interval_arg(fcinfo, argno, what, true, DLOCK_MAX_TTL_US,
						"30 days");
}

/* slots of a semaphore: 1 (a lease) up to DLOCK_MAX_SLOTS */
int
dlock_arg_slots(FunctionCallInfo fcinfo, int argno)
{
	int32		slots;

	dlock_arg_not_null(fcinfo, argno, "slots");
	slots = PG_GETARG_INT32(argno);
	if (slots < 1 || slots > DLOCK_MAX_SLOTS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("slots must be between 1 and %d", DLOCK_MAX_SLOTS),
				 errdetail("This acquire asked for %d slots.", slots)));
	return (int) slots;
}

/*
 * A fencing token argument.  Returns false when the argument is NULL and
 * null_ok (no token given); a NULL where a token is required is an error.
 */
bool
dlock_arg_token(FunctionCallInfo fcinfo, int argno, bool null_ok, int64 *token)
{
	if (PG_ARGISNULL(argno))
	{
		if (null_ok)
			return false;
		dlock_arg_not_null(fcinfo, argno, "token");
	}
	*token = PG_GETARG_INT64(argno);
	return true;
}
