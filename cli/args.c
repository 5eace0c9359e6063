/*-------------------------------------------------------------------------
 *
 * args.c
 *		The command line's arguments: the subcommand, KEY, the options
 *		(before or after the subcommand, as psql and git take them) and,
 *		for dlock run, the command after "--".
 *
 * Everything is checked here, before any connection is made: a value
 * outside what the server accepts (README, "Limits and errors"), an option
 * the subcommand does not take, a required one missing.  Each mistake is a
 * usage error (exit 64) with a one-line message that names the argument
 * and what it accepts.  --help and --version win wherever they are.
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlock_cli.h"

#ifndef DLOCK_VERSION
#error "DLOCK_VERSION must be defined (the Makefile reads it from META.json)"
#endif

/* the subcommands, as bits: which options each takes */
#define C_RUN		0x01
#define C_ACQUIRE	0x02
#define C_RENEW		0x04
#define C_RELEASE	0x08
#define C_STATUS	0x10
#define C_LIST		0x20
#define C_FORCE		0x40
#define C_HISTORY	0x80
#define C_ALL		0xff

static const struct
{
	const char *name;
	int			bit;
	bool		takes_key;
}			commands[] =
{
	{"run", C_RUN, true},
	{"acquire", C_ACQUIRE, true},
	{"renew", C_RENEW, true},
	{"release", C_RELEASE, true},
	{"status", C_STATUS, true},
	{"list", C_LIST, false},
	{"force-release", C_FORCE, true},
	{"history", C_HISTORY, true},
};

typedef enum OptId
{
	OPT_DBNAME, OPT_TTL, OPT_WAIT, OPT_HOLDER, OPT_TOKEN, OPT_GRACE, OPT_JSON,
	OPT_SLOTS, OPT_SHARED, OPT_QUIET_IF_HELD, OPT_HELP, OPT_VERSION, NUM_OPTS
} OptId;

static const struct
{
	const char *name;			/* --name */
	char		short_name;		/* -c, or 0 */
	bool		has_value;
	int			commands;		/* the subcommands that take it */
}			options[NUM_OPTS] =
{
	[OPT_DBNAME] = {"dbname", 'd', true, C_ALL},
	[OPT_TTL] = {"ttl", 0, true, C_RUN | C_ACQUIRE | C_RENEW},
	[OPT_WAIT] = {"wait", 0, true, C_RUN | C_ACQUIRE},
	[OPT_HOLDER] = {"holder", 0, true, C_RUN | C_ACQUIRE | C_RENEW | C_RELEASE},
	[OPT_TOKEN] = {"token", 0, true, C_RENEW | C_RELEASE},
	[OPT_GRACE] = {"grace", 0, true, C_RUN},
	[OPT_JSON] = {"json", 0, false, C_ALL},
	[OPT_SLOTS] = {"slots", 0, true, C_RUN | C_ACQUIRE},
	[OPT_SHARED] = {"shared", 0, false, C_RUN | C_ACQUIRE},
	[OPT_QUIET_IF_HELD] = {"quiet-if-held", 0, false, C_RUN | C_ACQUIRE},
	[OPT_HELP] = {"help", 'h', false, C_ALL},
	[OPT_VERSION] = {"version", 'V', false, C_ALL},
};

/* the ranges the server accepts (README, "Limits and errors"), in ms */
#define DAY_MS		86400000LL
#define MAX_TTL_MS	(30 * DAY_MS)
#define MAX_WAIT_MS	DAY_MS
#define MAX_GRACE_MS DAY_MS
#define MAX_KEY_BYTES 1024
#define MAX_HOLDER_BYTES 256
#define MAX_SLOTS	1000

/* One line on standard error, "dlock: ..." and a pointer to --help; exit 64. */
void
usage_error(const char *fmt,...)
{
	va_list		ap;

	fputs("dlock: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see \"dlock --help\")\n", stderr);
	exit(EXIT_USAGE);
}

/*
 * Which option is word (a "--name", "--name=value", "-c" or "-cvalue")?
 * Sets *inline_value to the value written into the word itself, or NULL.
 * NUM_OPTS if it names none.
 */
static OptId
lookup_option(const char *word, const char **inline_value)
{
	*inline_value = NULL;
	for (int i = 0; i < NUM_OPTS; i++)
	{
		size_t		len = strlen(options[i].name);

		if (word[1] == '-' && strncmp(word + 2, options[i].name, len) == 0 &&
			(word[2 + len] == '\0' || word[2 + len] == '='))
		{
			if (word[2 + len] == '=')
				*inline_value = word + 3 + len;
			return (OptId) i;
		}
		if (word[1] != '-' && options[i].short_name != 0 &&
			word[1] == options[i].short_name)
		{
			if (word[2] != '\0')
				*inline_value = word + 2;
			return (OptId) i;
		}
	}
	return NUM_OPTS;
}

