/*-------------------------------------------------------------------------
 *
 * dlock.c
 *		The dlock command line: main, the usage, the script commands
 *		(acquire, renew, release, status, list, force-release) and their
 *		output.  Arguments are read in args.c, leases acquired in
 *		acquire.c, signals caught in signals.c, `dlock run` is in run.c,
 *		database access in db.c.
 *
 * status and list read the dlock_locks view, which shows a role only the
 * leases of roles whose privileges it has (superusers and members of
 * pg_read_all_stats see all).  So status calls a key free only when the
 * caller sees every role's leases; otherwise a missing lease may be a
 * hidden one, and status says it cannot tell (exit 77).
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlock_cli.h"

static const char *usage_text =
"dlock - run commands under PostgreSQL lease locks (the dlock extension)\n"
"\n"
"Usage:\n"
"  dlock run KEY [options] -- CMD [ARGS...]   run CMD while holding KEY\n"
"  dlock acquire KEY [options]                 acquire KEY, print its token\n"
"  dlock renew KEY --holder NAME [options]     extend a held lease\n"
"  dlock release KEY --holder NAME [--token N] give a lease back\n"
"  dlock status KEY                            who holds KEY\n"
"  dlock list                                  the leases of this database role\n"
"  dlock force-release KEY                     free KEY whoever holds it (operators)\n"
"  dlock watch KEY [--json] [--count N]        print each change of KEY as it commits\n"
"Options go before or after the command (not after \"--\").\n"
"\n"
"Options:\n"
"  -d, --dbname CONNINFO  database name, conninfo string or URI (default: PGHOST,\n"
"                         PGPORT, PGDATABASE, PGUSER, PGPASSWORD, .pgpass,\n"
"                         PGSERVICE, as libpq does)\n"
"  --ttl DURATION         run, acquire, renew: lease length, 1ms to 30d\n"
"                         (default 30s; renew: the lease's own)\n"
"  --wait DURATION        run, acquire: how long to wait for the key, 0 to 1d\n"
"                         (default 0: do not wait)\n"
"  --holder NAME          holder name, 1 to 256 bytes (run, acquire: default\n"
"                         HOSTNAME:PID; renew, release: required)\n"
"  --token N              renew, release: the token of the grant\n"
"  --grace DURATION       run: time between SIGTERM and SIGKILL of CMD, 0 to 1d\n"
"                         (default 10s)\n"
"  --slots N              run, acquire: one of N holders of a counting\n"
"                         semaphore, 1 to 1000 (every holder names the same N)\n"
"  --shared               run, acquire: a shared lease (any number of shared\n"
"                         holders, or one holder of the lease)\n"
"  --json                 print JSON\n"
"  -h, --help             this help\n"
"  -V, --version          dlock's version\n"
"\n"
"Durations: 500ms, 30s, 2m, 1h, 1d, or a number of seconds.\n"
"Exit codes: 0 success (run: CMD's status, 128+N if signal N killed it),\n"
"  64 usage error, 69 database unreachable or dlock not installed,\n"
"  70 lease lost (or not held), 75 not acquired within --wait,\n"
"  77 status: no lease visible, but the caller cannot see every role's.\n"
"SIGINT, SIGTERM or SIGHUP while acquiring: the wait is cancelled, nothing\n"
"  stays held or queued, and dlock dies by the signal.\n";

static const char *run_usage_text =
"Usage: dlock run KEY [--ttl 30s] [--wait 0] [--holder NAME] [--grace 10s]\n"
"                 [--slots N | --shared] [-d CONNINFO] -- CMD [ARGS...]\n"
"\n"
"Acquires KEY (waiting up to --wait), runs CMD with DLOCK_KEY, DLOCK_HOLDER and\n"
"DLOCK_TOKEN in its environment, and renews the lease every ttl/3.  If the\n"
"lease is lost (a renewal fails, or the database stays unreachable until the\n"
"lease would lapse), CMD gets SIGTERM, then SIGKILL after --grace, and dlock\n"
"exits 70.  When CMD ends, dlock releases the lease and exits with CMD's\n"
"status.  SIGINT, SIGTERM and SIGHUP are passed on to CMD; before CMD starts\n"
"they cancel the acquire (nothing stays held or queued) and end dlock.\n"
"Exit codes: CMD's status, 64 usage, 69 database unreachable, 70 lease lost,\n"
"75 not acquired within --wait.\n";

void
print_usage(FILE *f, bool run)
{
	fputs(run ? run_usage_text : usage_text, f);
}

long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
json_string(const char *s)
{
	putchar('"');
	for (; *s; s++)
	{
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char) *s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
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

static int
cmd_acquire(const Options *o)
{
	Db			db = {.conninfo = o->conninfo};
	char		token[32];
	DbResult	rc = acquire_lease(&db, o, token, sizeof(token));

	db_close(&db);
	if (rc != DB_OK && rc != DB_NULL)
		return db_failure(&db, rc);
	if (o->json)
	{
		printf("{\"key\": ");
		json_string(o->key);
		printf(", \"holder\": ");
		json_string(o->holder);
		printf(", \"acquired\": %s, \"token\": %s}\n", rc == DB_OK ? "true" : "false",
			   rc == DB_OK ? token : "null");
	}
	else if (rc == DB_OK)
		printf("%s\n", token);
	return rc == DB_OK ? 0 : acquire_failure(&db, o, rc);
}

/* renew or release: a boolean answer, 0 when true, 70 when not held */
static int
cmd_bool(const Options *o, bool renew)
{
	Db			db = {.conninfo = o->conninfo};
	char		ttl[64], tok[32], ok[8];
	DbResult	rc;
	bool		yes;

	snprintf(tok, sizeof(tok), "%lld", o->token);
	if (renew)
	{
		const char *p[4] = {o->key, o->holder, o->has_ttl ? ttl : NULL,
		o->has_token ? tok : NULL};

		interval_text(o->ttl_ms, ttl, sizeof(ttl));
		rc = db_call(&db, "SELECT dlock_renew($1, $2, $3::interval, $4::bigint)", 4, p,
					 ok, sizeof(ok));
	}
	else
	{
		const char *p[3] = {o->key, o->holder, o->has_token ? tok : NULL};

		rc = db_call(&db, "SELECT dlock_release($1, $2, $3::bigint)", 3, p, ok, sizeof(ok));
	}
	db_close(&db);
	if (rc != DB_OK)
		return db_failure(&db, rc);
	yes = strcmp(ok, "t") == 0;
	if (o->json)
	{
		printf("{\"key\": ");
		json_string(o->key);
		printf(", \"%s\": %s}\n", renew ? "renewed" : "released", yes ? "true" : "false");
	}
	else
		printf("%s\n", yes ? "true" : "false");
	if (yes)
		return 0;
	fprintf(stderr, "dlock: %s not %s: holder %s of this role does not hold a live lease"
			" on it%s%s\n", o->key, renew ? "renewed" : "released", o->holder,
			o->has_token ? " with token " : "", o->has_token ? tok : "");
	return EXIT_LOST;
}

