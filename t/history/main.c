/*-------------------------------------------------------------------------
 *
 * main.c
 *		The history checker's options and main(): sets up a run, forks the
 *		client processes, supervises them, runs the checker and prints the
 *		report.  The other files are listed in history.h.
 *
 * history: a history checker for dlock's lease locks (Jepsen-style, on one
 * server).
 *
 * N client processes (fork, one connection each) loop for D seconds over K
 * keys with short ttls:
 *
 *     acquire (wait 0 or a short wait) -> "work" -> renew sometimes
 *     -> validate-then-write -> release (or let the lease run out)
 *
 * The write is the protected action:
 *
 *     UPDATE h_resource SET value = value + 1, last_token = $token, writer = $client
 *      WHERE key = $key AND dlock_validate($key, $holder, $token)
 *
 * plus an append-only row in h_wlog in the same transaction (key, seq =
 * the resource's new value, token, client, server timestamps, txid).  Writes
 * to one key serialise on the resource row, so seq is the commit order of
 * the writes per key.  Most writes are one statement; some are a
 * transaction of two statements with a short sleep between them (a client
 * paused there holds the fence of dlock_validate while its lease runs out).
 *
 * Meanwhile a supervisor (the parent process) pauses clients with SIGSTOP
 * for longer than their ttl (preferring clients that hold a lease and have
 * not written yet) and resumes them with SIGCONT, so they come back with a
 * stale token and try to write.
 *
 * Every call is recorded (client, call, arguments, result, and the server's
 * statement_timestamp() before / clock_timestamp() after the call, in
 * microseconds) to OUTDIR/client-N.tsv.  Afterwards the checker verifies:
 *
 *  (a) order:   per key, the tokens of committed writes never decrease in
 *               commit order (h_wlog.seq), seq is 1..n without gaps, and
 *               the resource's value equals the number of logged writes;
 *  (b) stale:   no write committed with a token that was not granted to its
 *               writer for that key, or after a newer grant on the key had
 *               surely happened, or after its lease had surely expired or
 *               been released;
 *  (c) holder:  release and renew returned true only when the caller could
 *               have been the live holder (right token, lease possibly
 *               unexpired, no newer grant surely before the call); and
 *               release, renew and the fence did not refuse a caller that
 *               surely was the live holder;
 *  (d) overlap: no two grants of one key were surely held at overlapping
 *               times; a grant that surely happened after another has a
 *               greater token (all keys); no token was handed out twice.
 *
 * "Surely" uses the server timestamps conservatively (an acquire happened
 * somewhere between its before and after timestamps; a lease granted with
 * ttl in [b, a] expires in [b + ttl, a + ttl]), so a reported violation is a
 * real one, never an artefact of timing.
 *
 * --no-fence is the control run: writes use only WHERE key = $key.  With the
 * pauses it must produce stale writes, and the checker must report them.
 *
 * Output: a summary, the first violations in detail, and a last line
 *   history: mode=... calls=... grants=... writes=... violations=N ...
 * Exit status: 0 no violations, 1 violations found, 2 usage or setup error
 * (in --no-fence mode, 1 is the expected outcome).
 *
 * Build (see Makefile in this directory):
 *   gcc -O2 -Wall -o history *.c -I"$(pg_config --includedir)" \
 *       -L"$(pg_config --libdir)" -lpq
 * Run (needs CREATE EXTENSION rights, or dlock already installed in the db):
 *   ./history -d 'host=/tmp port=5432 dbname=postgres' -c 6 -k 3 -t 15
 *   ./history -d ... -t 10 --no-fence
 * It creates (and empties) the tables h_resource and h_wlog in the database:
 * do not run two at once against the same database.
 *
 *-------------------------------------------------------------------------
 */
#include "history.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- options */

const char *conninfo = "";
int			nclients = 6;
int			nkeys = 3;
int			seconds = 15;
int			ttl_min = 200;
int			ttl_max = 500;
int			gap_min = 150;		/* ms between two pauses */
int			gap_max = 600;
int			extra_min = 100;	/* a pause lasts ttl + extra ms */
int			extra_max = 350;
bool		fence = true;
bool		no_pauses = false;
char		outdir[4096];
uint64_t	seed;
static bool verbose = false;
static const char *recheck_dir = NULL;
bool		use_roles = true;

/* -------------------------------------------------------------------- main */

