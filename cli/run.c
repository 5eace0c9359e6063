/*-------------------------------------------------------------------------
 *
 * run.c
 *		dlock run: run a command while holding a lease.
 *
 * Acquires KEY (waiting up to --wait), starts CMD with DLOCK_KEY,
 * DLOCK_HOLDER and DLOCK_TOKEN in its environment, and renews the lease
 * with its token every ttl/3.  When the lease is lost (a renewal returns
 * false, or the database stays unreachable until the lease would have
 * lapsed), CMD gets SIGTERM, then SIGKILL after --grace, and dlock exits
 * 70.  When CMD ends, the lease is released with its token and dlock exits
 * with CMD's status (128 + the signal when a signal killed it).  SIGINT,
 * SIGTERM and SIGHUP sent to dlock while CMD runs are passed on to it, also
 * while dlock waits on the database; before CMD starts they cancel the
 * acquire and end dlock, leaving nothing held or queued (acquire.c); once
 * CMD has ended they do not cut the release short.  A broken connection is
 * made again while the lease can still be renewed in time.
 *
 * No wait on the database outlasts the lease: dlock counts the lease's end
 * from when the acquire or the last successful renewal was sent (the server
 * set its expiry later than that), and every database call of the run
 * (db.c) gives up there.  A database that hangs, not answering, is thus
 * like one that is down: at the lease's end, CMD is stopped.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock_cli.h"

static pid_t
start_command(const Options *o, const char *token, char **argv)
{
	pid_t		pid = fork();

	if (pid < 0)
	{
		perror("dlock: fork");
		return -1;
	}
	if (pid == 0)
	{
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		setenv("DLOCK_KEY", o->key, 1);
		setenv("DLOCK_HOLDER", o->holder, 1);
		setenv("DLOCK_TOKEN", token, 1);
		execvp(argv[0], argv);
		fprintf(stderr, "dlock: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

static int
exit_status_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

/* the lease dlock run holds: what renewing it needs, and when it lapses */
typedef struct RunLease
{
	const Options *o;
	Db			db;
	char		ttl[64];
	char		token[32];
	pid_t		child;			/* CMD, while it runs; 0 once reaped */
	long long	period;			/* renew every ttl/3 */
	long long	lease_until;	/* when it may lapse unless renewed (earliest) */
	long long	next_renew;
} RunLease;

/*
 * Pass the signals dlock got on to the command (once it has ended, while
 * dlock releases the lease, they are dropped: the release goes on).
 */
static void
pass_on_signals(pid_t child)
{
	int			signo;

	while ((signo = signals_next()) != 0)
	{
		if (child > 0)
			kill(child, signo);
	}
}

/* the Db's wake callback while CMD runs: signals go on to CMD */
static int
on_db_wake(void *arg)
{
	RunLease   *l = (RunLease *) arg;

	pass_on_signals(l->child);
	return 0;
}

/*
 * One renewal with the token, given up when the lease ends (at the latest
 * at deadline): *renewed says whether the database said yes.
 */
static DbResult
renew_call(RunLease *l, long long deadline, bool *renewed)
{
	const Options *o = l->o;
	const char *ren[4] = {o->key, o->holder, l->ttl, l->token};
	char		ok[8];
	DbResult	rc;

	l->db.deadline = deadline;
	rc = db_call(&l->db, "SELECT dlock_renew($1, $2, $3::interval, $4::bigint)",
				 4, ren, ok, sizeof(ok));
	*renewed = rc == DB_OK && strcmp(ok, "t") == 0;
	return rc;
}

/*
 * Say why the lease is lost, after a renewal that the database answered
 * (rc) without renewing: the server refused it (the lease had expired, or
 * was released, force-released or taken over), and who holds the key now,
 * as far as this role may see (one more call, 5 s at most); or dlock_renew
 * is gone.  when: "" or " before CMD started".
 */
