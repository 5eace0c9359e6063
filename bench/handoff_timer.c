/*-------------------------------------------------------------------------
 *
 * handoff_timer.c
 *		bench/handoff_bench.sh's hand-off timer, on the client's clock.
 *
 * One process, three connections: the holder, the waiter and a monitor.
 * For each hand-off: the holder takes the lock; the waiter's blocking
 * acquire is sent without waiting for its answer; the monitor polls
 * pg_stat_activity until the waiter's backend is seen waiting, then the
 * program sleeps 20-40 ms (the holder "works"); then the clock starts and
 * the holder's release is sent, and the clock stops when the waiter's
 * acquire has come back with the lock (its commit included: a call in
 * autocommit answers after its commit).  Both sockets are watched with
 * poll(), so the waiter's answer is seen when it arrives, whichever of
 * the two answers comes first.  Then the waiter gives the lock back and
 * the next hand-off starts.
 *
 * Modes:
 *   advisory  pg_advisory_lock(k) / pg_advisory_unlock(k), session locks
 *   dlock     dlock_acquire(key, holder, '60 s', '10 s') / dlock_release
 *   claim     no lock: the waiter waits in dlock_claim(..., wait => '10 s')
 *             on an empty table whose inserts wake claims
 *             (dlock_claim_wakeup); the "release" is an autocommit INSERT
 *             of one row, and the clock stops when the waiter's claim has
 *             come back with that row (issue 38: insert commit to claimed)
 *   flush     no lock: one flushed commit in the same rhythm, the one
 *             cost a durable hand-off has on top of an advisory one.  Each
 *             trial sleeps 20-40 ms and times a one-row UPDATE (one WAL
 *             flush), sleeps again and times SELECT 1; it prints the p50
 *             of each and flush = their difference (table bench_flush,
 *             created if missing)
 *
 * usage: handoff_timer CONNINFO MODE [TRIALS=200] [BUDGET_S=120]
 * Prints one line of key=value pairs, times in ms:
 *   mode=dlock n=200 p50=0.612 p90=... p99=... max=... timeouts=0
 *   mode=flush n=200 p50=0.41 update_p50=... select_p50=...
 * Stops early when BUDGET_S seconds are used up (n then says how many).
 *
 * Build: gcc -O2 -o handoff_timer handoff_timer.c -I$(pg_config --includedir)
 *        -L$(pg_config --libdir) -lpq
 *
 *-------------------------------------------------------------------------
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

typedef enum
{
	MODE_ADVISORY,
	MODE_DLOCK,
	MODE_CLAIM,
	MODE_FLUSH
} Mode;

static double
clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static void
pause_ms(double ms)
{
	struct timespec ts;

	ts.tv_sec = (time_t) (ms / 1000.0);
	ts.tv_nsec = (long) ((ms - ts.tv_sec * 1000.0) * 1e6);
	while (nanosleep(&ts, &ts) != 0)
		;
}

/* 20-40 ms: the holder's work, and the idle time before a timed call */
static void
pause_work(void)
{
	pause_ms(20.0 + (double) (random() % 20001) / 1000.0);
}

static void
fail(PGconn *conn, const char *what)
{
	fprintf(stderr, "handoff_timer: %s: %s", what,
			conn ? PQerrorMessage(conn) : "\n");
	exit(2);
}

static PGconn *
open_conn(const char *conninfo)
{
	PGconn	   *conn = PQconnectdb(conninfo);

	if (PQstatus(conn) != CONNECTION_OK)
		fail(conn, "connect");
	return conn;
}

/* run sql, which must succeed; the first value of its result, or "" */
static char *
run(PGconn *conn, const char *sql)
{
	static char value[64];
	PGresult   *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
	{
		fprintf(stderr, "handoff_timer: %s: %s", sql, PQresultErrorMessage(res));
		exit(2);
	}
	value[0] = '\0';
	if (st == PGRES_TUPLES_OK && PQntuples(res) > 0 && PQnfields(res) > 0)
		snprintf(value, sizeof(value), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return value;
}

/*
 * Read conn's pending answer to the end; its first value into got (when
 * not NULL), false if it failed.  Call once PQisBusy(conn) is false.
 */
static int
finish_answer(PGconn *conn, char *got, size_t gotlen)
{
	PGresult   *res;
	int			ok = 1;

	while ((res = PQgetResult(conn)) != NULL)
	{
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			fprintf(stderr, "handoff_timer: %s", PQresultErrorMessage(res));
			ok = 0;
		}
		else if (got != NULL && PQntuples(res) > 0)
			snprintf(got, gotlen, "%s", PQgetisnull(res, 0, 0) ? "" :
					 PQgetvalue(res, 0, 0));
		PQclear(res);
	}
	return ok;
}

