/*-------------------------------------------------------------------------
 *
 * db.c
 *		The command line's database access: one libpq connection, made by
 *		libpq's conventions (-d conninfo or URI, PGHOST, PGPORT, PGDATABASE,
 *		PGUSER, PGPASSWORD, .pgpass, PGSERVICE, sslmode), reconnected when
 *		it breaks.
 *
 * Every call is one parameterised statement (PQsendQueryParams: the unnamed
 * prepared statement of the extended protocol), so it works behind
 * pgbouncer in transaction mode: no session state, no named statements.
 *
 * Nothing here blocks past db->deadline: the connection is made with
 * PQconnectStartParams/PQconnectPoll and the statement sent and its answer
 * read with libpq's asynchronous calls, waiting in poll() on the socket (and
 * on db->wake_fd, the signal pipe: dlock run keeps passing signals on to
 * CMD while it waits, and a signal while dlock acquires interrupts the
 * call).  A statement still unanswered at the deadline is cancelled and
 * its connection closed.  An interrupted connection attempt is given up;
 * an interrupted statement is cancelled and its answer awaited (10 s at
 * most), so that the caller learns what the server did.
 *
 * Errors are kept for messages as lines (libpq's, or the server's severity,
 * message, detail and hint, without the statement's text), which the
 * caller prints each with "dlock: " before it (print_lines).  So do the
 * notices and warnings the server sends, and the error a server sends as it
 * closes an idle connection (a restart's FATAL), which libpq passes to the
 * notice processor: no line dlock prints on stderr lacks the prefix.
 * libpq's connect_timeout bounds the connection
 * too, though for all of a conninfo's hosts together (libpq itself moves
 * to the next host when one times out; PQconnectPoll does not).  TCP
 * keepalives are on unless the conninfo says otherwise, so that a dead
 * peer is noticed on an idle connection.  Host names are resolved by
 * PQconnectPoll, which blocks while it does: use hostaddr to avoid that.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock_cli.h"

typedef enum WaitResult
{
	WAIT_READY,					/* the socket is ready */
	WAIT_TIMEOUT,				/* the deadline passed */
	WAIT_FAILED,				/* poll() failed (db->error says why) */
	WAIT_SIGNAL					/* a signal interrupted the call */
} WaitResult;

/*
 * Wait until the connection's socket is ready for events, or the deadline
 * (0: none), calling on_wake whenever wake_fd is readable.  The first
 * signal on_wake returns interrupts the wait (WAIT_SIGNAL, db->interrupted
 * set); later ones do not: the call is being ended by then.
 */
static WaitResult
wait_socket(Db *db, int events, long long deadline)
{
	for (;;)
	{
		struct pollfd pfd[2];
		nfds_t		n = 1;
		long long	left = deadline > 0 ? deadline - now_ms() : -1;

		if (deadline > 0 && left <= 0)
			return WAIT_TIMEOUT;
		pfd[0].fd = PQsocket(db->conn);
		pfd[0].events = (short) events;
		pfd[0].revents = 0;
		if (db->on_wake)
		{
			pfd[1].fd = db->wake_fd;
			pfd[1].events = POLLIN;
			pfd[1].revents = 0;
			n = 2;
		}
		if (poll(pfd, n, left > INT_MAX ? INT_MAX : (int) left) < 0)
		{
			if (errno == EINTR)
				continue;
			snprintf(db->error, sizeof(db->error), "poll: %s\n", strerror(errno));
			return WAIT_FAILED;
		}
		if (n == 2 && pfd[1].revents != 0)
		{
			int			signo = db->on_wake(db->wake_arg);

			if (signo != 0 && db->interrupted == 0)
			{
				db->interrupted = signo;
				return WAIT_SIGNAL;
			}
		}
		if (pfd[0].revents != 0)
			return WAIT_READY;
	}
}

/*
 * When the connection is made at the latest: the deadline, or sooner if
 * the connection's connect_timeout (as libpq reads it: at least 2 s, 0 for
 * none) comes first.
 */
