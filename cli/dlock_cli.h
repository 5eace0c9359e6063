/*-------------------------------------------------------------------------
 *
 * dlock_cli.h
 *		The dlock command line: shared declarations.
 *
 * Exit codes follow sysexits.h: 0 success (or the command's own status),
 * 64 usage error, 69 database unreachable or dlock not installed, 70 lease
 * lost, 75 not acquired within --wait.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CLI_H
#define DLOCK_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

#define EXIT_USAGE		64
#define EXIT_UNAVAIL	69
#define EXIT_LOST		70
#define EXIT_NOT_ACQUIRED 75

typedef struct Options
{
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
} Options;

/*
 * db.c: one connection, reconnected when it breaks.  Every wait on the
 * database (connecting, sending, waiting for the answer) ends at deadline;
 * while waiting, wake_fd is watched too and on_wake called when it is
 * readable (dlock run passes its signals on to CMD there).
 */
typedef struct Db
{
	const char *conninfo;
	PGconn	   *conn;
	long long	deadline;		/* now_ms() by which a call gives up; 0: never */
	void		(*on_wake) (void *arg); /* NULL: wake_fd is not watched */
	void	   *wake_arg;
	int			wake_fd;
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

/* run.c */
extern int	cmd_run(const Options *o, char **argv);

/* watch.c (issue 26) */
extern int	cmd_watch(int argc, char **argv);

/* dlock.c */
extern long long now_ms(void);
extern void json_string(const char *s);

#endif							/* DLOCK_CLI_H */
