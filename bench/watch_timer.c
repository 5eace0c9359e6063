/*
 * bench/watch_timer.c - watch latency against hand-off latency, timed on
 * the client (built and run by bench/watch_bench.sh, with libpq).
 *
 *   watch_timer CONNINFO handoff|watch [TRIALS=200] [BUDGET_S=120]
 *
 * Both modes: a holder H takes the key, sleeps a random 20-40 ms, then
 * releases it (dlock_release, autocommit); the clock starts just before H
 * sends its release.
 *
 *   handoff  a waiter P blocks in dlock_acquire(key, 'waiter', '60 s',
 *            '10 s'); the clock stops when P's acquire returns (the lease
 *            is handed over in H's commit); P then releases it.
 *   watch    a watcher W, subscribed with dlock_watch(key), waits in poll()
 *            on its connection; the clock stops when the "released"
 *            notification of H's lease has been read (PQnotifies).
 *
 * Prints one line: mode, trials done, p50 p90 p99 max mean in milliseconds.
 * Stops early when BUDGET_S runs out, so that a broken wait cannot hang.
 */
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *conninfo;
static int	trials = 200;
static int	budget_s = 120;

/* what the second thread (P or W) reports for the current trial */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int	trial_started = -1;		/* set by H: P may call, W expects it */
static int	trial_done = -1;		/* set by P or W */
static double stop_ms;				/* when P's acquire returned / W read it */
static char held_token[32];			/* the token H holds in this trial */
static volatile int quitting = 0;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void
sleep_ms(double ms)
{
	struct timespec ts = {(time_t) (ms / 1000), (long) ((ms - (long) (ms / 1000) * 1000) * 1e6)};

	nanosleep(&ts, NULL);
}

static PGconn *
connect_or_die(void)
{
	PGconn	   *c = PQconnectdb(conninfo);

	if (PQstatus(c) != CONNECTION_OK)
	{
		fprintf(stderr, "watch_timer: %s", PQerrorMessage(c));
		exit(2);
	}
	return c;
}

/* run sql with params; the first value of the answer into out (may be NULL) */
static int
one(PGconn *c, const char *sql, int n, const char *const *p, char *out, size_t len)
{
	PGresult   *r = PQexecParams(c, sql, n, NULL, p, NULL, NULL, 0);
	int			ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
		!PQgetisnull(r, 0, 0);

	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		fprintf(stderr, "watch_timer: %s", PQerrorMessage(c));
	if (ok && out)
		snprintf(out, len, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return ok;
}

static void
report(int trial)
{
	pthread_mutex_lock(&mu);
	stop_ms = now_ms();
	trial_done = trial;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

/* wait until H starts trial; false when quitting */
static int
await_start(int trial)
{
	pthread_mutex_lock(&mu);
	while (trial_started < trial && !quitting)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return !quitting;
}

/* P: one blocking acquire per trial, then its release */
static void *
waiter(void *arg)
{
	PGconn	   *c = connect_or_die();
	const char *const acq[1] = {"wt:key"};

	for (int t = 0; t < trials && await_start(t); t++)
	{
		char		tok[32];
		const char *const rel[2] = {"wt:key", tok};

		if (!one(c, "SELECT dlock_acquire($1, 'waiter', '60 s', '10 s')", 1, acq,
				 tok, sizeof(tok)))
		{
			report(-2 - t);		/* not acquired */
			continue;
		}
		report(t);
		one(c, "SELECT dlock_release($1, 'waiter', $2::bigint)::text", 2, rel, NULL, 0);
	}
	PQfinish(c);
	return NULL;
}

/* W: subscribed once, then a poll loop; reports each "released" of H's token */
static void *
watcher(void *arg)
{
	PGconn	   *c = (PGconn *) arg;
	int			t = 0;

	while (!quitting && t < trials)
	{
		struct pollfd pfd = {.fd = PQsocket(c), .events = POLLIN};
		PGnotify   *n;

		if (poll(&pfd, 1, 200) < 0 || !PQconsumeInput(c))
			break;
		while ((n = PQnotifies(c)) != NULL)
		{
			char		want[64];

			pthread_mutex_lock(&mu);
			snprintf(want, sizeof(want), "\"token\":%s,", held_token);
			pthread_mutex_unlock(&mu);
			if (strstr(n->extra, "\"event\":\"released\"") && strstr(n->extra, want))
				report(t++);
			PQfreemem(n);
		}
	}
	return NULL;
}

static int
cmp(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	PGconn	   *h;
	PGconn	   *w = NULL;
	pthread_t	th;
	double	   *lat;
	int			n = 0;
	int			watch;
	double		deadline;
	const char *const key[1] = {"wt:key"};

	if (argc < 3 || (strcmp(argv[2], "handoff") != 0 && strcmp(argv[2], "watch") != 0))
	{
		fprintf(stderr, "usage: %s CONNINFO handoff|watch [TRIALS] [BUDGET_S]\n", argv[0]);
		return 2;
	}
	conninfo = argv[1];
	watch = strcmp(argv[2], "watch") == 0;
	if (argc > 3)
		trials = atoi(argv[3]);
	if (argc > 4)
		budget_s = atoi(argv[4]);
	lat = calloc(trials, sizeof(double));
	srand((unsigned) time(NULL));
	h = connect_or_die();
	if (watch)
	{
		w = connect_or_die();
		if (!one(w, "SELECT dlock_watch($1)", 1, key, NULL, 0))
			return 2;
		pthread_create(&th, NULL, watcher, w);
	}
	else
		pthread_create(&th, NULL, waiter, NULL);

	deadline = now_ms() + budget_s * 1000.0;
	for (int t = 0; t < trials && now_ms() < deadline; t++)
	{
		char		tok[32];
		const char *const rel[2] = {"wt:key", tok};
		double		t0;
		int			done;

		if (!one(h, "SELECT dlock_acquire($1, 'holder', '60 s', '10 s')", 1, key,
				 tok, sizeof(tok)))
			break;
		pthread_mutex_lock(&mu);
		snprintf(held_token, sizeof(held_token), "%s", tok);
		trial_started = t;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
		sleep_ms(20 + rand() % 21);
		t0 = now_ms();
		one(h, "SELECT dlock_release($1, 'holder', $2::bigint)::text", 2, rel, NULL, 0);
		pthread_mutex_lock(&mu);
		while (trial_done != t && trial_done != -2 - t && now_ms() < deadline)
		{
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&cv, &mu, &ts);
		}
		done = trial_done == t;
		if (done)
			lat[n++] = stop_ms - t0;
		pthread_mutex_unlock(&mu);
		if (!done)
			break;
	}
	pthread_mutex_lock(&mu);
	quitting = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(th, NULL);
	if (n == 0)
	{
		printf("mode=%s trials=0/%d error=no_trial_completed\n", argv[2], trials);
		return 1;
	}
	{
		double		sum = 0;

		qsort(lat, n, sizeof(double), cmp);
		for (int i = 0; i < n; i++)
			sum += lat[i];
		printf("mode=%s trials=%d/%d p50=%.3f p90=%.3f p99=%.3f max=%.3f mean=%.3f ms\n",
			   argv[2], n, trials, lat[n / 2], lat[(int) (n * 0.9)],
			   lat[(int) (n * 0.99)], lat[n - 1], sum / n);
	}
	PQfinish(h);
	if (w)
		PQfinish(w);
	return 0;
}