static void
say_lost(RunLease *l, DbResult rc, const char *when)
{
	const char *p[1] = {l->o->key};
	PGresult   *r;

	if (rc == DB_NOT_INSTALLED)
	{
		fprintf(stderr, "dlock: lease %s lost%s: dlock_renew is missing (was the"
				" dlock extension dropped?):\n", l->o->key, when);
		print_lines(stderr, l->db.error);
		return;
	}
	fprintf(stderr, "dlock: lease %s lost%s: the server refused the renewal"
			" (dlock_renew returned %s: the lease had expired, or was released,"
			" force-released or taken over)", l->o->key, when,
			rc == DB_NULL ? "NULL" : "false");
	l->db.deadline = now_ms() + 5000;
	if (db_rows(&l->db, "SELECT holder, token FROM dlock_leader($1)", 1, p,
				&r) == DB_OK)
	{
		if (PQntuples(r) == 0)
			fprintf(stderr, "; no lease on it is live now that this role may see");
		else
			fprintf(stderr, "; it is held now by %s with token %s",
					PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
		PQclear(r);
	}
	fprintf(stderr, "\n");
}

/*
 * Renew the lease, now being when the renewal is due; false if it is lost
 * (the renewal said no, or no renewal succeeded before the lease's end:
 * every wait on the database ends there).
 */
static bool
renew_lease(RunLease *l, long long now)
{
	const Options *o = l->o;
	bool		renewed;
	DbResult	rc = renew_call(l, l->lease_until, &renewed);

	if (renewed)
	{
		/* the renewal was sent after now: the lease holds until now + ttl */
		l->lease_until = now + o->ttl_ms;
		l->next_renew = now + l->period;
	}
	else if (rc == DB_OK || rc == DB_NULL || rc == DB_NOT_INSTALLED)
	{
		say_lost(l, rc, "");
		return false;
	}
	else if (now_ms() >= l->lease_until)
	{
		fprintf(stderr, "dlock: lease %s lapsed while the database was unreachable:\n",
				o->key);
		print_lines(stderr, l->db.error);
		return false;
	}
	else
	{
		/* try again soon, while the lease still holds */
		long long	retry = l->period / 5 > 200 ? l->period / 5 : 200;

		l->next_renew = now + retry < l->lease_until ? now + retry : l->lease_until;
	}
	return true;
}

/*
 * Acquire the lease (waiting up to --wait) and learn when it ends at the
 * latest.  It was granted between sending the acquire and its answer, so
 * it holds at least until the sending + ttl; when the acquire took long
 * (it waited), that is too early, and a renewal (before CMD starts) tells
 * instead.  Returns 0, or the exit code.  A signal before CMD starts
 * cancels the acquire or releases the lease, and ends dlock (acquire.c).
 */
static int
take_lease(RunLease *l)
{
	const Options *o = l->o;
	long long	sent = now_ms();
	long long	answered;
	bool		renewed;
	DbResult	rc;

	l->db.deadline = sent + o->wait_ms + o->ttl_ms;
	rc = acquire_lease(&l->db, o, l->token, sizeof(l->token));
	if (rc != DB_OK)
	{
		db_close(&l->db);
		return acquire_failure(&l->db, o, rc);
	}
	answered = now_ms();
	if (answered - sent > l->period / 2)
	{
		sent = now_ms();
		rc = renew_call(l, answered + o->ttl_ms, &renewed);
		if (l->db.interrupted)
			interrupted_release(&l->db, o, l->token, "before CMD started, holding");
		if (!renewed)
		{
			db_close(&l->db);
			if (rc != DB_OK && rc != DB_NULL)
				return db_failure(&l->db, rc);
			say_lost(l, rc, " before CMD started");
			return EXIT_LOST;
		}
	}
	l->lease_until = sent + o->ttl_ms;
	l->next_renew = sent + l->period;
	return 0;
}

/*
 * The lease is lost: SIGTERM to the command, then SIGKILL once kill_at has
 * passed (--grace later), and again every second.
 */
static void
stop_command(const Options *o, pid_t child, bool *term_sent, long long *kill_at)
{
	if (!*term_sent)
	{
		kill(child, SIGTERM);
		*term_sent = true;
		*kill_at = now_ms() + o->grace_ms;
	}
	else if (now_ms() >= *kill_at)
	{
		kill(child, SIGKILL);
		*kill_at = now_ms() + 1000;
	}
}

/*
 * Renew the lease while CMD runs, passing signals on, until CMD ends (its
 * wait status in *status); true if the lease was lost (CMD was stopped).
 */
static bool
supervise(RunLease *l, int *status)
{
	bool		lost = false;
	bool		term_sent = false;
	long long	kill_at = 0;

	for (;;)
	{
		long long	now;
		long long	until;
		struct pollfd pfd = {l->db.wake_fd, POLLIN, 0};

		pass_on_signals(l->child);
		if (waitpid(l->child, status, WNOHANG) == l->child)
			break;
		now = now_ms();
		if (!lost && now >= l->next_renew)
		{
			lost = !renew_lease(l, now);
			continue;			/* its waits may have read a SIGCHLD: look again */
		}
		if (lost)
			stop_command(l->o, l->child, &term_sent, &kill_at);
		until = lost ? kill_at : l->next_renew;
		if (until > now)
			(void) poll(&pfd, 1, (int) (until - now));
	}
	l->child = 0;
	return lost;
}

/* give the lease back, with its token, while it still holds */
static void
release_lease(RunLease *l)
{
	const Options *o = l->o;
	const char *rel[3] = {o->key, o->holder, l->token};
	char		ok[8];
	DbResult	rc;

	for (;;)
	{
		/* one try at least, even if the lease may have just lapsed */
		l->db.deadline = l->lease_until > now_ms() + 1000 ? l->lease_until : now_ms() + 1000;
		rc = db_call(&l->db, "SELECT dlock_release($1, $2, $3::bigint)", 3, rel,
					 ok, sizeof(ok));
		if (rc != DB_UNREACHABLE || now_ms() >= l->lease_until)
			break;
		usleep(200 * 1000);
	}
	if (rc != DB_OK)
	{
		fprintf(stderr, "dlock: could not release %s (it lapses by itself):\n", o->key);
		print_lines(stderr, l->db.error);
	}
}

/* What CMD's end (its wait status) means, on standard error if not 0. */
static int
command_status(const char *cmd, int status)
{
	int			rc = exit_status_of(status);

	if (WIFSIGNALED(status))
		fprintf(stderr, "dlock: %s was killed by signal %d\n", cmd, WTERMSIG(status));
	else if (rc != 0)
		fprintf(stderr, "dlock: %s exited with status %d\n", cmd, rc);
	return rc;
}

int
cmd_run(const Options *o, char **argv)
{
	RunLease	l = {.o = o, .db = {.conninfo = o->conninfo}};
	int			status = 0;
	int			rc;
	int			signo;
	bool		lost;

	l.period = o->ttl_ms / 3 > 0 ? o->ttl_ms / 3 : 1;
	interval_text(o->ttl_ms, l.ttl, sizeof(l.ttl));
	if ((rc = take_lease(&l)) != 0)
		return rc;

	/* a signal that came as the lease was granted: CMD does not start */
	if ((signo = signals_next()) != 0)
	{
		l.db.interrupted = signo;
		interrupted_release(&l.db, o, l.token, "before CMD started, holding");
	}
	l.child = start_command(o, l.token, argv);
	if (l.child < 0)
	{
		l.child = 0;
		release_lease(&l);
		db_close(&l.db);
		return EXIT_UNAVAIL;
	}
	/* while waiting on the database, too, signals go on to CMD */
	l.db.wake_arg = &l;
	l.db.on_wake = on_db_wake;

	lost = supervise(&l, &status);
	if (!lost)
		release_lease(&l);
	db_close(&l.db);
	return lost ? EXIT_LOST : command_status(argv[0], status);
}