static int
lookup_command(const char *word)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(word, commands[i].name) == 0)
			return (int) i;
	return -1;
}

/*
 * A duration: a number (digits, optionally a fraction; no sign, exponent,
 * "inf" or "nan") and an optional unit, seconds when none.  Its length in
 * milliseconds, rounded, or -1 if s is not a duration or the number is
 * too large to matter (all limits are far below).
 */
static long long
parse_duration(const char *s)
{
	static const struct
	{
		const char *unit;
		double		ms;
	}			units[] =
	{
		{"", 1000}, {"ms", 1}, {"msec", 1}, {"msecs", 1}, {"millisecond", 1},
		{"milliseconds", 1}, {"s", 1000}, {"sec", 1000}, {"secs", 1000},
		{"second", 1000}, {"seconds", 1000}, {"m", 60000}, {"min", 60000},
		{"mins", 60000}, {"minute", 60000}, {"minutes", 60000},
		{"h", 3600000}, {"hour", 3600000}, {"hours", 3600000},
		{"d", 86400000}, {"day", 86400000}, {"days", 86400000},
	};
	const char *p = s;
	double		v = 0;
	int			digits = 0;

	for (; isdigit((unsigned char) *p); p++, digits++)
		v = v * 10 + (*p - '0');
	if (*p == '.')
	{
		double		scale = 0.1;

		for (p++; isdigit((unsigned char) *p); p++, digits++, scale /= 10)
			v += (*p - '0') * scale;
	}
	if (digits == 0)
		return -1;
	while (*p == ' ')
		p++;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
	{
		if (strcmp(p, units[i].unit) == 0)
		{
			double		ms = v * units[i].ms + 0.5;

			return ms < 1e15 ? (long long) ms : -1;
		}
	}
	return -1;
}

/* --ttl, --wait or --grace: a duration within [min_ms, max_ms] */
static long long
duration_option(OptId id, const char *value, long long min_ms, long long max_ms,
				const char *range)
{
	long long	ms = parse_duration(value);

	if (ms < min_ms || ms > max_ms)
		usage_error("invalid --%s \"%s\": a duration from %s is expected, such as"
					" 500ms, 30s, 2m, 1h (a plain number is seconds)",
					options[id].name, value, range);
	return ms;
}

/* --token: a whole number from 1 to 2^63-1, written in digits only */
static long long
token_option(const char *value)
{
	char	   *end;
	long long	t;

	errno = 0;
	t = strtoll(value, &end, 10);
	if (!isdigit((unsigned char) value[0]) || *end != '\0' || errno == ERANGE || t < 1)
		usage_error("invalid --token \"%s\": a whole number from 1 to"
					" 9223372036854775807 is expected", value);
	return t;
}

/* --slots: a whole number from 1 to MAX_SLOTS, in digits only */
static int
slots_option(const char *value)
{
	char	   *end;
	long		n;

	errno = 0;
	n = strtol(value, &end, 10);
	if (!isdigit((unsigned char) value[0]) || *end != '\0' || errno == ERANGE ||
		n < 1 || n > MAX_SLOTS)
		usage_error("invalid --slots \"%s\": a whole number from 1 to %d is expected",
					value, MAX_SLOTS);
	return (int) n;
}

/* KEY or --holder: 1 to max bytes */
static void
check_name(const char *what, const char *value, size_t max)
{
	if (value[0] == '\0' || strlen(value) > max)
		usage_error("invalid %s \"%.40s%s\": 1 to %zu bytes are expected", what, value,
					strlen(value) > 40 ? "..." : "", max);
}

/*
 * Before anything else: --help or --version anywhere before "--" (not as
 * the value of an option) is answered, and dlock exits 0.
 */
static void
answer_help_or_version(int argc, char **argv)
{
	const char *cmd = NULL;

	for (int i = 1; i < argc; i++)
	{
		const char *inline_value;
		OptId		id;

		if (strcmp(argv[i], "--") == 0)
			break;
		if (argv[i][0] != '-' || argv[i][1] == '\0')
		{
			if (cmd == NULL)
				cmd = argv[i];
			continue;
		}
		id = lookup_option(argv[i], &inline_value);
		if (id == OPT_HELP || id == OPT_VERSION)
		{
			if (id == OPT_VERSION)
				printf("dlock %s\n", DLOCK_VERSION);
			else
				print_usage(stdout, cmd != NULL && strcmp(cmd, "run") == 0);
			exit(0);
		}
		if (id != NUM_OPTS && options[id].has_value && inline_value == NULL)
			i++;				/* its value, whatever it looks like */
	}
}