static long long
connect_deadline(Db *db)
{
	PQconninfoOption *opts = PQconninfo(db->conn);
	long long	deadline = db->deadline;

	for (PQconninfoOption *opt = opts; opt && opt->keyword; opt++)
	{
		if (strcmp(opt->keyword, "connect_timeout") == 0 && opt->val)
		{
			long		t = strtol(opt->val, NULL, 10);

			if (t > 0)
			{
				long long	at = now_ms() + (t < 2 ? 2 : t) * 1000LL;

				if (deadline <= 0 || at < deadline)
					deadline = at;
			}
		}
	}
	PQconninfoFree(opts);
	return deadline;
}

/* libpq's notice processor: the server's notices, each line "dlock: " */
static void
notice_to_stderr(void *arg, const char *message)
{
	print_lines(stderr, message);
}

bool
db_connect(Db *db)
{
	/* keepalives first: what the conninfo (dbname, expanded) says wins */
	const char *const kw[] = {"keepalives", "keepalives_idle", "keepalives_interval",
	"keepalives_count", "dbname", NULL};
	const char *const val[] = {"1", "10", "5", "3", db->conninfo, NULL};
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	long long	deadline;
	WaitResult	w = WAIT_READY;

	if (db->conn && PQstatus(db->conn) == CONNECTION_OK)
		return true;
	db_close(db);
	db->conn = PQconnectStartParams(kw, val, 1);
	if (db->conn == NULL)
	{
		snprintf(db->error, sizeof(db->error), "out of memory\n");
		return false;
	}
	PQsetNoticeProcessor(db->conn, notice_to_stderr, NULL);
	deadline = connect_deadline(db);
	while (PQstatus(db->conn) != CONNECTION_BAD && st != PGRES_POLLING_OK &&
		   st != PGRES_POLLING_FAILED)
	{
		w = wait_socket(db, st == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline);
		if (w != WAIT_READY)
			break;
		st = PQconnectPoll(db->conn);
	}
	if (st != PGRES_POLLING_OK || PQstatus(db->conn) != CONNECTION_OK)
	{
		if (w == WAIT_SIGNAL)
			snprintf(db->error, sizeof(db->error), "interrupted while connecting\n");
		else if (w == WAIT_TIMEOUT)
			snprintf(db->error, sizeof(db->error),
					 "connection to server at \"%s\" not made in time\n",
					 PQhost(db->conn) ? PQhost(db->conn) : "");
		else if (PQstatus(db->conn) == CONNECTION_BAD)
			snprintf(db->error, sizeof(db->error), "%s", PQerrorMessage(db->conn));
		db_close(db);
		return false;
	}
	/* sends must not block either */
	if (PQsetnonblocking(db->conn, 1) != 0)
	{
		snprintf(db->error, sizeof(db->error), "%s", PQerrorMessage(db->conn));
		db_close(db);
		return false;
	}
	return true;
}

void
db_close(Db *db)
{
	if (db->conn)
		PQfinish(db->conn);
	db->conn = NULL;
}

/*
 * Ask the server to cancel the statement it has not answered.  PQcancel
 * waits for the server to close its cancel connection, which a hung
 * server never does, so a helper process sends it (detached: a child that
 * forks the sender and exits at once), gives up after 10 s, and leaves
 * dlock's standard output and error alone (a shell reading them would
 * wait for it).
 */
static void
send_cancel(Db *db)
{
	PGcancel   *cancel = PQgetCancel(db->conn);
	pid_t		pid;

	if (cancel == NULL)
		return;
	pid = fork();
	if (pid == 0)
	{
		if (fork() == 0)
		{
			char		err[256];
			int			null = open("/dev/null", O_RDWR);

			for (int fd = 0; fd <= 2 && null >= 0; fd++)
				dup2(null, fd);
			signal(SIGINT, SIG_DFL);	/* not dlock run's handlers */
			signal(SIGTERM, SIG_DFL);
			signal(SIGHUP, SIG_DFL);
			signal(SIGCHLD, SIG_DFL);
			alarm(10);
			(void) PQcancel(cancel, err, sizeof(err));
		}
		_exit(0);
	}
	if (pid > 0)
		(void) waitpid(pid, NULL, 0);
	PQfreeCancel(cancel);
}

/*
 * Wait for the socket while a statement is under way, until db->deadline.
 * Once a signal interrupts it, the statement is cancelled: a cancel
 * request goes to the server, again every second (one that arrives before
 * the statement started is lost), and the wait goes on for the answer
 * (the cancel's error, or a result that came first), 10 s at most.
 * False when the wait ends without the socket ready (*timed_out set if
 * the time ran out).
 */
