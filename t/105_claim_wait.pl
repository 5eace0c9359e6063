
# Copyright: dlock contributors
#
# 105_claim_wait.pl: claims waiting for rows (dlock_claim's wait, issue 38)
# across sessions: no thundering herd, and a crash with waiting claimers.
#
#  1. Sixteen claims of one row each wait on a table with dlock's wakeup
#     trigger.  One inserted row costs at most two attempts in all
#     (dlock_stats' claim_wakeups): the first waiter claims it, and, having
#     claimed a full batch, wakes the second, which finds nothing.  The row
#     is claimed once, the other fifteen still wait, in order.
#  2. A waiter's backend is killed (SIGKILL): the server restarts all
#     backends; every waiting claim's connection is lost, and after the
#     restart nobody is queued; a new waiting claim is woken by the next
#     insert and claims it.
#
# dlock.safety_wake is an hour: nothing here depends on the periodic wake.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockPoll;    # within(): waits of the test's own length
use DlockProcesses;    # every process started here is ended on every exit path
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('claim_wait');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'dlock'
dlock.safety_wake = '1h'
max_connections = 40
restart_after_crash = on
});
$node->start;

sub sql { return $node->safe_psql('postgres', $_[0]); }

sql('CREATE EXTENSION dlock');
sql('CREATE TABLE jobs (id int PRIMARY KEY)');
sql("SELECT dlock_claim_wakeup('jobs')");

my $nwait = 16;
my (@s, @pid);
for my $i (1 .. $nwait)
{
	my $b = $node->background_psql('postgres', on_error_stop => 0, timeout => 300);
	my $pid = $b->query_safe('SELECT pg_backend_pid()');
	$b->query_until(qr/started/,
		"\\echo started\nSELECT id FROM dlock_claim(NULL::jobs, 'w$i', 1, wait => '5 min');\n");
	# in the queue in this order, asleep after its first attempt
	ok( within($node, 120,
			"SELECT count(*) = 1 FROM dlock_waiters w JOIN pg_stat_activity a USING (pid)"
			  . " WHERE w.holder = 'w$i' AND w.pid = $pid AND a.wait_event_type = 'Extension'"),
		"w$i waits") or BAIL_OUT("w$i does not wait");
	push @s, $b;
	push @pid, $pid;
}
is(sql("SELECT string_agg(holder, ' ' ORDER BY queue_position) FROM dlock_waiters"),
	join(' ', map { "w$_" } 1 .. $nwait), 'the waiters queue in arrival order');

my $w0 = sql('SELECT claim_wakeups FROM dlock_stats()');
sql('INSERT INTO jobs VALUES (1)');
ok(within($node, 120, "SELECT count(*) = 1 FROM dlock_claims WHERE key = '1'"),
	'the inserted row is claimed');
is(sql("SELECT holder FROM dlock_claims WHERE key = '1'"), 'w1', 'by the first waiter');
# settled: fifteen wait, all asleep, and at least the two expected attempts made
ok( within($node, 120,
		"SELECT (SELECT claim_wakeups FROM dlock_stats()) - $w0 >= 2"
		  . " AND (SELECT count(*) FROM dlock_waiters w JOIN pg_stat_activity a USING (pid)"
		  . "       WHERE a.wait_event_type = 'Extension') = " . ($nwait - 1)),
	'the other waiters sleep again');
my $attempts = sql("SELECT claim_wakeups - $w0 FROM dlock_stats()");
cmp_ok($attempts, '<=', 2, "one row, $nwait waiters: at most 2 attempts ($attempts)");
is(sql("SELECT string_agg(holder, ' ' ORDER BY queue_position) FROM dlock_waiters"),
	join(' ', map { "w$_" } 2 .. $nwait), 'the others still wait, in order');

# the first waiter's statement returned its row
my ($out) = $s[0]->query('SELECT 1 AS alive');
like($out, qr/1/, "w1's session goes on");

# crash: kill a waiting claim's backend
kill 'KILL', $pid[1];
ok($node->poll_query_until('postgres', 'SELECT true'), 'the server is back after the crash')
  or BAIL_OUT('no restart');
is(sql('SELECT count(*) FROM dlock_waiters'), '0', 'nobody is queued after the restart');
ok( within($node, 120,
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid IN (" . join(',', @pid) . ")"),
	"every waiter's backend is gone");
for my $i (1 .. $#s)
{
	my ($o, $e) = eval { $s[$i]->query('SELECT 1') };
	ok(!defined $o || $o !~ /^1$/ || ($e // '') ne '',
		"w" . ($i + 1) . "'s connection is lost");
}

# a new waiting claim is woken by the next insert
my $c = $node->background_psql('postgres', on_error_stop => 0, timeout => 300);
my $cpid = $c->query_safe('SELECT pg_backend_pid()');
$c->query_until(qr/started/,
	"\\echo started\nSELECT 'got ' || id FROM dlock_claim(NULL::jobs, 'c', 1, wait => '5 min');\n");
ok( within($node, 120,
		"SELECT count(*) = 1 FROM dlock_waiters w JOIN pg_stat_activity a USING (pid)"
		  . " WHERE w.pid = $cpid AND a.wait_event_type = 'Extension'"),
	'a new claim waits after the restart');
sql('INSERT INTO jobs VALUES (2)');
ok(within($node, 120, "SELECT count(*) = 1 FROM dlock_claims WHERE key = '2' AND holder = 'c'"),
	'and is woken by the next insert');
is(sql('SELECT count(*) FROM dlock_waiters'), '0', 'nobody waits');
$c->quit;
for my $b (@s) { eval { $b->quit; }; }

$node->stop;
done_testing();
