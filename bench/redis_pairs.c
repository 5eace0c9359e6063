/*-------------------------------------------------------------------------
 *
 * redis_pairs.c
 *	  The Redis contender of bench/lease_bench.sh: acquire+release pairs of
 *	  a lease with a fencing token, each client on its own key, for a fixed
 *	  time, as pgbench runs dlock's pairs.
 *
 *	  The lease is the usual careful Redis lock, made as close to dlock's
 *	  as Redis allows: the acquire is one script call that sets the key only
 *	  if it is free, with a TTL, and then takes a token from a counter (so
 *	  one round trip, like dlock_acquire); the release is one script call
 *	  that deletes the key only if it still holds this holder's value.  Both
 *	  scripts are loaded once and called with EVALSHA (as pgbench uses
 *	  prepared statements).  How durable it is is the server's setting: the
 *	  benchmark starts Redis with appendonly yes and appendfsync always.
 *
 *	  It speaks RESP over a Unix socket itself, so it needs nothing but libc
 *	  and pthreads.  Every acquire must succeed and return a token greater
 *	  than the last one this client saw, and every release must delete its
 *	  key; otherwise it says so and exits 1.
 *
 *	  usage: redis_pairs SOCKET CLIENTS SECONDS
 *	  prints, like pgbench:
 *	    number of transactions actually processed: N
 *	    tps = X
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define ACQUIRE_LUA \
	"if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then " \
	"return redis.call('incr', 'bench:token') else return -1 end"
#define RELEASE_LUA \
	"if redis.call('get', KEYS[1]) == ARGV[1] then " \
	"return redis.call('del', KEYS[1]) else return 0 end"

typedef struct Conn
{
	int			fd;
	char		buf[4096];
	size_t		len;			/* bytes in buf */
	size_t		pos;			/* next unread byte */
} Conn;

typedef struct Client
{
	pthread_t	thread;
	int			id;
	long		pairs;
	const char *failure;		/* NULL while all is well */
} Client;

static const char *socket_path;
static double deadline;
static char acquire_sha[64];
static char release_sha[64];

