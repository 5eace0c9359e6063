/*-------------------------------------------------------------------------
 *
 * client.c
 *		The tables of a run (SQL setup), and a client process of the history
 *		checker: its own connection, a loop of acquire, "work", renew, the
 *		validated write and release over the keys, every call recorded (with
 *		server timestamps) to OUTDIR/client-N.tsv.
 *
 *-------------------------------------------------------------------------
 */
#include "history.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

/* ----------------------------------------------------------- shared state */

/* ClientState: history.h */

ClientState *shared;

/* set by call3 when its query failed with SQLSTATE 40001 */
static bool serialization_failure = false;

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

void
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

/* the call records (Call, and the types of calls): history.h */

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

void
client_main(int id, const char *tag, int64_t deadline)
{
	ClientCtx	c;
	char		path[64];
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
	snprintf(path, sizeof(path), "client-%d.tsv", id);
	c.out = create_out(path);
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
