
# Copyright: dlock contributors
#
# 097_abandoned.pl: nothing stays held or queued for a waiter that never
# saw its token, whatever ends it (README "Transactions", "Waiting";
# src/wait/wait_abandon.c, src/wait/wait_client.c).  The ways a statement can end that need
# processes of their own (specs/wait_abandoned.spec has the others):
#
#  - terminate: the waiter is handed the lease by the release, then its
#    backend is terminated (pg_terminate_backend) before its statement ends:
#    the next waiter gets the key, with a greater token;
#  - client gone while waiting: the waiter's client (psql) is killed while
#    its backend waits: the backend leaves the queue at once ("connection
#    to client lost"), and the release that follows frees the key;
#  - client gone after the grant: the client is killed after its backend
#    was handed the lease, while the statement still runs: the statement
#    does not commit the lease for a client that cannot see the token (the
#    key is free when it ends); the same for a key acquired at once;
#  - cancel while the grant commits: the releaser's commit waits for a
#    synchronous standby that is not there, and the waiter is cancelled
#    meanwhile; when the commit goes through, the grant has no taker and
#    the next waiter gets the key;
#  - PREPARE TRANSACTION of a waiter's transaction, then ROLLBACK PREPARED:
#    the next waiter gets the key;
#  - with no background worker slot (max_worker_processes = 0), a grant
#    abandoned by a later error still reads as a free key at once (only
#    its row stays as it was written).
#
# dlock.safety_wake is an hour: nothing here depends on the periodic wake.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockPoll;    # within(): waits of the test's own length
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('abandoned');
$node->init(allows_streaming => 1);    # max_wal_senders > 0: synchronous replication can be asked for
# A synchronous standby that never comes: a session with synchronous_commit
# on waits for it after its commit record (below, a release handing a key
# over); everything else commits locally.
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'dlock'
dlock.safety_wake = '1h'
max_prepared_transactions = 2
synchronous_standby_names = 'nobody'
synchronous_commit = local
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock');
$node->safe_psql('postgres', 'CREATE TABLE written (n int)');
# a gate: a statement that reads it FOR SHARE waits while the test holds
# its row FOR UPDATE (a statement kept running until the test is done with
# it, however slow the machine, instead of a pg_sleep of some seconds)
$node->safe_psql('postgres', 'CREATE TABLE gate (n int); INSERT INTO gate VALUES (0)');
my $GATE = '(SELECT n FROM gate FOR SHARE)';
my $gate;
sub close_gate
{
	$gate = $node->background_psql('postgres', timeout => 3600);
	$gate->query_safe('BEGIN; SELECT n FROM gate FOR UPDATE');
	return;
}
sub open_gate
{
	$gate->query_safe('COMMIT');
	$gate->quit;
	return;
}
# until pid waits at the gate
sub at_gate
{
	my ($pid) = @_;
	return within($node, 120,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $pid AND wait_event_type = 'Lock'");
}

# Send query in a new background psql; return (session, backend pid).
sub start_query
{
	my ($query, $setup) = @_;
	# 180 s per query: every statement here ends in well under a second
	# on an idle machine; the limit only ends one that never ends (a
	# broken promise), and is far above any load's delay
	my $bg = $node->background_psql('postgres', on_error_stop => 0, timeout => 180);
	my $pid = $bg->query_safe('SELECT pg_backend_pid()');
	$bg->query_safe($setup) if defined $setup;
	$bg->query_until(qr/started/, "\\echo started\n$query\n");
	return ($bg, $pid);
}

# The output of a start_query session's query, once it has ended.
sub result_of
{
	my ($bg) = @_;
	my $out = $bg->query_until(qr/query ended\n/, "\\echo query ended\n");
	$out =~ s/\n?query ended\n//;
	return $out;
}

# End a background psql whose backend (or psql) may be gone already.
sub end_psql
{
	my ($bg) = @_;
	eval {
		$bg->{run}->pump_nb();
		if ($bg->{run}->pumpable()) { $bg->quit; }
		else { $bg->{run}->finish; }
	};
	return;
}

# Kill a background psql (the client), as a client that dies does.
sub kill_client
{
	my ($bg) = @_;
	$bg->{run}->kill_kill;
	eval { $bg->{run}->finish; };
	return;
}

sub queued
{
	my ($key, $holder) = @_;
	return within($node, 120,
		"SELECT count(*) = 1 FROM dlock_waiters WHERE key = '$key' AND holder = '$holder'");
}

# holder and token of key's lease (dlock_locks), or '' when it is free
sub lease_of
{
	my ($key) = @_;
	return $node->safe_psql('postgres',
		"SELECT holder || ' ' || token FROM dlock_locks WHERE key = '$key'");
}

sub acquire
{
	my ($key, $holder) = @_;
	return $node->safe_psql('postgres',
		"SELECT dlock_acquire('$key', '$holder', '1 hour')");
}

sub release
{
	my ($key, $holder) = @_;
	return $node->safe_psql('postgres', "SELECT dlock_release('$key', '$holder')");
}

# ---------------------------------------------------------------------
# terminate after the grant
# ---------------------------------------------------------------------
acquire('ab:t', 'A');
close_gate();    # B's statement goes on after its grant until terminated
my ($b, $bpid) = start_query(
	"SELECT dlock_acquire('ab:t', 'B', '1 hour', '1 hour') + $GATE;");
ok(queued('ab:t', 'B'), 'terminate: B waits');
my ($c, $cpid) = start_query("SELECT dlock_acquire('ab:t', 'C', '1 hour', '1 hour');");
ok(queued('ab:t', 'C'), 'terminate: C waits behind B');
release('ab:t', 'A');
ok(within($node, 120, "SELECT holder = 'B' FROM dlock_locks WHERE key = 'ab:t'"),
	'terminate: the release handed the lease to B');
my (undef, $b_token) = split / /, lease_of('ab:t');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($bpid)");
open_gate();
my $c_token = result_of($c);
like($c_token, qr/^\d+$/, 'terminate: C got the key');
cmp_ok($c_token, '>', $b_token, "terminate: C's token is greater than B's abandoned one");
is(lease_of('ab:t'), "C $c_token", 'terminate: C holds ab:t');
end_psql($b);
end_psql($c);

# ---------------------------------------------------------------------
# client gone while waiting
# ---------------------------------------------------------------------
my $log_offset = -s $node->logfile;
acquire('ab:d', 'A');
($b, $bpid) = start_query("SELECT dlock_acquire('ab:d', 'B', '1 hour', '10 min');");
ok(queued('ab:d', 'B'), 'client gone while waiting: B waits');
kill_client($b);
ok( within($node, 120, "SELECT count(*) = 0 FROM dlock_waiters WHERE key = 'ab:d'"),
	'client gone while waiting: B left the queue at once');
ok( within($node, 120, "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $bpid"),
	"client gone while waiting: B's backend ended");
ok($node->log_contains('connection to client lost', $log_offset),
	'client gone while waiting: the server says so');
release('ab:d', 'A');
is(lease_of('ab:d'), '', 'client gone while waiting: the release freed the key');

# ---------------------------------------------------------------------
# client gone after the grant, and after an acquire of a free key
# ---------------------------------------------------------------------
acquire('ab:g', 'A');
close_gate();
($b, $bpid) = start_query(
	"SELECT dlock_acquire('ab:g', 'B', '1 hour', '1 hour') + $GATE;");
ok(queued('ab:g', 'B'), 'client gone after the grant: B waits');
release('ab:g', 'A');
ok(within($node, 120, "SELECT holder = 'B' FROM dlock_locks WHERE key = 'ab:g'"),
	'client gone after the grant: the release handed the lease to B');
ok(at_gate($bpid), "client gone after the grant: B's statement goes on (at the gate)");
kill_client($b);
open_gate();
ok(within($node, 120, "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $bpid"),
	"client gone after the grant: B's backend ended after its statement");
is(lease_of('ab:g'), '', 'client gone after the grant: the key is free');
like(acquire('ab:g', 'D'), qr/^\d+$/, 'client gone after the grant: D acquires it');

close_gate();
($b, $bpid) = start_query(
	"SELECT dlock_acquire('ab:s', 'B', '1 hour') + $GATE;");
ok(at_gate($bpid), "client gone after an acquire: B's statement goes on (at the gate)");
kill_client($b);
open_gate();
ok(within($node, 120, "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $bpid"),
	"client gone after an acquire: B's backend ended after its statement");
is(lease_of('ab:s'), '', 'client gone after an acquire: the key is free');

# ---------------------------------------------------------------------
# cancel while the releaser commits the grant
# ---------------------------------------------------------------------
acquire('ab:c', 'A');
($b, $bpid) = start_query("SELECT dlock_acquire('ab:c', 'B', '1 hour', '5 min');");
ok(queued('ab:c', 'B'), 'cancel while committing: B waits');
($c, $cpid) = start_query("SELECT dlock_acquire('ab:c', 'C', '1 hour', '5 min');");
ok(queued('ab:c', 'C'), 'cancel while committing: C waits behind B');
# a release in a transaction that wrote something else, with
# synchronous_commit on, waits for its synchronous standby after its commit
# record: the grant it wrote for B is committing meanwhile
my ($a, $apid) = start_query(
	"WITH w AS (INSERT INTO written VALUES (1) RETURNING n)"
	  . " SELECT dlock_release('ab:c', 'A') FROM w;",
	'SET synchronous_commit = on');
ok( within($node, 120,
		"SELECT wait_event = 'SyncRep' FROM pg_stat_activity WHERE pid = $apid"),
	'cancel while committing: the release waits for its synchronous standby');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($bpid)");
like(result_of($b), qr/^$/, 'cancel while committing: B was cancelled');
ok(within($node, 120, "SELECT count(*) = 1 FROM dlock_waiters WHERE key = 'ab:c'"),
	'cancel while committing: B left the queue');
# a cancel ends the wait for the standby; the commit stands
$node->safe_psql('postgres', "SELECT pg_cancel_backend($apid)");
is(result_of($a), 't', "cancel while committing: the release committed");
$c_token = result_of($c);
like($c_token, qr/^\d+$/, 'cancel while committing: C got the key');
is(lease_of('ab:c'), "C $c_token", 'cancel while committing: C holds ab:c');
end_psql($a);
end_psql($b);
end_psql($c);

# ---------------------------------------------------------------------
# PREPARE TRANSACTION, then ROLLBACK PREPARED
# ---------------------------------------------------------------------
acquire('ab:p', 'A');
$b = $node->background_psql('postgres', on_error_stop => 0);
$b->query_safe('BEGIN');
$b->query_until(qr/started/,
	"\\echo started\nSELECT dlock_acquire('ab:p', 'B', '1 hour', '1 hour');\n");
ok(queued('ab:p', 'B'), 'prepare: B waits in a transaction block');
($c, $cpid) = start_query("SELECT dlock_acquire('ab:p', 'C', '1 hour', '1 hour');");
ok(queued('ab:p', 'C'), 'prepare: C waits behind B');
release('ab:p', 'A');
my $b_own = result_of($b);
like($b_own, qr/^\d+$/, 'prepare: B took the key in its transaction');
$b->query_safe("PREPARE TRANSACTION 'ab_p'");
$node->safe_psql('postgres', "ROLLBACK PREPARED 'ab_p'");
$c_token = result_of($c);
like($c_token, qr/^\d+$/, 'prepare: after ROLLBACK PREPARED, C got the key');
cmp_ok($c_token, '>', $b_own, "prepare: C's token is greater than B's");
is(lease_of('ab:p'), "C $c_token", 'prepare: C holds ab:p');
end_psql($b);
end_psql($c);

is($node->safe_psql('postgres', 'SELECT count(*) FROM dlock_waiters'),
	'0', 'nobody waits any more');

# ---------------------------------------------------------------------
# no background worker can start: an abandoned grant still reads as a
# free key at once, though its row is not freed
# ---------------------------------------------------------------------
$node->append_conf('postgresql.conf',
	"max_worker_processes = 0\nmax_logical_replication_workers = 0");
$node->restart;
$log_offset = -s $node->logfile;
acquire('ab:n', 'A');
($b, $bpid) = start_query("SELECT dlock_acquire('ab:n', 'B', '1 hour', '1 hour') / 0;");
ok(queued('ab:n', 'B'), 'no worker: B waits');
release('ab:n', 'A');
result_of($b);
ok( within($node, 120, "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $bpid AND state <> 'idle'"),
	"no worker: B's statement ended");
is(lease_of('ab:n'), '', 'no worker: the abandoned grant reads as a free key');
my $row = $node->safe_psql('postgres',
	"SELECT holder || ' ' || token FROM dlock.lease WHERE key = 'ab:n'");
like($row, qr/^B \d+$/, 'no worker: its row still names B');
(undef, $b_token) = split / /, $row;
my $d_token = acquire('ab:n', 'D');
like($d_token, qr/^\d+$/, 'no worker: D acquires the key at once');
cmp_ok($d_token, '>', $b_token, "no worker: D's token is greater than B's");
is(lease_of('ab:n'), "D $d_token", 'no worker: D holds ab:n');
ok($node->log_contains('could not start a background worker', $log_offset),
	'no worker: the server says why the row stays');
end_psql($b);

$node->stop;
done_testing();
