/*-------------------------------------------------------------------------
 *
 * dlock.c
 *		The dlock command line: options, the script commands (acquire,
 *		renew, release, status, list, force-release) and their output.
 *		`dlock run` is in run.c, database access in db.c.
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
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
"\n"
"Options:\n"
"  -d, --dbname CONNINFO  database name, conninfo string or URI (default: PGHOST,\n"
"                         PGPORT, PGDATABASE, PGUSER, PGPASSWORD, .pgpass,\n"
"                         PGSERVICE, as libpq does)\n"
"  --ttl DURATION         lease length (default 30s)\n"
"  --wait DURATION        how long to wait for the key (default 0: do not wait)\n"
"  --holder NAME          holder name (default HOSTNAME:PID)\n"
"  --token N              the token of the grant to renew or release\n"
"  --grace DURATION       run: time between SIGTERM and SIGKILL of CMD (default 10s)\n"
"  --json                 print JSON\n"
"  -h, --help             this help\n"
"\n"
"Durations: 500ms, 30s, 2m, 1h, 1d, or a number of seconds.\n"
"Exit codes: 0 success (run: CMD's status, 128+N if signal N killed it),\n"
"  64 usage error, 69 database unreachable or dlock not installed,\n"
"  70 lease lost (or not held), 75 not acquired within --wait.\n";

static const char *run_usage_text =
"Usage: dlock run KEY [--ttl 30s] [--wait 0] [--holder NAME] [--grace 10s]\n"
"                 [-d CONNINFO] -- CMD [ARGS...]\n"
"\n"
"Acquires KEY (waiting up to --wait), runs CMD with DLOCK_KEY, DLOCK_HOLDER and\n"
"DLOCK_TOKEN in its environment, and renews the lease every ttl/3.  If the\n"
"lease is lost (a renewal fails, or the database stays unreachable until the\n"
"lease would lapse), CMD gets SIGTERM, then SIGKILL after --grace, and dlock\n"
"exits 70.  When CMD ends, dlock releases the lease and exits with CMD's\n"
"status.  SIGINT, SIGTERM and SIGHUP are passed on to CMD.\n"
"Exit codes: CMD's status, 64 usage, 69 database unreachable, 70 lease lost,\n"
"75 not acquired within --wait.\n";

long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "dlock: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry \"dlock --help\".\n");
	exit(EXIT_USAGE);
}

/* "500ms", "30s", "2m", "1h", "1d", "30 seconds", "30": milliseconds */
static long long
parse_duration(const char *s)
{
	char	   *end;
	double		v = strtod(s, &end);
	double		mult = 1000;

	if (end == s || v < 0)
		usage_error("invalid duration \"%s\"", s);
	while (isspace((unsigned char) *end))
		end++;
	if (*end == '\0' || strcmp(end, "s") == 0 || strncmp(end, "sec", 3) == 0)
		mult = 1000;
	else if (strcmp(end, "ms") == 0 || strncmp(end, "msec", 4) == 0 ||
			 strncmp(end, "millisecond", 11) == 0)
		mult = 1;
	else if (strcmp(end, "m") == 0 || strncmp(end, "min", 3) == 0)
		mult = 60000;
	else if (strcmp(end, "h") == 0 || strncmp(end, "hour", 4) == 0)
		mult = 3600000;
	else if (strcmp(end, "d") == 0 || strncmp(end, "day", 3) == 0)
		mult = 86400000;
	else
		usage_error("invalid duration \"%s\"", s);
	return (long long) (v * mult + 0.5);
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

static int
db_failure(Db *db, DbResult rc)
{
	fprintf(stderr, "dlock: %s", db->error[0] ? db->error : "no answer\n");
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
	char		ttl[64], wait[64], token[32];
	const char *p[4] = {o->key, o->holder, ttl, wait};
	DbResult	rc;

	interval_text(o->ttl_ms, ttl, sizeof(ttl));
	interval_text(o->wait_ms, wait, sizeof(wait));
	rc = db_call(&db, "SELECT dlock_acquire($1, $2, $3::interval, $4::interval)",
				 4, p, token, sizeof(token));
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
	return rc == DB_OK ? 0 : EXIT_NOT_ACQUIRED;
}

/* renew or release: a boolean answer, 0 when true, 70 when not held */
static int
cmd_bool(const Options *o, bool renew)
{
	Db			db = {.conninfo = o->conninfo};
	char		ttl[64], tok[32], ok[8];
	DbResult	rc;

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
	if (o->json)
	{
		printf("{\"key\": ");
		json_string(o->key);
		printf(", \"%s\": %s}\n", renew ? "renewed" : "released",
			   strcmp(ok, "t") == 0 ? "true" : "false");
	}
	else
		printf("%s\n", strcmp(ok, "t") == 0 ? "true" : "false");
	return strcmp(ok, "t") == 0 ? 0 : EXIT_LOST;
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

	if (key)
		rc = db_rows(&db, "SELECT key, holder, owner::text, token, expires_at,"
					 " round(extract(epoch FROM expires_at - clock_timestamp()), 3)"
					 " FROM dlock_locks WHERE key = $1", 1, p, &r);
	else
		rc = db_rows(&db, "SELECT key, holder, owner::text, token, expires_at,"
					 " round(extract(epoch FROM expires_at - clock_timestamp()), 3)"
					 " FROM dlock_locks WHERE owner = current_user::regrole ORDER BY key",
					 0, NULL, &r);
	if (rc != DB_OK)
	{
		db_close(&db);
		return db_failure(&db, rc);
	}
	n = PQntuples(r);
	if (o->json)
		printf(key ? "" : "[");
	if (key && n == 0 && o->json)
	{
		printf("{\"key\": ");
		json_string(key);
		printf(", \"held\": false}\n");
	}
	else if (key && n == 0)
		printf("%s free\n", key);
	for (int i = 0; i < n; i++)
	{
		if (o->json)
		{
			printf("%s{\"key\": ", i > 0 ? ", " : "");
			json_string(PQgetvalue(r, i, 0));
			printf(", \"held\": true, \"holder\": ");
			json_string(PQgetvalue(r, i, 1));
			printf(", \"owner\": ");
			json_string(PQgetvalue(r, i, 2));
			printf(", \"token\": %s, \"expires_at\": ", PQgetvalue(r, i, 3));
			json_string(PQgetvalue(r, i, 4));
			printf(", \"expires_in_s\": %s}", PQgetvalue(r, i, 5));
		}
		else
			printf("%s held by %s (role %s) token %s until %s\n", PQgetvalue(r, i, 0),
				   PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), PQgetvalue(r, i, 3),
				   PQgetvalue(r, i, 4));
	}
	if (o->json)
		printf(key ? (n > 0 ? "\n" : "") : "]\n");
	PQclear(r);
	db_close(&db);
	return 0;
}

