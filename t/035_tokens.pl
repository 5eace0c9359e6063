# Copyright: dlock contributors
#
# 035_tokens.pl: fencing tokens are greater than every token the database
# ever returned (issue 12, cases 1-3), through:
#  - a crash with synchronous_commit = off, right after a burst of acquires;
#  - DROP EXTENSION / CREATE EXTENSION (a new token sequence);
#  - ALTER EXTENSION UPDATE from 0.2 with tokens of the old format
#    ((timeline << 47) + n) already handed out;
#  - promotion of an asynchronous standby that was behind, on a cluster
#    whose token sequence is above its own timeline's old range (what a
#    restore from a dump of a cluster that had failed over, or pg_upgrade,
#    leaves: the old timeline-in-high-bits scheme handed out old tokens
#    again there);
#  - point-in-time recovery to a moment before the last tokens.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

sub acquire_burst
{
	my ($node, $prefix, $n) = @_;
	my $out = $node->safe_psql('postgres',
		"SELECT string_agg(dlock_acquire('$prefix' || g, 'h', '1 min')::text, ',' ORDER BY g)"
		  . " FROM generate_series(1, $n) g");
	return split(/,/, $out);
}

sub max_of
{
	my $m = shift;
	for (@_) { $m = $_ if $_ > $m; }
	return $m;
}

sub min_of
{
	my $m = shift;
	for (@_) { $m = $_ if $_ < $m; }
	return $m;
}

# --- crash with synchronous_commit = off ---
my $node = PostgreSQL::Test::Cluster->new('tokens');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'dlock'\nwal_writer_delay = '10s'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock');
$node->safe_psql('postgres', 'ALTER DATABASE postgres SET synchronous_commit = off');

# each acquire is its own autocommit transaction, none waits for its flush
my @before;
for my $i (1 .. 70)
{
	push @before, $node->safe_psql('postgres',
		"SELECT dlock_acquire('crash:$i', 'h', '1 min')");
}
my $max_before = max_of(@before);
$node->stop('immediate');
$node->start;
my @after = acquire_burst($node, 'crash2:', 40);
cmp_ok(min_of(@after), '>', $max_before,
	'synchronous_commit = off: after a crash every token is greater than every token returned before');

# --- takeovers: an expired lease taken over by another holder, or again by
# its own, gets a new token, greater than every token before, also when
# the lease was granted before a restart ---
$node->safe_psql('postgres', 'ALTER DATABASE postgres RESET synchronous_commit');
my @short = split /,/, $node->safe_psql('postgres',
	"SELECT string_agg(dlock_acquire('short:' || g, 'h', '1 ms')::text, ',' ORDER BY g)"
	  . ' FROM generate_series(1, 20) g');
$node->restart;
$node->safe_psql('postgres', 'SELECT pg_sleep(0.01)');
my $takeovers0 = $node->safe_psql('postgres', 'SELECT takeovers FROM dlock_stats()');
my @taken = split /,/, $node->safe_psql('postgres',
	"SELECT string_agg(dlock_acquire('short:' || g, CASE WHEN g % 2 = 0 THEN 'h' ELSE 'h2' END,"
	  . " '1 ms')::text, ',' ORDER BY g) FROM generate_series(1, 20) g");
is($node->safe_psql('postgres', 'SELECT takeovers FROM dlock_stats()') - $takeovers0,
	20, 'every expired lease granted before the restart was taken over');
cmp_ok(min_of(@taken), '>', max_of(@short, @after, $max_before),
	'a takeover after a restart gets a token greater than every token before');
$node->safe_psql('postgres', 'SELECT pg_sleep(0.01)');
my @taken2 = split /,/, $node->safe_psql('postgres',
	"SELECT string_agg(dlock_acquire('short:' || g, 'h3', '1 min')::text, ',' ORDER BY g)"
	  . ' FROM generate_series(1, 20) g');
cmp_ok(min_of(@taken2), '>', max_of(@taken),
	'a takeover without a restart gets a token greater than every token before');

