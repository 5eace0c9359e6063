# Copyright: dlock contributors
#
# 018_release_flush_after.pl: an asynchronous release (a transaction that
# only released leases commits without waiting for its flush, src/lease/lease_xact.c)
# leaves synchronous_commit as it was for what the session does next: a
# later acquire, or any other write, in the same session waits for its
# flush again, and SHOW synchronous_commit says what the user set.
#
# As in 016_release_flush.pl (t/DlockFlush.pm): the WAL writer is stopped
# and nothing else writes WAL, so an unflushed commit stays unflushed; the
# session notes where WAL insertion stood after
# its last statement, and another session reports whether WAL is flushed up
# to there.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockFlush;    # flush_node, flushed
use Test::More;

my $node = flush_node('flush_after');

$node->safe_psql('postgres', "SELECT dlock_acquire('a:1', 'h', '1 hour')");
is( flushed($node, "SELECT dlock_release('a:1', 'h')"),
	'f', 'control: the release alone is not flushed');

$node->safe_psql('postgres', "SELECT dlock_acquire('a:2', 'h', '1 hour')");
is( flushed($node, 
		"SELECT dlock_release('a:2', 'h'); INSERT INTO other VALUES (1)"),
	't', 'a write after an asynchronous release in the same session is flushed');

$node->safe_psql('postgres', "SELECT dlock_acquire('a:3', 'h', '1 hour')");
is( flushed($node, 
		"SELECT dlock_release('a:3', 'h'); SELECT dlock_acquire('a:4', 'h', '1 hour')"),
	't', 'an acquire after an asynchronous release in the same session is flushed');

$node->safe_psql('postgres', "SELECT dlock_acquire('a:5', 'h', '1 hour')");
my @shown = split /\n/,
  $node->safe_psql('postgres',
	"SET synchronous_commit = remote_apply; SELECT dlock_release('a:5', 'h'); SHOW synchronous_commit");
is($shown[0], 't', 'released');
is($shown[-1], 'remote_apply', 'SHOW synchronous_commit after a release says what was set');

flush_node_stop($node);
done_testing();
