# Copyright: dlock contributors
#
# 099_watch_once.pl: each event of a watched key is sent once, also when
# two transactions report it and one of them is held up at its commit
# (README "Watching keys", Guarantees; src/watch/watch_expiry.c, src/watch/watch_registry.c).
#
#  - an expiry found by the watch worker, whose round then rolls back
#    after an acquire took the expired holder over: the expiry is sent
#    all the same (by the acquire, which waits for the round's outcome);
#  - an abandoned hand-over grant whose row dlock's worker deletes while
#    a new acquire reads it as free and writes the key anew: its release
#    is sent once, not by both.
#
# To hold a transaction up at its commit, another session commits a
# NOTIFY and then waits for a synchronous standby that never comes: it
# keeps PostgreSQL's notification queue lock meanwhile, and every commit
# that sends a notification waits for that lock (after its pre-commit,
# where dlock's watchers are chosen).  Sessions whose changes no watcher
# may see send nothing and are not held up.  No test asserts a time.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DlockWatch;   # watch_start, events, quiet_for, watch_stop, watch_stop_all

my $node = PostgreSQL::Test::Cluster->new('watch_once');
$node->init(allows_streaming => 1);    # max_wal_senders > 0: synchronous commit
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'dlock'
dlock.safety_wake = '1h'
synchronous_standby_names = 'nobody'
synchronous_commit = local
});
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION dlock;
	CREATE TABLE written (n int);
	CREATE TABLE gate (n int);
	CREATE ROLE regress_once_a LOGIN;
	CREATE ROLE regress_once_b LOGIN;
	CREATE ROLE regress_once_w LOGIN IN ROLE regress_once_a;
});

sub sql
{
	my ($query, $user) = @_;
	return $node->safe_psql('postgres', $query,
		$user ? (extra_params => [ '-U', $user ]) : ());
}

sub brief
{
	my ($e) = @_;
	return join('/', $e->{event} // '-', $e->{cause} // '-',
		$e->{holder} // '-', $e->{token} // '-');
}

sub briefs { return [ map { brief($_) } events(@_) ]; }

# a background psql (as user), with its backend's pid
sub session
{
	my ($user) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0,
		$user ? (extra_params => [ '-U', $user ]) : ());
	return ($s, $s->query_safe('SELECT pg_backend_pid()'));
}

sub poll
{
	my ($what, $sql) = @_;
	$node->poll_query_until('postgres', $sql) or die "never: $what";
	return;
}

# A session commits a NOTIFY and waits for the synchronous standby, with
# the notification queue lock; returns (session, pid).
sub hold_notify_lock
{
	my ($x, $xpid) = session();
	$x->query_safe('SET synchronous_commit = on');
	$x->query_until(qr/holding/,
		"\\echo holding\nBEGIN; INSERT INTO written VALUES (1); NOTIFY regress_once; COMMIT;\n");
	poll('the notification queue lock held',
		"SELECT wait_event = 'SyncRep' FROM pg_stat_activity WHERE pid = $xpid");
	return ($x, $xpid);
}

# Lets it go: its wait is cancelled (its commit stands).
sub free_notify_lock
{
	my ($x, $xpid) = @_;
	sql("SELECT pg_cancel_backend($xpid)");
	$x->quit;
	return;
}

# a backend of this type waits for a heavyweight lock
sub waits
{
	my ($type, $event) = @_;
	return "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = '$type'"
	  . " AND wait_event_type = 'Lock'" . ($event ? " AND wait_event = '$event'" : '');
}

