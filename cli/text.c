/*-------------------------------------------------------------------------
 *
 * text.c
 *		The command line's fixed texts: the usage of dlock and of
 *		`dlock run`, and JSON strings.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>

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
"  dlock history KEY                           KEY's ended leases and claims, oldest\n"
"                                              first (dlock_history: a tracked key)\n"
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
"  --quiet-if-held        run, acquire: not acquired within --wait: exit 75\n"
"                         without a word on stderr (cron mails none)\n"
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
"                 [--slots N | --shared] [--quiet-if-held] [-d CONNINFO]\n"
"                 -- CMD [ARGS...]\n"
"\n"
"Acquires KEY (waiting up to --wait), runs CMD with DLOCK_KEY, DLOCK_HOLDER and\n"
"DLOCK_TOKEN in its environment, and renews the lease every ttl/3.  If the\n"
"lease is lost (a renewal fails, or the database stays unreachable until the\n"
"lease would lapse), CMD gets SIGTERM, then SIGKILL after --grace, and dlock\n"
"exits 70.  When CMD ends, dlock releases the lease and exits with CMD's\n"
"status.  SIGINT, SIGTERM and SIGHUP are passed on to CMD; before CMD starts\n"
"they cancel the acquire (nothing stays held or queued) and end dlock.\n"
"Exit codes: CMD's status, 64 usage, 69 database unreachable, 70 lease lost,\n"
"75 not acquired within --wait (silent with --quiet-if-held).\n";

void
print_usage(FILE *f, bool run)
{
	fputs(run ? run_usage_text : usage_text, f);
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