static void
usage(void)
{
	printf("usage: history [options]\n"
		   "  -d, --dbname=CONNINFO   connection string (default: libpq environment)\n"
		   "  -c, --clients=N         client processes (default 6, max %d)\n"
		   "  -k, --keys=N            keys (default 3)\n"
		   "  -t, --seconds=N         run time (default 15)\n"
		   "      --ttl=MIN,MAX       lease ttl range in ms (default 200,500)\n"
		   "      --gap=MIN,MAX       ms between pauses (default 150,600)\n"
		   "      --no-pauses         no SIGSTOP/SIGCONT\n"
		   "      --no-fence          control run: write without dlock_validate\n"
		   "      --no-roles          all clients as the connecting role, each with its own\n"
		   "                          holder name (default: roles dlock_history_a/_b are\n"
		   "                          created, and pairs of clients share a holder name\n"
		   "                          under different roles; needs CREATEROLE)\n"
		   "  -o, --outdir=DIR        where call records go (default: a new /tmp/history.XXXXXX)\n"
		   "  -s, --seed=N            random seed (default: time and pid)\n"
		   "  -v, --verbose\n"
		   "      --recheck=DIR       only check again the records of an earlier run in DIR\n"
		   "                          (its tables must still be in the database)\n"
		   "exit status: 0 no violations, 1 violations, 2 usage or setup error\n",
		   MAX_CLIENTS);
}