/* Store the option id's value (checked) into *o. */
static void
set_option(Options *o, OptId id, const char *value)
{
	switch (id)
	{
		case OPT_DBNAME:
			o->conninfo = value;
			break;
		case OPT_TTL:
			o->ttl_ms = duration_option(id, value, 1, MAX_TTL_MS, "1ms to 30d");
			o->has_ttl = true;
			break;
		case OPT_WAIT:
			o->wait_ms = duration_option(id, value, 0, MAX_WAIT_MS, "0 to 1d");
			break;
		case OPT_GRACE:
			o->grace_ms = duration_option(id, value, 0, MAX_GRACE_MS, "0 to 1d");
			break;
		case OPT_HOLDER:
			check_name("--holder", value, MAX_HOLDER_BYTES);
			o->holder = value;
			break;
		case OPT_TOKEN:
			o->token = token_option(value);
			o->has_token = true;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_SLOTS:
			o->slots = slots_option(value);
			break;
		case OPT_SHARED:
			o->shared = true;
			break;
		case OPT_QUIET_IF_HELD:
			o->quiet_if_held = true;
			break;
		default:
			break;
	}
}

/* The words that are not options: the subcommand, then KEY. */
static void
take_word(Options *o, const char *word, int *cmd)
{
	if (o->cmd == NULL)
	{
		if ((*cmd = lookup_command(word)) < 0)
			usage_error("unknown command \"%s\"", word);
		o->cmd = word;
	}
	else if (commands[*cmd].takes_key && o->key == NULL)
		o->key = word;
	else
		usage_error("unexpected argument \"%s\"", word);
}

/*
 * Read argv into *o, or exit: 0 after --help or --version, 64 after a
 * usage error.  Options not given keep the values *o has.
 */
void
parse_args(int argc, char **argv, Options *o)
{
	const char *value[NUM_OPTS] = {0};
	int			cmd = -1;

	answer_help_or_version(argc, argv);
	for (int i = 1; i < argc; i++)
	{
		const char *a = argv[i];
		const char *inline_value;
		OptId		id;

		if (strcmp(a, "--") == 0)
		{
			o->cmd_argv = argv + i + 1;
			break;
		}
		if (a[0] != '-' || a[1] == '\0')
		{
			take_word(o, a, &cmd);
			continue;
		}
		if ((id = lookup_option(a, &inline_value)) == NUM_OPTS)
			usage_error("unknown option \"%s\"", a);
		if (!options[id].has_value && inline_value != NULL)
			usage_error("--%s takes no value", options[id].name);
		if (options[id].has_value && inline_value == NULL && i + 1 >= argc)
			usage_error("--%s needs a value", options[id].name);
		value[id] = !options[id].has_value ? "" : inline_value ? inline_value : argv[++i];
	}

	if (o->cmd == NULL)
		usage_error("no command given: run, acquire, renew, release, status, list,"
					" force-release, history or watch");
	if (commands[cmd].takes_key && o->key == NULL)
		usage_error("%s needs a KEY", o->cmd);
	if (o->key)
		check_name("KEY", o->key, MAX_KEY_BYTES);
	for (int id = 0; id < NUM_OPTS; id++)
	{
		if (value[id] == NULL)
			continue;
		if ((options[id].commands & commands[cmd].bit) == 0)
			usage_error("%s takes no --%s", o->cmd, options[id].name);
		set_option(o, (OptId) id, value[id]);
	}
	if (value[OPT_SLOTS] != NULL && value[OPT_SHARED] != NULL)
		usage_error("--slots and --shared cannot go together");
	if ((commands[cmd].bit & (C_RENEW | C_RELEASE)) && value[OPT_HOLDER] == NULL)
		usage_error("%s needs --holder NAME (the holder that acquired the key)", o->cmd);
	if (commands[cmd].bit == C_RUN && (o->cmd_argv == NULL || o->cmd_argv[0] == NULL))
		usage_error("run needs -- CMD [ARGS...]");
	if (commands[cmd].bit != C_RUN && o->cmd_argv != NULL)
		usage_error("%s takes no command after \"--\"", o->cmd);
}
