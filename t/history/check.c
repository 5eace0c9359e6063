/*-------------------------------------------------------------------------
 *
 * check.c
 *		The checker: counts the calls, and verifies the history for (a) order,
 *		(b) stale, (c) holder and (d) overlap (see the top of main.c), printing
 *		the first violations of each category in detail.  The grants and
 *		indexes it works on are built in grants.c.
 *
 *-------------------------------------------------------------------------
 */
#include "history.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------- checker */

int			viol[4];			/* a, b, c, d */
static const char *const viol_name[4] = {"order", "stale", "holder", "overlap"};

void
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

/* Counts: history.h */

void
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
