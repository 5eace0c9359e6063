# Copyright: dlock contributors
#
# 010_wait.pl: the queue of waiters heals when a waiting backend dies, and
# waits work without shared_preload_libraries.
#
# With dlock in shared_preload_libraries:
#  - a waiting backend ended by pg_terminate_backend (FATAL) leaves the
#    queue: the waiter behind it moves up to position 1, and once both are
#    gone dlock_waiters is empty; a new waiter then gets position 1 and the
#    key as soon as it is released; the killed waiters hold no lease;
#  - a waiting backend killed with SIGKILL makes the postmaster reset shared
#    memory and restart: afterwards dlock_waiters is empty, the leases are
#    exactly the committed ones (same holders and tokens), and acquiring,
#    waiting and releasing work, with tokens greater than before.
# Without it:
#  - CREATE EXTENSION works; dlock_waiters and dlock_stats() are empty;
#  - a wait (which polls every dlock.poll_interval ms) gets the key once it
#    is released, and ends with the usual error on statement_timeout.
#
# With dlock preloaded the cluster runs with dlock.safety_wake = 1 hour;
# every waiter that must get the key waits up to an hour, and the test gives
# up on it 30 s after the release: one that is not woken fails instead
# of being rescued by the safety wake.  No duration is
# asserted, and every step waits for the state it needs (issue 36).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

# Start "SELECT dlock_acquire(key, holder, ttl, wait)" in a new background
# psql and return (session, backend pid) without waiting for the result.
# The session prints "token|got_at" when the acquire returns.
sub start_wait
{
	my ($node, $key, $holder, $ttl, $wait) = @_;
	# The waiting statement is the session's first outside a transaction
	# block: a statement before it would leave statistics to send, and the
	# backend arms a timer (10 s) to send them while idle, whose signal
	# would later wake the waiter as if the key had been freed.  The pid is
	# found by the session's application_name.
	my $app = 'waiter_' . $key . '_' . $holder . '_' . int(rand(1e9));
	my $bg;
	{
		local $ENV{PGAPPNAME} = $app;
		$bg = $node->background_psql('postgres', on_error_stop => 0, timeout => 3600);
	}
	$bg->query_until(qr/starting wait/,
		    "\\echo starting wait\n"
		  . "SELECT dlock_acquire('$key', '$holder', '$ttl', '$wait'),"
		  . " clock_timestamp();\n");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = '$app'")
	  or die "no backend for $app";
	my $pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = '$app'");
	return ($bg, $pid);
}

# Wait for the result of a start_wait session: returns "token|got_at".
sub wait_result
{
	my ($bg, $limit) = @_;
	# 30 s from now (or LIMIT seconds), on the test's side (a
	# statement_timeout would wake the waiter, which would then find the key
	# free)
	$limit //= 30;
	$bg->{timeout}->start($limit);
	my $out = eval { $bg->query_until(qr/wait finished\n/, "\\echo wait finished\n") };
	die "a waiter was not woken: no answer within $limit s" unless defined $out;
	$out =~ s/\nwait finished\n//;
	return $out;
}

# End a background psql whose backend may be gone already.
sub end_psql
{
	my ($bg) = @_;
	eval {
		$bg->{run}->pump_nb();
		if ($bg->{run}->pumpable())
		{
			$bg->quit;
		}
		else
		{
			$bg->{run}->finish;
		}
	};
	return;
}

# Wait until the first waiter for key has slept for 300 ms, so that the
# release that follows finds it asleep (with dlock.safety_wake = 1 hour,
# only the wake-up on release can end that sleep).
sub settle
{
	my ($node, $key) = @_;
	$node->poll_query_until('postgres',
		"SELECT min(waiting_since) < clock_timestamp() - interval '300 ms'"
		  . " FROM dlock_waiters WHERE key = '$key'")
	  or die "nobody waits for $key";
	return;
}

sub waiters
{
	my ($node, $key) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(holder || ':' || queue_position, ',' ORDER BY queue_position)"
		  . " FROM dlock_waiters WHERE key = '$key'");
}

