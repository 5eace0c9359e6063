# Copyright: dlock contributors
#
# t/DlockFlush.pm: what the tests of releases that commit without waiting
# for their WAL flush (src/lease/lease_xact.c) share, 016_release_flush.pl and
# 018_release_flush_after.pl: a node on which an unflushed commit stays
# unflushed until the test is done with it, the question "is WAL flushed
# up to where this SQL left it?", and a crash before anything more is
# flushed.
#
#   use PostgreSQL::Test::Cluster;
#   use FindBin;
#   use lib $FindBin::RealBin;
#   use DlockFlush;
#
#   my $node = flush_node('name', "max_prepared_transactions = 2\n");
#   is(flushed($node, "SELECT dlock_release('k', 'h')"), 'f', '...');
#   crash($node);    # the unflushed release is lost
#   flush_node_stop($node);
#
# Nothing here waits for a time: the WAL writer, the one process that would
# flush an asynchronous commit by itself (after wal_writer_delay, at any
# moment on a busy machine), is stopped (SIGSTOP) for the whole test, and
# nothing else commits (autovacuum off, no checkpoint, the background
# writer writes no page).

package DlockFlush;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use DlockProcesses;    # the paused WAL writer is continued on every exit path

our @EXPORT = qw(flush_node flushed crash flush_node_stop);

# pause_walwriter(NODE): stops NODE's WAL writer (SIGSTOP) until the file
# ends or crash() kills it
sub pause_walwriter
{
	my ($node) = @_;
	my $pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'");
	die "no WAL writer found" unless $pid =~ /^\d+$/;
	DlockProcesses::pause($pid);
	$node->{dlock_walwriter} = $pid;
	return;
}

# flush_node(NAME, [CONF]): a started node with dlock preloaded and created,
# its WAL writer stopped and nothing else writing WAL (autovacuum off, no
# checkpoint for an hour, the background writer writing no page, no dead
# catalog rows left for a later connection to prune and log), and a table
# "other" to write to.  CONF: more postgresql.conf lines.
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
bgwriter_lru_maxpages = 0
restart_after_crash = on
} . ($conf // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION dlock');
	$node->safe_psql('postgres', 'CREATE TABLE other (n int)');
	$node->safe_psql('postgres', 'VACUUM');
	$node->safe_psql('postgres', 'CHECKPOINT');
	pause_walwriter($node);
	return $node;
}

# crash(NODE): the server crashes before anything more is flushed: the
# stopped WAL writer is killed (SIGKILL), so the postmaster ends every
# other process at once and restarts, recovering from the WAL that was
# written (restart_after_crash); returns once the server accepts
# connections again, with its new WAL writer stopped.
sub crash
{
	my ($node) = @_;
	my $pid = $node->{dlock_walwriter};
	my $offset = -s $node->logfile;
	kill('KILL', $pid) or die "could not kill the WAL writer $pid: $!";
	DlockProcesses::resume($pid);    # (gone: only forgotten)
	$node->wait_for_log(qr/database system is ready to accept connections/, $offset);
	$node->poll_query_until('postgres', 'SELECT 1', '1')
	  or die 'the server did not come back after the crash';
	pause_walwriter($node);
	return;
}

# flush_node_stop(NODE): continues the WAL writer and stops the node
sub flush_node_stop
{
	my ($node) = @_;
	DlockProcesses::resume($node->{dlock_walwriter});
	$node->stop;
	return;
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
