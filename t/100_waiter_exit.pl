
# Copyright: dlock contributors
#
# 100_waiter_exit.pl: a waiter whose backend exits after a release granted
# it the key, but before it returned the token, leaves nothing held or
# queued (README "Guarantees"; src/lease/lease_acquire.c, wait_exit_callback).
#
# The waiter B sleeps in dlock_acquire(..., wait) with a ttl of an hour.
# Its backend is stopped (SIGSTOP), the holder releases (the release hands
# the key over to B: its commit grants B the lease), B's backend is sent
# pg_terminate_backend and continued (SIGCONT): it wakes in its wait, takes
# the termination there (a FATAL error: no PG_CATCH runs, only the exit
# callbacks) and exits without having returned its token.  The grant is
# abandoned: the key reads as free at once (not for the grant's hour),
# nobody waits, and a third session acquires the key at once with a
# greater token.
#
# dlock.safety_wake is an hour: nothing here depends on the periodic wake.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockPoll;    # within(): waits of the test's own length
use DlockProcesses;    # every process started (or stopped) here is ended (or continued) on every exit path
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('waiter_exit');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'dlock'
dlock.safety_wake = '1h'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock');

sub sql { return $node->safe_psql('postgres', $_[0]); }

# True once process pid is stopped (state T in /proc), within $secs seconds.
sub stopped
{
	my ($pid, $secs) = @_;
	my $until = time() + $secs;
	while (time() < $until)
	{
		if (open(my $fh, '<', "/proc/$pid/stat"))
		{
			my $stat = <$fh>;
			close($fh);
			return 1 if defined $stat && $stat =~ /\)\s+[Tt]\s/;
		}
		select(undef, undef, undef, 0.05);
	}
	return 0;
}

# holder and token of key's lease (dlock_locks), or '' when it is free
sub lease_of
{
	my ($key) = @_;
	return sql("SELECT holder || ' ' || token FROM dlock_locks WHERE key = '$key'");
}

is(sql("SELECT dlock_acquire('we:k', 'A', '1 hour') IS NOT NULL"), 't', 'A holds we:k');

# B waits for the key, in a statement of its own (a release may hand over to it)
my $b = $node->background_psql('postgres', on_error_stop => 0, timeout => 180);
my $bpid = $b->query_safe('SELECT pg_backend_pid()');
$b->query_until(qr/started/,
	"\\echo started\nSELECT dlock_acquire('we:k', 'B', '1 hour', '5 min');\n");
ok( within($node, 120,
		"SELECT count(*) = 1 FROM dlock_waiters WHERE key = 'we:k' AND holder = 'B' AND pid = $bpid"),
	'B waits');
ok( within($node, 120,
		"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $bpid"),
	'B sleeps in its wait');

DlockProcesses::pause($bpid);
ok(stopped($bpid, 120), "B's backend is stopped");

is(sql("SELECT dlock_release('we:k', 'A')"), 't', 'A releases');
my $granted = lease_of('we:k');
like($granted, qr/^B \d+$/, 'the release handed the lease to B');
my (undef, $b_token) = split / /, $granted;

is(sql("SELECT pg_terminate_backend($bpid)"), 't', "B's backend is told to terminate");
DlockProcesses::resume($bpid);
ok(within($node, 120, "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $bpid"),
	"B's backend exited");

is(sql("SELECT count(*) FROM dlock_waiters"), '0', 'nobody waits any more');
is(lease_of('we:k'), '', "B's abandoned grant reads as a free key at once (not for its hour)");
my $c_token = sql("SELECT dlock_acquire('we:k', 'C', '1 hour', wait => '0')");
like($c_token, qr/^\d+$/, 'C acquires the key at once');
cmp_ok($c_token, '>', $b_token, "C's token is greater than B's abandoned one");
is(lease_of('we:k'), "C $c_token", 'C holds we:k');

# B's psql: its server connection is gone
eval {
	$b->{run}->pump_nb();
	if ($b->{run}->pumpable()) { $b->quit; }
	else { $b->{run}->finish; }
};

$node->stop;
done_testing();
