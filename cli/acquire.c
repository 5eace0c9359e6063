/*-------------------------------------------------------------------------
 *
 * acquire.c
 *		Acquiring a lease for dlock acquire and dlock run, and what a
 *		signal does meanwhile.
 *
 * SIGINT, SIGTERM or SIGHUP while dlock connects or waits for the key
 * must leave nothing on the server: the caller never saw a token, so no
 * lease may stay held for it, and no wait may stay queued (a backend left
 * waiting would receive the lease later, held by no process, for the
 * whole ttl).  So the signal interrupts the call (db.c): a connection
 * attempt is given up (nothing was sent), a statement sent is cancelled
 * on the server and its answer awaited.  Then dlock gives back whatever
 * the statement may have granted: the token it returned (a grant that
 * raced the cancel), or a hand-over a releasing transaction committed for
 * this waiter while the cancel arrived.  Last, dlock says so on standard
 * error and dies by the signal.
 *
 * What is given back is this holder's lease on KEY granted after dlock
 * started (its acquired_at, on the server's clock, later than the time
 * dlock has been running allows): a lease the holder had before, which
 * the acquire only extended (a re-acquire keeps acquired_at), stays.
 *
 *-------------------------------------------------------------------------
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock_cli.h"

static long long started_ms;	/* when dlock began to connect */

/* the Db's wake callback while acquiring: a signal interrupts */
static int
interrupt_on_signal(void *arg)
{
	return signals_next();
}

static const char *
signal_name(int signo)
{
	switch (signo)
	{
		case SIGHUP:
			return "SIGHUP";
		case SIGINT:
			return "SIGINT";
		case SIGTERM:
			return "SIGTERM";
		default:
			return "a signal";
	}
}

/*
 * Acquire o->key for o->holder (waiting up to --wait): DB_OK with the
 * token in token[len], DB_NULL when not acquired, or the failure.  A
 * signal meanwhile ends dlock (see above); db->deadline is the caller's.
 */
DbResult
acquire_lease(Db *db, const Options *o, char *token, size_t len)
{
	char		ttl[64], wait[64], slots[16];
	const char *p[5] = {o->key, o->holder, ttl, wait, slots};
	const char *sql = "SELECT dlock_acquire($1, $2, $3::interval, $4::interval)";
	int			nparams = 4;
	DbResult	rc;

	if (started_ms == 0)
		started_ms = now_ms();
	interval_text(o->ttl_ms, ttl, sizeof(ttl));
	interval_text(o->wait_ms, wait, sizeof(wait));
	if (o->slots > 0)
	{
		snprintf(slots, sizeof(slots), "%d", o->slots);
		sql = "SELECT dlock_acquire($1, $2, $3::interval, $4::interval, $5::integer)";
		nparams = 5;
	}
	else if (o->shared)
		sql = "SELECT dlock_acquire_shared($1, $2, $3::interval, $4::interval)";
	db->wake_fd = signals_catch();
	db->on_wake = interrupt_on_signal;
	db->wake_arg = NULL;
	rc = db_call(db, sql, nparams, p, token, len);
	if (db->interrupted)
		interrupted_release(db, o, NULL,
							db->sent ? "while acquiring" : "while connecting to acquire");
	return rc;
}

/*
 * --slots and --shared call functions that dlock 0.4 added: against an
 * older extension they are missing (42883, DB_NOT_INSTALLED) though dlock
 * is installed: say so (db_older_than), else db_failure's message.
 */
static int
option_failure(Db *db, const Options *o, DbResult rc)
{
	if (db_older_than(db, "0.4", o->shared ? "--shared" : "--slots"))
	{
		db_close(db);
		return EXIT_UNAVAIL;
	}
	return db_failure(db, rc);
}

/* The message and exit code of an acquire that did not return a token. */
int
acquire_failure(Db *db, const Options *o, DbResult rc)
{
	char		wait[64];

	if (rc == DB_NOT_INSTALLED && (o->slots > 0 || o->shared))
		return option_failure(db, o, rc);
	if (rc != DB_NULL)
		return db_failure(db, rc);
	if (o->quiet_if_held)
		return EXIT_NOT_ACQUIRED;	/* cron: no mail for a lost race */
	if (o->wait_ms == 0)
		snprintf(wait, sizeof(wait), "at once (no --wait)");
	else
		snprintf(wait, sizeof(wait), "within --wait %lldms", o->wait_ms);
	fprintf(stderr, "dlock: %s not acquired %s: another holder has it, or others"
			" wait for it\n", o->key, wait);
	return EXIT_NOT_ACQUIRED;
}

/*
 * Give back what dlock may hold: the lease with token, or (token NULL,
 * after an interrupted acquire) this holder's lease on the key granted
 * since dlock started.  False if dlock could not make sure.
 */
static bool
give_back(Db *db, const Options *o, const char *token, bool *released)
{
	char		age[64];
	const char *p[3] = {o->key, o->holder, token ? token : age};
	PGresult   *r;
	DbResult	rc;

	*released = false;
	if (!db->sent && token == NULL)
		return true;			/* nothing reached the server */
	db->deadline = now_ms() + 10000;
	db->on_wake = NULL;			/* more signals wait until this is done */
	/* a new connection: a cancel request still on its way hits the old one */
	db_close(db);
	if (!db_connect(db))
		return false;
	/* measured once connected: the server's clock runs on meanwhile */
	interval_text(now_ms() - started_ms, age, sizeof(age));
	if (token)
		rc = db_rows(db, "SELECT dlock_release($1, $2, $3::bigint)", 3, p, &r);
	else
		rc = db_rows(db,
					 "SELECT dlock_release(l.key, l.holder, l.token)"
					 "  FROM dlock_locks l"
					 " WHERE l.key = $1 AND l.holder = $2"
					 "   AND l.acquired_at >= pg_catalog.clock_timestamp() - $3::interval",
					 3, p, &r);
	if (rc != DB_OK)
		return false;
	for (int i = 0; i < PQntuples(r); i++)
		*released |= strcmp(PQgetvalue(r, i, 0), "t") == 0;
	PQclear(r);
	return true;
}

/*
 * A signal came while dlock acquired, or held a lease CMD had not started
 * under yet (token: its token, or NULL if none was seen): leave nothing
 * held, say so in one line, and die by the signal.
 */
void
interrupted_release(Db *db, const Options *o, const char *token, const char *phase)
{
	int			signo = db->interrupted;
	bool		released;

	if (give_back(db, o, token, &released))
		fprintf(stderr, "dlock: %s %s %s: %s\n", signal_name(signo), phase, o->key,
				token ? (released ? "the lease was released" : "the lease had ended already")
				: released ? "cancelled; the lease granted meanwhile was released"
				: "cancelled; it left nothing held or queued");
	else
	{
		fprintf(stderr, "dlock: %s %s %s: could not make sure nothing is held (a lease"
				" granted meanwhile lapses after --ttl):\n", signal_name(signo), phase,
				o->key);
		print_lines(stderr, db->error);
	}
	db_close(db);
	signals_die(signo);
}
