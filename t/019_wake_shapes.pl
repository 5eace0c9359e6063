# Copyright: dlock contributors
#
# 019_wake_shapes.pl: every event that frees a key wakes the waiter that
# can take it, in every shape of waiting (issue 36), with the safety wake
# out of the way.
#
# The cluster runs with dlock.safety_wake = 1 hour, and every waiter here
# waits up to an hour: a waiter that is woken gets its token in
# milliseconds; one that is not woken sleeps on, and the test gives up on
# it after $LIMIT seconds and fails (the limit is kept by the test, on the
# client's side: a server-side statement_timeout would wake the waiter,
# which would then find the key free; no duration is asserted: the limit
# only tells a missing wake-up from a slow machine).  Every step waits for
# the state it needs (a waiter in dlock_waiters), never for a time.  Shapes:
#  - release to a waiter in a transaction block (woken, not handed over);
#  - an acquiring transaction that rolls back, the waiter in a block;
#  - release to a waiter in a statement of its own (handed over);
#  - a rolled-back release that handed the lease over: the waiter waits on,
#    and the next release that commits gives it the key;
#  - a hand-over grant abandoned by its waiter (cancelled once the next
#    waiter sleeps at the head of the queue): that waiter gets the key;
#  - semaphores: two slots freed in one transaction go to two waiters; a
#    slot that runs out wakes a waiter while the other slot is held long;
#  - shared leases: a reader queued behind another reader's open
#    transaction gets the key at its commit; a reader queued behind a
#    waiting writer gets the key when the writer gives up (is cancelled, or
#    its wait runs out inside a transaction block that stays open);
#  - dlock_acquire_all: a call waiting for its last key gets them all at
#    its release; a waiter of a key that such a call holds gets it when the
#    call is cancelled inside a savepoint, while the caller's transaction
#    stays open;
#  - 2PC: COMMIT PREPARED of a release, ROLLBACK PREPARED of an acquire;
#  - dlock_release_all of more keys than a transaction notes one by one
#    (1,024): the waiter of one of them gets it.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

# how long a waiter may take before it counts as never woken, in seconds:
# a woken waiter takes milliseconds, a thousand times less even at load 8
# on two cores; one never woken would sleep its hour, but for the backend's
# statistics timer, whose signal wakes it too (as if woken) 10 s after an
# earlier statement of its session, and about a minute after it connected:
# hence no statement before the wait, and a limit well under a minute
my $LIMIT = 30;

my $node = PostgreSQL::Test::Cluster->new('wake_shapes');
$node->init;
$node->append_conf('postgresql.conf',
	    "shared_preload_libraries = 'dlock'\n"
	  . "dlock.safety_wake = '1h'\n"
	  . "max_prepared_transactions = 4\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock');
$node->safe_psql('postgres', 'CREATE TABLE gate (n int); INSERT INTO gate VALUES (0)');

# Poll until SQL returns 't'; dies when it never does (the TAP file's own
# time limit is the real one: this only waits on the state).
sub until_true
{
	my ($sql, $what) = @_;
	for (1 .. 6000)
	{
		return if $node->safe_psql('postgres', $sql) eq 't';
		select(undef, undef, undef, 0.1);
	}
	die "never true: $what";
}

# Start a waiting statement SQL (it returns one value) in a session of its
# own, after the statements SETUP; returns the session and its backend pid.
sub start_wait
{
	my ($sql, $setup) = @_;
	# The waiting statement is the session's first outside a transaction
	# block (SETUP may open one): a statement before it would leave statistics to send, and the
	# backend arms a timer (10 s) to send them while idle, whose signal
	# would later wake the waiter as if the key had been freed.  The pid is
	# found by the session's application_name.
	my $app = 'waiter_' . int(rand(1e9));
	my $bg;
	{
		local $ENV{PGAPPNAME} = $app;
		$bg = $node->background_psql('postgres', on_error_stop => 0, timeout => 3600);
	}
	$bg->query_until(qr/starting wait/,
		"\\echo starting wait\n" . ($setup ? ($setup =~ /;\s*$/ ? $setup : "$setup;") . "\n" : '')
		  . "SELECT coalesce(($sql)::text, 'NULL');\n");
	until_true("SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = '$app'",
		"a backend for $app");
	my $pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = '$app'");
	return { bg => $bg, pid => $pid };
}

# What the waiting statement returned ('' after an error); dies when it has
# not returned within $LIMIT seconds from now (a waiter never woken: the
# timer is the test's, and does not disturb the waiter).
sub result_of
{
	my ($w) = @_;
	$w->{bg}{timeout}->start($LIMIT);
	my $out = eval { $w->{bg}->query_until(qr/wait finished\n/, "\\echo wait finished\n") };
	die "a waiter was not woken: no answer within $LIMIT s" unless defined $out;
	$w->{bg}{timeout}->start(3600);
	$out =~ s/\n?wait finished\n//;
	return $out;
}

sub finish
{
	my ($w, $sql) = @_;
	$w->{bg}->query($sql) if $sql;
	$w->{bg}->quit;
	return;
}

# the holders waiting for key, in queue order
sub waiting
{
	my ($key) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(holder, ',' ORDER BY queue_position), '')"
		  . " FROM dlock_waiters WHERE key = '$key'");
}