# ---------------------------------------------------------------------
# With dlock in shared_preload_libraries
# ---------------------------------------------------------------------
my $node = PostgreSQL::Test::Cluster->new('wait_preload');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'dlock'\nrestart_after_crash = on\n"
	  . "dlock.safety_wake = '1h'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock');

my $tok_h = $node->safe_psql('postgres',
	"SELECT dlock_acquire('tw:k', 'holder', '1 hour')");
like($tok_h, qr/^\d+$/, 'holder got tw:k');

# two waiters, then pg_terminate_backend of the head, then of the other
my ($w1, $pid1) = start_wait($node, 'tw:k', 'w1', '1 hour', '1 hour');
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM dlock_waiters WHERE key = 'tw:k'")
  or die 'w1 never queued';
my ($w2, $pid2) = start_wait($node, 'tw:k', 'w2', '1 hour', '1 hour');
$node->poll_query_until('postgres',
	"SELECT count(*) = 2 FROM dlock_waiters WHERE key = 'tw:k'")
  or die 'w2 never queued';
is(waiters($node, 'tw:k'), 'w1:1,w2:2', 'w1 and w2 queue in arrival order');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(pid::text, ',' ORDER BY queue_position)"
		  . " FROM dlock_waiters WHERE key = 'tw:k'"),
	"$pid1,$pid2",
	'dlock_waiters shows the waiting backends');

$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid1)");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid1"),
	'terminated waiter w1 is gone');
is(waiters($node, 'tw:k'), 'w2:1',
	'after the head was terminated, w2 is first in line');
end_psql($w1);

$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid2)");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid2"),
	'terminated waiter w2 is gone');
end_psql($w2);
is($node->safe_psql('postgres', 'SELECT count(*) FROM dlock_waiters'),
	'0', 'dlock_waiters is empty after both waiters were terminated');
is( $node->safe_psql(
		'postgres', "SELECT holder || ':' || token FROM dlock_locks WHERE key = 'tw:k'"),
	"holder:$tok_h",
	'the terminated waiters left no lease: holder still has its token');

# a new waiter is first in line and gets the key at once on release
my ($w3, $pid3) = start_wait($node, 'tw:k', 'w3', '1 hour', '1 hour');
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM dlock_waiters WHERE key = 'tw:k'")
  or die 'w3 never queued';
is(waiters($node, 'tw:k'), 'w3:1', 'a new waiter gets position 1');
settle($node, 'tw:k');
my $rel_at = $node->safe_psql('postgres',
	"SELECT clock_timestamp(); SELECT dlock_release('tw:k', 'holder')");
my ($rel_ts, $released) = split /\n/, $rel_at;
is($released, 't', 'holder released tw:k');
my ($tok3, $got3) = split /\|/, wait_result($w3);
end_psql($w3);
ok($tok3 > $tok_h, 'w3 got tw:k with a greater token');
is( $node->safe_psql(
		'postgres', "SELECT holder FROM dlock_locks WHERE key = 'tw:k'"),
	'w3', 'w3 holds tw:k');

# the head of a queue times out with another waiter behind it: the other
# moves up, and gets the key at once on release (not at its next safety wake)
my $tok_to = $node->safe_psql('postgres',
	"SELECT dlock_acquire('tw:to', 'holder', '1 hour')");
# w4's short wait must still run while w5 queues behind it: a machine too
# slow for that gets the whole case again, with a longer wait for w4
my ($w4, $pid4, $w5, $pid5, $w4_secs);
for my $secs (2, 8, 32, 128)
{
	($w4, $pid4) = start_wait($node, 'tw:to', 'w4', '1 hour', "$secs s");
	$node->poll_query_until('postgres',
		"SELECT EXISTS (SELECT FROM dlock_waiters WHERE key = 'tw:to' AND holder = 'w4')"
		  . " OR EXISTS (SELECT FROM pg_stat_activity WHERE pid = $pid4 AND state = 'idle')")
	  or die 'w4 never queued nor ended';
	($w5, $pid5) = start_wait($node, 'tw:to', 'w5', '1 hour', '1 hour');
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM dlock_waiters WHERE key = 'tw:to' AND holder = 'w5'")
	  or die 'w5 never queued';
	$w4_secs = $secs;
	last if waiters($node, 'tw:to') eq 'w4:1,w5:2';
	note("w4's wait of $secs s ran out before w5 queued: again with a longer one");
	wait_result($w4, $secs + 30);
	end_psql($w4);
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid5)");
	wait_result($w5);
	end_psql($w5);
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM dlock_waiters WHERE key = 'tw:to'")
	  or die 'w5 never left';
}
my ($tok4) = split /\|/, wait_result($w4, $w4_secs + 30);
end_psql($w4);
is($tok4, '', 'the head w4 timed out with nothing (NULL)');
is(waiters($node, 'tw:to'), 'w5:1', 'after the head timed out, w5 is first in line');
settle($node, 'tw:to');
$rel_at = $node->safe_psql('postgres',
	"SELECT clock_timestamp(); SELECT dlock_release('tw:to', 'holder')");
