/*-------------------------------------------------------------------------
 *
 * wait_client.c
 *		The backend's client connection: its socket, so that a waiting
 *		acquire notices a client that went away, and whether it is still
 *		there before a new token commits.
 *
 * A lease acquired for a client that can no longer receive its token
 * would stay, held by nobody, until its ttl runs out.  PostgreSQL notices
 * a closed client connection only when it next reads or writes it (or
 * every client_connection_check_interval, off by default); dlock looks
 * itself, the way that check does (WL_SOCKET_CLOSED), and ends the backend
 * as PostgreSQL does when it finds its client gone.
 *
 * The socket lives in struct Port (libpq/libpq-be.h).  That header
 * includes GSSAPI's when the server was built with GSSAPI, and the
 * server development packages do not always bring those headers; the
 * struct keeps only a pointer there either way, so it is read here with
 * GSSAPI left out.  Nothing else of libpq-be.h is used.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#ifdef ENABLE_GSS
#undef ENABLE_GSS
#endif
#include "libpq/libpq.h"
#include "libpq/libpq-be.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "tcop/dest.h"
#include "tcop/tcopprot.h"

#include "wait/wait.h"
#include "wait/wait_int.h"

/*
 * The client's socket, for a wait that is to end when it closes; or
 * PGINVALID_SOCKET when there is no client (a background worker) or a
 * closed socket cannot be told apart on this platform.
 */
pgsocket
dlock_client_socket(void)
{
	if (MyProcPort == NULL || whereToSendOutput != DestRemote ||
		!WaitEventSetCanReportClosed())
		return PGINVALID_SOCKET;
	return MyProcPort->sock;
}

/* True when this backend's client has closed its connection. */
bool
dlock_client_gone(void)
{
	return dlock_client_socket() != PGINVALID_SOCKET && !pq_check_connection();
}

/*
 * End the backend because its client is gone, as PostgreSQL does
 * (ProcessInterrupts): its transaction rolls back, and a waiting acquire
 * leaves its queue.
 */
void
dlock_client_lost(void)
{
	whereToSendOutput = DestNone;
	ereport(FATAL,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("connection to client lost"),
			 errdetail("A lease is not acquired for a client that can no longer receive its token.")));
}