static void
parse_range(const char *s, int *lo, int *hi)
{
	if (sscanf(s, "%d,%d", lo, hi) != 2 || *lo < 1 || *hi < *lo)
		die("bad range \"%s\" (expected MIN,MAX)", s);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"dbname", required_argument, NULL, 'd'},
		{"clients", required_argument, NULL, 'c'},
		{"keys", required_argument, NULL, 'k'},
		{"seconds", required_argument, NULL, 't'},
		{"ttl", required_argument, NULL, 1},
		{"gap", required_argument, NULL, 2},
		{"no-pauses", no_argument, NULL, 3},
		{"no-fence", no_argument, NULL, 4},
		{"outdir", required_argument, NULL, 'o'},
		{"seed", required_argument, NULL, 's'},
		{"verbose", no_argument, NULL, 'v'},
		{"recheck", required_argument, NULL, 5},
		{"no-roles", no_argument, NULL, 6},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	int			opt;
	char		tag[64];
	pid_t		pids[MAX_CLIENTS];
	int64_t		deadline;
	int64_t		started;
	PauseStats	ps;
	Counts		n;
	int			failed_clients = 0;
	int			total;
	double		elapsed;

	seed = (uint64_t) time(NULL) * 1000003u + (uint64_t) getpid();
	outdir[0] = '\0';
	while ((opt = getopt_long(argc, argv, "d:c:k:t:o:s:vh", longopts, NULL)) != -1)
	{
		switch (opt)
		{
			case 'd':
				conninfo = optarg;
				break;
			case 'c':
				nclients = atoi(optarg);
				break;
			case 'k':
				nkeys = atoi(optarg);
				break;
			case 't':
				seconds = atoi(optarg);
				break;
			case 1:
				parse_range(optarg, &ttl_min, &ttl_max);
				break;
			case 2:
				parse_range(optarg, &gap_min, &gap_max);
				break;
			case 3:
				no_pauses = true;
				break;
			case 4:
				fence = false;
				break;
			case 'o':
				snprintf(outdir, sizeof(outdir), "%s", optarg);
				break;
			case 's':
				seed = strtoull(optarg, NULL, 10);
				break;
			case 'v':
				verbose = true;
				break;
			case 5:
				recheck_dir = optarg;
				break;
			case 6:
				use_roles = false;
				break;
			case 'h':
				usage();
				return 0;
			default:
				usage();
				return 2;
		}
	}
	if (nclients < 2 || nclients > MAX_CLIENTS)
		die("--clients must be between 2 and %d", MAX_CLIENTS);
	if (nkeys < 1 || nkeys > MAX_KEYS)
		die("--keys must be between 1 and %d", MAX_KEYS);
	if (seconds < 1)
		die("--seconds must be at least 1");
	if (recheck_dir)
	{
		/* check the records of an earlier run again (to debug the checker) */
		char		path[4200];
		FILE	   *f;
		int			fl;

		snprintf(outdir, sizeof(outdir), "%s", recheck_dir);
		snprintf(path, sizeof(path), "%s/meta", outdir);
		f = fopen(path, "r");
		if (f == NULL || fscanf(f, "%63s %d %d %d %d", tag, &nclients, &nkeys, &fl, &seconds) != 5)
			die("cannot read %s", path);
		fclose(f);
		fence = fl != 0;
		memset(&ps, 0, sizeof(ps));
		snprintf(path, sizeof(path), "%s/pauses.tsv", outdir);
		if ((f = fopen(path, "r")) != NULL)
		{
			int			v, ms, ttl, h;

			while (fscanf(f, "%d %d %d %d", &v, &ms, &ttl, &h) == 4)
			{
				ps.pauses++;
				ps.past_ttl += ms > ttl;
				ps.while_holding += h > 0;
				ps.in_fence += h == 2;
				if (ms > ps.longest_ms)
					ps.longest_ms = ms;
			}
			fclose(f);
		}
		started = mono_us();
		goto check;
	}
	if (outdir[0] == '\0')
	{
		snprintf(outdir, sizeof(outdir), "/tmp/history.XXXXXX");
		if (mkdtemp(outdir) == NULL)
			die("mkdtemp failed: %s", strerror(errno));
	}
	else if (mkdir(outdir, 0755) != 0 && errno != EEXIST)
		die("cannot create %s: %s", outdir, strerror(errno));
	rng_state = seed;
	snprintf(tag, sizeof(tag), "%lx%x", (unsigned long) time(NULL), (unsigned) getpid());
	{
		FILE	   *f = create_out("meta");

		fprintf(f, "%s %d %d %d %d\n", tag, nclients, nkeys, fence ? 1 : 0, seconds);
		fclose(f);
	}

	setup(tag);
	shared = mmap(NULL, sizeof(ClientState) * MAX_CLIENTS, PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		die("mmap failed: %s", strerror(errno));
	memset(shared, 0, sizeof(ClientState) * MAX_CLIENTS);

	printf("history: mode=%s clients=%d keys=%d seconds=%d ttl=%d..%d ms roles=%s seed=%" PRIu64
		   " records=%s\n",
		   fence ? "fence" : "no-fence", nclients, nkeys, seconds, ttl_min, ttl_max,
		   use_roles ? "2" : "1", seed, outdir);
	fflush(stdout);

	started = mono_us();
	deadline = started + (int64_t) seconds * 1000000;
	for (int i = 0; i < nclients; i++)
	{
		pid_t		pid = fork();

		if (pid < 0)
			die("fork failed: %s", strerror(errno));
		if (pid == 0)
		{
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			client_main(i, tag, deadline);
		}
		pids[i] = pid;
		shared[i].pid = pid;
	}

	supervise(deadline, &ps);

	/* resume everyone (harmless if running) and collect them */
	for (int i = 0; i < nclients; i++)
		kill(pids[i], SIGCONT);
	for (int i = 0; i < nclients; i++)
	{
		int			st;
		int64_t		give_up = mono_us() + 60 * 1000000LL;

		while (waitpid(pids[i], &st, WNOHANG) == 0)
		{
			if (mono_us() > give_up)
			{
				fprintf(stderr, "history: client %d does not finish; killing it\n", i);
				kill(pids[i], SIGKILL);
				waitpid(pids[i], &st, 0);
				break;
			}
			sleep_ms(20);
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed_clients++;
	}
check:
	elapsed = (mono_us() - started) / 1e6;
	if (recheck_dir)
		elapsed = seconds;

	check(tag, &n);

	total = viol[0] + viol[1] + viol[2] + viol[3];
	printf("calls: %d in %.1f s (%.0f/s), errors %d, clients failed %d\n",
		   n.calls, elapsed, n.calls / elapsed, n.errors, failed_clients);
	printf("acquire: %d calls (%d with wait), %d granted (%d grants, %d extensions)\n",
		   n.acq, n.acq_wait, n.acq_ok, ngrants, n.ext);
	printf("renew: %d calls, %d true; release: %d calls, %d true; probes of keys not held: %d, %d true\n",
		   n.renew, n.renew_ok, n.rel, n.rel_ok, n.probes, n.probes_ok);
	printf("writes: %d attempted (%d in two steps, %d in REPEATABLE READ), %d committed (%d logged),"
		   " %d refused (%d of them with a stale or expired token), %d serialization failures\n",
		   n.w_try, n.w_two_step, n.w_rr, n.w_ok, nwlog, n.w_rej, n.w_stale_rej, n.w_serial);
	printf("pauses: %d (%d past the ttl, %d of a client holding a lease, %d inside a validated"
		   " write transaction, longest %" PRId64 " ms)\n",
		   ps.pauses, ps.past_ttl, ps.while_holding, ps.in_fence, ps.longest_ms);
	printf("violations: %d (a order %d, b stale %d, c holder %d, d overlap %d)\n",
		   total, viol[0], viol[1], viol[2], viol[3]);
	printf("history: mode=%s calls=%d grants=%d writes=%d refused=%d stale_refused=%d"
		   " pauses=%d pauses_past_ttl=%d errors=%d violations=%d\n",
		   fence ? "fence" : "no-fence", n.calls, ngrants, nwlog, n.w_rej,
		   n.w_stale_rej, ps.pauses, ps.past_ttl, n.errors + failed_clients, total);
	if (verbose)
		printf("records kept in %s\n", outdir);
	return total > 0 ? 1 : 0;
}
