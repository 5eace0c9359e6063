/*-------------------------------------------------------------------------
 *
 * supervise.c
 *		The supervisor of a run (the parent process): pauses clients with
 *		SIGSTOP for longer than their ttl (preferring a client inside a
 *		validated write transaction, then one holding a lease) and resumes
 *		them with SIGCONT; every pause is recorded to OUTDIR/pauses.tsv.
 *
 *-------------------------------------------------------------------------
 */
#include "history.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* -------------------------------------------------------------- supervisor */

/* PauseStats: history.h */

void
supervise(int64_t deadline, PauseStats *ps)
{
	FILE	   *f = create_out("pauses.tsv");

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
