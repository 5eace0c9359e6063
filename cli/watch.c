/*-------------------------------------------------------------------------
 *
 * watch.c
 *		dlock watch KEY: print each change of a key (grant, release,
 *		expiry) as it commits, until interrupted or --count events.
 *
 * Calls dlock_watch(KEY), which LISTENs on this session's channel, then
 * prints the lease the key has now (unless --no-current), then waits in
 * poll() on the connection's socket and prints every notification that
 * comes on that channel (PQconsumeInput, PQnotifies): one line of text, or
 * with --json the notification's JSON as it came.  The watch needs a
 * session of its own: a direct connection, or a pooler in session mode.
 * A connection that breaks ends the command (exit 69): changes made while
 * no session watched are not replayed.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock_cli.h"

static const char *watch_usage_text =
"Usage: dlock watch KEY [--json] [--count N] [--no-current] [-d CONNINFO]\n"
"\n"
"Prints the lease KEY has now, then each change of it as it commits: a grant\n"
"(acquire, hand-over to a waiter, takeover of an expired lease), a release,\n"
"or an expiry.  Only leases of roles whose privileges the connecting role\n"
"has are shown (as in dlock_locks).  Runs until interrupted (SIGINT, SIGTERM:\n"
"exit 0) or until --count changes were printed.  Needs dlock in\n"
"shared_preload_libraries, and a session of its own (no transaction pooler).\n"
"  --json        print each change as the JSON the server sent\n"
"  --count N     exit 0 after N changes\n"
"  --no-current  do not print the current lease first\n"
"Exit codes: 0, 64 usage, 69 database unreachable, connection lost, or dlock\n"
"not installed or not preloaded.\n";

static volatile sig_atomic_t stop = 0;

static void
on_stop(int signo)
{
	stop = 1;
}

/* ---- the notification's JSON: one flat object, as dlock sends it ---- */

#define MAX_FIELDS 16

typedef struct Field
{
	char	   *name;
	char	   *value;			/* decoded; NULL for JSON null */
} Field;

/* parse a JSON string at *p (after its quote) into a new buffer */
static char *
parse_string(const char **p)
{
	const char *s = *p;
	char	   *out = malloc(strlen(s) * 3 + 1);
	char	   *o = out;

	while (*s && *s != '"')
	{
		if (*s != '\\')
		{
			*o++ = *s++;
			continue;
		}
		s++;
		switch (*s)
		{
			case 'b': *o++ = '\b'; break;
			case 'f': *o++ = '\f'; break;
			case 'n': *o++ = '\n'; break;
			case 'r': *o++ = '\r'; break;
			case 't': *o++ = '\t'; break;
			case 'u':
				{
					unsigned int c = 0;

					if (sscanf(s + 1, "%4x", &c) != 1)
						c = '?';
					if (c < 0x80)
						*o++ = (char) c;
					else if (c < 0x800)
					{
						*o++ = (char) (0xC0 | (c >> 6));
						*o++ = (char) (0x80 | (c & 0x3F));
					}
					else
					{
						*o++ = (char) (0xE0 | (c >> 12));
						*o++ = (char) (0x80 | ((c >> 6) & 0x3F));
						*o++ = (char) (0x80 | (c & 0x3F));
					}
					for (int i = 0; i < 4 && s[1]; i++)
						s++;
					break;
				}
			case '\0':
				s--;
				break;
			default:
				*o++ = *s;
		}
		s++;
	}
	*o = '\0';
	*p = *s ? s + 1 : s;
	return out;
}

/* the fields of a flat JSON object; returns how many, or -1 */
static int
parse_object(const char *s, Field *f)
{
	int			n = 0;

	while (*s == ' ')
		s++;
	if (*s++ != '{')
		return -1;
	while (*s && *s != '}' && n < MAX_FIELDS)
	{
		const char *end;

		while (*s == ' ' || *s == ',')
			s++;
		if (*s++ != '"')
			return -1;
		f[n].name = parse_string(&s);
		while (*s == ' ' || *s == ':')
			s++;
		if (*s == '"')
		{
			s++;
			f[n].value = parse_string(&s);
		}
		else
		{
			end = s + strcspn(s, ",}");
			f[n].value = strncmp(s, "null", 4) == 0 ? NULL : strndup(s, end - s);
			s = end;
		}
		n++;
	}
	return n;
}

static const char *
field(const Field *f, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(f[i].name, name) == 0)
			return f[i].value ? f[i].value : "";
	return "";
}