static int
cmd_force_release(const Options *o)
{
	Db			db = {.conninfo = o->conninfo};
	const char *p[1] = {o->key};
	char		ok[8];
	DbResult	rc = db_call(&db, "SELECT dlock_force_release($1)", 1, p, ok, sizeof(ok));

	db_close(&db);
	if (rc != DB_OK)
		return db_failure(&db, rc);
	if (o->json)
	{
		printf("{\"key\": ");
		json_string(o->key);
		printf(", \"released\": %s}\n", strcmp(ok, "t") == 0 ? "true" : "false");
	}
	else
		printf("%s\n", strcmp(ok, "t") == 0 ? "true" : "false");
	return strcmp(ok, "t") == 0 ? 0 : EXIT_LOST;
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

/*
 * Read the options and KEY that follow the command cmd (argv[2..]) into *o,
 * and the words after "--" into *rest.  Returns false if --help asked for
 * the help, which is printed.
 */
static bool
parse_args(int argc, char **argv, const char *cmd, Options *o, char ***rest)
{
	for (int i = 2; i < argc; i++)
	{
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

#define NEED_VALUE() do { if (!v) usage_error("%s needs a value", a); i++; } while (0)
		if (strcmp(a, "--") == 0)
		{
			*rest = argv + i + 1;
			break;
		}
		else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
		{
			fputs(strcmp(cmd, "run") == 0 ? run_usage_text : usage_text, stdout);
			return false;
		}
		else if (strcmp(a, "-d") == 0 || strcmp(a, "--dbname") == 0)
		{
			NEED_VALUE();
			o->conninfo = v;
		}
		else if (strcmp(a, "--ttl") == 0)
		{
			NEED_VALUE();
			o->ttl_ms = parse_duration(v);
			o->has_ttl = true;
		}
		else if (strcmp(a, "--wait") == 0)
		{
			NEED_VALUE();
			o->wait_ms = parse_duration(v);
		}
		else if (strcmp(a, "--grace") == 0)
		{
			NEED_VALUE();
			o->grace_ms = parse_duration(v);
		}
		else if (strcmp(a, "--holder") == 0)
		{
			NEED_VALUE();
			o->holder = v;
		}
		else if (strcmp(a, "--token") == 0)
		{
			char	   *end;

			NEED_VALUE();
			o->token = strtoll(v, &end, 10);
			if (*v == '\0' || *end != '\0')
				usage_error("invalid token \"%s\"", v);
			o->has_token = true;
		}
		else if (strcmp(a, "--json") == 0)
			o->json = true;
		else if (a[0] == '-')
			usage_error("unknown option %s", a);
		else if (!o->key)
			o->key = a;
		else
			usage_error("unexpected argument \"%s\"", a);
#undef NEED_VALUE
	}
	return true;
}

/* run the command cmd with the options o; returns the exit code */
static int
run_command(const char *cmd, const Options *o, char **rest)
{
	if (strcmp(cmd, "list") == 0)
		return o->key ? (usage_error("%s takes no key", cmd), 0) : cmd_show(o, NULL);
	if (!o->key)
		usage_error("%s needs a KEY", cmd);
	if (strcmp(cmd, "run") == 0)
	{
		if (!rest || !rest[0])
			usage_error("%s", "run needs -- CMD [ARGS...]");
		if (o->ttl_ms <= 0)
			usage_error("%s", "--ttl must be more than 0");
		return cmd_run(o, rest);
	}
	if (rest)
		usage_error("%s takes no command", cmd);
	if (strcmp(cmd, "acquire") == 0)
		return cmd_acquire(o);
	if (strcmp(cmd, "renew") == 0 || strcmp(cmd, "release") == 0)
		return cmd_bool(o, strcmp(cmd, "renew") == 0);
	if (strcmp(cmd, "status") == 0)
		return cmd_show(o, o->key);
	if (strcmp(cmd, "force-release") == 0)
		return cmd_force_release(o);
	usage_error("unknown command \"%s\"", cmd);
	return EXIT_USAGE;
}

int
main(int argc, char **argv)
{
	Options		o;
	const char *cmd;
	char	  **rest = NULL;

	memset(&o, 0, sizeof(o));
	o.ttl_ms = 30000;
	o.grace_ms = 10000;
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
	{
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	cmd = argv[1];
	if (strcmp(cmd, "watch") == 0)	/* watch (issue 26): options of its own */
		return cmd_watch(argc, argv);
	if (!parse_args(argc, argv, cmd, &o, &rest))
		return 0;
	if (!o.holder)
		o.holder = default_holder();
	return run_command(cmd, &o, rest);
}