sub queued
{
	my ($key, $holders) = @_;
	until_true(
		"SELECT coalesce(string_agg(holder, ',' ORDER BY queue_position), '') = '$holders'"
		  . " FROM dlock_waiters WHERE key = '$key'",
		"waiters $holders on $key");
	return;
}

sub holders_of
{
	my ($key) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(holder, ',' ORDER BY holder), '')"
		  . " FROM dlock_locks WHERE key = '$key'");
}

sub acquire_sql
{
	my ($key, $holder, $fn, $slots) = @_;
	$fn ||= 'dlock_acquire';
	my $s = defined $slots ? ", $slots" : '';
	return "$fn('$key', '$holder', '1 hour', '1 hour'$s)";
}

# an expression that fails (division by zero) once COND has been evaluated
sub fails_after
{
	my ($cond) = @_;
	return "CASE WHEN ($cond) IS NOT NULL THEN 1 / (random() * 0)::int END";
}

my ($w, $w2, $tx0);

# --- a release, the waiter in a transaction block: woken at the commit ---
$node->safe_psql('postgres', "SELECT dlock_acquire('ws:block', 'h', '1 hour')");
$w = start_wait(acquire_sql('ws:block', 'w'), 'BEGIN');
queued('ws:block', 'w');
$node->safe_psql('postgres', "SELECT dlock_release('ws:block', 'h')");
like(result_of($w), qr/^\d+$/, 'release: the waiter in a transaction block got the key');
finish($w, 'COMMIT');
is(holders_of('ws:block'), 'w', 'release: it holds the key');

# --- an acquire rolled back, the waiter in a transaction block ---
$tx0 = $node->background_psql('postgres', timeout => 3600);
$tx0->query_safe("BEGIN; SELECT dlock_acquire('ws:acqrb', 'h', '1 hour')");
$w = start_wait(acquire_sql('ws:acqrb', 'w'), 'BEGIN');
queued('ws:acqrb', 'w');
$tx0->query_safe('ROLLBACK');
$tx0->quit;
like(result_of($w), qr/^\d+$/, 'rollback: the waiter got the key when the acquiring transaction rolled back');
finish($w, 'COMMIT');
is(holders_of('ws:acqrb'), 'w', 'rollback: it holds the key');

# --- a release, the waiter in a statement of its own: handed over ---
$node->safe_psql('postgres', "SELECT dlock_acquire('ws:hand', 'h', '1 hour')");
$w = start_wait(acquire_sql('ws:hand', 'w'));
queued('ws:hand', 'w');
$node->safe_psql('postgres', "SELECT dlock_release('ws:hand', 'h')");
like(result_of($w), qr/^\d+$/, 'hand-over: the waiter got the key');
finish($w);
is(holders_of('ws:hand'), 'w', 'hand-over: it holds the key');

# --- a release that hands the lease over, then rolls back ---
$node->safe_psql('postgres', "SELECT dlock_acquire('ws:rb', 'h', '1 hour')");
$w = start_wait(acquire_sql('ws:rb', 'w'));
queued('ws:rb', 'w');
my ($ret, $out, $err) = $node->psql('postgres',
	'SELECT ' . fails_after("dlock_release('ws:rb', 'h')"));