($rel_ts, $released) = split /\n/, $rel_at;
my ($tok5, $got5) = split /\|/, wait_result($w5);
end_psql($w5);
ok($tok5 > $tok_to, 'w5 got tw:to after the holder released it');
$node->safe_psql('postgres', "SELECT dlock_release('tw:to', 'w5')");

# ---------------------------------------------------------------------
# SIGKILL of a waiting backend: crash and restart
# ---------------------------------------------------------------------
$node->safe_psql('postgres',
	"SELECT dlock_acquire('tc:' || i, 'holder-' || i, '1 hour') FROM generate_series(1, 3) i"
);
# a lease released in a transaction block (durable) and one that expired
$node->safe_psql('postgres',
	"BEGIN; SELECT dlock_release('tc:3', 'holder-3'); COMMIT;");
$node->safe_psql('postgres', "SELECT dlock_acquire('tc:short', 'h', '1 ms')");
my $leases_sql =
  "SELECT key || ':' || holder || ':' || token FROM dlock_locks ORDER BY key";
my $before = $node->safe_psql('postgres', $leases_sql);
my $max_before = $node->safe_psql('postgres',
	'SELECT max(token) FROM dlock.lease');
my @before_rows = split /\n/, $before;
is(scalar(@before_rows), 3, 'three leases before the crash (tc:1, tc:2, tw:k)');

my ($wk, $pidk) = start_wait($node, 'tc:1', 'doomed', '1 hour', '1 hour');
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM dlock_waiters WHERE key = 'tc:1'")
  or die 'doomed waiter never queued';
my $log_offset = -s $node->logfile;
kill 'KILL', $pidk or die "could not SIGKILL $pidk: $!";
end_psql($wk);

$node->wait_for_log(qr/all server processes terminated; reinitializing/,
	$log_offset);
ok( $node->poll_query_until('postgres', 'SELECT 1', '1'),
	'server is back after the crash of a waiting backend');
is($node->safe_psql('postgres', 'SELECT count(*) FROM dlock_waiters'),
	'0', 'dlock_waiters is empty after the restart');
is($node->safe_psql('postgres', $leases_sql),
	$before, 'leases after the restart are the committed ones');
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM dlock.lease WHERE holder = 'doomed'"),
	'0', 'the killed waiter holds nothing');

my ($w_after, $pid_after) = start_wait($node, 'tc:1', 'w4', '1 hour', '1 hour');
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM dlock_waiters WHERE key = 'tc:1'")
  or die 'w4 never queued';
is(waiters($node, 'tc:1'), 'w4:1', 'after the restart a new waiter gets position 1');
settle($node, 'tc:1');
my ($rel_after, $released_after) = split /\n/,
  $node->safe_psql('postgres',
	"SELECT clock_timestamp(); SELECT dlock_release('tc:1', 'holder-1')");
is($released_after, 't', 'holder-1 releases tc:1');
my ($tok_after, $got_after) = split /\|/, wait_result($w_after);
end_psql($w_after);
ok($tok_after > $max_before, 'the waiter got tc:1 with a token greater than any before the crash');
my $tok_new = $node->safe_psql('postgres',
	"SELECT dlock_acquire('tc:3', 'new', '1 hour')");
ok($tok_new > $tok_after, 'a plain acquire after the restart works, with a greater token');

$node->stop;