static bool
await_answer(Db *db, int events, bool *timed_out)
{
	for (;;)
	{
		long long	deadline = db->deadline;
		WaitResult	w;

		if (db->cancelling)
		{
			if (now_ms() >= db->next_cancel)
			{
				send_cancel(db);
				db->next_cancel = now_ms() + 1000;
			}
			deadline = db->next_cancel < db->cancel_until ? db->next_cancel : db->cancel_until;
		}
		w = wait_socket(db, events, deadline);
		if (w == WAIT_READY)
			return true;
		if (w == WAIT_SIGNAL)
		{
			db->cancelling = true;
			db->cancel_until = now_ms() + 10000;
			db->next_cancel = now_ms();
			continue;
		}
		if (w == WAIT_TIMEOUT && db->cancelling && now_ms() < db->cancel_until)
			continue;			/* time to send the cancel again */
		*timed_out = (w == WAIT_TIMEOUT);
		return false;
	}
}

/*
 * Send sql and read its answer, waiting at most until the deadline: the
 * last result, or NULL (the connection broke, or *timed_out).
 */
static PGresult *
exchange(Db *db, const char *sql, int nparams, const char *const *params,
		 bool *timed_out)
{
	PGconn	   *conn = db->conn;
	PGresult   *res = NULL;
	PGresult   *r;
	int			f;

	if (!PQsendQueryParams(conn, sql, nparams, NULL, params, NULL, NULL, 0))
		return NULL;
	db->sent = true;
	while ((f = PQflush(conn)) > 0)
	{
		if (!await_answer(db, POLLIN | POLLOUT, timed_out) || !PQconsumeInput(conn))
			return NULL;
	}
	if (f < 0)
		return NULL;
	for (;;)
	{
		while (PQisBusy(conn))
		{
			if (!await_answer(db, POLLIN, timed_out) || !PQconsumeInput(conn))
			{
				PQclear(res);
				return NULL;
			}
		}
		if ((r = PQgetResult(conn)) == NULL)
			break;
		PQclear(res);
		res = r;
	}
	return res;
}

/* what an error result means for the caller */
static DbResult
classify_error(Db *db, PGresult *r)
{
	const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	const char *severity = PQresultErrorField(r, PG_DIAG_SEVERITY);
	const char *primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
	const char *detail = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL);
	const char *hint = PQresultErrorField(r, PG_DIAG_MESSAGE_HINT);

	snprintf(db->sqlstate, sizeof(db->sqlstate), "%s", state ? state : "");
	/* the message without the statement's text and its caret line */
	if (primary)
		snprintf(db->error, sizeof(db->error), "%s:  %s\n%s%s%s%s%s%s",
				 severity ? severity : "ERROR", primary,
				 detail ? "DETAIL:  " : "", detail ? detail : "", detail ? "\n" : "",
				 hint ? "HINT:  " : "", hint ? hint : "", hint ? "\n" : "");
	else
		snprintf(db->error, sizeof(db->error), "%s", PQresultErrorMessage(r));
	if (PQstatus(db->conn) != CONNECTION_OK)
	{
		db_close(db);
		return DB_UNREACHABLE;
	}
	/* an undefined function or schema: dlock is not installed here */
	if (strcmp(db->sqlstate, "42883") == 0 || strcmp(db->sqlstate, "3F000") == 0 ||
		strcmp(db->sqlstate, "42P01") == 0)
		return DB_NOT_INSTALLED;
	/* the server is going away (shutdown, failover): like a broken connection */
	if (strncmp(db->sqlstate, "57P", 3) == 0 || strncmp(db->sqlstate, "08", 2) == 0)
	{
		db_close(db);
		return DB_UNREACHABLE;
	}
	return DB_ERROR;
}

/*
 * Run sql with its text parameters; on success *res holds the result
 * (PQclear it).  A broken connection, or one whose statement the deadline
 * cut short, is closed, to be made again by the next call.
 */
