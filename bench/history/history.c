/*
 * history.c - a history checker for dlock's lease locks (Jepsen-style, on one
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
 *   gcc -O2 -Wall -o history history.c -I"$(pg_config --includedir)" \
 *       -L"$(pg_config --libdir)" -lpq
 * Run (needs CREATE EXTENSION rights, or dlock already installed in the db):
 *   ./history -d 'host=/tmp port=5432 dbname=postgres' -c 6 -k 3 -t 15
 *   ./history -d ... -t 10 --no-fence
 * It creates (and empties) the tables h_resource and h_wlog in the database:
 * do not run two at once against the same database.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#define TEXTOID 25
#define INT8OID 20
#define INT4OID 23

#define MAX_CLIENTS 64
#define MAX_KEYS 64
#define MAX_SHOWN 12			/* violations printed in detail per category */

#define STMT_US "(extract(epoch FROM statement_timestamp()) * 1000000)::int8"
#define CLOCK_US "(extract(epoch FROM clock_timestamp()) * 1000000)::int8"

/* ---------------------------------------------------------------- options */

static const char *conninfo = "";
static int	nclients = 6;
static int	nkeys = 3;
static int	seconds = 15;
static int	ttl_min = 200;
static int	ttl_max = 500;
static int	gap_min = 150;		/* ms between two pauses */
static int	gap_max = 600;
static int	extra_min = 100;	/* a pause lasts ttl + extra ms */
static int	extra_max = 350;
static bool fence = true;
static bool no_pauses = false;
static char outdir[4096];
static uint64_t seed;
static bool verbose = false;
static const char *recheck_dir = NULL;
static bool use_roles = true;

/* ----------------------------------------------------------- shared state */

typedef struct ClientState
{
	volatile pid_t pid;
	volatile int holding;		/* 1 between a grant and its first write,
								 * 2 inside a validated, uncommitted write */
	volatile int ttl_ms;		/* ttl of the current lease */
} ClientState;

static ClientState *shared;

/* set by call3 when its query failed with SQLSTATE 40001 */
static bool serialization_failure = false;

/* ------------------------------------------------------------------ utils */

