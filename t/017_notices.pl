# Copyright: dlock contributors
#
# 017_notices.pl: what dlock tells a newcomer (issue 23).
#  - Without shared_preload_libraries, a backend gets one WARNING, with a
#    hint naming the setting, when it first needs what only preloading
#    gives (a waiting acquire that has to poll, dlock_stats(),
#    dlock_waiters), not again; a backend that needs none of it (acquire,
#    release, CREATE EXTENSION) and a preloaded server get none.
#  - A waiting acquire shows in pg_stat_activity as wait event type
#    Extension, named DlockWait on PostgreSQL 17 and later (which let an
#    extension name its wait events, also listed in pg_wait_events), plain
#    Extension before; preloaded (woken waits) and not (polling waits).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $warning = qr/WARNING:  dlock is not in shared_preload_libraries/;
my $hint = qr/HINT:  Add dlock to shared_preload_libraries in postgresql.conf and restart the server\./;

sub count_of
{
	my ($re, $text) = @_;
	my $n = () = $text =~ /$re/g;
	return $n;
}

my $plain = PostgreSQL::Test::Cluster->new('not_preloaded');
$plain->init;
$plain->start;
my $major = $plain->safe_psql('postgres', 'SHOW server_version_num') / 10000;

# --- the WARNING, once per backend, without preloading ---
my ($ret, $out, $err) = $plain->psql('postgres',
	"CREATE EXTENSION dlock;\n"
	  . "SELECT dlock_acquire('n:a', 'h', '1 min') IS NOT NULL;\n"
	  . "SELECT dlock_release('n:a', 'h');\n");
is($ret, 0, 'CREATE EXTENSION, acquire and release work without preloading');
is($err, '', 'they lose nothing without preloading: no WARNING');

($ret, $out, $err) = $plain->psql('postgres',
	"SELECT count(*) FROM dlock_stats();\n"
	  . "SELECT count(*) FROM dlock_stats();\n"
	  . "SELECT count(*) FROM dlock_waiters;\n");
is($out, "0\n0\n0", 'dlock_stats() and dlock_waiters are empty without preloading');
is(count_of($warning, $err), 1, 'a session reading them: one WARNING, at the first');
like($err, $hint, 'the WARNING has a hint naming shared_preload_libraries');
like($err, qr/DETAIL:  Waiting acquires poll every dlock.poll_interval/,
	'the WARNING says what is missing');

($ret, $out, $err) = $plain->psql('postgres', 'SELECT count(*) FROM dlock_waiters');
is(count_of($warning, $err), 1, 'the next session (a new backend) is told again, by dlock_waiters');

# a waiting acquire that has to poll
$plain->safe_psql('postgres', "SELECT dlock_acquire('n:p', 'holder', '1 min')");
($ret, $out, $err) = $plain->psql('postgres',
	"SELECT dlock_acquire('n:p', 'other', '1 min', '50 ms') IS NULL;\n"
	  . "SELECT dlock_acquire('n:p', 'other', '1 min', '50 ms') IS NULL;\n");
is($out, "t\nt", 'a polling acquire on a held key waits and gets NULL');
is(count_of($warning, $err), 1, 'a session whose acquires poll: one WARNING');
like($err, $hint, 'with its hint');
$plain->safe_psql('postgres', "SELECT dlock_release('n:p', 'holder')");

my $pre = PostgreSQL::Test::Cluster->new('preloaded');
$pre->init;
$pre->append_conf('postgresql.conf', "shared_preload_libraries = 'dlock'");
$pre->start;
$pre->safe_psql('postgres', "CREATE EXTENSION dlock; SELECT dlock_acquire('p:p', 'holder', '1 min')");
($ret, $out, $err) = $pre->psql('postgres',
	"SELECT count(*) FROM dlock_stats();\n"
	  . "SELECT count(*) FROM dlock_waiters;\n"
	  . "SELECT dlock_acquire('p:p', 'other', '1 min', '50 ms') IS NULL;\n");
is($out, "1\n0\nt", 'preloaded: dlock_stats() has its row, a waiting acquire waits');
is($err, '', 'preloaded: no WARNING, nothing on stderr');

# --- the wait event of a waiting acquire ---
my $want = $major >= 17 ? 'Extension DlockWait' : 'Extension Extension';

# wait_event_of NODE SETUP: the wait event type and name of an acquire
# waiting behind another holder, as pg_stat_activity shows them
sub wait_event_of
{
	my ($node, $key, $setup) = @_;
	$node->safe_psql('postgres', "SELECT dlock_acquire('$key', 'holder', '10 min')");
	my $bg = $node->background_psql('postgres', on_error_stop => 0);
	$bg->query_safe($setup) if $setup;
	my $pid = $bg->query_safe('SELECT pg_backend_pid()');
	$bg->query_until(qr/starting wait/,
		    "\\echo starting wait\n"
		  . "SELECT dlock_acquire('$key', 'waiter', '1 min', '3 min') IS NOT NULL AS got;\n");
	# ask until the acquire is seen asleep (a polling waiter is on the CPU
	# now and then, and the statement may not have started yet)
	my $ev = '';
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	while ($ev eq '' && time() < $deadline)
	{
		$ev = $node->safe_psql('postgres',
			"SELECT wait_event_type || ' ' || wait_event FROM pg_stat_activity"
			  . " WHERE pid = $pid AND state = 'active' AND query LIKE '%''waiter''%'"
			  . " AND wait_event IS NOT NULL");
		usleep(50_000) if $ev eq '';
	}
	$node->safe_psql('postgres', "SELECT dlock_force_release('$key')");
	my $res = $bg->query_until(qr/wait finished\n/, "\\echo wait finished\n");
	$bg->quit;
	like($res, qr/^t$/m, "the waiter got '$key' once it was freed");
	return $ev;
}

is(wait_event_of($pre, 'p:w'), $want,
	"a waiting acquire, preloaded: wait event $want");
is(wait_event_of($plain, 'n:w', "SET dlock.poll_interval = '2s'"), $want,
	"a polling acquire, not preloaded: wait event $want");
if ($major >= 17)
{
	is($pre->safe_psql('postgres',
			"SELECT type || ' ' || name FROM pg_wait_events WHERE name = 'DlockWait'"),
		'Extension DlockWait', 'pg_wait_events lists DlockWait');
}

$plain->stop;
$pre->stop;
done_testing();
