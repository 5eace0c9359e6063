
# Copyright: dlock contributors
#
# 016_release_flush.pl: which releases commit without waiting for their WAL
# flush, and which do not (src/lease/lease_xact.c, README "Guarantees").
#
# A transaction that did nothing but release leases (dlock_release or
# dlock_release_all, on its own, in autocommit mode) commits without
# waiting for its flush: losing it in a crash only gives the lease back to
# its releasing holder until its ttl runs out.  Every other commit that
# contains a release waits for its flush as usual: a release in an explicit
# transaction block, a release in the same statement as an acquire, a
# release in a transaction that wrote anything else, COMMIT PREPARED.
#
# Seen from outside: right after the commit, is the WAL flushed up to where
# it was inserted?  The WAL writer is stopped for the whole test and nothing
# else writes WAL (t/DlockFlush.pm), so an unflushed commit stays unflushed
# until the test crashes the server (crash(): the stopped WAL writer is
# killed), whatever the load of the machine.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use DlockFlush;        # flush_node, flushed
use Test::More;

my $node = flush_node('flush', "max_prepared_transactions = 2\n");

sub acquire
{
	my ($key) = @_;
	# an acquire on its own waits for its flush: afterwards all is flushed
	is(flushed($node, "SELECT dlock_acquire('$key', 'h', '1 hour')"),
		't', "$key: the acquire is flushed");
	return;
}

# --- releases that do not wait for their flush ---
acquire('f:auto');
is(flushed($node, "SELECT dlock_release('f:auto', 'h')"),
	'f', 'a release on its own (autocommit) commits without waiting for its flush');

acquire('f:all1');
acquire('f:all2');
is(flushed($node, "SELECT dlock_release_all('h')"),
	'f', 'dlock_release_all on its own commits without waiting for its flush');

# --- releases that wait ---
acquire('f:block');
is(flushed($node, "BEGIN; SELECT dlock_release('f:block', 'h'); COMMIT;"),
	't', 'a release in an explicit transaction block waits for its flush');

acquire('f:stmt');
is(flushed($node, "SELECT dlock_release('f:stmt', 'h'), dlock_acquire('f:stmt2', 'h', '1 hour')"),
	't', 'a release in the same statement as an acquire waits for its flush');

acquire('f:wrote');
is(flushed($node, "WITH i AS (INSERT INTO other VALUES (1) RETURNING n)"
	  . " SELECT dlock_release('f:wrote', 'h') FROM i"),
	't', 'a release in a transaction that wrote something else waits for its flush');

acquire('f:2pc');
$node->safe_psql('postgres',
	"BEGIN; SELECT dlock_release('f:2pc', 'h'); PREPARE TRANSACTION 'rel'");
is(flushed($node, "COMMIT PREPARED 'rel'"), 't', 'COMMIT PREPARED of a release waits for its flush');

# the one kind of release that is not flushed can be lost in a crash, and
# then the lease is back with its releasing holder and token: nobody else's
acquire('f:lost');
my $token = $node->safe_psql('postgres',
	"SELECT token FROM dlock_locks WHERE key = 'f:lost'");
is(flushed($node, "SELECT dlock_release('f:lost', 'h')"), 'f', 'the release is not flushed yet');
crash($node);
is( $node->safe_psql(
		'postgres',
		"SELECT coalesce((SELECT holder || ' ' || token FROM dlock_locks"
		  . " WHERE key = 'f:lost'), 'free')"),
	"h $token",
	'after a crash, the unflushed release is lost: the lease is back with its holder and token');

# a release in a transaction block survives the crash
acquire('f:kept');
is(flushed($node, "BEGIN; SELECT dlock_release('f:kept', 'h'); COMMIT;"), 't', 'flushed');
crash($node);
is($node->safe_psql('postgres', "SELECT count(*) FROM dlock_locks WHERE key = 'f:kept'"),
	'0', 'after a crash, the flushed release is still there');

# a release that hands the key over to a waiter writes the waiter's grant
# in its own commit, which may skip its flush (a release on its own) and
# here also runs with synchronous_commit = off; the waiter must still not
# return its token before that grant is flushed: after a crash right after
# the waiter returns, the waiter holds the lease with that token
acquire('f:hand');
my $bg = $node->background_psql('postgres', timeout => 3600);
$bg->query_until(qr/starting wait/,
	    "\\echo starting wait\n"
	  . "SELECT dlock_acquire('f:hand', 'w', '1 hour', '1 hour');\n");
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM dlock_waiters WHERE key = 'f:hand'")
  or die "the waiter for f:hand does not show up";
$node->safe_psql('postgres',
	"SET synchronous_commit = off; SELECT dlock_release('f:hand', 'h')");
my $got = $bg->query_until(qr/wait finished\n/, "\\echo wait finished\n");
$got =~ s/\nwait finished\n//;
$bg->quit;
like($got, qr/^\d+$/, 'the waiter got the key handed over');
crash($node);
is( $node->safe_psql(
		'postgres',
		"SELECT coalesce((SELECT holder || ' ' || token FROM dlock_locks"
		  . " WHERE key = 'f:hand'), 'free')"),
	"w $got",
	'after a crash, the waiter still holds the lease handed over to it, with its token');

flush_node_stop($node);
done_testing();
