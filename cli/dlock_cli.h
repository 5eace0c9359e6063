/*-------------------------------------------------------------------------
 *
 * dlock_cli.h
 *		The dlock command line: shared declarations.
 *
 * Exit codes follow sysexits.h: 0 success (or the command's own status),
 * 64 usage error, 69 database unreachable, dlock not installed or older
 * than an option needs, 70 lease lost, 75 not acquired within --wait, 77
 * status cannot tell (the key may be held by a role whose leases the
 * caller may not see).  Every non-zero exit prints its reason on standard
 * error, each line starting "dlock: " (but 75 with --quiet-if-held: none).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLI_H
#define DLOCK_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <libpq-fe.h>

#define EXIT_USAGE		64
#define EXIT_UNAVAIL	69
#define EXIT_LOST		70
#define EXIT_NOT_ACQUIRED 75
#define EXIT_NOT_VISIBLE 77

typedef struct Options
{
	const char *cmd;			/* the subcommand */
	char	  **cmd_argv;		/* run: CMD [ARGS...] after "--"; NULL: none */
	const char *conninfo;		/* -d: conninfo string or URI; NULL: PG* env */
	const char *key;
	const char *holder;
	long long	ttl_ms;
	bool		has_ttl;		/* --ttl given */
	long long	wait_ms;
	long long	grace_ms;
	bool		has_token;
	long long	token;
	bool		json;
	int			slots;			/* --slots: a semaphore's; 0: not given */
	bool		shared;			/* --shared: a shared lease */
	bool		quiet_if_held;	/* --quiet-if-held: exit 75 without a word */
} Options;

/*
 * db.c: one connection, reconnected when it breaks.  Every wait on the
 * database (connecting, sending, waiting for the answer) ends at deadline.
 * While waiting, wake_fd (the signal pipe) is watched too, and on_wake
 * called when it is readable: it returns the number of a signal that
 * interrupts the call, or 0 to go on waiting (dlock run passes signals on
 * to CMD there).  An interrupted connection attempt is given up; an
 * interrupted statement is cancelled on the server and its answer (an
 * error, or a result that came first) awaited, at most 10 s.
 */
typedef struct Db
{
	const char *conninfo;
	PGconn	   *conn;
	long long	deadline;		/* now_ms() by which a call gives up; 0: never */
	int			(*on_wake) (void *arg); /* NULL: wake_fd is not watched */
	void	   *wake_arg;
	int			wake_fd;
	int			interrupted;	/* the signal that interrupted a call; 0: none */
	bool		sent;			/* the last call's statement was sent */
	bool		cancelling;		/* the statement under way is being cancelled */
	long long	cancel_until;	/* ... until then at most */
	long long	next_cancel;	/* when to send the cancel request (again) */
	char		error[512];		/* the last error, for messages */
	char		sqlstate[6];
} Db;

typedef enum DbResult
{
	DB_OK,						/* the call answered */
	DB_NULL,					/* it answered NULL */
	DB_UNREACHABLE,				/* no connection: try again later */
	DB_NOT_INSTALLED,			/* dlock's function is missing */
	DB_ERROR					/* the call failed */
} DbResult;

extern bool db_connect(Db *db);
extern void db_close(Db *db);
extern DbResult db_call(Db *db, const char *sql, int nparams,
						const char *const *params, char *out, size_t outlen);
extern DbResult db_rows(Db *db, const char *sql, int nparams,
						const char *const *params, PGresult **res);
extern char *interval_text(long long ms, char *buf, size_t len);
extern void print_lines(FILE *f, const char *text);
extern long long now_ms(void);
extern bool db_older_than(Db *db, const char *version, const char *what);
extern int	db_failure(Db *db, DbResult rc);

/* args.c */
extern void parse_args(int argc, char **argv, Options *o);
extern void usage_error(const char *fmt,...)
			__attribute__((format(printf, 1, 2), noreturn));

/* signals.c: SIGINT, SIGTERM, SIGHUP and SIGCHLD, written to a pipe */
extern int	signals_catch(void);
extern int	signals_next(void);
extern void signals_die(int signo) __attribute__((noreturn));

/* acquire.c: acquiring, interrupted by the signals caught */
extern DbResult acquire_lease(Db *db, const Options *o, char *token, size_t len);
extern int	acquire_failure(Db *db, const Options *o, DbResult rc);
extern void interrupted_release(Db *db, const Options *o, const char *token,
								const char *phase) __attribute__((noreturn));

/* run.c */
extern int	cmd_run(const Options *o, char **argv);

/* watch.c (issue 26) */
extern int	cmd_watch(int argc, char **argv);

/* text.c */
extern void print_usage(FILE *f, bool run);
extern void json_string(const char *s);

#endif							/* DLOCK_CLI_H */
