# Copyright: dlock contributors
#
# 082_cli_time.pl: the command line's promises about time, at their edges,
# without asserting a speed:
#  - `dlock acquire --wait 0` (and the default) and `dlock run --wait 0` on a
#    held key exit 75 at once: dlock_stats() counts no wait, and no call
#    waits for a lock (each run's statement under statement_timeout = 60s,
#    PGOPTIONS: it only ends a hang, far above any load's delay; no speed
#    is asserted);
#  - the same while another session's open transaction works on the key (a
#    lock the call would have to wait for), and a wrong holder's `renew` and
#    `release` (exit 70);
#  - `--wait 1s` on a held key exits 75 after its whole wait, not before,
#    counted as one wait that timed out, and CMD never runs;
#  - `dlock acquire --ttl` and `dlock renew --ttl` lease from the call:
#    expires_at is at least the clock before the run plus the ttl.
#
# Every process started here is stopped on every exit path (t/DlockProcesses.pm).

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('cli_time');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'dlock'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock');
my $conn = $node->connstr('postgres');

# run dlock to its end, its statements under statement_timeout = $limit (if
# given): (exit code, stdout, stderr, seconds it took)
sub dl
{
	my ($limit, @args) = @_;
	my ($out, $err) = ('', '');
	local $ENV{PGOPTIONS} = defined $limit ? "-c statement_timeout=$limit" : '';
	my $t0 = time;
	IPC::Run::run([ 'dlock', @args ], '<', \undef, '>', \$out, '2>', \$err,
		IPC::Run::timeout(120));
	return ($? >> 8, $out, $err, time - $t0);
}

sub stats
{
	my %s;
	@s{qw(contended waits wait_timeouts)} = split /\|/,
	  $node->safe_psql('postgres', 'SELECT contended, waits, wait_timeouts FROM dlock_stats()');
	return \%s;
}

# $n runs of dlock (with @args) under statement_timeout = 60s: how many
# exited with $want (the others are shown)
sub count_exits
{
	my ($n, $want, @args) = @_;
	my $ok = 0;
	for (1 .. $n)
	{
		my ($rc, $out, $err) = dl('60s', @args);
		if ($rc == $want) { $ok++ }
		else { diag("dlock @args: exit $rc, $err") }
	}
	return $ok;
}

my $token = $node->safe_psql('postgres', "SELECT dlock_acquire('ct:held', 'h1', '1 hour')");
ok($token > 0, 'h1 holds ct:held');

# --- wait 0, at once ---
my $s0 = stats();
is(count_exits(10, 75, 'acquire', 'ct:held', '--holder', 'h2', '--wait', '0', '-d', $conn),
	10, 'acquire --wait 0 of a held key: exit 75 at once, ten times');
is(count_exits(10, 75, 'acquire', 'ct:held', '--holder', 'h2', '-d', $conn),
	10, 'acquire without --wait: the same');
my $ran = "$PostgreSQL::Test::Utils::tmp_check/082_ran";
unlink $ran;
is(count_exits(5, 75, 'run', 'ct:held', '--holder', 'h2', '--wait', '0', '-d', $conn,
		'--', 'touch', $ran),
	5, 'run --wait 0 of a held key: exit 75 at once');
ok(!-e $ran, 'CMD never ran');
is(count_exits(5, 70, 'release', 'ct:held', '--holder', 'h2', '-d', $conn),
	5, 'a wrong holder\'s release: exit 70 at once');
is(count_exits(5, 70, 'renew', 'ct:held', '--holder', 'h2', '--ttl', '1h', '-d', $conn),
	5, 'a wrong holder\'s renew: exit 70 at once');
my $s1 = stats();
is($s1->{waits} - $s0->{waits}, 0, 'none of them waited');
is($s1->{contended} - $s0->{contended}, 25, 'each acquire was counted as contended');

# --- the same while another session's transaction works on the key ---
my $bg = $node->background_psql('postgres', on_error_stop => 1);
$bg->query_safe("BEGIN; SELECT dlock_renew('ct:held', 'h1', '2 hours')");
is(count_exits(5, 75, 'acquire', 'ct:held', '--holder', 'h2', '--wait', '0', '-d', $conn),
	5, 'acquire --wait 0 while the key is locked: exit 75 at once');