like($err, qr/division by zero/, 'rolled-back release: the releasing statement failed');
is(holders_of('ws:rb'), 'h', 'rolled-back release: h still holds the key');
is(waiting('ws:rb'), 'w', 'rolled-back release: the waiter still waits');
$node->safe_psql('postgres', "SELECT dlock_release('ws:rb', 'h')");
like(result_of($w), qr/^\d+$/, 'rolled-back release: the next release gave the waiter the key');
finish($w);
is(holders_of('ws:rb'), 'w', 'rolled-back release: it holds the key');

# --- a hand-over grant abandoned by its waiter: the next waiter gets it ---
# w1 is handed the key, then its statement stops at a gate (a row lock the
# test holds) until w2 sleeps at the head of the queue; then w1 is
# cancelled: its transaction rolls back, the grant is abandoned, and only
# that can wake w2 (w1 wrote nothing of its own)
$node->safe_psql('postgres', "SELECT dlock_acquire('ws:ab', 'h', '1 hour')");
my $gate = $node->background_psql('postgres', timeout => 3600);
$gate->query_safe('BEGIN; SELECT n FROM gate FOR UPDATE');
$w = start_wait('CASE WHEN ' . acquire_sql('ws:ab', 'w1')
	  . ' IS NOT NULL THEN (SELECT n FROM gate FOR SHARE) END');
queued('ws:ab', 'w1');
$w2 = start_wait(acquire_sql('ws:ab', 'w2'));
queued('ws:ab', 'w1,w2');
$node->safe_psql('postgres', "SELECT dlock_release('ws:ab', 'h')");
until_true("SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $w->{pid} AND wait_event_type = 'Lock'",
	'w1 at the gate');
queued('ws:ab', 'w2');
until_true("SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $w2->{pid} AND wait_event_type = 'Extension'",
	'w2 asleep');
is(holders_of('ws:ab'), 'w1', 'abandoned: the release handed the key to w1');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($w->{pid})");
is(result_of($w), '', 'abandoned: w1 was cancelled after it was handed the key');
finish($w);
like(result_of($w2), qr/^\d+$/, 'abandoned: the waiter behind it got the key');
finish($w2);
$gate->query_safe('COMMIT');
$gate->quit;
is(holders_of('ws:ab'), 'w2', 'abandoned: the second waiter holds the key');

# --- a semaphore: two slots freed in one transaction, two waiters ---
$node->safe_psql('postgres',
	"SELECT dlock_acquire('ws:sem', 'a', '1 hour', '0', 2), dlock_acquire('ws:sem', 'b', '1 hour', '0', 2)");
$w = start_wait(acquire_sql('ws:sem', 'w1', 'dlock_acquire', 2));
queued('ws:sem', 'w1');
$w2 = start_wait(acquire_sql('ws:sem', 'w2', 'dlock_acquire', 2));
queued('ws:sem', 'w1,w2');
$node->safe_psql('postgres',
	"BEGIN; SELECT dlock_release('ws:sem', 'a'); SELECT dlock_release('ws:sem', 'b'); COMMIT");
like(result_of($w), qr/^\d+$/, 'semaphore: the first waiter got a freed slot');
like(result_of($w2), qr/^\d+$/, 'semaphore: the second waiter got the other');
finish($w);
finish($w2);
is(holders_of('ws:sem'), 'w1,w2', 'semaphore: the two waiters hold the slots');

# --- a semaphore: a slot that runs out, the other held for an hour ---
# (if the short slot runs out before the waiter queues, the waiter takes
# it at once: the test passes, but proves less; 10 s is ample for a start)
$node->safe_psql('postgres',
	"SELECT dlock_acquire('ws:semx', 'long', '1 hour', '0', 2), dlock_acquire('ws:semx', 'short', '10 s', '0', 2)");
$w = start_wait(acquire_sql('ws:semx', 'w', 'dlock_acquire', 2));
like(result_of($w), qr/^\d+$/, 'semaphore expiry: the waiter got the slot that ran out');
finish($w);
is(holders_of('ws:semx'), 'long,w', 'semaphore expiry: it holds that slot');