static void
die(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fprintf(stderr, "history: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static int64_t
mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
sleep_ms(int ms)
{
	struct timespec ts;

	if (ms <= 0)
		return;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long) (ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static uint64_t rng_state;

static uint64_t
rnd(void)
{
	/* splitmix64 */
	uint64_t	z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* uniform in [lo, hi] */
static int
rnd_between(int lo, int hi)
{
	if (hi <= lo)
		return lo;
	return lo + (int) (rnd() % (uint64_t) (hi - lo + 1));
}

static bool
chance(int percent)
{
	return (int) (rnd() % 100) < percent;
}

static void *
xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (p == NULL && n > 0)
		die("out of memory");
	return p;
}

/* -------------------------------------------------------------- SQL setup */

static void
exec_or_die(PGconn *conn, const char *sql)
{
	PGresult   *r = PQexec(conn, sql);

	if (PQresultStatus(r) != PGRES_COMMAND_OK &&
		PQresultStatus(r) != PGRES_TUPLES_OK)
		die("setup query failed: %s\n  %s", PQerrorMessage(conn), sql);
	PQclear(r);
}

static void
setup(const char *tag)
{
	PGconn	   *conn = PQconnectdb(conninfo);
	char		sql[512];

	if (PQstatus(conn) != CONNECTION_OK)
		die("connection failed: %s", PQerrorMessage(conn));
	exec_or_die(conn, "SET client_min_messages = warning");
	exec_or_die(conn, "CREATE EXTENSION IF NOT EXISTS dlock");
	exec_or_die(conn, "DROP TABLE IF EXISTS h_resource, h_wlog");
	exec_or_die(conn,
				"CREATE TABLE h_resource ("
				" key text PRIMARY KEY, value bigint NOT NULL DEFAULT 0,"
				" last_token bigint, writer int)");
	exec_or_die(conn,
				"CREATE TABLE h_wlog ("
				" id bigserial PRIMARY KEY, key text NOT NULL, seq bigint NOT NULL,"
				" token bigint NOT NULL, client int NOT NULL,"
				" v_before bigint NOT NULL, v_after bigint NOT NULL,"
				" fence_until bigint NOT NULL,"
				" txid bigint NOT NULL, two_step boolean NOT NULL,"
				" UNIQUE (key, seq))");
	if (use_roles)
	{
		/*
		 * Two roles; clients 2i and 2i+1 use the same holder name under
		 * different roles, so they must never share a lease.
		 */
		exec_or_die(conn,
					"DO $$ BEGIN"
					" IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dlock_history_a') THEN"
					"  CREATE ROLE dlock_history_a; END IF;"
					" IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dlock_history_b') THEN"
					"  CREATE ROLE dlock_history_b; END IF; END $$");
		exec_or_die(conn, "GRANT SELECT, UPDATE ON h_resource TO dlock_history_a, dlock_history_b");
		exec_or_die(conn, "GRANT SELECT, INSERT ON h_wlog TO dlock_history_a, dlock_history_b");
		exec_or_die(conn, "GRANT USAGE ON SEQUENCE h_wlog_id_seq TO dlock_history_a, dlock_history_b");
	}
	for (int k = 0; k < nkeys; k++)
	{
		snprintf(sql, sizeof(sql),
				 "INSERT INTO h_resource (key) VALUES ('hist-%s-%d')", tag, k);
		exec_or_die(conn, sql);
	}
	PQfinish(conn);
}

/* ------------------------------------------------------------------ client */

/*
 * Call records.  type: A acquire, X re-acquire of the key held (extends),
 * N renew, R release, W write, Q renew of a key not held, P release of a
 * key not held.  res: acquire: token or 0 (NULL); renew/release: 1/0;
 * write: seq or 0 (rejected); -1: error.
 */
typedef struct Call
{
	int			client;
	int			idx;
	char		type;
	int			key;
	int64_t		tok_arg;		/* token argument, 0 = none (NULL) */
	int			ttl;			/* ms, 0 = none (NULL) */
	int			wait;			/* ms */
	int64_t		res;
	int64_t		b;				/* server µs before (statement start) */
	int64_t		a;				/* server µs after */
	int			two_step;
	/* filled in by the checker */
	int			grant;			/* the caller's latest grant on key, or -1 */
	int64_t		exp_lo;			/* its expiry bounds as of the call */
	int64_t		exp_hi;
	bool		released;		/* released (by the caller) before the call */
} Call;

typedef struct ClientCtx
{
	int			id;
	PGconn	   *conn;
	FILE	   *out;
	int			idx;
	char		holder[128];
	char		keys[MAX_KEYS][128];
} ClientCtx;

static void
record(ClientCtx *c, char type, int key, int64_t tok_arg, int ttl, int wait,
	   int64_t res, int64_t b, int64_t a, int two_step)
{
	fprintf(c->out, "%d\t%d\t%c\t%d\t%" PRId64 "\t%d\t%d\t%" PRId64 "\t%" PRId64
			"\t%" PRId64 "\t%d\n",
			c->id, c->idx++, type, key, tok_arg, ttl, wait, res, b, a, two_step);
}

static void
client_error(ClientCtx *c, const char *what, PGresult *r)
{
	fprintf(stderr, "history: client %d: %s failed: %s", c->id, what,
			r ? PQresultErrorMessage(r) : PQerrorMessage(c->conn));
	if (PQstatus(c->conn) != CONNECTION_OK)
	{
		fflush(c->out);
		_exit(3);
	}
}

/*
 * Runs a query returning one row "b, x, a"; fills b, a, and x (int8, bool
 * as 1/0, NULL as 0).  Returns false on error.
 */
static bool
call3(ClientCtx *c, const char *what, const char *sql, int nparams,
	  const Oid *types, const char *const *values, int64_t *b, int64_t *x,
	  int64_t *a)
{
	PGresult   *r = PQexecParams(c->conn, sql, nparams, types, values, NULL,
								 NULL, 0);

	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
	{
		const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);

		serialization_failure = st != NULL && strcmp(st, "40001") == 0;
		if (!serialization_failure)
			client_error(c, what, r);
		PQclear(r);
		return false;
	}
	*b = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	*a = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
	if (PQgetisnull(r, 0, 1))
		*x = 0;
	else
	{
		const char *v = PQgetvalue(r, 0, 1);

		if (v[0] == 't')
			*x = 1;
		else if (v[0] == 'f')
			*x = 0;
		else
			*x = strtoll(v, NULL, 10);
	}
	PQclear(r);
	return true;
}

static bool
simple(ClientCtx *c, const char *sql)
{
	PGresult   *r = PQexec(c->conn, sql);
	bool		ok = PQresultStatus(r) == PGRES_COMMAND_OK;

	if (!ok)
		client_error(c, sql, r);
	PQclear(r);
	return ok;
}

static int64_t
do_acquire(ClientCtx *c, char type, int key, int ttl, int wait)
{
	static const Oid types[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	char		ttl_s[32],
				wait_s[32];
	const char *v[4];
	int64_t		b = 0,
				x = 0,
				a = 0;

	snprintf(ttl_s, sizeof(ttl_s), "%d milliseconds", ttl);
	snprintf(wait_s, sizeof(wait_s), "%d milliseconds", wait);
	v[0] = c->keys[key];
	v[1] = c->holder;
	v[2] = ttl_s;
	v[3] = wait_s;
	if (!call3(c, "acquire",
			   "SELECT " STMT_US ", dlock_acquire($1, $2, $3::interval, $4::interval), " CLOCK_US,
			   4, types, v, &b, &x, &a))
		x = -1;
	record(c, type, key, 0, ttl, wait, x, b, a, 0);
	return x;
}

static int64_t
do_renew(ClientCtx *c, char type, int key, int ttl, int64_t token)
{
	static const Oid types[4] = {TEXTOID, TEXTOID, TEXTOID, INT8OID};
	char		ttl_s[32],
				tok_s[32];
	const char *v[4];
	int64_t		b = 0,
				x = 0,
				a = 0;

	snprintf(ttl_s, sizeof(ttl_s), "%d milliseconds", ttl);
	snprintf(tok_s, sizeof(tok_s), "%" PRId64, token);
	v[0] = c->keys[key];
	v[1] = c->holder;
	v[2] = ttl > 0 ? ttl_s : NULL;
	v[3] = token > 0 ? tok_s : NULL;
	if (!call3(c, "renew",
			   "SELECT " STMT_US ", dlock_renew($1, $2, $3::interval, $4), " CLOCK_US,
			   4, types, v, &b, &x, &a))
		x = -1;
	record(c, type, key, token, ttl, 0, x, b, a, 0);
	return x;
}

static int64_t
do_release(ClientCtx *c, char type, int key, int64_t token)
{
	static const Oid types[3] = {TEXTOID, TEXTOID, INT8OID};
	char		tok_s[32];
	const char *v[3];
	int64_t		b = 0,
				x = 0,
				a = 0;

	snprintf(tok_s, sizeof(tok_s), "%" PRId64, token);
	v[0] = c->keys[key];
	v[1] = c->holder;
	v[2] = token > 0 ? tok_s : NULL;
	if (!call3(c, "release",
			   "SELECT " STMT_US ", dlock_release($1, $2, $3), " CLOCK_US,
			   3, types, v, &b, &x, &a))
		x = -1;
	record(c, type, key, token, 0, 0, x, b, a, 0);
	return x;
}

/* the fence, or (control run) nothing but the key */
#define FENCE_QUAL() (fence ? "AND dlock_validate($1, $2, $3)" : "")

/*
 * REPEATABLE READ write, first half: the transaction and its snapshot start
 * right after the grant, before the "work"; the write comes after it (a
 * pause in between makes both the token and the snapshot old).
 */
static bool
begin_rr(ClientCtx *c, int key)
{
	static const Oid types[1] = {TEXTOID};
	const char *v[1] = {c->keys[key]};
	PGresult   *r;
	bool		ok;

	if (!simple(c, "BEGIN ISOLATION LEVEL REPEATABLE READ"))
		return false;
	r = PQexecParams(c->conn, "SELECT value FROM h_resource WHERE key = $1",
					 1, types, v, NULL, NULL, 0);
	ok = PQresultStatus(r) == PGRES_TUPLES_OK;
	if (!ok)
		client_error(c, "snapshot", r);
	PQclear(r);
	if (!ok)
		simple(c, "ROLLBACK");
	return ok;
}

/*
 * The protected write.  mode 0: one statement; 1: a transaction of two
 * statements with a pause-prone gap after the validating UPDATE; 2: like 1,
 * inside the REPEATABLE READ transaction begun by begin_rr.
 * Result: seq, 0 refused, -1 error, -2 serialization failure (mode 2).
 */
static int64_t
do_write(ClientCtx *c, int key, int64_t token, int mode)
{
	bool		two_step = mode > 0;
	static const Oid types[4] = {TEXTOID, TEXTOID, INT8OID, INT4OID};
	char		tok_s[32],
				cl_s[16],
				sql[2048];
	const char *v[4];
	int64_t		b = 0,
				x = 0,
				a = 0;

	snprintf(tok_s, sizeof(tok_s), "%" PRId64, token);
	snprintf(cl_s, sizeof(cl_s), "%d", c->id);
	v[0] = c->keys[key];
	v[1] = c->holder;
	v[2] = tok_s;
	v[3] = cl_s;

	if (!two_step)
	{
		snprintf(sql, sizeof(sql),
				 "WITH u AS (UPDATE h_resource"
				 "              SET value = value + 1, last_token = $3, writer = $4"
				 "            WHERE key = $1 %s RETURNING key, value),"
				 "     ins AS (INSERT INTO h_wlog (key, seq, token, client, v_before,"
				 "                                 v_after, fence_until, txid, two_step)"
				 "             SELECT key, value, $3, $4, " STMT_US ", " CLOCK_US ","
				 "                    " CLOCK_US ", txid_current(), false FROM u RETURNING seq)"
				 " SELECT " STMT_US ", (SELECT seq FROM ins), " CLOCK_US,
				 FENCE_QUAL());
		if (!call3(c, "write", sql, 4, types, v, &b, &x, &a))
			x = -1;
	}
	else
	{
		/* validate-and-update, a pause-prone gap, then the log row */
		static const Oid itypes[6] = {TEXTOID, INT8OID, INT8OID, INT4OID,
		INT8OID, INT8OID};
		char		seq_s[32],
					b_s[32],
					a_s[32];
		const char *iv[6];
		PGresult   *r;

		serialization_failure = false;
		if (mode == 1 && !simple(c, "BEGIN"))
			x = -1;
		else
		{
			snprintf(sql, sizeof(sql),
					 "WITH u AS (UPDATE h_resource"
					 "              SET value = value + 1, last_token = $3, writer = $4"
					 "            WHERE key = $1 %s RETURNING value)"
					 " SELECT " STMT_US ", (SELECT value FROM u), " CLOCK_US,
					 FENCE_QUAL());
			if (!call3(c, "write (update)", sql, 4, types, v, &b, &x, &a))
				x = serialization_failure ? -2 : -1;
			if (x <= 0)
				simple(c, "ROLLBACK");
			else
			{
				/* fenced (validated) but not committed: a pause here holds the fence */
				shared[c->id].holding = 2;
				sleep_ms(rnd_between(1, 25));
				shared[c->id].holding = 1;
				snprintf(seq_s, sizeof(seq_s), "%" PRId64, x);
				snprintf(b_s, sizeof(b_s), "%" PRId64, b);
				snprintf(a_s, sizeof(a_s), "%" PRId64, a);
				iv[0] = c->keys[key];
				iv[1] = seq_s;
				iv[2] = tok_s;
				iv[3] = cl_s;
				iv[4] = b_s;
				iv[5] = a_s;
				r = PQexecParams(c->conn,
								 "INSERT INTO h_wlog (key, seq, token, client, v_before,"
								 " v_after, fence_until, txid, two_step)"
								 " VALUES ($1, $2, $3, $4, $5, $6, " CLOCK_US ", txid_current(), true)",
								 6, itypes, iv, NULL, NULL, 0);
				if (PQresultStatus(r) != PGRES_COMMAND_OK)
				{
					client_error(c, "write (log)", r);
					x = -1;
				}
				PQclear(r);
				if (x > 0)
				{
					if (!simple(c, "COMMIT"))
						x = -1;
				}
				else
					simple(c, "ROLLBACK");
			}
		}
	}
	record(c, 'W', key, token, 0, 0, x, b, a, mode);
	return x;
}

static void
client_main(int id, const char *tag, int64_t deadline)
{
	ClientCtx	c;
	char		path[4200];
	ClientState *me = &shared[id];

	memset(&c, 0, sizeof(c));
	c.id = id;
	rng_state = seed * 7919 + (uint64_t) id * 104729 + 1;
	if (use_roles)
		snprintf(c.holder, sizeof(c.holder), "h-%s-p%d", tag, id / 2);
	else
		snprintf(c.holder, sizeof(c.holder), "h-%s-c%d", tag, id);
	for (int k = 0; k < nkeys; k++)
		snprintf(c.keys[k], sizeof(c.keys[k]), "hist-%s-%d", tag, k);
	snprintf(path, sizeof(path), "%s/client-%d.tsv", outdir, id);
	c.out = fopen(path, "w");
	if (c.out == NULL)
		die("cannot write %s: %s", path, strerror(errno));
	c.conn = PQconnectdb(conninfo);
	if (PQstatus(c.conn) != CONNECTION_OK)
	{
		fprintf(stderr, "history: client %d: connection failed: %s", id,
				PQerrorMessage(c.conn));
		_exit(3);
	}
	{
		char		sql[128];

		snprintf(sql, sizeof(sql), "SET application_name = 'history-c%d'", id);
		simple(&c, sql);
		if (use_roles)
		{
			snprintf(sql, sizeof(sql), "SET ROLE dlock_history_%c", id % 2 ? 'b' : 'a');
			if (!simple(&c, sql))
				_exit(3);
		}
	}

	while (mono_us() < deadline)
	{
		int			key = (int) (rnd() % (uint64_t) nkeys);
		int			ttl = rnd_between(ttl_min, ttl_max);
		int			wait = chance(30) ? rnd_between(1, 100) : 0;
		int			wmode;
		int64_t		token;

		token = do_acquire(&c, 'A', key, ttl, wait);
		if (token <= 0)
		{
			/* now and then, poke a key we do not hold: must be refused */
			if (chance(5))
			{
				int			other = (int) (rnd() % (uint64_t) nkeys);

				if (chance(50))
					do_release(&c, 'P', other, chance(50) ? 0 : (int64_t) (rnd() % 1000) + 1);
				else
					do_renew(&c, 'Q', other, chance(50) ? 0 : ttl, 0);
			}
			sleep_ms(rnd_between(0, 4));
			continue;
		}
		me->ttl_ms = ttl;
		me->holding = 1;

		wmode = chance(10) ? 2 : chance(25) ? 1 : 0;
		if (wmode == 2 && !begin_rr(&c, key))
			wmode = 1;

		/* work: the window in which a pause makes the token stale */
		sleep_ms(rnd_between(2, ttl / 6));

		/* (renewals inside the open transaction would count only at commit) */
		if (wmode != 2 && chance(30))
		{
			int			nttl = chance(50) ? 0 : rnd_between(ttl_min, ttl_max);

			if (do_renew(&c, 'N', key, nttl, chance(50) ? token : 0) == 1 && nttl > 0)
				me->ttl_ms = nttl;
			sleep_ms(rnd_between(0, ttl / 10));
		}
		if (wmode != 2 && chance(8))
			do_acquire(&c, 'X', key, ttl, 0);	/* same holder: extends */

		do_write(&c, key, token, wmode);
		me->holding = 0;
		if (chance(15))
		{
			sleep_ms(rnd_between(0, 5));
			do_write(&c, key, token, 0);
		}

		if (chance(4))
			do_release(&c, 'R', key, token + 1);	/* wrong token: must fail */
		if (chance(85))
			do_release(&c, 'R', key, chance(50) ? token : 0);
		/* else: let it run out (the next acquire of it may extend it) */
		sleep_ms(rnd_between(0, 3));
	}
	fflush(c.out);
	fclose(c.out);
	PQfinish(c.conn);
	_exit(0);
}

/* -------------------------------------------------------------- supervisor */

typedef struct PauseStats
{
	int			pauses;
	int			past_ttl;
	int			while_holding;
	int			in_fence;
	int64_t		longest_ms;
} PauseStats;

static void
supervise(int64_t deadline, PauseStats *ps)
{
	char		path[4200];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/pauses.tsv", outdir);
	f = fopen(path, "w");
	if (f == NULL)
		die("cannot write %s: %s", path, strerror(errno));
	memset(ps, 0, sizeof(*ps));
	/* let the clients get going */
	sleep_ms(rnd_between(gap_min, gap_max));
	while (!no_pauses && mono_us() < deadline - 200000)
	{
		int			victim = -1;
		int			ttl;
		int			ms;
		int			holding;
		int64_t		t0;

		/*
		 * First choice: a client inside a validated write transaction (its
		 * fence must hold the key past the ttl); then, mostly, a client
		 * that holds a lease and has not written yet.
		 */
		for (int i = 0; i < nclients; i++)
			if (shared[i].holding == 2)
				victim = i;
		if (victim < 0 && chance(80))
		{
			int			start = (int) (rnd() % (uint64_t) nclients);

			for (int i = 0; i < nclients; i++)
			{
				int			j = (start + i) % nclients;

				if (shared[j].holding)
				{
					victim = j;
					break;
				}
			}
		}
		if (victim < 0)
			victim = (int) (rnd() % (uint64_t) nclients);
		ttl = shared[victim].ttl_ms > 0 ? shared[victim].ttl_ms : ttl_max;
		ms = ttl + rnd_between(extra_min, extra_max);
		holding = shared[victim].holding;
		t0 = mono_us();
		if (kill(shared[victim].pid, SIGSTOP) != 0)
			break;
		sleep_ms(ms);
		kill(shared[victim].pid, SIGCONT);
		ms = (int) ((mono_us() - t0) / 1000);
		ps->pauses++;
		if (ms > ttl)
			ps->past_ttl++;
		if (holding)
			ps->while_holding++;
		if (holding == 2)
			ps->in_fence++;
		if (ms > ps->longest_ms)
			ps->longest_ms = ms;
		fprintf(f, "%d\t%d\t%d\t%d\n", victim, ms, ttl, holding);
		sleep_ms(rnd_between(gap_min, gap_max));
	}
	fclose(f);
}

/* ----------------------------------------------------------------- checker */

typedef struct Grant
{
	int			key;
	int			client;
	int64_t		token;
	int64_t		s_lo;			/* granted somewhere in [s_lo, s_hi] */
	int64_t		s_hi;
	int			ttl;			/* current ttl (ms), for renew(ttl => NULL) */
	int64_t		exp_lo;			/* expiry bounds after the last extension */
	int64_t		exp_hi;
	int64_t		op_b;			/* latest start of a call that proved it held */
	bool		released;
	int64_t		rel_b;
	int64_t		rel_a;
	int			writes;
} Grant;

typedef struct WlogRow
{
	int			key;
	int64_t		seq;
	int64_t		token;
	int			client;
	int64_t		v_before;
	int64_t		v_after;
	int64_t		fence_until;	/* a time before commit, after the validation */
	bool		two_step;
} WlogRow;

typedef struct KeyIndex
{
	int			n;
	int		   *g;				/* grants of the key sorted by token */
	int64_t    *suf_min_hi;		/* min s_hi over g[i..] */
	int64_t    *suf_min_lo;		/* min s_lo over g[i..] */
} KeyIndex;

static Call *calls;
static int	ncalls;
static Grant *grants;
static int	ngrants;
static WlogRow *wlog;
static int	nwlog;
static KeyIndex kidx[MAX_KEYS];

static int	viol[4];			/* a, b, c, d */
static const char *const viol_name[4] = {"order", "stale", "holder", "overlap"};

static void
violation(int cat, const char *fmt,...)
{
	va_list		ap;

	viol[cat]++;
	if (viol[cat] > MAX_SHOWN)
		return;
	va_start(ap, fmt);
	printf("VIOLATION (%c, %s): ", 'a' + cat, viol_name[cat]);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static int
cmp_grant_token_idx(const void *x, const void *y)
{
	int64_t		a = grants[*(const int *) x].token,
				b = grants[*(const int *) y].token;

	return a < b ? -1 : a > b;
}

static int
cmp_grant_s_hi_idx(const void *x, const void *y)
{
	int64_t		a = grants[*(const int *) x].s_hi,
				b = grants[*(const int *) y].s_hi;

	return a < b ? -1 : a > b;
}

static int
cmp_call(const void *x, const void *y)
{
	const Call *a = x,
			   *b = y;

	if (a->client != b->client)
		return a->client - b->client;
	return a->idx - b->idx;
}

/* first index in kidx[key] with token > t */
static int
first_newer(int key, int64_t t)
{
	KeyIndex   *ki = &kidx[key];
	int			lo = 0,
				hi = ki->n;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (grants[ki->g[mid]].token > t)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* earliest s_hi / s_lo of a grant of key with a token greater than t */
static int64_t
newer_min_hi(int key, int64_t t)
{
	int			i = first_newer(key, t);

	return i < kidx[key].n ? kidx[key].suf_min_hi[i] : INT64_MAX;
}

static int64_t
newer_min_lo(int key, int64_t t)
{
	int			i = first_newer(key, t);

	return i < kidx[key].n ? kidx[key].suf_min_lo[i] : INT64_MAX;
}

static int
find_grant(int key, int64_t token)
{
	int			i = first_newer(key, token - 1);

	if (i < kidx[key].n && grants[kidx[key].g[i]].token == token)
		return kidx[key].g[i];
	return -1;
}

static int
cmp_wlog(const void *x, const void *y)
{
	const WlogRow *a = x,
			   *b = y;

	if (a->key != b->key)
		return a->key - b->key;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static void
load_calls(void)
{
	char		path[4200];
	char		line[512];

	for (int id = 0; id < nclients; id++)
	{
		FILE	   *f;

		snprintf(path, sizeof(path), "%s/client-%d.tsv", outdir, id);
		f = fopen(path, "r");
		if (f == NULL)
			die("cannot read %s: %s", path, strerror(errno));
		while (fgets(line, sizeof(line), f))
		{
			Call	   *c;

			if (ncalls % 4096 == 0)
				calls = xrealloc(calls, sizeof(Call) * (ncalls + 4096));
			c = &calls[ncalls];
			memset(c, 0, sizeof(*c));
			if (sscanf(line, "%d\t%d\t%c\t%d\t%" SCNd64 "\t%d\t%d\t%" SCNd64 "\t%" SCNd64
					   "\t%" SCNd64 "\t%d",
					   &c->client, &c->idx, &c->type, &c->key, &c->tok_arg,
					   &c->ttl, &c->wait, &c->res, &c->b, &c->a, &c->two_step) != 11)
				die("bad line in %s: %s", path, line);
			c->grant = -1;
			ncalls++;
		}
		fclose(f);
	}
	qsort(calls, ncalls, sizeof(Call), cmp_call);
}

static void
load_wlog(const char *tag, int64_t *resource_value)
{
	PGconn	   *conn = PQconnectdb(conninfo);
	PGresult   *r;
	char		prefix[160];

	if (PQstatus(conn) != CONNECTION_OK)
		die("connection failed: %s", PQerrorMessage(conn));
	snprintf(prefix, sizeof(prefix), "hist-%s-", tag);
	r = PQexec(conn, "SELECT key, seq, token, client, v_before, v_after, two_step, fence_until"
			   " FROM h_wlog ORDER BY key, seq");
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		die("reading h_wlog failed: %s", PQerrorMessage(conn));
	nwlog = PQntuples(r);
	wlog = xrealloc(NULL, sizeof(WlogRow) * (nwlog + 1));
	for (int i = 0; i < nwlog; i++)
	{
		const char *k = PQgetvalue(r, i, 0);

		if (strncmp(k, prefix, strlen(prefix)) != 0)
			die("h_wlog has a row of another run (key %s)", k);
		wlog[i].key = atoi(k + strlen(prefix));
		wlog[i].seq = strtoll(PQgetvalue(r, i, 1), NULL, 10);
		wlog[i].token = strtoll(PQgetvalue(r, i, 2), NULL, 10);
		wlog[i].client = atoi(PQgetvalue(r, i, 3));
		wlog[i].v_before = strtoll(PQgetvalue(r, i, 4), NULL, 10);
		wlog[i].v_after = strtoll(PQgetvalue(r, i, 5), NULL, 10);
		wlog[i].two_step = PQgetvalue(r, i, 6)[0] == 't';
		wlog[i].fence_until = strtoll(PQgetvalue(r, i, 7), NULL, 10);
	}
	PQclear(r);
	qsort(wlog, nwlog, sizeof(WlogRow), cmp_wlog);
	r = PQexec(conn, "SELECT key, value FROM h_resource");
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		die("reading h_resource failed: %s", PQerrorMessage(conn));
	for (int i = 0; i < PQntuples(r); i++)
	{
		const char *k = PQgetvalue(r, i, 0);

		if (strncmp(k, prefix, strlen(prefix)) == 0)
			resource_value[atoi(k + strlen(prefix))] = strtoll(PQgetvalue(r, i, 1), NULL, 10);
	}
	PQclear(r);
	PQfinish(conn);
}

static Grant *
new_grant(void)
{
	if (ngrants % 1024 == 0)
		grants = xrealloc(grants, sizeof(Grant) * (ngrants + 1024));
	memset(&grants[ngrants], 0, sizeof(Grant));
	return &grants[ngrants++];
}

/* the end of the interval in which grant g was surely held */
static int64_t
sure_end(const Grant *g)
{
	int64_t		e;

	if (g->released)
		return g->rel_b;
	e = g->exp_lo;
	if (g->op_b > e)
		e = g->op_b;
	return e;
}

/* pass 1: per client, in program order, build the grants */
static void
build_grants(int *n_ext)
{
	int			cur[MAX_KEYS];
	int			client = -1;

	*n_ext = 0;
	for (int i = 0; i < ncalls; i++)
	{
		Call	   *c = &calls[i];
		Grant	   *g;

		if (c->client != client)
		{
			client = c->client;
			for (int k = 0; k < MAX_KEYS; k++)
				cur[k] = -1;
		}
		if (c->key < 0 || c->key >= nkeys)
			die("bad key in a call record");
		c->grant = cur[c->key];
		g = c->grant >= 0 ? &grants[c->grant] : NULL;
		if (g)
		{
			c->exp_lo = g->exp_lo;
			c->exp_hi = g->exp_hi;
			c->released = g->released;
		}
		if (c->res <= 0)
			continue;

		switch (c->type)
		{
			case 'A':
			case 'X':
				if (g && g->token == c->res && !g->released)
				{
					/* the holder acquired again: an extension, same token */
					(*n_ext)++;
					if (g->exp_hi < c->b)
						violation(2, "client %d key %d: acquire returned the old token %" PRId64
								  " although that lease surely expired %" PRId64 " µs before the call",
								  c->client, c->key, c->res, c->b - g->exp_hi);
					g->ttl = c->ttl;
					g->exp_lo = c->b + (int64_t) c->ttl * 1000;
					g->exp_hi = c->a + (int64_t) c->ttl * 1000;
					if (c->b > g->op_b)
						g->op_b = c->b;
				}
				else
				{
					g = new_grant();
					g->key = c->key;
					g->client = c->client;
					g->token = c->res;
					g->s_lo = c->b;
					g->s_hi = c->a;
					g->ttl = c->ttl;
					g->exp_lo = c->b + (int64_t) c->ttl * 1000;
					g->exp_hi = c->a + (int64_t) c->ttl * 1000;
					g->op_b = c->b;
					cur[c->key] = ngrants - 1;
				}
				break;
			case 'N':
			case 'Q':
				if (g)
				{
					int			ttl = c->ttl > 0 ? c->ttl : g->ttl;

					g->ttl = ttl;
					g->exp_lo = c->b + (int64_t) ttl * 1000;
					g->exp_hi = c->a + (int64_t) ttl * 1000;
					if (c->b > g->op_b)
						g->op_b = c->b;
				}
				break;
			case 'R':
			case 'P':
				if (g && !g->released)
				{
					g->released = true;
					g->rel_b = c->b;
					g->rel_a = c->a;
				}
				break;
			case 'W':
				if (g)
				{
					g->writes++;
					/* a write that passed the fence proves the lease was held */
					if (fence && c->b > g->op_b && !g->released)
						g->op_b = c->b;
				}
				break;
		}
	}
}

static void
build_key_index(void)
{
	for (int k = 0; k < nkeys; k++)
	{
		KeyIndex   *ki = &kidx[k];

		ki->n = 0;
		ki->g = xrealloc(NULL, sizeof(int) * (ngrants + 1));
		for (int i = 0; i < ngrants; i++)
			if (grants[i].key == k)
				ki->g[ki->n++] = i;
		qsort(ki->g, ki->n, sizeof(int), cmp_grant_token_idx);
		ki->suf_min_hi = xrealloc(NULL, sizeof(int64_t) * (ki->n + 1));
		ki->suf_min_lo = xrealloc(NULL, sizeof(int64_t) * (ki->n + 1));
		for (int i = ki->n - 1; i >= 0; i--)
		{
			Grant	   *g = &grants[ki->g[i]];

			ki->suf_min_hi[i] = g->s_hi;
			ki->suf_min_lo[i] = g->s_lo;
			if (i + 1 < ki->n)
			{
				if (ki->suf_min_hi[i + 1] < ki->suf_min_hi[i])
					ki->suf_min_hi[i] = ki->suf_min_hi[i + 1];
				if (ki->suf_min_lo[i + 1] < ki->suf_min_lo[i])
					ki->suf_min_lo[i] = ki->suf_min_lo[i + 1];
			}
		}
	}
}

/*
 * Could the caller of c have been the live holder of its grant during the
 * call?  (token argument right, not released, expiry not surely past, no
 * newer grant surely before the call.)  *why explains a "no".
 */
static bool
could_be_holder(const Call *c, int64_t tok, const char **why)
{
	const Grant *g = c->grant >= 0 ? &grants[c->grant] : NULL;

	if (g == NULL)
	{
		*why = "the caller never held this key";
		return false;
	}
	if (tok != 0 && tok != g->token)
	{
		*why = "the token is not the caller's grant";
		return false;
	}
	if (c->released)
	{
		*why = "the caller had released this grant already";
		return false;
	}
	if (c->exp_hi < c->b)
	{
		*why = "the lease had surely expired before the call";
		return false;
	}
	if (newer_min_hi(c->key, g->token) < c->b)
	{
		*why = "a newer grant of the key surely happened before the call";
		return false;
	}
	return true;
}

/* Was the caller surely the live holder for the whole call? */
static bool
surely_holder(const Call *c, int64_t tok)
{
	const Grant *g = c->grant >= 0 ? &grants[c->grant] : NULL;

	return g != NULL && (tok == 0 || tok == g->token) && !c->released &&
		c->exp_lo > c->a && newer_min_lo(c->key, g->token) > c->a;
}

/* per key, the call that reported write #seq succeeding (-1: none) */
static int *write_call[MAX_KEYS];
static int64_t write_call_n[MAX_KEYS];

static void
build_write_index(void)
{
	for (int k = 0; k < nkeys; k++)
	{
		int64_t		maxseq = 0;

		for (int i = 0; i < ncalls; i++)
			if (calls[i].type == 'W' && calls[i].key == k && calls[i].res > maxseq)
				maxseq = calls[i].res;
		for (int w = 0; w < nwlog; w++)
			if (wlog[w].key == k && wlog[w].seq > maxseq)
				maxseq = wlog[w].seq;
		write_call_n[k] = maxseq + 1;
		write_call[k] = xrealloc(NULL, sizeof(int) * (maxseq + 1));
		for (int64_t q = 0; q <= maxseq; q++)
			write_call[k][q] = -1;
		for (int i = 0; i < ncalls; i++)
			if (calls[i].type == 'W' && calls[i].key == k && calls[i].res > 0)
			{
				if (write_call[k][calls[i].res] >= 0)
					violation(0, "key %d: clients %d and %d both saw write #%" PRId64 " succeed",
							  k, calls[write_call[k][calls[i].res]].client,
							  calls[i].client, calls[i].res);
				write_call[k][calls[i].res] = i;
			}
	}
}

static int
find_write_call(int client, int key, int64_t seq)
{
	int			i;

	if (seq <= 0 || seq >= write_call_n[key])
		return -1;
	i = write_call[key][seq];
	return (i >= 0 && calls[i].client == client) ? i : -1;
}

typedef struct Counts
{
	int			calls,
				errors,
				acq,
				acq_ok,
				acq_wait,
				ext,
				renew,
				renew_ok,
				rel,
				rel_ok,
				probes,
				probes_ok,
				w_try,
				w_ok,
				w_rej,
				w_stale_rej,
				w_two_step,
				w_rr,
				w_serial;
} Counts;

static void
check(const char *tag, Counts *n)
{
	int64_t		resource_value[MAX_KEYS];
	int		   *order;

	memset(n, 0, sizeof(*n));
	for (int k = 0; k < MAX_KEYS; k++)
		resource_value[k] = -1;
	load_calls();
	load_wlog(tag, resource_value);
	build_grants(&n->ext);
	build_key_index();
	build_write_index();

	/* counts, and (c) on every renew / release / refused write */
	for (int i = 0; i < ncalls; i++)
	{
		Call	   *c = &calls[i];
		const char *why = "";

		n->calls++;
		if (c->type == 'W' && c->res == -2)
		{
			/*
			 * REPEATABLE READ write whose row changed after its snapshot,
			 * which was taken after the grant: somebody wrote the key while
			 * the writer held it.  With the fence that cannot happen.
			 */
			n->w_try++;
			n->w_rr++;
			n->w_serial++;
			if (fence)
				violation(1, "client %d key %d: REPEATABLE READ write with token %" PRId64
						  " failed to serialise: the key was written by somebody else"
						  " after this client's grant", c->client, c->key, c->tok_arg);
			continue;
		}
		if (c->res < 0)
		{
			n->errors++;
			continue;
		}
		switch (c->type)
		{
			case 'A':
				n->acq++;
				if (c->wait > 0)
					n->acq_wait++;
				if (c->res > 0)
					n->acq_ok++;
				break;
			case 'X':
				break;
			case 'N':
			case 'Q':
			case 'R':
			case 'P':
				if (c->type == 'N')
					n->renew++, n->renew_ok += (c->res == 1);
				else if (c->type == 'R')
					n->rel++, n->rel_ok += (c->res == 1);
				else
					n->probes++, n->probes_ok += (c->res == 1);
				if (c->res == 1 && !could_be_holder(c, c->tok_arg, &why))
					violation(2, "client %d key %d: %s%s returned true but %s"
							  " (token arg %" PRId64 ", server time %" PRId64 ")",
							  c->client, c->key,
							  (c->type == 'N' || c->type == 'Q') ? "renew" : "release",
							  (c->type == 'Q' || c->type == 'P') ? " (probe)" : "",
							  why, c->tok_arg, c->b);
				if (c->res == 0 && surely_holder(c, c->tok_arg))
					violation(2, "client %d key %d: %s returned false to the live holder"
							  " (token %" PRId64 ", lease surely live until %" PRId64
							  ", call %" PRId64 "..%" PRId64 ")",
							  c->client, c->key,
							  (c->type == 'N' || c->type == 'Q') ? "renew" : "release",
							  grants[c->grant].token, c->exp_lo, c->b, c->a);
				break;
			case 'W':
				n->w_try++;
				n->w_two_step += c->two_step == 1;
				n->w_rr += c->two_step == 2;
				if (c->res == 0)
				{
					n->w_rej++;
					if (!could_be_holder(c, c->tok_arg, &why))
						n->w_stale_rej++;
					if (fence && surely_holder(c, c->tok_arg))
						violation(2, "client %d key %d: the fence refused the live holder"
								  " (token %" PRId64 ", lease surely live until %" PRId64
								  ", write %" PRId64 "..%" PRId64 ")",
								  c->client, c->key, c->tok_arg, c->exp_lo, c->b, c->a);
				}
				else
					n->w_ok++;
				break;
		}
	}

	/* (a) per key, tokens never decrease in commit order; no gaps */
	{
		int			i = 0;

		while (i < nwlog)
		{
			int			k = wlog[i].key;
			int64_t		expect = 1;
			int			j;

			for (j = i; j < nwlog && wlog[j].key == k; j++)
			{
				if (wlog[j].seq != expect)
					violation(0, "key %d: write seq %" PRId64 " where %" PRId64 " was expected"
							  " (a lost or duplicated write)", k, wlog[j].seq, expect);
				expect = wlog[j].seq + 1;
				if (j > i && wlog[j].token < wlog[j - 1].token)
					violation(0, "key %d: write #%" PRId64 " by client %d has token %" PRId64
							  " after write #%" PRId64 " by client %d with token %" PRId64,
							  k, wlog[j].seq, wlog[j].client, wlog[j].token,
							  wlog[j - 1].seq, wlog[j - 1].client, wlog[j - 1].token);
			}
			if (resource_value[k] != j - i)
				violation(0, "key %d: resource value %" PRId64 " but %d logged writes",
						  k, resource_value[k], j - i);
			i = j;
		}
		for (int k = 0; k < nkeys; k++)
		{
			bool		seen = false;

			for (int w = 0; w < nwlog; w++)
				if (wlog[w].key == k)
					seen = true;
			if (!seen && resource_value[k] > 0)
				violation(0, "key %d: resource value %" PRId64 " but no logged write",
						  k, resource_value[k]);
		}
	}

	/* (b) every committed write: a granted token, the lease live, not stale */
	for (int w = 0; w < nwlog; w++)
	{
		WlogRow    *r = &wlog[w];
		int			gi = find_grant(r->key, r->token);
		int			ci = find_write_call(r->client, r->key, r->seq);
		int64_t		newer;

		if (gi < 0 || grants[gi].client != r->client)
		{
			violation(1, "key %d: write #%" PRId64 " by client %d used token %" PRId64
					  " that was never granted to it", r->key, r->seq, r->client, r->token);
			continue;
		}
		newer = newer_min_hi(r->key, r->token);
		if (newer < r->v_before)
			violation(1, "key %d: write #%" PRId64 " by client %d with token %" PRId64
					  " committed %.1f ms after a newer grant of the key",
					  r->key, r->seq, r->client, r->token,
					  (r->v_before - newer) / 1000.0);
		else if (fence && newer < r->fence_until)
			/*
			 * The validation holds the key until commit, and commit comes
			 * after fence_until: a newer grant cannot happen before it.
			 */
			violation(1, "key %d: write #%" PRId64 " by client %d with token %" PRId64
					  " was validated, but a newer grant of the key happened %.1f ms"
					  " before the write's transaction ended",
					  r->key, r->seq, r->client, r->token,
					  (r->fence_until - newer) / 1000.0);
		if (ci < 0)
		{
			violation(1, "key %d: write #%" PRId64 " by client %d committed but the client"
					  " did not see it succeed", r->key, r->seq, r->client);
			continue;
		}
		if (calls[ci].grant != gi)
			violation(1, "key %d: write #%" PRId64 " by client %d used token %" PRId64
					  " of an older grant", r->key, r->seq, r->client, r->token);
		else if (calls[ci].released)
			violation(1, "key %d: write #%" PRId64 " by client %d with token %" PRId64
					  " after the client had released that lease",
					  r->key, r->seq, r->client, r->token);
		else if (calls[ci].exp_hi < r->v_before)
			violation(1, "key %d: write #%" PRId64 " by client %d with token %" PRId64
					  " %.1f ms after its lease had surely expired",
					  r->key, r->seq, r->client, r->token,
					  (r->v_before - calls[ci].exp_hi) / 1000.0);
	}
	/* every write the clients saw succeed is in the log */
	for (int i = 0; i < ncalls; i++)
	{
		Call	   *c = &calls[i];
		bool		found = false;
		int			lo = 0,
					hi = nwlog;

		if (c->type != 'W' || c->res <= 0)
			continue;
		/* wlog is sorted by key, seq */
		while (lo < hi)
		{
			int			mid = (lo + hi) / 2;

			if (wlog[mid].key < c->key ||
				(wlog[mid].key == c->key && wlog[mid].seq < c->res))
				lo = mid + 1;
			else
				hi = mid;
		}
		found = lo < nwlog && wlog[lo].key == c->key && wlog[lo].seq == c->res &&
			wlog[lo].client == c->client;
		if (!found)
			violation(0, "key %d: client %d saw write #%" PRId64 " succeed but it is not in the log",
					  c->key, c->client, c->res);
	}

	/* (d) overlap per key, tokens grow over time, no token twice */
	order = xrealloc(NULL, sizeof(int) * (ngrants + 1));
	for (int k = 0; k < nkeys; k++)
	{
		int			m = 0;
		int			best = -1;
		int64_t		best_end = INT64_MIN;

		for (int i = 0; i < ngrants; i++)
			if (grants[i].key == k)
				order[m++] = i;
		qsort(order, m, sizeof(int), cmp_grant_s_hi_idx);
		for (int i = 0; i < m; i++)
		{
			Grant	   *g = &grants[order[i]];

			if (best >= 0 && g->s_hi < best_end)
				violation(3, "key %d: client %d (token %" PRId64 ") was granted it while"
						  " client %d (token %" PRId64 ") surely held it (%.1f ms overlap)",
						  k, g->client, g->token, grants[best].client,
						  grants[best].token, (best_end - g->s_hi) / 1000.0);
			if (sure_end(g) > best_end)
			{
				best_end = sure_end(g);
				best = order[i];
			}
		}
	}
	for (int i = 0; i < ngrants; i++)
		order[i] = i;
	qsort(order, ngrants, sizeof(int), cmp_grant_token_idx);
	{
		int64_t		min_hi_larger = INT64_MAX;
		int			min_owner = -1;

		for (int i = ngrants - 1; i >= 0; i--)
		{
			Grant	   *g = &grants[order[i]];

			if (i > 0 && grants[order[i - 1]].token == g->token)
				violation(3, "token %" PRId64 " was granted twice (clients %d and %d, keys %d and %d)",
						  g->token, g->client, grants[order[i - 1]].client,
						  g->key, grants[order[i - 1]].key);
			if (min_hi_larger < g->s_lo)
				violation(3, "token %" PRId64 " (key %d) was granted after token %" PRId64
						  " (key %d): tokens must grow", g->token, g->key,
						  grants[min_owner].token, grants[min_owner].key);
			if (g->s_hi < min_hi_larger)
			{
				min_hi_larger = g->s_hi;
				min_owner = order[i];
			}
		}
	}
	free(order);
}

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
		char		path[4200];
		FILE	   *f;

		snprintf(path, sizeof(path), "%s/meta", outdir);
		f = fopen(path, "w");
		if (f == NULL)
			die("cannot write %s: %s", path, strerror(errno));
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
