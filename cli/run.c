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
 * SIGTERM and SIGHUP sent to dlock are passed on to CMD.  A broken
 * connection is made again while the lease can still be renewed in time.
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

static int sigpipe_fds[2] = {-1, -1};

static void
on_signal(int signo)
{
	int			saved = errno;
	unsigned char b = (unsigned char) signo;

	if (write(sigpipe_fds[1], &b, 1) < 0)
	{
		/* the pipe is full: the signal is pending there already */
	}
	errno = saved;
}

static void
catch_signals(void)
{
	struct sigaction sa;
	const int	sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};

	if (pipe(sigpipe_fds) != 0)
	{
		perror("dlock: pipe");
		exit(EXIT_UNAVAIL);
	}
	for (int i = 0; i < 2; i++)
	{
		fcntl(sigpipe_fds[i], F_SETFL, fcntl(sigpipe_fds[i], F_GETFL) | O_NONBLOCK);
		fcntl(sigpipe_fds[i], F_SETFD, FD_CLOEXEC);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

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

/* exit code for a failed acquire */
static int
acquire_failure(Db *db, DbResult rc)
{
	if (rc == DB_NULL)
		return EXIT_NOT_ACQUIRED;
	fprintf(stderr, "dlock: %s", db->error[0] ? db->error : "no answer\n");
	if (rc == DB_NOT_INSTALLED)
		fprintf(stderr, "dlock: is the dlock extension installed in this database?\n");
	if (rc == DB_ERROR && strncmp(db->sqlstate, "22", 2) == 0)
		return EXIT_USAGE;
	return EXIT_UNAVAIL;
}

/* the lease dlock run holds: what renewing it needs, and when it lapses */
typedef struct RunLease
{
	const Options *o;
	Db			db;
	char		ttl[64];
	char		token[32];
	long long	period;			/* renew every ttl/3 */
	long long	lease_until;	/* when it lapses unless renewed */
	long long	next_renew;
} RunLease;

/* pass the signals dlock got (all but SIGCHLD) on to the command */
static void
pass_on_signals(pid_t child)
{
	unsigned char sigs[64];
	ssize_t		n;

	while ((n = read(sigpipe_fds[0], sigs, sizeof(sigs))) > 0)
	{
		for (ssize_t i = 0; i < n; i++)
		{
			if (sigs[i] != SIGCHLD)
				kill(child, sigs[i]);	/* pass it on */
		}
	}
}

/*
 * Renew the lease, now being when the renewal is due; false if it is lost
 * (the renewal said no, or the database stayed unreachable until the lease
 * lapsed).
 */
static bool
renew_lease(RunLease *l, long long now)
{
	const Options *o = l->o;
	const char *ren[4] = {o->key, o->holder, l->ttl, l->token};
	char		ok[8];
	DbResult	rc;

	rc = db_call(&l->db, "SELECT dlock_renew($1, $2, $3::interval, $4::bigint)",
				 4, ren, ok, sizeof(ok));
	if (rc == DB_OK && strcmp(ok, "t") == 0)
	{
		l->lease_until = now + o->ttl_ms;
		l->next_renew = now + l->period;
	}
	else if (rc == DB_OK || rc == DB_NULL || rc == DB_NOT_INSTALLED)
	{
		fprintf(stderr, "dlock: lease %s lost\n", o->key);
		return false;
	}
	else if (now_ms() >= l->lease_until)
	{
		fprintf(stderr, "dlock: lease %s lapsed while the database was unreachable: %s",
				o->key, l->db.error);
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

/* give the lease back, with its token, while it still holds */
static void
release_lease(RunLease *l)
{
	const Options *o = l->o;
	char		ok[8];
	DbResult	rc;

	for (;;)
	{
		rc = db_call(&l->db, "SELECT dlock_release($1, $2, $3::bigint)", 3,
					 (const char *[]) {o->key, o->holder, l->token}, ok, sizeof(ok));
		if (rc != DB_UNREACHABLE || now_ms() >= l->lease_until)
			break;
		usleep(200 * 1000);
	}
	if (rc != DB_OK)
		fprintf(stderr, "dlock: could not release %s (it lapses by itself): %s", o->key,
				l->db.error);
}

int
cmd_run(const Options *o, char **argv)
{
	RunLease	l = {.o = o, .db = {o->conninfo, NULL, "", ""}};
	char		wait[64], ok[8];
	const char *acq[4] = {o->key, o->holder, l.ttl, wait};
	DbResult	rc;
	pid_t		child;
	int			status = 0;
	bool		lost = false;
	bool		term_sent = false;
	long long	kill_at = 0;

	l.period = o->ttl_ms / 3 > 0 ? o->ttl_ms / 3 : 1;
	interval_text(o->ttl_ms, l.ttl, sizeof(l.ttl));
	interval_text(o->wait_ms, wait, sizeof(wait));
	rc = db_call(&l.db, "SELECT dlock_acquire($1, $2, $3::interval, $4::interval)",
				 4, acq, l.token, sizeof(l.token));
	if (rc != DB_OK)
		return acquire_failure(&l.db, rc);
	l.lease_until = now_ms() + o->ttl_ms;
	l.next_renew = now_ms() + l.period;

	catch_signals();
	child = start_command(o, l.token, argv);
	if (child < 0)
	{
		(void) db_call(&l.db, "SELECT dlock_release($1, $2, $3::bigint)", 3,
					   (const char *[]) {o->key, o->holder, l.token}, ok, sizeof(ok));
		return EXIT_UNAVAIL;
	}

	for (;;)
	{
		long long	now = now_ms();
		long long	until = lost ? kill_at : l.next_renew;
		struct pollfd pfd = {sigpipe_fds[0], POLLIN, 0};

		if (until > now)
			(void) poll(&pfd, 1, (int) (until - now));
		pass_on_signals(child);
		if (waitpid(child, &status, WNOHANG) == child)
			break;

		now = now_ms();
		if (!lost && now >= l.next_renew)
			lost = !renew_lease(&l, now);
		if (lost)
			stop_command(o, child, &term_sent, &kill_at);
	}

	if (lost)
	{
		db_close(&l.db);
		return EXIT_LOST;
	}
	release_lease(&l);
	db_close(&l.db);
	return exit_status_of(status);
}