DbResult
db_rows(Db *db, const char *sql, int nparams, const char *const *params,
		PGresult **res)
{
	PGresult   *r;
	bool		timed_out = false;
	DbResult	rc;

	*res = NULL;
	db->sqlstate[0] = '\0';
	db->sent = false;
	db->cancelling = false;
	if (!db_connect(db))
		return DB_UNREACHABLE;
	r = exchange(db, sql, nparams, params, &timed_out);
	if (r == NULL)
	{
		if (timed_out && db->cancelling)
			snprintf(db->error, sizeof(db->error),
					 "no answer from the database to the cancel request\n");
		else if (timed_out)
		{
			snprintf(db->error, sizeof(db->error), "no answer from the database in time\n");
			send_cancel(db);
		}
		else
			snprintf(db->error, sizeof(db->error), "%s", PQerrorMessage(db->conn));
		db_close(db);
		return DB_UNREACHABLE;
	}
	if (PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK)
	{
		*res = r;
		return DB_OK;
	}
	rc = classify_error(db, r);
	PQclear(r);
	return rc;
}

/* A call returning one value: its text in out, or DB_NULL. */
DbResult
db_call(Db *db, const char *sql, int nparams, const char *const *params,
		char *out, size_t outlen)
{
	PGresult   *r;
	DbResult	rc = db_rows(db, sql, nparams, params, &r);

	if (rc != DB_OK)
		return rc;
	if (PQntuples(r) != 1 || PQnfields(r) < 1 || PQgetisnull(r, 0, 0))
	{
		PQclear(r);
		return DB_NULL;
	}
	snprintf(out, outlen, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return DB_OK;
}

/*
 * Print text (a message of libpq or of the server, one line or more) with
 * "dlock: " before each of its lines, their leading blanks dropped.
 */
void
print_lines(FILE *f, const char *text)
{
	while (*text)
	{
		size_t		len = strcspn(text, "\n");
		size_t		skip = strspn(text, " \t");

		if (skip < len)
			fprintf(f, "dlock: %.*s\n", (int) (len - skip), text + skip);
		text += len;
		if (*text == '\n')
			text++;
	}
}

/* milliseconds as a PostgreSQL interval */
char *
interval_text(long long ms, char *buf, size_t len)
{
	snprintf(buf, len, "%lld milliseconds", ms);
	return buf;
}

/* milliseconds of the monotonic clock: deadlines of calls and waits */
long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * After a call found a function missing: whether the dlock extension of
 * this database is older than version ("0.4"), which what (an option, a
 * command) needs; if so, says so and how to update, on stderr.  Asks the
 * database only then; keeps the failed call's error for db_failure.  No
 * signal interrupts the question, and it gives up after 10 s.
 */
bool
db_older_than(Db *db, const char *version, const char *what)
{
	char		error[sizeof(db->error)];
	char		sqlstate[sizeof(db->sqlstate)];
	char		have[64];
	int			major,
				minor,
				need_major,
				need_minor;
	bool		older;

	memcpy(error, db->error, sizeof(error));
	memcpy(sqlstate, db->sqlstate, sizeof(sqlstate));
	db->on_wake = NULL;
	db->deadline = now_ms() + 10000;
	older = db_call(db, "SELECT extversion FROM pg_catalog.pg_extension"
					" WHERE extname = 'dlock'", 0, NULL, have, sizeof(have)) == DB_OK &&
		sscanf(have, "%d.%d", &major, &minor) == 2 &&
		sscanf(version, "%d.%d", &need_major, &need_minor) == 2 &&
		(major < need_major || (major == need_major && minor < need_minor));
	memcpy(db->error, error, sizeof(error));
	memcpy(db->sqlstate, sqlstate, sizeof(sqlstate));
	if (older)
	{
		fprintf(stderr, "dlock: %s needs the dlock extension %s or later; this database"
				" has %s\n", what, version, have);
		fprintf(stderr, "dlock: HINT:  Update it in this database with ALTER EXTENSION"
				" dlock UPDATE, as its owner or a superuser.\n");
	}
	return older;
}

/* The message and exit code of a failed call. */
int
db_failure(Db *db, DbResult rc)
{
	print_lines(stderr, db->error[0] ? db->error : "no answer from the database");
	if (rc == DB_NOT_INSTALLED)
		fprintf(stderr, "dlock: is the dlock extension installed in this database?\n");
	if (rc == DB_ERROR && strncmp(db->sqlstate, "22", 2) == 0)
		return EXIT_USAGE;
	return EXIT_UNAVAIL;
}