is(count_exits(5, 75, 'acquire', 'ct:held', '--holder', 'h1', '--wait', '0', '-d', $conn),
	5, 'even by the holder: exit 75 at once');
is(count_exits(5, 70, 'release', 'ct:held', '--holder', 'h2', '-d', $conn),
	5, 'a wrong holder\'s release while the key is locked: exit 70 at once');
$bg->query_safe('COMMIT');
my $s2 = stats();
is($s2->{waits} - $s1->{waits}, 0, 'none of them waited');

# --- a wait runs its whole length ---
my ($rc, $out, $err, $took) = dl(undef, 'acquire', 'ct:held', '--holder', 'h2', '--wait', '1s',
	'-d', $conn);
is($rc, 75, 'acquire --wait 1s of a held key: exit 75');
cmp_ok($took, '>=', 1.0, 'after its whole wait');
($rc, $out, $err, $took) = dl(undef, 'run', 'ct:held', '--holder', 'h2', '--wait', '1s',
	'-d', $conn, '--', 'touch', $ran);
is($rc, 75, 'run --wait 1s of a held key: exit 75');
cmp_ok($took, '>=', 1.0, 'after its whole wait');
ok(!-e $ran, 'CMD never ran');
my $s3 = stats();
is($s3->{waits} - $s2->{waits}, 2, 'two waits');
is($s3->{wait_timeouts} - $s2->{wait_timeouts}, 2, 'both ran out');

# --- leases from the clock of the call ---
my $before = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
($rc) = dl(undef, 'acquire', 'ct:ttl', '--holder', 'h3', '--ttl', '1h', '-d', $conn);
is($rc, 0, 'acquire --ttl 1h');
is( $node->safe_psql('postgres',
		"SELECT expires_at >= '$before'::timestamptz + interval '1 hour',"
		  . " expires_at - acquired_at = interval '1 hour'"
		  . " FROM dlock_locks WHERE key = 'ct:ttl'"),
	't|t', 'leased for 1 hour from the call');
sleep 1;
$before = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
($rc) = dl(undef, 'renew', 'ct:ttl', '--holder', 'h3', '--ttl', '2h', '-d', $conn);
is($rc, 0, 'renew --ttl 2h');
is( $node->safe_psql('postgres',
		"SELECT expires_at >= '$before'::timestamptz + interval '2 hours'"
		  . " FROM dlock_locks WHERE key = 'ct:ttl'"),
	't', 'renewed for 2 hours from the call');

$bg->quit;

# --- without shared_preload_libraries (waits poll, no queue): the same ---
my $plain = PostgreSQL::Test::Cluster->new('cli_time_plain');
$plain->init;
$plain->start;
$plain->safe_psql('postgres', 'CREATE EXTENSION dlock');
my $pconn = $plain->connstr('postgres');
$plain->safe_psql('postgres', "SELECT dlock_acquire('ct:held', 'h1', '1 hour')");
is(count_exits(5, 75, 'acquire', 'ct:held', '--holder', 'h2', '--wait', '0', '-d', $pconn),
	5, 'not preloaded: acquire --wait 0 of a held key: exit 75 at once');
is( $plain->safe_psql('postgres',
		"SET statement_timeout = '60s'; SELECT count(*) FROM generate_series(1, 1000)"
		  . " WHERE dlock_acquire('ct:held', 'h2', '1 min', '0') IS NULL"),
	'1000', 'not preloaded: 1,000 wait => 0 acquires, none waits');
($rc, $out, $err, $took) = dl(undef, 'acquire', 'ct:held', '--holder', 'h2', '--wait', '1s',
	'-d', $pconn);
is($rc, 75, 'not preloaded: acquire --wait 1s of a held key: exit 75');
cmp_ok($took, '>=', 1.0, 'after its whole wait');
is( $plain->safe_psql('postgres',
		"SELECT dlock_acquire('ct:held', 'h2', '1 min', '300 ms') IS NULL,"
		  . " clock_timestamp() - statement_timestamp() >= interval '300 ms'"),
	't|t', 'not preloaded: a waited acquire that is not granted took its whole wait');
$plain->stop;

done_testing();
