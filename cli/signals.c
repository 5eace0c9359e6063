/*-------------------------------------------------------------------------
 *
 * signals.c
 *		SIGINT, SIGTERM, SIGHUP and SIGCHLD caught into a pipe (the
 *		self-pipe trick), so that dlock sees them in the poll() of every
 *		wait: on the database (db.c) and on CMD (run.c).
 *
 * While dlock acquires, a signal interrupts the acquire: its statement is
 * cancelled on the server, whatever it granted is released, and dlock then
 * dies by that signal (acquire.c).  While CMD runs, signals are passed on
 * to it (run.c).
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlock_cli.h"

static int	pipe_fds[2] = {-1, -1};

static void
on_signal(int signo)
{
	int			saved = errno;
	unsigned char b = (unsigned char) signo;

	if (write(pipe_fds[1], &b, 1) < 0)
	{
		/* the pipe is full: dlock has many signals to read already */
	}
	errno = saved;
}

/* Catch the signals (once); returns the pipe's end to poll() and read. */
int
signals_catch(void)
{
	struct sigaction sa;
	const int	sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};

	if (pipe_fds[0] >= 0)
		return pipe_fds[0];
	if (pipe(pipe_fds) != 0)
	{
		perror("dlock: pipe");
		exit(EXIT_UNAVAIL);
	}
	for (int i = 0; i < 2; i++)
	{
		fcntl(pipe_fds[i], F_SETFL, fcntl(pipe_fds[i], F_GETFL) | O_NONBLOCK);
		fcntl(pipe_fds[i], F_SETFD, FD_CLOEXEC);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	return pipe_fds[0];
}

/*
 * The next signal caught and not yet read, SIGCHLD left out (it only
 * wakes dlock run to reap CMD); 0 if none.
 */
int
signals_next(void)
{
	unsigned char b;

	if (pipe_fds[0] < 0)
		return 0;
	while (read(pipe_fds[0], &b, 1) == 1)
	{
		if (b != SIGCHLD)
			return b;
	}
	return 0;
}

/* End dlock by signo, as if it had not been caught: the shell sees that. */
void
signals_die(int signo)
{
	sigset_t	set;

	fflush(stdout);
	signal(signo, SIG_DFL);
	sigemptyset(&set);
	sigaddset(&set, signo);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(signo);
	_exit(128 + signo);
}
