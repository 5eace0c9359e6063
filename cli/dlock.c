/*-------------------------------------------------------------------------
 *
 * dlock.c
 *		The dlock command line: main, the script commands
 *		(acquire, renew, release, status, list, force-release, history) and
 *		their output.  Arguments are read in args.c, leases acquired in
 *		acquire.c, signals caught in signals.c, `dlock run` is in run.c,
 *		`dlock watch` in watch.c, database access in db.c, the usage and
 *		JSON strings in text.c.
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

static int
cmd_acquire(const Options *o)
{
	Db			db = {.conninfo = o->conninfo};
	char		token[32];
	DbResult	rc = acquire_lease(&db, o, token, sizeof(token));

	db_close(&db);
	if (rc != DB_OK && rc != DB_NULL)
		return acquire_failure(&db, o, rc);
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

/* row i of cmd_history's result, JSON or text */
static void
print_tenure(PGresult *r, int i, bool json)
{
	bool		claim = strcmp(PQgetvalue(r, i, 0), "claim") == 0;

	if (json)
	{
		static const char *const names[] = {
			"kind", "key", "table", "holder", "role", "token", "granted_at",
			"ended_at", "ended", "attempts"
		};

		printf("%s{", i > 0 ? ", " : "");
		for (int c = 0; c < 10; c++)
		{
			printf("%s\"%s\": ", c > 0 ? ", " : "", names[c]);
			if (PQgetisnull(r, i, c))
				printf("null");
			else if (c == 5 || c == 9)
				printf("%s", PQgetvalue(r, i, c));
			else
				json_string(PQgetvalue(r, i, c));
		}
		printf("}");
	}
	else if (claim)
		printf("claim %s %s held by %s (role %s) token %s from %s to %s: %s"
			   " (attempt %s)\n", PQgetvalue(r, i, 2), PQgetvalue(r, i, 1),
			   PQgetvalue(r, i, 3), PQgetvalue(r, i, 4), PQgetvalue(r, i, 5),
			   PQgetvalue(r, i, 6), PQgetvalue(r, i, 7), PQgetvalue(r, i, 8),
			   PQgetvalue(r, i, 9));
	else
		printf("%s held by %s (role %s) token %s from %s to %s: %s\n",
			   PQgetvalue(r, i, 1), PQgetvalue(r, i, 3), PQgetvalue(r, i, 4),
			   PQgetvalue(r, i, 5), PQgetvalue(r, i, 6), PQgetvalue(r, i, 7),
			   PQgetvalue(r, i, 8));
}

/*
 * history KEY: the ended leases of KEY and claims on rows whose key is KEY
 * that the caller may see (dlock_history), oldest first.  Nothing when the
 * key is not tracked.
 */
static int
cmd_history(const Options *o)
{
	Db			db = {.conninfo = o->conninfo};
	PGresult   *r;
	const char *p[1] = {o->key};
	DbResult	rc = db_rows(&db, "SELECT kind, key, table_name, holder, role, token,"
							 " granted_at, ended_at, ended, attempts"
							 " FROM dlock_history($1)"
							 " ORDER BY granted_at, ended_at, token", 1, p, &r);
	int			n;

	if (rc == DB_NOT_INSTALLED && db_older_than(&db, "0.5", "dlock history"))
	{
		db_close(&db);
		return EXIT_UNAVAIL;
	}
	db_close(&db);
	if (rc != DB_OK)
		return db_failure(&db, rc);
	n = PQntuples(r);
	if (o->json)
		printf("[");
	for (int i = 0; i < n; i++)
		print_tenure(r, i, o->json);
	if (o->json)
		printf("]\n");
	PQclear(r);
	return 0;
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
	if (strcmp(cmd, "history") == 0)
		return cmd_history(o);
	return cmd_force_release(o);
}

/* whether option word a, written alone, takes the next word as its value */
static bool
takes_value(const char *a)
{
	static const char *const with_value[] = {
		"-d", "--dbname", "--count", "--ttl", "--wait", "--holder", "--token",
		"--grace", "--slots", NULL
	};

	for (int i = 0; with_value[i]; i++)
		if (strcmp(a, with_value[i]) == 0)
			return true;
	return false;
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
			if (takes_value(a))
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