# ---- an expiry, and the worker's round rolls back ----
{
	my $w = watch_start($node, 'wo:exp', 'regress_once_w');
	# (30 s: the notification queue lock must be held before the lease runs
	# out, however slow the machine; the worker learns of the expiry from
	# the grant, so a later renewal to a shorter ttl would not do)
	my $ta = sql("SELECT dlock_acquire('wo:exp', 'A', '30 s')", 'regress_once_a');
	is_deeply(briefs($w, 1, 'the grant'), ["granted/acquire/A/$ta"], 'the grant');
	my @x = hold_notify_lock();
	sql("SELECT expires_at > clock_timestamp() FROM dlock.lease WHERE key = 'wo:exp'") eq 't'
	  or die 'the lease ran out before the test was ready (a machine slower than 30 s)';
	# the round that found the expiry waits to commit its notification
	poll('the watch worker held up', waits('dlock watch worker', 'object'));
	# b's takeover sends nothing that the watcher may see: not held up
	my ($b) = session('regress_once_b');
	$b->query_until(qr/asking/,
		"\\echo asking\nSELECT 'token=' || dlock_acquire('wo:exp', 'B', '1 hour', '10 min');\n");
	poll('b has the key, or waits for it',
		"SELECT count(*) = 1 FROM dlock.lease WHERE key = 'wo:exp' AND holder = 'B'"
		  . " OR EXISTS (SELECT FROM dlock_waiters WHERE key = 'wo:exp')");
	# the round fails: it is cancelled
	sql("SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
		  . " WHERE backend_type = 'dlock watch worker'");
	free_notify_lock(@x);
	is_deeply(briefs($w, 1, 'the expiry'), ["expired/-/A/$ta"],
		'an expiry is sent even when the worker\'s round that found it rolls back');
	ok(quiet_for($w, 2), 'once');
	my ($tb) = $b->query_safe("SELECT 'done'") =~ /token=(\d+)/;
	ok(defined $tb, 'b took the key over');
	$b->quit;
	sql("SELECT dlock_force_release('wo:exp')");
	watch_stop($w);
}

# ---- an abandoned grant, its row deleted as the next acquire takes it ----
{
	my $w = watch_start($node, 'wo:ab');
	my $ta = sql("SELECT dlock_acquire('wo:ab', 'a', '1 hour')");
	# b is handed the key by a's release, then its statement fails: it
	# never saw its token (the gate holds it up in between)
	my ($g) = session();
	$g->query_safe('BEGIN; LOCK TABLE gate;');
	my ($b) = session();
	$b->query_until(qr/waiting/, "\\echo waiting\n"
		  . "DO \$\$ BEGIN PERFORM dlock_acquire('wo:ab', 'b', '1 hour', '10 min');"
		  . " LOCK TABLE gate; RAISE EXCEPTION 'b fails'; END \$\$;\n");
	poll('b waits', "SELECT count(*) = 1 FROM dlock_waiters WHERE key = 'wo:ab'");
	sql("SELECT dlock_release('wo:ab', 'a', $ta)");
	my @e = events($w, 3, 'the hand-over');
	my $tb = $e[2]{token} // 'none';
	is_deeply([ map { brief($_) } @e ],
		[ "granted/acquire/a/$ta", "released/-/a/$ta", "granted/handover/b/$tb" ],
		'the key is handed over to b');
	my @x = hold_notify_lock();
	$g->query_safe('ROLLBACK');    # b fails: the grant is abandoned
	poll('dlock\'s worker held up after deleting the row', waits('dlock worker', 'object'));
	my ($c) = session();
	$c->query_until(qr/asking/,
		"\\echo asking\nSELECT 'token=' || dlock_acquire('wo:ab', 'c', '1 hour');\n");
	poll('c waits for the delete', waits('client backend', 'transactionid'));
	free_notify_lock(@x);
	my ($tc) = $c->query_safe("SELECT 'done'") =~ /token=(\d+)/;
	$tc //= 'none';
	is_deeply(briefs($w, 2, 'the release and the next grant'),
		[ "released/-/b/$tb", "granted/acquire/c/$tc" ],
		'an abandoned grant deleted as the next acquire takes it is released once');
	ok(quiet_for($w, 2), 'and nothing else');
	$b->quit;
	$c->quit;
	$g->quit;
	sql("SELECT dlock_force_release('wo:ab')");
	watch_stop($w);
}

watch_stop_all();
$node->stop;
done_testing();