# --- DROP / CREATE EXTENSION ---
my @old = acquire_burst($node, 'drop:', 40);
$node->safe_psql('postgres', 'DROP EXTENSION dlock; CREATE EXTENSION dlock');
my @new = acquire_burst($node, 'drop2:', 5);
cmp_ok(min_of(@new), '>', max_of(@old, @after),
	'after DROP and CREATE EXTENSION tokens are greater than before');

# --- ALTER EXTENSION UPDATE from 0.2 with old-format tokens ---
$node->safe_psql('postgres', "DROP EXTENSION dlock; CREATE EXTENSION dlock VERSION '0.2'");
# what dlock 0.2 had handed out on timeline 3: (3 << 47) + n
$node->safe_psql('postgres', 'SELECT setval(\'dlock.token_seq\', (3::bigint << 47) + 1000)');
my $old_format = $node->safe_psql('postgres', 'SELECT (3::bigint << 47) + 1000');
$node->safe_psql('postgres', 'ALTER EXTENSION dlock UPDATE');
my @upd = acquire_burst($node, 'upd:', 5);
cmp_ok(min_of(@upd), '>', $old_format,
	'after ALTER EXTENSION UPDATE from 0.2 tokens are greater than the old-format ones');

# --- promotion of a lagging asynchronous standby, sequence above its range ---
# the primary's token sequence is high, as after a restore from a dump of a
# cluster that had failed over to timeline 2 (the new cluster is on 1)
$node->safe_psql('postgres', 'SELECT setval(\'dlock.token_seq\', (2::bigint << 47) + 500)');
$node->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('tokens_standby');
$standby->init_from_backup($node, 'b1', has_streaming => 1);
$standby->start;
my @p1 = acquire_burst($node, 'rep:', 10);
$node->wait_for_catchup($standby);
# the standby falls behind: stopped, then the primary hands out more
# tokens than a sequence batch (32) without it
$standby->stop;
my @p2 = acquire_burst($node, 'lost:', 100);
my $primary_max = max_of(@p1, @p2);
$node->stop('immediate');
$standby->append_conf('postgresql.conf', "primary_conninfo = ''");
$standby->start;
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'standby not promoted';
is($standby->safe_psql('postgres', "SELECT count(*) FROM dlock_locks WHERE key LIKE 'lost:%'"),
	'0', 'the promoted standby never saw the last tokens (it was behind)');
cmp_ok($standby->safe_psql('postgres', 'SELECT last_value FROM dlock.token_seq'),
	'<', $primary_max, 'its token sequence is behind the old primary\'s last token');
my @s = acquire_burst($standby, 'after:', 10);
cmp_ok(min_of(@s), '>', $primary_max,
	'every token of the promoted standby is greater than every token of the old primary');
$standby->stop;

# --- point-in-time recovery to before the last tokens ---
$node->start;
$node->safe_psql('postgres',
	"ALTER SYSTEM SET archive_mode = on; ALTER SYSTEM SET archive_command = 'cp %p "
	  . $node->archive_dir . "/%f'");
$node->restart;
$node->backup('b2');
my @t1 = acquire_burst($node, 'pitr1:', 10);
my $target = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
$node->safe_psql('postgres', 'SELECT pg_sleep(0.1)');
my @t2 = acquire_burst($node, 'pitr2:', 100);
$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
$node->poll_query_until('postgres',
	"SELECT last_archived_wal IS NOT NULL AND last_failed_wal IS NULL FROM pg_stat_archiver")
  or die 'archiving failed';
my $all_max = max_of(@t1, @t2);
$node->stop;
my $pitr = PostgreSQL::Test::Cluster->new('tokens_pitr');
$pitr->init_from_backup($node, 'b2', has_restoring => 1);
$pitr->append_conf('postgresql.conf',
	"recovery_target_time = '$target'\nrecovery_target_action = 'promote'\n");
$pitr->start;
$pitr->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'point-in-time recovery did not end';
is($pitr->safe_psql('postgres', "SELECT count(*) FROM dlock_locks WHERE key LIKE 'pitr2:%'"),
	'0', 'the recovered cluster stopped before the last tokens');
my @r = acquire_burst($pitr, 'pitr3:', 10);
cmp_ok(min_of(@r), '>', $all_max,
	'after point-in-time recovery every token is greater than every token returned before');
$pitr->stop;

done_testing();