# --- shared leases: a reader beside another reader's open transaction
# takes its place at once: an open acquire keeps the key only while it
# decides (issue 35), so there is no wake-up to wait for ---
my $tx = $node->background_psql('postgres', timeout => 3600);
$tx->query_safe("BEGIN; SELECT dlock_acquire_shared('ws:sh', 'r1', '1 hour')");
like(
	$node->safe_psql('postgres',
		"SELECT dlock_acquire_shared('ws:sh', 'r2', '1 hour', '0')"),
	qr/^\d+$/,
	"shared: the reader got the key at once while the other reader's transaction is open");
$tx->query_safe('COMMIT');
is(holders_of('ws:sh'), 'r1,r2', 'shared: both readers hold it');

# --- shared leases: a reader behind a writer's grant whose transaction
# rolls back (the grant never was: the rollback must wake the reader) ---
$tx->query_safe("BEGIN; SELECT dlock_acquire('ws:shr', 'writer', '1 hour')");
$w = start_wait(acquire_sql('ws:shr', 'r2', 'dlock_acquire_shared'));
queued('ws:shr', 'r2');
$tx->query_safe('ROLLBACK');
like(result_of($w), qr/^\d+$/, "shared: the reader got the key at the writer's rollback");
finish($w);
is(holders_of('ws:shr'), 'r2', 'shared: the reader holds it');

# --- shared leases: a reader behind a writer that gives up ---
$node->safe_psql('postgres', "SELECT dlock_acquire_shared('ws:shw', 'r1', '1 hour')");
$w = start_wait(acquire_sql('ws:shw', 'writer'));
queued('ws:shw', 'writer');
$w2 = start_wait(acquire_sql('ws:shw', 'r2', 'dlock_acquire_shared'));
queued('ws:shw', 'writer,r2');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($w->{pid})");
is(result_of($w), '', 'shared: the waiting writer was cancelled');
finish($w);
like(result_of($w2), qr/^\d+$/, 'shared: the reader behind it got the key');
finish($w2);
is(holders_of('ws:shw'), 'r1,r2', 'shared: both readers hold it');

# --- shared leases: a reader behind a writer whose wait runs out in an open
# transaction block (no transaction end wakes anyone: the writer leaving the
# queue must wake the reader).  The writer's short wait must still run
# while the reader queues behind it: a machine too slow for that gets the
# case again with a longer wait ---
$node->safe_psql('postgres', "SELECT dlock_acquire_shared('ws:sht', 'r1', '1 hour')");
my $seen = 0;
for my $secs (2, 8, 32, 128)
{
	$w = start_wait("dlock_acquire('ws:sht', 'writer', '1 hour', '$secs s')", 'BEGIN');
	until_true(
		"SELECT EXISTS (SELECT FROM dlock_waiters WHERE key = 'ws:sht' AND holder = 'writer')"
		  . " OR EXISTS (SELECT FROM pg_stat_activity WHERE pid = $w->{pid} AND state <> 'active'"
		  . " AND query LIKE '%dlock_acquire(%')",
		'the writer queued or ended');
	$w2 = start_wait(acquire_sql('ws:sht', 'r2', 'dlock_acquire_shared'));
	until_true(
		"SELECT EXISTS (SELECT FROM dlock_waiters WHERE key = 'ws:sht' AND holder = 'r2')"
		  . " OR EXISTS (SELECT FROM pg_stat_activity WHERE pid = $w2->{pid} AND state <> 'active'"
		  . " AND query LIKE '%dlock_acquire_shared(%')",
		'the reader queued or ended');
	$seen = waiting('ws:sht') eq 'writer,r2';
	last if $seen;
	note("the writer's wait of $secs s ran out before the reader queued: again with a longer one");
	result_of($w);
	finish($w, 'ROLLBACK');
	result_of($w2);
	finish($w2);
	$node->safe_psql('postgres', "SELECT dlock_release('ws:sht', 'r2')");
}
ok($seen, 'shared: a reader queued behind a writer whose wait runs out');
is(result_of($w), 'NULL', "shared: the writer's wait ran out");
like(result_of($w2), qr/^\d+$/,
	"shared: the reader behind it got the key, the writer's transaction still open");
finish($w2);
finish($w, 'COMMIT');
is(holders_of('ws:sht'), 'r1,r2', 'shared: both readers hold it');

