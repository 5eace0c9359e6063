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

int
cmd_run(const Options *o, char **argv)
{
	Db			db = {o->conninfo, NULL, "", ""};
	char		ttl[64], wait[64], token[32], ok[8];
	const char *acq[4] = {o->key, o->holder, ttl, wait};
	const char *ren[4] = {o->key, o->holder, ttl, token};
	DbResult	rc;
	pid_t		child;
	int			status = 0;
	bool		exited = false;
	bool		lost = false;
	bool		term_sent = false;
	long long	lease_until, next_renew, kill_at = 0;
	long long	period = o->ttl_ms / 3 > 0 ? o->ttl_ms / 3 : 1;

	interval_text(o->ttl_ms, ttl, sizeof(ttl));
	interval_text(o->wait_ms, wait, sizeof(wait));
	rc = db_call(&db, "SELECT dlock_acquire($1, $2, $3::interval, $4::interval)",
				 4, acq, token, sizeof(token));
	if (rc != DB_OK)
		return acquire_failure(&db, rc);
	lease_until = now_ms() + o->ttl_ms;
	next_renew = now_ms() + period;

	catch_signals();
	child = start_command(o, token, argv);
	if (child < 0)
	{
		(void) db_call(&db, "SELECT dlock_release($1, $2, $3::bigint)", 3,
					   (const char *[]) {o->key, o->holder, token}, ok, sizeof(ok));
		return EXIT_UNAVAIL;
	}

	while (!exited)
	{
		long long	now = now_ms();
		long long	until = lost ? kill_at : next_renew;
		struct pollfd pfd = {sigpipe_fds[0], POLLIN, 0};
		unsigned char sigs[64];
		ssize_t		n;

		if (until > now)
			(void) poll(&pfd, 1, (int) (until - now));
		while ((n = read(sigpipe_fds[0], sigs, sizeof(sigs))) > 0)
		{
			for (ssize_t i = 0; i < n; i++)
			{
				if (sigs[i] != SIGCHLD)
					kill(child, sigs[i]);	/* pass it on */
			}
		}
		if (waitpid(child, &status, WNOHANG) == child)
		{
			exited = true;
			break;
		}

		now = now_ms();
		if (!lost && now >= next_renew)
		{
			rc = db_call(&db, "SELECT dlock_renew($1, $2, $3::interval, $4::bigint)",
						 4, ren, ok, sizeof(ok));
			if (rc == DB_OK && strcmp(ok, "t") == 0)
			{
				lease_until = now + o->ttl_ms;
				next_renew = now + period;
			}
			else if (rc == DB_OK || rc == DB_NULL || rc == DB_NOT_INSTALLED)
			{
				fprintf(stderr, "dlock: lease %s lost\n", o->key);
				lost = true;
			}
			else if (now_ms() >= lease_until)
			{
				fprintf(stderr, "dlock: lease %s lapsed while the database was unreachable: %s",
						o->key, db.error);
				lost = true;
			}
			else
			{
				/* try again soon, while the lease still holds */
				long long	retry = period / 5 > 200 ? period / 5 : 200;

				next_renew = now + retry < lease_until ? now + retry : lease_until;
			}
		}
		if (lost && !term_sent)
		{
			kill(child, SIGTERM);
			term_sent = true;
			kill_at = now_ms() + o->grace_ms;
		}
		else if (lost && now_ms() >= kill_at)
		{
			kill(child, SIGKILL);
			kill_at = now_ms() + 1000;
		}
	}

	if (lost)
	{
		db_close(&db);
		return EXIT_LOST;
	}
	/* give the lease back, with its token, while it still holds */
	for (;;)
	{
		rc = db_call(&db, "SELECT dlock_release($1, $2, $3::bigint)", 3,
					 (const char *[]) {o->key, o->holder, token}, ok, sizeof(ok));
		if (rc != DB_UNREACHABLE || now_ms() >= lease_until)
			break;
		usleep(200 * 1000);
	}
	if (rc != DB_OK)
		fprintf(stderr, "dlock: could not release %s (it lapses by itself): %s", o->key,
				db.error);
	db_close(&db);
	return exit_status_of(status);
}
