/*-------------------------------------------------------------------------
 *
 * grants.c
 *		The checker's data: reads the call records and the write log back,
 *		rebuilds the grants (per client, in program order), indexes them by
 *		key and token and the successful writes by key and seq, and answers
 *		questions about them (a newer grant, could or must a caller have been
 *		the live holder).  The checks themselves are in check.c.
 *
 *-------------------------------------------------------------------------
 */
#include "history.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

/* ----------------------------------------------------------------- checker */

/* Call, Grant, WlogRow: history.h */

typedef struct KeyIndex
{
	int			n;
	int		   *g;				/* grants of the key sorted by token */
	int64_t    *suf_min_hi;		/* min s_hi over g[i..] */
	int64_t    *suf_min_lo;		/* min s_lo over g[i..] */
} KeyIndex;

Call	   *calls;
int			ncalls;
Grant	   *grants;
int			ngrants;
WlogRow	   *wlog;
int			nwlog;
static KeyIndex kidx[MAX_KEYS];

int
cmp_grant_token_idx(const void *x, const void *y)
{
	int64_t		a = grants[*(const int *) x].token,
				b = grants[*(const int *) y].token;

	return a < b ? -1 : a > b;
}

int
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
int64_t
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

int
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

void
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

void
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
int64_t
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
void
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

void
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
bool
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
bool
surely_holder(const Call *c, int64_t tok)
{
	const Grant *g = c->grant >= 0 ? &grants[c->grant] : NULL;

	return g != NULL && (tok == 0 || tok == g->token) && !c->released &&
		c->exp_lo > c->a && newer_min_lo(c->key, g->token) > c->a;
}

/* per key, the call that reported write #seq succeeding (-1: none) */
static int *write_call[MAX_KEYS];
static int64_t write_call_n[MAX_KEYS];

void
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

int
find_write_call(int client, int key, int64_t seq)
{
	int			i;

	if (seq <= 0 || seq >= write_call_n[key])
		return -1;
	i = write_call[key][seq];
	return (i >= 0 && calls[i].client == client) ? i : -1;
}