static void
print_event(const char *payload)
{
	Field		f[MAX_FIELDS];
	int			n = parse_object(payload, f);
	const char *event = field(f, n, "event");

	if (n < 0)
		printf("%s\n", payload);
	else if (strcmp(event, "granted") == 0)
		printf("%s granted to %s token %s until %s (%s)\n", field(f, n, "key"),
			   field(f, n, "holder"), field(f, n, "token"),
			   field(f, n, "expires_at"), field(f, n, "cause"));
	else if (strcmp(event, "released") == 0)
		printf("%s released by %s token %s\n", field(f, n, "key"),
			   field(f, n, "holder"), field(f, n, "token"));
	else if (strcmp(event, "expired") == 0)
		printf("%s expired: %s token %s ran out at %s\n", field(f, n, "key"),
			   field(f, n, "holder"), field(f, n, "token"),
			   field(f, n, "expires_at"));
	else
		printf("%s %s\n", field(f, n, "key"), event);
	for (int i = 0; i < n; i++)
	{
		free(f[i].name);
		free(f[i].value);
	}
}

/* ---- the command ---- */

typedef struct WatchOptions
{
	const char *conninfo;
	const char *key;
	bool		json;
	bool		current;
	long		count;			/* 0: no limit */
} WatchOptions;

/* One line on standard error, "dlock: ..." and a pointer to --help; exit 64. */
static void
watch_usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "dlock: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (see \"dlock watch --help\")\n");
	exit(EXIT_USAGE);
}

/* --count: a whole number from 1 to MAX_COUNT, in digits only */
#define MAX_COUNT 2147483647L

static long
count_option(const char *v)
{
	char	   *end;
	long		n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (*v < '0' || *v > '9' || *end != '\0' || errno == ERANGE ||
		n < 1 || n > MAX_COUNT)
		watch_usage_error("invalid --count \"%s\": a whole number from 1 to"
						  " 2147483647 is expected", v);
	return n;
}

/*
 * The option a (argv[*i]) with a value: its value, written into a
 * ("--count=3", "-dapp") or the next word (*i moves past it).
 */
static const char *
option_value(int argc, char **argv, int *i, const char *name)
{
	const char *a = argv[*i];
	size_t		len = strlen(name);

	if (strncmp(a, name, len) == 0 && a[len] == '=')
		return a + len + 1;
	if (strcmp(name, "-d") == 0 && strncmp(a, "-d", 2) == 0 && a[2] != '\0')
		return a + 2;
	if (*i + 1 >= argc)
		watch_usage_error("%s needs a value", name);
	return argv[++(*i)];
}

/* is a the option name, as "--name", "--name=value" (or "-dvalue")? */
static bool
is_option(const char *a, const char *name)
{
	size_t		len = strlen(name);

	return strncmp(a, name, len) == 0 &&
		(a[len] == '\0' || a[len] == '=' ||
		 (strcmp(name, "-d") == 0 && strncmp(a, "--", 2) != 0));
}

/* the other commands' options: watch takes none of them */
static const char *const other_options[] = {
	"--ttl", "--wait", "--holder", "--token", "--grace", "--slots", "--shared",
	"--quiet-if-held",
	NULL
};

/* an option a that watch does not take: a usage error naming it */
static void
reject_option(const char *a)
{
	for (int k = 0; other_options[k]; k++)
		if (is_option(a, other_options[k]))
			watch_usage_error("watch takes no %s", other_options[k]);
	watch_usage_error("unknown option \"%s\"", a);
}

/* argv[2..]; false when --help or --version was asked for (and printed) */
static bool
parse_watch_args(int argc, char **argv, WatchOptions *o)
{
	for (int i = 2; i < argc; i++)
	{
		const char *a = argv[i];

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
		{
			fputs(watch_usage_text, stdout);
			return false;
		}
		else if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0)
		{
			printf("dlock %s\n", DLOCK_VERSION);
			return false;
		}
		else if (is_option(a, "-d"))
			o->conninfo = option_value(argc, argv, &i, "-d");
		else if (is_option(a, "--dbname"))
			o->conninfo = option_value(argc, argv, &i, "--dbname");
		else if (is_option(a, "--count"))
			o->count = count_option(option_value(argc, argv, &i, "--count"));
		else if (strcmp(a, "--json") == 0)
			o->json = true;
		else if (strcmp(a, "--no-current") == 0)
			o->current = false;
		else if (strcmp(a, "--") == 0)
			watch_usage_error("%s", "watch takes no command after \"--\"");
		else if (a[0] == '-' && a[1] != '\0')
			reject_option(a);
		else if (!o->key)
			o->key = a;
		else
			watch_usage_error("unexpected argument \"%s\"", a);
	}
	if (!o->key)
		watch_usage_error("%s", "watch needs a KEY");
	if (o->key[0] == '\0' || strlen(o->key) > 1024)
		watch_usage_error("invalid KEY \"%.40s\": 1 to 1024 bytes are expected",
						  o->key);
	return true;
}