# ---------------------------------------------------------------------
# Without shared_preload_libraries
# ---------------------------------------------------------------------
my $plain = PostgreSQL::Test::Cluster->new('wait_plain');
$plain->init;
$plain->start;
is($plain->safe_psql('postgres',
		"SELECT count(*) FROM pg_settings WHERE name = 'shared_preload_libraries' AND setting LIKE '%dlock%'"),
	'0', 'dlock is not preloaded');
$plain->safe_psql('postgres', 'CREATE EXTENSION dlock');
pass('CREATE EXTENSION dlock works without shared_preload_libraries');

my $tok_p = $plain->safe_psql('postgres',
	"SELECT dlock_acquire('tp:k', 'holder', '1 hour')");
my ($wp, $pidp) = start_wait($plain, 'tp:k', 'wp', '1 hour', '1 hour');
ok( $plain->poll_query_until(
		'postgres',
		"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $pidp"),
	'the waiter sleeps in dlock_acquire');
is($plain->safe_psql('postgres', 'SELECT count(*) FROM dlock_waiters'),
	'0', 'dlock_waiters is empty without shared_preload_libraries');
is($plain->safe_psql('postgres', 'SELECT count(*) FROM dlock_stats()'),
	'0', 'dlock_stats() has no row without shared_preload_libraries');
my ($rel_p, $released_p) = split /\n/,
  $plain->safe_psql('postgres',
	"SELECT clock_timestamp(); SELECT dlock_release('tp:k', 'holder')");
is($released_p, 't', 'holder released tp:k');
my ($tok_wp, $got_wp) = split /\|/, wait_result($wp);
end_psql($wp);
ok($tok_wp > $tok_p, 'the polling waiter got tp:k with a greater token');

my ($ret, $stdout, $stderr) = $plain->psql('postgres',
	"SET statement_timeout = '200ms'; SELECT dlock_acquire('tp:k', 'late', '1 hour', '1 min')"
);
like($stderr, qr/canceling statement due to statement timeout/,
	'a polling wait ends on statement_timeout');
is($plain->safe_psql('postgres', "SELECT holder FROM dlock_locks WHERE key = 'tp:k'"),
	'wp', 'the timed-out waiter took nothing');

# claims work without shared memory too (without step hints over held rows)
$plain->safe_psql('postgres',
	'CREATE TABLE pj (id int PRIMARY KEY, done boolean NOT NULL DEFAULT false);'
	  . ' INSERT INTO pj (id) SELECT g FROM generate_series(1, 3000) g');
is($plain->safe_psql('postgres',
		"SELECT count(*) FROM dlock_claim(NULL::pj, 'a', 1000, '1 hour');"
	  . " SELECT count(*) FROM dlock_claim(NULL::pj, 'a', 1000, '1 hour')"),
	"1000\n1000", 'without preloading: a claims 2,000 rows');
is($plain->safe_psql('postgres',
		"SELECT string_agg(id::text, ',' ORDER BY id) FROM dlock_claim(NULL::pj, 'b', 2, '1 hour');"
	  . " SELECT string_agg(id::text, ',' ORDER BY id) FROM dlock_claim(NULL::pj, 'b', 2, '1 hour')"),
	"2001,2002\n2003,2004", 'without preloading: b gets the rows after the held ones');
is($plain->safe_psql('postgres',
		"SELECT dlock_unclaim('pj', 'a', ARRAY[5]);"
	  . " SELECT string_agg(id::text, ',') FROM dlock_claim(NULL::pj, 'c', 1, '1 hour')"),
	"1\n5", 'without preloading: a row given back is claimed again at once');
is($plain->safe_psql('postgres',
		"WITH u AS (UPDATE pj SET done = true FROM dlock_complete('pj', 'b', ARRAY[2001, 2002]) AS d(id)"
	  . " WHERE pj.id = d.id RETURNING pj.id) SELECT count(*) FROM u;"
	  . " SELECT dlock_renew_claims('pj', 'b');"
	  . " SELECT dlock_release_all('a')"),
	"2\n2\n1999", 'without preloading: complete, renew and release_all');
is($plain->safe_psql('postgres', 'SELECT count(*) FROM dlock_stats()'),
	'0', 'dlock_stats() still has no row');

$plain->stop;

done_testing();
