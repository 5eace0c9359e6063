# Copyright: dlock contributors
#
# 095_watch.pl: watching keys and leader election (issue 26), with real
# sessions: the watchers are `dlock watch KEY --json` processes (so the
# command line is tested too), the changes are made by psql sessions.
#
#  - a notification for every grant (acquire, hand-over to a waiter,
#    takeover of an expired lease), release (dlock_release,
#    dlock_release_all, dlock_force_release) and expiry, in commit order,
#    each at its commit and never for a change rolled back (a transaction or
#    a savepoint); renewals change nothing and send nothing; a prepared
#    transaction with a watched key can be prepared and committed;
#  - an expiry is noticed with no client calling anything (the worker), is
#    sent once per watcher and token (not again by the takeover), and never
#    for a lease renewed in time;
#  - a watcher whose role may not see a lease gets nothing about it (not
#    even from `dlock watch`'s first line); a member of the owner and a
#    member of pg_read_all_stats get it all;
#  - a watcher that joins while a change of its key commits misses nothing:
#    dlock_watch waits for that commit (held up here by a synchronous
#    standby that never comes), and the key's leader is then visible;
#  - the worker runs while anyone watches in its database, leaves when
#    nobody does, comes back after pg_terminate_backend, and after a crash
#    the watches are gone and a new watch works (and gets its expiry);
#  - without shared_preload_libraries dlock_watch fails with 55000.
#
# The cluster runs with dlock.safety_wake = 1 hour: the worker must be
# woken by what happens, not by its timer.  No test asserts a time.

use strict;
use warnings;

use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use FindBin;
use lib $FindBin::RealBin;
use DlockWatch;   # watch_start, events, quiet_for, watch_stop, watch_forget, watch_stop_all

my $node = PostgreSQL::Test::Cluster->new('watch');
$node->init(allows_streaming => 1);	# max_wal_senders > 0: synchronous commit (below)
$node->append_conf('postgresql.conf',
	    "shared_preload_libraries = 'dlock'\n"
	  . "dlock.safety_wake = '1h'\n"
	  . "max_prepared_transactions = 4\n"
	  . "restart_after_crash = on\n");
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION dlock;
	CREATE ROLE regress_watch_a LOGIN;
	CREATE ROLE regress_watch_b LOGIN;
	CREATE ROLE regress_watch_amember LOGIN IN ROLE regress_watch_a;
	CREATE ROLE regress_watch_mon LOGIN IN ROLE pg_read_all_stats;
});

