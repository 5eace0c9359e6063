# Copyright: dlock contributors
#
# t/DlockFlush.pm: what the tests of releases that commit without waiting
# for their WAL flush (src/lease_xact.c) share, 016_release_flush.pl and
# 018_release_flush_after.pl: a node on which an unflushed commit stays
# unflushed long enough to be seen, and the question "is WAL flushed up to
# where this SQL left it?".
#
#   use PostgreSQL::Test::Cluster;
#   use FindBin;
#   use lib $FindBin::RealBin;
#   use DlockFlush;
#
#   my $node = flush_node('name', "max_prepared_transactions = 2\n");
#   is(flushed($node, "SELECT dlock_release('k', 'h')"), 'f', '...');

package DlockFlush;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;

our @EXPORT = qw(flush_node flushed);

# flush_node(NAME, [CONF]): a started node with dlock preloaded and created,
# the WAL writer slowed down (wal_writer_delay = 10s) and nothing else
# writing WAL (autovacuum off, no checkpoint for an hour, no dead catalog
# rows left for a later connection to prune and log), and a table "other"
# to write to.  CONF: more postgresql.conf lines.
sub flush_node
{
	my ($name, $conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'dlock'
wal_writer_delay = '10s'
autovacuum = off
checkpoint_timeout = '1h'
} . ($conf // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION dlock');
	$node->safe_psql('postgres', 'CREATE TABLE other (n int)');
	$node->safe_psql('postgres', 'VACUUM');
	$node->safe_psql('postgres', 'CHECKPOINT');
	return $node;
}

# flushed(NODE, SQL): runs SQL (one or more statements) in a session of its
# own and notes where WAL insertion stood right after it; then reports from
# another session whether WAL is flushed up to there ('t' or 'f').
# Comparing against that mark, not against the insert position when the
# second session asks, keeps WAL that the second session or anyone else
# inserts meanwhile (a page pruned while reading the catalogs at
# connection) out of the answer.
sub flushed
{
	my ($node, $sql) = @_;
	my @out = split /\n/,
	  $node->safe_psql('postgres', "$sql; SELECT pg_current_wal_insert_lsn()");
	my $mark = $out[-1];
	return $node->safe_psql('postgres',
		"SELECT pg_current_wal_flush_lsn() >= '$mark'::pg_lsn");
}

1;