static int
watch_failure(Db *db, DbResult rc)
{
	int			status;

	if (rc == DB_NOT_INSTALLED && db_older_than(db, "0.4", "dlock watch"))
	{
		db_close(db);
		return EXIT_UNAVAIL;
	}
	status = db_failure(db, rc);
	db_close(db);
	return status;
}

/* the lease the key has now, as a first line (the current state) */
static int
print_current(Db *db, const WatchOptions *o)
{
	const char *p[1] = {o->key};
	PGresult   *r;
	DbResult	rc = db_rows(db, "SELECT holder, token, expires_at,"
						 " to_char(expires_at AT TIME ZONE 'UTC',"
						 " 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"
						 " FROM dlock_leader($1)", 1, p, &r);

	if (rc != DB_OK)
		return watch_failure(db, rc);
	if (o->json)
	{
		printf("{\"key\":");
		json_string(o->key);
		if (PQntuples(r) == 0)
			printf(",\"event\":\"current\",\"holder\":null}\n");
		else
		{
			printf(",\"event\":\"current\",\"holder\":");
			json_string(PQgetvalue(r, 0, 0));
			printf(",\"token\":%s,\"expires_at\":\"%s\"}\n", PQgetvalue(r, 0, 1),
				   PQgetvalue(r, 0, 3));
		}
	}
	else if (PQntuples(r) == 0)
		printf("%s free\n", o->key);
	else
		printf("%s held by %s token %s until %s\n", o->key, PQgetvalue(r, 0, 0),
			   PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2));
	fflush(stdout);
	PQclear(r);
	return 0;
}

/* print what libpq has received on channel; false when --count is reached */
static bool
drain(Db *db, const WatchOptions *o, const char *channel, long *printed)
{
	PGnotify   *n;

	while ((o->count == 0 || *printed < o->count) &&
		   (n = PQnotifies(db->conn)) != NULL)
	{
		if (strcmp(n->relname, channel) == 0)
		{
			if (o->json)
				printf("%s\n", n->extra);
			else
				print_event(n->extra);
			fflush(stdout);
			(*printed)++;
		}
		PQfreemem(n);
	}
	return o->count == 0 || *printed < o->count;
}

/* wait for notifications on channel and print them; the exit code */
static int
listen_loop(Db *db, const WatchOptions *o, const char *channel)
{
	long		printed = 0;

	while (drain(db, o, channel, &printed) && !stop)
	{
		struct pollfd pfd = {.fd = PQsocket(db->conn), .events = POLLIN};

		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
		{
			fprintf(stderr, "dlock: poll: %s\n", strerror(errno));
			return EXIT_UNAVAIL;
		}
		if (!stop && !PQconsumeInput(db->conn))
		{
			fprintf(stderr, "dlock: connection lost (changes from now on are not"
					" watched):\n");
			print_lines(stderr, PQerrorMessage(db->conn));
			return EXIT_UNAVAIL;
		}
	}
	return 0;
}

/* dlock watch KEY ...: argv as main() got it */
int
cmd_watch(int argc, char **argv)
{
	WatchOptions o = {.current = true};
	Db			db;
	char		channel[64];
	const char *p[1];
	DbResult	rc;
	struct sigaction sa;
	int			status;

	if (!parse_watch_args(argc, argv, &o))
		return 0;
	memset(&db, 0, sizeof(db));
	db.conninfo = o.conninfo;
	p[0] = o.key;
	rc = db_call(&db, "SELECT dlock_watch($1)", 1, p, channel, sizeof(channel));
	if (rc != DB_OK)
		return watch_failure(&db, rc);
	if (o.current && (status = print_current(&db, &o)) != 0)
		return status;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	status = listen_loop(&db, &o, channel);
	db_close(&db);
	return status;
}