# --- dlock_acquire_all waiting for its last key ---
$node->safe_psql('postgres', "SELECT dlock_acquire('wm:b', 'h', '1 hour')");
$w = start_wait("dlock_acquire_all(ARRAY['wm:a', 'wm:b'], 'x', '1 hour', '1 hour')");
queued('wm:b', 'x');
$node->safe_psql('postgres', "SELECT dlock_release('wm:b', 'h')");
like(result_of($w), qr/^\{\d+,\d+\}$/, 'several keys: the call got both keys at the release');
finish($w);
is(holders_of('wm:a') . ' ' . holders_of('wm:b'), 'x x', 'several keys: it holds both');

# --- dlock_acquire_all cancelled inside a savepoint: its keys' waiters ---
$node->safe_psql('postgres', "SELECT dlock_acquire('wm2:b', 'h', '1 hour')");
$w = start_wait("dlock_acquire_all(ARRAY['wm2:a', 'wm2:b'], 'x', '1 hour', '1 hour')",
	'BEGIN; SAVEPOINT s;');
queued('wm2:b', 'x');
$w2 = start_wait(acquire_sql('wm2:a', 'y'));
queued('wm2:a', 'y');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($w->{pid})");
is(result_of($w), '', 'several keys: the call was cancelled');
like(result_of($w2), qr/^\d+$/,
	"several keys: the waiter of a key the call had got it, the call's transaction still open");
finish($w2);
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE pid = $w->{pid} AND state = 'idle in transaction (aborted)'"),
	'1', "several keys: (the call's transaction was still open)");
finish($w, 'ROLLBACK');
is(holders_of('wm2:a'), 'y', 'several keys: the waiter holds the key');

# --- 2PC: COMMIT PREPARED of a release ---
$node->safe_psql('postgres', "SELECT dlock_acquire('ws:2pc', 'h', '1 hour')");
$w = start_wait(acquire_sql('ws:2pc', 'w'));
queued('ws:2pc', 'w');
$node->safe_psql('postgres',
	"BEGIN; SELECT dlock_release('ws:2pc', 'h'); PREPARE TRANSACTION 'ws_rel'");
is(waiting('ws:2pc'), 'w', '2pc: the waiter waits while the release is prepared');
$node->safe_psql('postgres', "COMMIT PREPARED 'ws_rel'");
like(result_of($w), qr/^\d+$/, '2pc: COMMIT PREPARED of the release gave the waiter the key');
finish($w);
is(holders_of('ws:2pc'), 'w', '2pc: it holds the key');

# --- 2PC: ROLLBACK PREPARED of an acquire ---
$node->safe_psql('postgres',
	"BEGIN; SELECT dlock_acquire('ws:2pcr', 'h', '1 hour'); PREPARE TRANSACTION 'ws_acq'");
$w = start_wait(acquire_sql('ws:2pcr', 'w'));
queued('ws:2pcr', 'w');
$node->safe_psql('postgres', "ROLLBACK PREPARED 'ws_acq'");
like(result_of($w), qr/^\d+$/, '2pc: ROLLBACK PREPARED of the acquire gave the waiter the key');
finish($w);
is(holders_of('ws:2pcr'), 'w', '2pc: it holds the key');

# --- dlock_release_all of more keys than are noted one by one ---
# (the waiter waits for the last key in key order, wb:999: past the first
# 1,024 keys, which are noted one by one)
is($node->safe_psql('postgres',
		"SELECT count(dlock_acquire('wb:' || g, 'bulk', '1 hour')) FROM generate_series(1, 1100) g"),
	'1100', 'many keys: bulk holds 1,100 keys');
$w = start_wait(acquire_sql('wb:999', 'w'), 'BEGIN');
queued('wb:999', 'w');
is($node->safe_psql('postgres', "SELECT dlock_release_all('bulk')"),
	'1100', 'many keys: dlock_release_all freed them');
like(result_of($w), qr/^\d+$/, 'many keys: the waiter of one of them got it');
finish($w, 'COMMIT');
is(holders_of('wb:999'), 'w', 'many keys: it holds the key');

is($node->safe_psql('postgres', 'SELECT count(*) FROM dlock_waiters'),
	'0', 'nobody is left waiting');

$node->stop;
done_testing();