/* wait until the backend pid is seen waiting on a lock of this kind */
static void
await_waiting(PGconn *monitor, const char *pid, const char *event_type)
{
	char		sql[256];
	double		give_up = clock_ms() + 10000.0;

	snprintf(sql, sizeof(sql),
			 "SELECT count(*) FROM pg_catalog.pg_stat_activity"
			 " WHERE pid = %s AND wait_event_type = '%s'", pid, event_type);
	while (strcmp(run(monitor, sql), "1") != 0)
	{
		if (clock_ms() > give_up)
		{
			fprintf(stderr, "handoff_timer: backend %s never waited\n", pid);
			exit(2);
		}
		pause_ms(0.5);
	}
}

/*
 * One hand-off from holder to waiter; returns its time in ms, or -1 when
 * the waiter's acquire came back without the lock.
 */
static double
one_handoff(Mode mode, PGconn *holder, PGconn *waiter, PGconn *monitor,
			const char *waiter_pid)
{
	static const char *const sql[][4] = {
		/* take, wait, release, give back */
		[MODE_ADVISORY] = {"SELECT pg_advisory_lock(4242) IS NOT NULL",
			"SELECT pg_advisory_lock(4242) IS NOT NULL",
			"SELECT pg_advisory_unlock(4242)",
		"SELECT pg_advisory_unlock(4242)"},
		[MODE_DLOCK] = {"SELECT dlock_acquire('handoff', 'holder', '60 s') IS NOT NULL",
			"SELECT dlock_acquire('handoff', 'waiter', '60 s', '10 s') IS NOT NULL",
			"SELECT dlock_release('handoff', 'holder')",
		"SELECT dlock_release('handoff', 'waiter')"},
		[MODE_CLAIM] = {"SELECT true",
			"SELECT count(*) = 1 FROM dlock_claim(NULL::bench_wjobs, 'waiter', 1,"
			" '60 s', wait => '10 s')",
			"INSERT INTO bench_wjobs (payload) VALUES ('job') RETURNING id",
			"WITH d AS (DELETE FROM bench_wjobs RETURNING id)"
		" SELECT count(*) FROM dlock_complete('bench_wjobs', 'waiter', ARRAY(SELECT id FROM d))"},
	};
	const char *take = sql[mode][0];
	const char *wait = sql[mode][1];
	const char *release = sql[mode][2];
	const char *give_back = sql[mode][3];
	char		got[16] = "";
	int			released = 0;
	int			acquired = 0;
	double		t0;
	double		t1 = 0;

	if (strcmp(run(holder, take), "t") != 0)
		fail(NULL, "the holder did not get the lock\n");
	if (!PQsendQuery(waiter, wait))
		fail(waiter, "send the waiter's acquire");
	await_waiting(monitor, waiter_pid, mode == MODE_ADVISORY ? "Lock" : "Extension");
	pause_work();

	t0 = clock_ms();
	if (!PQsendQuery(holder, release))
		fail(holder, "send the release");
	while (!released || !acquired)
	{
		struct pollfd fds[2] = {
			{PQsocket(holder), POLLIN, 0},
			{PQsocket(waiter), POLLIN, 0},
		};

		if (poll(fds, 2, 15000) <= 0)
			fail(NULL, "no answer within 15 s\n");
		if (!acquired && fds[1].revents)
		{
			if (!PQconsumeInput(waiter))
				fail(waiter, "read the waiter's answer");
			if (!PQisBusy(waiter))
			{
				t1 = clock_ms();
				if (!finish_answer(waiter, got, sizeof(got)))
					exit(2);
				acquired = 1;
			}
		}
		if (!released && fds[0].revents)
		{
			if (!PQconsumeInput(holder))
				fail(holder, "read the release's answer");
			if (!PQisBusy(holder))
			{
				if (!finish_answer(holder, NULL, 0))
					exit(2);
				released = 1;
			}
		}
	}
	if (strcmp(got, "t") != 0)
		return -1;
	(void) run(waiter, give_back);
	return t1 - t0;
}