/* row i of cmd_show's result (the lease from column 2 on), JSON or text */
static void
print_lease(PGresult *r, int i, bool json)
{
	if (json)
	{
		printf("%s{\"key\": ", i > 0 ? ", " : "");
		json_string(PQgetvalue(r, i, 2));
		printf(", \"held\": true, \"holder\": ");
		json_string(PQgetvalue(r, i, 3));
		printf(", \"owner\": ");
		json_string(PQgetvalue(r, i, 4));
		printf(", \"token\": %s, \"expires_at\": ", PQgetvalue(r, i, 5));
		json_string(PQgetvalue(r, i, 6));
		printf(", \"expires_in_s\": %s}", PQgetvalue(r, i, 7));
	}
	else
		printf("%s held by %s (role %s) token %s until %s\n", PQgetvalue(r, i, 2),
			   PQgetvalue(r, i, 3), PQgetvalue(r, i, 4), PQgetvalue(r, i, 5),
			   PQgetvalue(r, i, 6));
}

/* status KEY, or list (key NULL): rows of dlock_locks */
static int
cmd_show(const Options *o, const char *key)
{
	Db			db = {.conninfo = o->conninfo};
	PGresult   *r;
	DbResult	rc;
	const char *p[1] = {key};
	int			n;
	bool		unseen;

	/*
	 * Column 0: whether this role sees every role's leases; 1: its name;
	 * then the lease, if any.  The owner's name is compared and shown as
	 * the catalog has it: no name is parsed ("Bob" is not bob).
	 */
	if (key)
		rc = db_rows(&db, "SELECT pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE'),"
					 " current_user, l.key, l.holder, r.rolname, l.token, l.expires_at,"
					 " round(extract(epoch FROM l.expires_at - pg_catalog.clock_timestamp()), 3)"
					 " FROM (SELECT 1) one"
					 " LEFT JOIN dlock_locks l ON l.key = $1"
					 " LEFT JOIN pg_catalog.pg_roles r ON r.oid = l.owner::oid", 1, p, &r);
	else
		rc = db_rows(&db, "SELECT true, current_user, l.key, l.holder, r.rolname, l.token,"
					 " l.expires_at,"
					 " round(extract(epoch FROM l.expires_at - pg_catalog.clock_timestamp()), 3)"
					 " FROM dlock_locks l"
					 " JOIN pg_catalog.pg_roles r ON r.oid = l.owner::oid"
					 " WHERE r.rolname = current_user ORDER BY l.key", 0, NULL, &r);
	db_close(&db);
	if (rc != DB_OK)
		return db_failure(&db, rc);
	n = PQntuples(r);
	if (key && n == 1 && PQgetisnull(r, 0, 2))
		n = 0;					/* the LEFT JOIN found no lease */
	unseen = key && n == 0 && strcmp(PQgetvalue(r, 0, 0), "t") != 0;
	if (key && n == 0)
	{
		if (o->json)
		{
			printf("{\"key\": ");
			json_string(key);
			printf(unseen ? ", \"held\": null, \"sees_all_roles\": false}\n"
				   : ", \"held\": false}\n");
		}
		else
			printf(unseen ? "%s not held by any role visible to you\n" : "%s free\n", key);
	}
	if (!key && o->json)
		printf("[");
	for (int i = 0; i < n; i++)
		print_lease(r, i, o->json);
	if (o->json && (!key || n > 0))
		printf(key ? "\n" : "]\n");
	if (unseen)
		fprintf(stderr, "dlock: %s: no lease that role %s may see; it may be held by a"
				" role whose leases are hidden from it (pg_read_all_stats members see"
				" all)\n", key, PQgetvalue(r, 0, 1));
	PQclear(r);
	return unseen ? EXIT_NOT_VISIBLE : 0;
}

