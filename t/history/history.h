/*-------------------------------------------------------------------------
 *
 * history.h
 *		Declarations shared by the files of the history checker: limits,
 *		the options, the state shared with the client processes, the call
 *		records, the checker's grants, write log and counts.
 *
 * What the program runs and what it checks is described at the top of
 * main.c (and in README.md).  Its files:
 *	util.c		dying with a message, clocks, sleeping, random numbers, memory
 *	client.c	the tables of a run (SQL setup), and a client process
 *	supervise.c	the supervisor: pauses clients with SIGSTOP / SIGCONT
 *	grants.c	the checker's data: the records and the write log read back,
 *				the grants rebuilt from them, their indexes
 *	check.c		the checker: the checks (a) to (d), and the counts
 *	main.c		options, usage, main(): the run and its report
 *
 *-------------------------------------------------------------------------
 */
#ifndef HISTORY_H
#define HISTORY_H

#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#define TEXTOID 25
#define INT8OID 20
#define INT4OID 23

#define MAX_CLIENTS 64
#define MAX_KEYS 64
#define MAX_SHOWN 12			/* violations printed in detail per category */

#define STMT_US "(extract(epoch FROM statement_timestamp()) * 1000000)::int8"
#define CLOCK_US "(extract(epoch FROM clock_timestamp()) * 1000000)::int8"

/* --------------------------------------------------------- options: main.c */

extern const char *conninfo;
extern int	nclients;
extern int	nkeys;
extern int	seconds;
extern int	ttl_min;
extern int	ttl_max;
extern int	gap_min;			/* ms between two pauses */
extern int	gap_max;
extern int	extra_min;			/* a pause lasts ttl + extra ms */
extern int	extra_max;
extern bool fence;
extern bool no_pauses;
extern char outdir[4096];
extern uint64_t seed;
extern bool use_roles;

/* -------------------------------------------------- shared state: client.c */

typedef struct ClientState
{
	volatile pid_t pid;
	volatile int holding;		/* 1 between a grant and its first write,
								 * 2 inside a validated, uncommitted write */
	volatile int ttl_ms;		/* ttl of the current lease */
} ClientState;

/* one per client, in memory shared with the clients */
extern ClientState *shared;

/* ----------------------------------------------------------- utils: util.c */

extern uint64_t rng_state;

extern void die(const char *fmt,...) __attribute__((noreturn));
extern int64_t mono_us(void);
extern void sleep_ms(int ms);
extern uint64_t rnd(void);
extern int	rnd_between(int lo, int hi);
extern bool chance(int percent);
extern void *xrealloc(void *p, size_t n);
extern FILE *create_out(const char *name);

/* ------------------------------------------------------------ call records */

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

/* --------------------------------------------------- client.c, supervise.c */

typedef struct PauseStats
{
	int			pauses;
	int			past_ttl;
	int			while_holding;
	int			in_fence;
	int64_t		longest_ms;
} PauseStats;

extern void setup(const char *tag);
extern void client_main(int id, const char *tag, int64_t deadline);
extern void supervise(int64_t deadline, PauseStats *ps);

/* ---------------------------------------------- checker: grants.c, check.c */

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

/* grants.c */
extern Call *calls;
extern int	ncalls;
extern Grant *grants;
extern int	ngrants;
extern WlogRow *wlog;
extern int	nwlog;

extern int	cmp_grant_token_idx(const void *x, const void *y);
extern int	cmp_grant_s_hi_idx(const void *x, const void *y);
extern int64_t newer_min_hi(int key, int64_t t);
extern int	find_grant(int key, int64_t token);
extern void load_calls(void);
extern void load_wlog(const char *tag, int64_t *resource_value);
extern int64_t sure_end(const Grant *g);
extern void build_grants(int *n_ext);
extern void build_key_index(void);
extern bool could_be_holder(const Call *c, int64_t tok, const char **why);
extern bool surely_holder(const Call *c, int64_t tok);
extern void build_write_index(void);
extern int	find_write_call(int client, int key, int64_t seq);

/* check.c */
extern int	viol[4];			/* a, b, c, d */

extern void violation(int cat, const char *fmt,...);
extern void check(const char *tag, Counts *n);

#endif							/* HISTORY_H */
