# Copyright: dlock contributors
#
# 018_release_flush_after.pl: an asynchronous release (a transaction that
# only released leases commits without waiting for its flush, src/xact.c)
# leaves synchronous_commit as it was for what the session does next: a
# later acquire, or any other write, in the same session waits for its
# flush again, and SHOW synchronous_commit says what the user set.
#
# As in 016_release_flush.pl: the WAL writer is slowed down and nothing else
# writes WAL, so an unflushed commit stays unflushed long enough to be seen;
# the session notes where WAL insertion stood after its last statement, and
# another session reports whether WAL is flushed up to there.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('flush_after');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'dlock'
wal_writer_delay = '10s'
autovacuum = off
checkpoint_timeout = '1h'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock');
$node->safe_psql('postgres', 'CREATE TABLE other (n int)');
$node->safe_psql('postgres', 'VACUUM');
$node->safe_psql('postgres', 'CHECKPOINT');

# flushed_after(SQL): runs SQL (several statements, one session), then
# reports whether WAL is flushed up to where insertion stood after it
sub flushed_after
{
	my ($sql) = @_;
	my @out = split /\n/,
	  $node->safe_psql('postgres', "$sql; SELECT pg_current_wal_insert_lsn()");
	my $mark = $out[-1];
	return $node->safe_psql('postgres',
		"SELECT pg_current_wal_flush_lsn() >= '$mark'::pg_lsn");
}

$node->safe_psql('postgres', "SELECT dlock_acquire('a:1', 'h', '1 hour')");
is( flushed_after("SELECT dlock_release('a:1', 'h')"),
	'f', 'control: the release alone is not flushed');

$node->safe_psql('postgres', "SELECT dlock_acquire('a:2', 'h', '1 hour')");
is( flushed_after(
		"SELECT dlock_release('a:2', 'h'); INSERT INTO other VALUES (1)"),
	't', 'a write after an asynchronous release in the same session is flushed');

$node->safe_psql('postgres', "SELECT dlock_acquire('a:3', 'h', '1 hour')");
is( flushed_after(
		"SELECT dlock_release('a:3', 'h'); SELECT dlock_acquire('a:4', 'h', '1 hour')"),
	't', 'an acquire after an asynchronous release in the same session is flushed');

$node->safe_psql('postgres', "SELECT dlock_acquire('a:5', 'h', '1 hour')");
my @shown = split /\n/,
  $node->safe_psql('postgres',
	"SET synchronous_commit = remote_apply; SELECT dlock_release('a:5', 'h'); SHOW synchronous_commit");
is($shown[0], 't', 'released');
is($shown[-1], 'remote_apply', 'SHOW synchronous_commit after a release says what was set');

$node->stop;
done_testing();
