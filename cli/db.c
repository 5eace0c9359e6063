/*-------------------------------------------------------------------------
 *
 * db.c
 *		The command line's database access: one libpq connection, made by
 *		libpq's conventions (-d conninfo or URI, PGHOST, PGPORT, PGDATABASE,
 *		PGUSER, PGPASSWORD, .pgpass, PGSERVICE, sslmode), reconnected when
 *		it breaks.
 *
 * Every call is one parameterised statement (PQexecParams: the unnamed
 * prepared statement of the extended protocol), so it works behind
 * pgbouncer in transaction mode: no session state, no named statements.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <string.h>

#include "dlock_cli.h"

bool
db_connect(Db *db)
{
	if (db->conn && PQstatus(db->conn) == CONNECTION_OK)
		return true;
	if (db->conn)
		PQfinish(db->conn);
	db->conn = PQconnectdb(db->conninfo ? db->conninfo : "");
	if (PQstatus(db->conn) != CONNECTION_OK)
	{
		snprintf(db->error, sizeof(db->error), "%s", PQerrorMessage(db->conn));
		PQfinish(db->conn);
		db->conn = NULL;
		return false;
	}
	return true;
}

void
db_close(Db *db)
{
	if (db->conn)
		PQfinish(db->conn);
	db->conn = NULL;
}

/*
 * Run sql with its text parameters; on success *res holds the result
 * (PQclear it).  A broken connection is closed, to be made again by the
 * next call.
 */
DbResult
db_rows(Db *db, const char *sql, int nparams, const char *const *params,
		PGresult **res)
{
	PGresult   *r;
	const char *state;

	*res = NULL;
	db->sqlstate[0] = '\0';
	if (!db_connect(db))
		return DB_UNREACHABLE;
	r = PQexecParams(db->conn, sql, nparams, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK)
	{
		*res = r;
		return DB_OK;
	}
	state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	snprintf(db->sqlstate, sizeof(db->sqlstate), "%s", state ? state : "");
	snprintf(db->error, sizeof(db->error), "%s", PQerrorMessage(db->conn));
	PQclear(r);
	if (PQstatus(db->conn) != CONNECTION_OK)
	{
		db_close(db);
		return DB_UNREACHABLE;
	}
	/* an undefined function or schema: dlock is not installed here */
	if (strcmp(db->sqlstate, "42883") == 0 || strcmp(db->sqlstate, "3F000") == 0 ||
		strcmp(db->sqlstate, "42P01") == 0)
		return DB_NOT_INSTALLED;
	/* the server is going away (shutdown, failover): like a broken connection */
	if (strncmp(db->sqlstate, "57P", 3) == 0 || strncmp(db->sqlstate, "08", 2) == 0)
	{
		db_close(db);
		return DB_UNREACHABLE;
	}
	return DB_ERROR;
}

/* A call returning one value: its text in out, or DB_NULL. */
DbResult
db_call(Db *db, const char *sql, int nparams, const char *const *params,
		char *out, size_t outlen)
{
	PGresult   *r;
	DbResult	rc = db_rows(db, sql, nparams, params, &r);

	if (rc != DB_OK)
		return rc;
	if (PQntuples(r) != 1 || PQnfields(r) < 1 || PQgetisnull(r, 0, 0))
	{
		PQclear(r);
		return DB_NULL;
	}
	snprintf(out, outlen, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return DB_OK;
}

/* milliseconds as a PostgreSQL interval */
char *
interval_text(long long ms, char *buf, size_t len)
{
	snprintf(buf, len, "%lld milliseconds", ms);
	return buf;
}
