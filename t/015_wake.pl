# Copyright: dlock contributors
#
# 015_wake.pl: a waiter is woken by every commit or rollback that frees its
# key, never only by the safety-net timer.
#
# The cluster runs with dlock.safety_wake = 1 hour, and every waiter waits
# up to an hour: a woken waiter gets its token in milliseconds; one that is
# not woken sleeps on, and the test gives up on it after 30 s and fails
# (a limit kept on the client's side: a statement_timeout would wake the
# waiter, which would then find the key free; no duration is asserted, and
# the steps wait for states, not times).  Cases (issue 12):
#  - a release that commits between a waiting acquire's first attempt and
#    its joining the queue (dlock.debug_queue_delay widens that window);
#  - COMMIT PREPARED of a release, ROLLBACK PREPARED of an acquire;
#  - ROLLBACK TO SAVEPOINT of an acquire, with the outer transaction open;
#  - a lease that runs out with nobody releasing it;
#  - the backend of a transaction holding the key lock being terminated;
#  - FIFO: the holder of a lease that ran out does not get it back past the
#    queue; three waiters get the key in the order they came, one release
#    each.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('wake');
$node->init;
$node->append_conf('postgresql.conf',
	    "shared_preload_libraries = 'dlock'\n"
	  . "dlock.safety_wake = '1h'\n"
	  . "max_prepared_transactions = 4\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock');

# Start a waiting acquire in a background psql; returns the session.
sub start_wait
{
	my ($key, $holder, $options) = @_;
	# The waiting statement is the session's first outside a transaction
	# block: a statement before it would leave statistics to send, and the
	# backend arms a timer (10 s) to send them while idle, whose signal
	# would later wake the waiter as if the key had been freed.  Settings
	# come as connection options (OPTIONS).
	my $bg;
	{
		local $ENV{PGOPTIONS} = $options if $options;
		$bg = $node->background_psql('postgres', on_error_stop => 0, timeout => 3600);
	}
	$bg->query_until(qr/starting wait/,
		    "\\echo starting wait\n"
		  . "SELECT coalesce(dlock_acquire('$key', '$holder', '1 min', '1 hour')::text, 'NULL');\n"
	);
	return $bg;
}

# The result of the waiting acquire: "woken" when it got a token, else what
# it returned; dies when it has not returned within 30 s from
# now (the test's own timer, which does not disturb the waiter).
sub wait_result
{
	my ($bg) = @_;
	$bg->{timeout}->start(30);
	my $out = eval { $bg->query_until(qr/wait finished\n/, "\\echo wait finished\n") };
	die 'a waiter was not woken: no answer within 30 s' unless defined $out;
	$out =~ s/\n?wait finished\n//;
	$bg->quit;
	return 'woken' if $out =~ /^\d+$/;
	return "not woken: '$out'";
}

sub queued
{
	my ($key, $n) = @_;
	$node->poll_query_until('postgres',
		"SELECT count(*) = $n FROM dlock_waiters WHERE key = '$key'")
	  or die "$key never had $n waiters";
	return;
}

sub holder_of
{
	my ($key) = @_;
	return $node->safe_psql('postgres',
		"SELECT holder FROM dlock_locks WHERE key = '$key'");
}

# --- a release in the window between the first attempt and the queue ---
$node->safe_psql('postgres', "SELECT dlock_acquire('wk:gap', 'h1', '1 min')");
my $waits0 = $node->safe_psql('postgres', 'SELECT waits FROM dlock_stats()');
my $w = start_wait('wk:gap', 'w', '-c dlock.debug_queue_delay=3s');
# the waiter's first attempt found the key held (it counts a wait before
# its delay): it is now in its delay, not yet queued
$node->poll_query_until('postgres',
	"SELECT waits > $waits0 FROM dlock_stats()")
  or die 'the waiter never started waiting';
is($node->safe_psql('postgres', "SELECT count(*) FROM dlock_waiters WHERE key = 'wk:gap'"),
	'0', 'gap: the waiter has not joined the queue yet');
is($node->safe_psql('postgres', "SELECT dlock_release('wk:gap', 'h1')"),
	't', 'gap: the holder released while the waiter was between attempt and queue');
is(wait_result($w), 'woken', 'gap: the waiter got the key (the release was not missed)');
is(holder_of('wk:gap'), 'w', 'gap: the waiter holds it');

# --- COMMIT PREPARED of a release ---
$node->safe_psql('postgres', "SELECT dlock_acquire('wk:2pc', 'h1', '1 min')");
$w = start_wait('wk:2pc', 'w');
queued('wk:2pc', 1);
$node->safe_psql('postgres',
	"BEGIN; SELECT dlock_release('wk:2pc', 'h1'); PREPARE TRANSACTION 'wk_rel'");
is(holder_of('wk:2pc'), 'h1', '2pc: the prepared release has not freed the key yet');
$node->safe_psql('postgres', "COMMIT PREPARED 'wk_rel'");
is(wait_result($w), 'woken', '2pc: COMMIT PREPARED woke the waiter, which got the key');
is(holder_of('wk:2pc'), 'w', '2pc: the waiter holds it');

# --- ROLLBACK PREPARED of an acquire ---
$node->safe_psql('postgres',
	"BEGIN; SELECT dlock_acquire('wk:2pcr', 'h1', '1 min'); PREPARE TRANSACTION 'wk_acq'");
$w = start_wait('wk:2pcr', 'w');
queued('wk:2pcr', 1);
$node->safe_psql('postgres', "ROLLBACK PREPARED 'wk_acq'");
is(wait_result($w), 'woken', '2pc: ROLLBACK PREPARED of an acquire woke the waiter');
is(holder_of('wk:2pcr'), 'w', '2pc: the waiter holds the key');

# --- ROLLBACK TO SAVEPOINT of an acquire, outer transaction still open ---
my $tx = $node->background_psql('postgres');
$tx->query_safe("BEGIN; SAVEPOINT s; SELECT dlock_acquire('wk:sp', 'h1', '1 min')");
$w = start_wait('wk:sp', 'w');
queued('wk:sp', 1);
$tx->query_safe('ROLLBACK TO SAVEPOINT s');
is(wait_result($w), 'woken',
	'savepoint: rolling back the acquire woke the waiter while the outer transaction stays open');
is(holder_of('wk:sp'), 'w', 'savepoint: the waiter holds the key');
$tx->query_safe('COMMIT');
$tx->quit;

# --- a lease that runs out ---
$node->safe_psql('postgres', "SELECT dlock_acquire('wk:exp', 'h1', '700 ms')");
$w = start_wait('wk:exp', 'w');
is(wait_result($w), 'woken', 'expiry: the waiter got the key when the lease ran out');
is(holder_of('wk:exp'), 'w', 'expiry: the waiter holds it');

# --- the holder's backend is terminated inside its transaction ---
$tx = $node->background_psql('postgres', on_error_stop => 0, timeout => 3600);
my $txpid = $tx->query_safe('SELECT pg_backend_pid()');
$tx->query_safe("BEGIN; SELECT dlock_acquire('wk:die', 'h1', '1 min')");
$w = start_wait('wk:die', 'w');
queued('wk:die', 1);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($txpid)");
is(wait_result($w), 'woken', 'death: terminating the locking backend woke the waiter');
eval { $tx->quit; };

# --- FIFO: an expired holder does not jump the queue ---
$tx = $node->background_psql('postgres');
$tx->query_safe("SELECT dlock_acquire('wk:fifo', 'h1', '500 ms')");
# keep the key locked in an open transaction, so the waiter cannot take it
$tx->query_safe("BEGIN; SELECT dlock_renew('wk:fifo', 'h1', '500 ms')");
$w = start_wait('wk:fifo', 'w');
queued('wk:fifo', 1);
$tx->query_safe('SELECT pg_sleep(0.7)');
is($tx->query_safe("SELECT dlock_acquire('wk:fifo', 'h1', '1 min') IS NULL"),
	't', 'fifo: the holder of an expired lease gets NULL while someone queues');
$tx->query_safe('COMMIT');
$tx->quit;
is(wait_result($w), 'woken', 'fifo: the queued waiter got the key');
is(holder_of('wk:fifo'), 'w', 'fifo: the waiter holds it, not the old holder');

# --- FIFO: waiters served in the order they came ---
$node->safe_psql('postgres', "SELECT dlock_acquire('wk:order', 'h1', '1 min')");
my @ws;
for my $i (1 .. 3)
{
	push @ws, start_wait('wk:order', "w$i");
	queued('wk:order', $i);
}
my $prev = 'h1';
for my $i (1 .. 3)
{
	is($node->safe_psql('postgres', "SELECT dlock_release('wk:order', '$prev')"),
		't', "fifo: $prev released");
		is(wait_result($ws[ $i - 1 ]), 'woken', "fifo: w$i, next in line, got the key");
	is(holder_of('wk:order'), "w$i", "fifo: w$i holds it");
	$prev = "w$i";
}

$node->stop;
done_testing();