/* one call of sql after 20-40 ms idle; its time in ms */
static double
one_call(PGconn *conn, const char *sql)
{
	double		t0;

	pause_work();
	t0 = clock_ms();
	(void) run(conn, sql);
	return clock_ms() - t0;
}

static int
by_value(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/* the q-quantile of n sorted values (nearest rank) */
static double
quantile(const double *v, int n, double q)
{
	int			i = (int) (q * n + 0.999999) - 1;

	if (n == 0)
		return 0;
	return v[i < 0 ? 0 : (i >= n ? n - 1 : i)];
}

int
main(int argc, char **argv)
{
	const char *conninfo;
	Mode		mode;
	int			trials = argc > 3 ? atoi(argv[3]) : 200;
	double		budget_ms = (argc > 4 ? atof(argv[4]) : 120.0) * 1000.0;
	double		deadline;
	double	   *a;
	double	   *b;
	int			n = 0;
	int			timeouts = 0;
	PGconn	   *c1;
	PGconn	   *c2;
	PGconn	   *monitor = NULL;
	char		waiter_pid[16];

	if (argc < 3 || trials < 1)
	{
		fprintf(stderr, "usage: handoff_timer CONNINFO advisory|dlock|claim|flush [TRIALS] [BUDGET_S]\n");
		return 2;
	}
	conninfo = argv[1];
	if (strcmp(argv[2], "advisory") == 0)
		mode = MODE_ADVISORY;
	else if (strcmp(argv[2], "dlock") == 0)
		mode = MODE_DLOCK;
	else if (strcmp(argv[2], "claim") == 0)
		mode = MODE_CLAIM;
	else if (strcmp(argv[2], "flush") == 0)
		mode = MODE_FLUSH;
	else
	{
		fprintf(stderr, "handoff_timer: unknown mode \"%s\"\n", argv[2]);
		return 2;
	}
	srandom((unsigned) time(NULL));
	a = calloc(trials, sizeof(double));
	b = calloc(trials, sizeof(double));
	c1 = open_conn(conninfo);
	c2 = open_conn(conninfo);
	if (mode == MODE_FLUSH)
		(void) run(c1, "SET client_min_messages = warning;"
				   "CREATE TABLE IF NOT EXISTS bench_flush (id int PRIMARY KEY, n bigint);"
				   "INSERT INTO bench_flush VALUES (1, 0) ON CONFLICT DO NOTHING");
	else
	{
		if (mode == MODE_CLAIM)
			(void) run(c1, "SET client_min_messages = warning;"
					   "CREATE TABLE IF NOT EXISTS bench_wjobs"
					   " (id bigserial PRIMARY KEY, payload text);"
					   "SELECT dlock_claim_wakeup('bench_wjobs')");
		monitor = open_conn(conninfo);
		snprintf(waiter_pid, sizeof(waiter_pid), "%d", PQbackendPID(c2));
	}

	deadline = clock_ms() + budget_ms;
	while (n < trials && clock_ms() < deadline)
	{
		if (mode == MODE_FLUSH)
		{
			a[n] = one_call(c1, "UPDATE bench_flush SET n = n + 1 WHERE id = 1");
			b[n] = one_call(c1, "SELECT 1");
			n++;
			continue;
		}
		a[n] = one_handoff(mode, c1, c2, monitor, waiter_pid);
		if (a[n] < 0)
			timeouts++;
		else
			n++;
	}
	qsort(a, n, sizeof(double), by_value);
	if (mode == MODE_FLUSH)
	{
		qsort(b, n, sizeof(double), by_value);
		printf("mode=flush n=%d p50=%.3f update_p50=%.3f select_p50=%.3f ms\n", n,
			   quantile(a, n, 0.5) - quantile(b, n, 0.5),
			   quantile(a, n, 0.5), quantile(b, n, 0.5));
	}
	else
		printf("mode=%s n=%d p50=%.3f p90=%.3f p99=%.3f max=%.3f timeouts=%d ms\n",
			   argv[2], n, quantile(a, n, 0.5), quantile(a, n, 0.9),
			   quantile(a, n, 0.99), n > 0 ? a[n - 1] : 0, timeouts);
	PQfinish(c1);
	PQfinish(c2);
	if (monitor)
		PQfinish(monitor);
	return n == trials ? 0 : 1;
}
