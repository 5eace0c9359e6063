/*-------------------------------------------------------------------------
 *
 * util.c
 *		Small helpers of the history checker: dying with a message, the
 *		monotonic clock, sleeping, the random generator (splitmix64) and a
 *		realloc that cannot fail.
 *
 *-------------------------------------------------------------------------
 */
#include "history.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ utils */

void
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

int64_t
mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void
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

uint64_t	rng_state;

uint64_t
rnd(void)
{
	/* splitmix64 */
	uint64_t	z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* uniform in [lo, hi] */
int
rnd_between(int lo, int hi)
{
	if (hi <= lo)
		return lo;
	return lo + (int) (rnd() % (uint64_t) (hi - lo + 1));
}

bool
chance(int percent)
{
	return (int) (rnd() % 100) < percent;
}

/* create (or truncate) outdir/name for writing, or die */
FILE *
create_out(const char *name)
{
	char		path[4200];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/%s", outdir, name);
	f = fopen(path, "w");
	if (f == NULL)
		die("cannot write %s: %s", path, strerror(errno));
	return f;
}

void *
xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (p == NULL && n > 0)
		die("out of memory");
	return p;
}