static double
now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
die(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fprintf(stderr, "redis_pairs: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static int
conn_open(Conn *c)
{
	struct sockaddr_un addr;

	memset(c, 0, sizeof(*c));
	c->fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (c->fd < 0)
		return -1;
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_path);
	return connect(c->fd, (struct sockaddr *) &addr, sizeof(addr));
}

/* Sends one command, its arguments as RESP bulk strings. */
static int
conn_send(Conn *c, int argc, const char **argv)
{
	char		out[2048];
	size_t		n;
	size_t		done = 0;

	n = snprintf(out, sizeof(out), "*%d\r\n", argc);
	for (int i = 0; i < argc; i++)
	{
		size_t		alen = strlen(argv[i]);

		if (n + alen + 32 >= sizeof(out))
			return -1;
		n += snprintf(out + n, sizeof(out) - n, "$%zu\r\n%s\r\n", alen, argv[i]);
	}
	while (done < n)
	{
		ssize_t		w = write(c->fd, out + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		done += w;
	}
	return 0;
}

/* Reads one byte; -1 on a closed or broken connection. */
static int
conn_getc(Conn *c)
{
	if (c->pos == c->len)
	{
		ssize_t		r;

		do
			r = read(c->fd, c->buf, sizeof(c->buf));
		while (r < 0 && errno == EINTR);
		if (r <= 0)
			return -1;
		c->len = r;
		c->pos = 0;
	}
	return (unsigned char) c->buf[c->pos++];
}

/* Reads one line up to CRLF into line (without it); -1 on error. */
static int
conn_line(Conn *c, char *line, size_t size)
{
	size_t		n = 0;
	int			ch;

	line[0] = '\0';
	while ((ch = conn_getc(c)) >= 0)
	{
		if (ch == '\r')
			return conn_getc(c) == '\n' ? 0 : -1;
		if (n + 1 < size)
			line[n++] = ch;
		line[n] = '\0';
	}
	return -1;
}

/*
 * Reads one reply: its type byte goes to *type, an integer reply's value to
 * *value, a bulk string's or status's text to text.  -1 on a broken reply.
 */
static int
conn_reply(Conn *c, char *type, long long *value, char *text, size_t size)
{
	char		line[512];
	int			ch = conn_getc(c);

	if (ch < 0 || conn_line(c, line, sizeof(line)) < 0)
		return -1;
	*type = ch;
	text[0] = '\0';
	switch (ch)
	{
		case ':':
			*value = strtoll(line, NULL, 10);
			return 0;
		case '+':
		case '-':
			{
				size_t		n = strlen(line);

				if (n >= size)
					n = size - 1;
				memcpy(text, line, n);
				text[n] = '\0';
				return 0;
			}
		case '$':
			{
				long long	len = strtoll(line, NULL, 10);

				*value = len;
				if (len < 0)
					return 0;	/* nil */
				if ((size_t) len + 1 > size)
					return -1;
				for (long long i = 0; i < len; i++)
				{
					int			b = conn_getc(c);

					if (b < 0)
						return -1;
					text[i] = b;
				}
				text[len] = '\0';
				return conn_line(c, line, sizeof(line));
			}
		default:
			return -1;
	}
}

static void
load_script(Conn *c, const char *body, char *sha)
{
	const char *argv[] = {"SCRIPT", "LOAD", body};
	char		type;
	long long	v;

	if (conn_send(c, 3, argv) < 0 || conn_reply(c, &type, &v, sha, 64) < 0 ||
		type != '$')
		die("SCRIPT LOAD failed: %s", sha);
}

static void *
client_main(void *arg)
{
	Client	   *cl = arg;
	Conn		c;
	char		key[32];
	char		holder[32];
	char		text[128];
	char		type;
	long long	v;
	long long	last_token = 0;

	snprintf(key, sizeof(key), "lease:k%d", cl->id);
	snprintf(holder, sizeof(holder), "c%d", cl->id);
	if (conn_open(&c) < 0)
	{
		cl->failure = "could not connect";
		return NULL;
	}
	while (now_seconds() < deadline)
	{
		const char *acq[] = {"EVALSHA", acquire_sha, "1", key, holder, "30000"};
		const char *rel[] = {"EVALSHA", release_sha, "1", key, holder};

		if (conn_send(&c, 6, acq) < 0 || conn_reply(&c, &type, &v, text, sizeof(text)) < 0)
		{
			cl->failure = "acquire: connection lost";
			break;
		}
		if (type != ':' || v <= last_token)
		{
			cl->failure = type == '-' ? "acquire: error reply" : "acquire: not acquired or token did not grow";
			break;
		}
		last_token = v;
		if (conn_send(&c, 5, rel) < 0 || conn_reply(&c, &type, &v, text, sizeof(text)) < 0)
		{
			cl->failure = "release: connection lost";
			break;
		}
		if (type != ':' || v != 1)
		{
			cl->failure = "release: key was not deleted";
			break;
		}
		cl->pairs++;
	}
	close(c.fd);
	return NULL;
}

int
main(int argc, char **argv)
{
	Conn		c;
	Client	   *clients;
	int			nclients;
	double		seconds;
	double		start;
	double		elapsed;
	long		total = 0;
	int			failed = 0;

	if (argc != 4)
		die("usage: redis_pairs SOCKET CLIENTS SECONDS");
	socket_path = argv[1];
	nclients = atoi(argv[2]);
	seconds = atof(argv[3]);
	if (nclients < 1 || seconds <= 0)
		die("CLIENTS and SECONDS must be positive");

	if (conn_open(&c) < 0)
		die("could not connect to %s: %s", socket_path, strerror(errno));
	load_script(&c, ACQUIRE_LUA, acquire_sha);
	load_script(&c, RELEASE_LUA, release_sha);
	close(c.fd);

	clients = calloc(nclients, sizeof(Client));
	if (clients == NULL)
		die("out of memory");
	start = now_seconds();
	deadline = start + seconds;
	for (int i = 0; i < nclients; i++)
	{
		clients[i].id = i + 1;
		if (pthread_create(&clients[i].thread, NULL, client_main, &clients[i]) != 0)
			die("could not start a client thread");
	}
	for (int i = 0; i < nclients; i++)
	{
		pthread_join(clients[i].thread, NULL);
		total += clients[i].pairs;
		if (clients[i].failure)
		{
			fprintf(stderr, "redis_pairs: client %d: %s\n", i + 1, clients[i].failure);
			failed++;
		}
	}
	elapsed = now_seconds() - start;
	printf("number of transactions actually processed: %ld\n", total);
	printf("number of failed transactions: %d\n", failed);
	printf("tps = %f\n", total / elapsed);
	return failed ? 1 : 0;
}