static int
cmd_force_release(const Options *o)
{
	Db			db = {.conninfo = o->conninfo};
	const char *p[1] = {o->key};
	char		ok[8];
	DbResult	rc = db_call(&db, "SELECT dlock_force_release($1)", 1, p, ok, sizeof(ok));
	bool		yes;

	db_close(&db);
	if (rc != DB_OK)
		return db_failure(&db, rc);
	yes = strcmp(ok, "t") == 0;
	if (o->json)
	{
		printf("{\"key\": ");
		json_string(o->key);
		printf(", \"released\": %s}\n", yes ? "true" : "false");
	}
	else
		printf("%s\n", yes ? "true" : "false");
	if (!yes)
		fprintf(stderr, "dlock: %s not released: nobody holds a live lease on it\n", o->key);
	return yes ? 0 : EXIT_LOST;
}

static const char *
default_holder(void)
{
	static char buf[300];
	char		host[256] = "localhost";

	(void) gethostname(host, sizeof(host) - 1);
	snprintf(buf, sizeof(buf), "%s:%d", host, (int) getpid());
	return buf;
}

/* run the command o->cmd (checked by parse_args); returns the exit code */
static int
run_command(const Options *o)
{
	const char *cmd = o->cmd;

	if (strcmp(cmd, "run") == 0)
		return cmd_run(o, o->cmd_argv);
	if (strcmp(cmd, "acquire") == 0)
		return cmd_acquire(o);
	if (strcmp(cmd, "renew") == 0 || strcmp(cmd, "release") == 0)
		return cmd_bool(o, strcmp(cmd, "renew") == 0);
	if (strcmp(cmd, "status") == 0)
		return cmd_show(o, o->key);
	if (strcmp(cmd, "list") == 0)
		return cmd_show(o, NULL);
	return cmd_force_release(o);
}

/*
 * Whether the command is "watch" (its first argument that is neither an
 * option nor an option's value): if so, argv is rearranged in place so that
 * "watch" comes first, the options before it after it, as cmd_watch reads
 * them (options may stand before or after the command, as for the others).
 */
static bool
watch_command(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
	{
		const char *a = argv[i];

		if (strcmp(a, "--") == 0)
			return false;
		if (a[0] == '-')
		{
			if (strcmp(a, "-d") == 0 || strcmp(a, "--dbname") == 0 ||
				strcmp(a, "--count") == 0)
				i++;
			continue;
		}
		if (strcmp(a, "watch") != 0)
			return false;
		for (int j = i; j > 1; j--)
			argv[j] = argv[j - 1];
		argv[1] = (char *) "watch";
		return true;
	}
	return false;
}

int
main(int argc, char **argv)
{
	Options		o;

	memset(&o, 0, sizeof(o));
	o.ttl_ms = 30000;
	o.grace_ms = 10000;
	if (watch_command(argc, argv))	/* watch (issue 26): options of its own */
		return cmd_watch(argc, argv);
	parse_args(argc, argv, &o);
	if (!o.holder)
		o.holder = default_holder();
	return run_command(&o);
}