# an event in short: "event/cause/holder"
sub brief
{
	my ($e) = @_;
	return join('/', $e->{event}, $e->{cause} // '-', $e->{holder} // '-');
}

sub briefs { return [ map { brief($_) } events(@_) ]; }

sub sql
{
	my ($query, $user) = @_;
	return $node->safe_psql('postgres', $query,
		$user ? (extra_params => [ '-U', $user ]) : ());
}

# wait until the database has n watch workers
sub workers_are
{
	my ($n) = @_;
	return $node->poll_query_until('postgres',
		"SELECT count(*) = $n FROM pg_stat_activity"
		  . " WHERE backend_type = 'dlock watch worker'");
}

# ---- every kind of change, at commit, never rolled back ----
{
	my $w = watch_start($node, 'w:tx');
	is($w->{current}{event}, 'current', 'dlock watch prints the current lease first');
	is($w->{current}{holder}, undef, 'the key is free');
	ok(workers_are(1), 'the database has a watch worker while a session watches');

	my $t1 = sql("SELECT dlock_acquire('w:tx', 'h1', '1 hour')");
	sql("BEGIN; SELECT dlock_release('w:tx', 'h1'); ROLLBACK;");
	sql("BEGIN; SAVEPOINT s; SELECT dlock_release('w:tx', 'h1'); ROLLBACK TO s;"
		  . " SELECT dlock_renew('w:tx', 'h1', '2 hours'); COMMIT;");
	sql("SELECT dlock_acquire('w:tx', 'h1', '3 hours')");    # a re-acquire: no change
	my $t2 = sql("BEGIN; SELECT dlock_release('w:tx', 'h1');"
		  . " SELECT dlock_acquire('w:tx', 'h2', '1 hour'); COMMIT;");
	sql("BEGIN; SELECT dlock_release('w:tx', 'h2'); PREPARE TRANSACTION 'w_tx';");
	sql("COMMIT PREPARED 'w_tx'");
	sql("SELECT dlock_acquire('w:tx', 'h3', '1 hour'); SELECT dlock_release_all('h3')");
	sql("SELECT dlock_acquire('w:tx', 'h4', '1 hour'); SELECT dlock_force_release('w:tx')");
	is_deeply(
		briefs($w, 7, 'the changes of w:tx'),
		[
			'granted/acquire/h1', 'released/-/h1',
			'granted/acquire/h2', 'granted/acquire/h3',
			'released/-/h3', 'granted/acquire/h4',
			'released/-/h4'
		],
		'grants and releases come in commit order; rolled back changes, renewals, '
		  . 're-acquires and the prepared transaction send nothing');

	# a change in a transaction block reaches the watcher at its commit
	my $tx = $node->background_psql('postgres');
	$tx->query_safe("BEGIN; SELECT dlock_acquire('w:tx', 'h5', '1 hour')");
	ok(quiet_for($w, 1), 'nothing is sent before the commit');
	$tx->query_safe('COMMIT');
	$tx->quit;
	my ($e) = events($w, 1, 'a grant committed later');
	is(brief($e), 'granted/acquire/h5', 'a grant is sent when its transaction commits');
	my $t5 = sql("SELECT token FROM dlock_locks WHERE key = 'w:tx'");
	is($e->{token}, $t5, 'with the token of the grant');
	is($e->{key}, 'w:tx', 'and the key');
	like($e->{expires_at}, qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00$/,
		'and its expiry, in UTC');
	sql("SELECT dlock_release('w:tx', 'h5')");
	is(brief((events($w, 1, 'the last release'))[0]), 'released/-/h5', 'then its release');
	watch_stop($w);
}

# ---- a hand-over to a waiter ----
{
	my $w = watch_start($node, 'w:ho');
	sql("SELECT dlock_acquire('w:ho', 'holder', '1 hour')");
	my $waiter = $node->background_psql('postgres');
	$waiter->query_until(qr/waiting/,
		"\\echo waiting\nSELECT 'token=' || dlock_acquire('w:ho', 'waiter', '1 hour', '10 min');\n");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM dlock_waiters WHERE key = 'w:ho'")
	  or die 'the waiter never waited';
	sql("SELECT dlock_release('w:ho', 'holder')");
	my $out = $waiter->query_safe("SELECT 'done'");
	$waiter->quit;
	my @e = events($w, 3, 'the hand-over');
	is_deeply([ map { brief($_) } @e ],
		[ 'granted/acquire/holder', 'released/-/holder', 'granted/handover/waiter' ],
		'a hand-over is a release and a grant to the waiter');
	my ($wtoken) = $out =~ /token=(\d+)/;
	is($e[2]{token}, $wtoken, 'with the token the waiter got');
	sql("SELECT dlock_release('w:ho', 'waiter')");
	watch_stop($w);
}

# ---- expiry: noticed by nobody calling anything, sent once, not when renewed ----
{
	my $w = watch_start($node, 'w:exp');
	my $token = sql("SELECT dlock_acquire('w:exp', 'sleepy', '2 s')");
	my @e = events($w, 2, 'the grant and its expiry');
	is_deeply([ map { brief($_) } @e ], [ 'granted/acquire/sleepy', 'expired/-/sleepy' ],
		'a lease that runs out is notified with no client call');
	is($e[1]{token}, $token, 'the expiry names the token that ran out');
	ok($e[1]{at} ge $e[1]{expires_at}, 'and comes after the lease ran out')
	  or diag("at $e[1]{at}, expires_at $e[1]{expires_at}");

	# the takeover does not send that expiry again
	sql("SELECT dlock_acquire('w:exp', 'taker', '1 hour')");
	is_deeply(briefs($w, 1, 'the takeover'), ['granted/takeover/taker'],
		'the takeover is a grant; the expiry is not sent twice');
	sql("SELECT dlock_release('w:exp', 'taker')");
	is_deeply(briefs($w, 1, 'the release'), ['released/-/taker'], 'then the release');

	# a lease renewed in time never expires (renewed every second for twice
	# its ttl; a renewal more than 4 s late skips the check)
	sql("SELECT dlock_acquire('w:exp', 'busy', '5 s')");
	my $renewed = 1;
	for (1 .. 10)
	{
		usleep(1_000_000);
		$renewed &&= sql("SELECT dlock_renew('w:exp', 'busy', '5 s')") eq 't';
	}
	sql("SELECT dlock_release('w:exp', 'busy')");
  SKIP:
	{
		skip 'a renewal came too late on this loaded machine', 1 unless $renewed;
		is_deeply(briefs($w, 2, 'a renewed lease'), [ 'granted/acquire/busy', 'released/-/busy' ],
			'no expiry for a lease renewed in time');
	}

	# a takeover before the worker noticed sends the expiry itself, once
	# (the watcher starts first, so that it is there for the expiry however
	# slow the machine; the takeover comes once the lease has run out)
	my $w2 = watch_start($node, 'w:exp2');
	sql("SELECT dlock_acquire('w:exp2', 'gone', '1 s')");
	$node->poll_query_until('postgres',
		"SELECT NOT EXISTS (SELECT FROM dlock.lease WHERE key = 'w:exp2'"
		  . " AND expires_at >= clock_timestamp())")
	  or die 'the lease of gone never ran out';
	sql("SELECT dlock_acquire('w:exp2', 'next', '1 hour')");
	sql("SELECT dlock_release('w:exp2', 'next')");
	my @e2 = events($w2, 4, 'an expiry and a takeover');
	is_deeply([ map { brief($_) } @e2 ],
		[ 'granted/acquire/gone', 'expired/-/gone', 'granted/takeover/next', 'released/-/next' ],
		'an expiry comes once, from the worker or from the takeover, before the takeover');
	watch_stop($w2);
	watch_stop($w);
}

# ---- who may see what ----
{
	sql("SELECT dlock_acquire('w:roles', 'a0', '1 hour')", 'regress_watch_a');
	my $wb = watch_start($node, 'w:roles', 'regress_watch_b');
	my $wm = watch_start($node, 'w:roles', 'regress_watch_amember');
	my $wmon = watch_start($node, 'w:roles', 'regress_watch_mon');
	is($wb->{current}{holder}, undef, "dlock watch does not show b the lease of a");
	is($wm->{current}{holder}, 'a0', 'a member of a sees it');
	is($wmon->{current}{holder}, 'a0', 'pg_read_all_stats sees it');
	sql("SELECT dlock_release('w:roles', 'a0')", 'regress_watch_a');
	sql("SELECT dlock_acquire('w:roles', 'b1', '1 hour'); SELECT dlock_release('w:roles', 'b1')",
		'regress_watch_b');
	sql("SELECT dlock_acquire('w:roles', 'a2', '1 s')", 'regress_watch_a');
	# a2 runs out; then b's marker
	is_deeply(briefs($wmon, 5, 'everything'),
		[ 'released/-/a0', 'granted/acquire/b1', 'released/-/b1', 'granted/acquire/a2',
		  'expired/-/a2' ],
		'pg_read_all_stats gets every change, the expiry too');
	sql("SELECT dlock_acquire('w:roles', 'b3', '1 hour'); SELECT dlock_release('w:roles', 'b3')",
		'regress_watch_b');
	is_deeply(briefs($wb, 4, "b's own"),
		[ 'granted/acquire/b1', 'released/-/b1', 'granted/takeover/b3', 'released/-/b3' ],
		"b gets only its own leases' changes, none of a's, not a's expiry");
	is_deeply(briefs($wm, 3, "a's"),
		[ 'released/-/a0', 'granted/acquire/a2', 'expired/-/a2' ],
		"a member of a gets a's, none of b's");
	# a superuser's dlock_force_release of a's lease: b still learns nothing
	sql("SELECT dlock_acquire('w:roles', 'a4', '1 hour')", 'regress_watch_a');
	sql("SELECT dlock_force_release('w:roles')");
	sql("SELECT dlock_acquire('w:roles', 'b5', '1 hour'); SELECT dlock_release('w:roles', 'b5')",
		'regress_watch_b');
	is_deeply(briefs($wb, 2, "b's marker"), [ 'granted/acquire/b5', 'released/-/b5' ],
		"b does not learn of a's force-released lease");
	is_deeply(briefs($wm, 2, "a's force release"), [ 'granted/acquire/a4', 'released/-/a4' ],
		"a's member learns of it");
	watch_stop($_) for ($wb, $wm, $wmon);
}

# ---- a watcher joining while a change of its key commits ----
{
	# a lease that runs out while commits wait for the standby (below)
	my $ws = watch_start($node, 'w:syncexp');
	sql("SELECT dlock_acquire('w:syncexp', 'syncexp', '4 s')");
	is_deeply(briefs($ws, 1, 'the grant'), ['granted/acquire/syncexp'], 'a grant');

	# every commit that writes WAL now waits for a standby that never comes
	sql("ALTER SYSTEM SET synchronous_standby_names = 'nobody'; SELECT pg_reload_conf()");
	# (the checkpointer makes the setting count a moment after the reload:
	# an acquire that committed at once is released and tried again)
	# (until the acquire either waits in SyncRep or has ended: no deadline)
	my $c = $node->background_psql('postgres');
	my $cpid = $c->query_safe('SELECT pg_backend_pid()');
	my $held_up = 0;
	for my $try (1 .. 60)
	{
		$c->query_until(qr/committing/,
			"\\echo committing\nSELECT dlock_acquire('w:race', 'c', '1 hour');\n");
		my $ended = 0;
		while (!$held_up && !$ended)
		{
			$held_up = sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'");
			$ended = sql("SELECT state LIKE 'idle%' FROM pg_stat_activity WHERE pid = $cpid")
			  eq 't' unless $held_up;
			usleep(100_000) unless $held_up || $ended;
		}
		last if $held_up;
		$c->query_safe("SELECT dlock_release('w:race', 'c')");
	}
	ok($held_up, 'an acquire waits for the synchronous standby in its commit')
	  or die 'the acquire never waited for the standby';
	my $wsess = $node->background_psql('postgres');
	my $wpid = $wsess->query_safe('SELECT pg_backend_pid()');
	$wsess->query_until(qr/watching/, "\\echo watching\nSELECT dlock_watch('w:race');\n");
	my $state = '';
	my $deadline = time + 60;
	while (time < $deadline)
	{
		$state = sql("SELECT state || '/' || coalesce(wait_event, '')"
			  . " FROM pg_stat_activity WHERE pid = $wpid");
		last if $state eq 'active/transactionid' || $state =~ /^idle/;
		usleep(100_000);
	}
	is($state, 'active/transactionid',
		'dlock_watch waits for the commit of a change of its key already past its pre-commit');
	is_deeply(briefs($ws, 1, 'an expiry while commits wait for a standby'),
		['expired/-/syncexp'],
		'the worker sends an expiry without waiting for a synchronous standby');
	watch_stop($ws);
	sql("ALTER SYSTEM RESET synchronous_standby_names; SELECT pg_reload_conf()");
	my $after = $wsess->query_safe(
		"SELECT 'leader=' || string_agg(holder, ',') FROM dlock_leader('w:race')");
	like($after, qr/^leader=c$/m, 'once dlock_watch returns, the change is visible');
	$c->quit;
	$wsess->quit;
	sql("SELECT dlock_release('w:race', 'c')");
}

# ---- the worker: leaves when nobody watches, comes back when terminated ----
{
	ok(workers_are(0), 'the worker leaves when nobody watches');
	my $w = watch_start($node, 'w:term');
	ok(workers_are(1), 'a new watch starts it again');
	my $old = sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'dlock watch worker'");
	sql("SELECT pg_terminate_backend($old)");
	sql("SELECT dlock_acquire('w:term', 'late', '2 s')");
	# the postmaster starts it again after its restart time, 5 s: waited
	# for 180 s (then the expiry would not come either)
	my $back = 0;
	my $deadline = time + 180;
	while (!$back && time < $deadline)
	{
		usleep(200_000);
		$back = sql("SELECT count(*) FROM pg_stat_activity WHERE backend_type"
			  . " = 'dlock watch worker' AND pid <> $old") == 1;
	}
	ok($back, 'a terminated worker is started again');
  SKIP:
	{
		skip 'the worker did not come back', 1 unless $back;
		is_deeply(briefs($w, 2, 'an expiry after the worker was terminated'),
			[ 'granted/acquire/late', 'expired/-/late' ],
			'a terminated worker comes back and sends the expiry');
	}
	watch_stop($w);
}

# ---- a crash: watches gone, the worker starts cleanly ----
{
	my $w = watch_start($node, 'w:crash');
	my $victim = $node->background_psql('postgres', on_error_stop => 0);
	my $vpid = $victim->query_safe('SELECT pg_backend_pid()');
	kill 'KILL', $vpid or die "could not send SIGKILL to $vpid: $!";
	eval { $victim->{run}->kill_kill; };
	# the watcher's connection is gone with the crash
	my $deadline = time + 120;
	while ($w->{h}->pumpable && time < $deadline)
	{
		$w->{h}->pump_nb;
		usleep(50_000);
	}
	eval { $w->{h}->finish };
	is($w->{h}->result(0), 69, 'dlock watch ends with 69 when its connection is lost');
	watch_forget($w);
	$node->poll_query_until('postgres', 'SELECT true') or die 'no restart after the crash';
	ok(workers_are(0), 'after the crash no worker stays');
	my $w2 = watch_start($node, 'w:crash');
	sql("SELECT dlock_acquire('w:crash', 'after', '1 s')");
	is_deeply(briefs($w2, 2, 'a watch after the crash'),
		[ 'granted/acquire/after', 'expired/-/after' ],
		'a watch after the crash gets its changes and expiry');
	watch_stop($w2);
}

# ---- without shared_preload_libraries ----
{
	my $plain = PostgreSQL::Test::Cluster->new('watch_plain');
	$plain->init;
	$plain->start;
	$plain->safe_psql('postgres', 'CREATE EXTENSION dlock');
	my ($ret, $out, $err) = $plain->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT dlock_watch('k')");
	isnt($ret, 0, 'dlock_watch fails without preloading');
	like($err, qr/55000: watching a key needs dlock in shared_preload_libraries/,
		'with 55000 and a message that says why');
	like($err, qr/HINT:  Add dlock to shared_preload_libraries/, 'and a hint');
	is($plain->safe_psql('postgres',
			"SELECT dlock_unwatch('k'), dlock_unwatch(),"
			  . " dlock_acquire('k', 'h') IS NOT NULL,"
			  . " (SELECT holder FROM dlock_leader('k'))"),
		"f|0|t|h", 'unwatch and dlock_leader work without it');
	$plain->stop;
}

watch_stop_all();
$node->stop;
done_testing();
