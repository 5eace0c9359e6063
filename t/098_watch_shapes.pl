# Copyright: dlock contributors
#
# 098_watch_shapes.pl: watching keys of every shape and every way a key
# changes hands (issue 26), with real sessions: the watchers are
# `dlock watch KEY --json` processes, the changes are made by psql sessions.
#
#  - a semaphore's holders (any slot) and shared holders: each grant and
#    release is notified with its own holder and token; each holder that
#    runs out is notified as expired, with nobody calling anything (the
#    worker reads every holder of the key, not only slot 0), once: two
#    running out together both come, and an acquire that later takes a
#    reported slot over does not send its expiry again;
#  - a hand-over grant its waiter abandoned (its transaction rolled back):
#    the watchers were told "granted", and are told "released" when dlock's
#    worker frees it, or when the next waiter takes the key first.
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

my $node = PostgreSQL::Test::Cluster->new('watch_shapes');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'dlock'\n" . "dlock.safety_wake = '1h'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock');

# an event in short: "event/cause/holder/token"
sub brief
{
	my ($e) = @_;
	return join('/', $e->{event}, $e->{cause} // '-', $e->{holder} // '-',
		$e->{token} // '-');
}

sub briefs { return [ map { brief($_) } events(@_) ]; }

sub sql { return $node->safe_psql('postgres', $_[0]); }

# ---- a semaphore: every holder's grant, release and expiry ----
{
	my $w = watch_start($node, 'ws:sem');
	my $t1 = sql("SELECT dlock_acquire('ws:sem', 'h1', '1 hour', '0', 4)");
	my $t2 = sql("SELECT dlock_acquire('ws:sem', 'h2', '1 hour', '0', 4)");
	is_deeply(
		briefs($w, 2, 'two grants'),
		[ "granted/acquire/h1/$t1", "granted/acquire/h2/$t2" ],
		'each holder of a semaphore is notified with its own token');

	# slots 2 and 3 run out together: both expiries, from the worker (both
	# granted in one transaction, so that neither can run out before the
	# other is granted, however slow the machine)
	my ($t3, $t4) = split /\|/, sql("SELECT dlock_acquire('ws:sem', 'h3', '2 s', '0', 4),"
		  . " dlock_acquire('ws:sem', 'h4', '2 s', '0', 4)");
	my @e = events($w, 4, 'two grants and two expiries');
	is_deeply([ map { brief($_) } @e[ 0, 1 ] ],
		[ "granted/acquire/h3/$t3", "granted/acquire/h4/$t4" ],
		'grants of slots 2 and 3');
	is_deeply(
		[ sort map { brief($_) } @e[ 2, 3 ] ],
		[ "expired/-/h3/$t3", "expired/-/h4/$t4" ],
		'holders of slots 2 and 3 that run out are notified with nobody calling anything');
	ok(quiet_for($w, 3), 'each expiry is sent once');

	sql("SELECT dlock_release('ws:sem', 'h2', $t2)");
	is_deeply(briefs($w, 1, 'a release'), ["released/-/h2/$t2"],
		'a release names its holder and token');

	# slot 1 is free, slots 2 and 3 ran out: two grants, no expiry again
	my $t5 = sql("SELECT dlock_acquire('ws:sem', 'h5', '1 hour', '0', 4)");
	my $t6 = sql("SELECT dlock_acquire('ws:sem', 'h6', '1 hour', '0', 4)");
	is_deeply(
		briefs($w, 2, 'two more grants'),
		[ "granted/acquire/h5/$t5", "granted/takeover/h6/$t6" ],
		'taking over a slot whose expiry was sent does not send it again');
	sql("SELECT dlock_force_release('ws:sem')");
	is_deeply(
		[ sort @{ briefs($w, 3, 'a force release') } ],
		[ sort("released/-/h1/$t1", "released/-/h5/$t5", "released/-/h6/$t6") ],
		'a force release frees each holder, each with its token');
	watch_stop($w);
}

# ---- shared leases: every shared holder ----
{
	my $w = watch_start($node, 'ws:shared');
	my $s1 = sql("SELECT dlock_acquire_shared('ws:shared', 's1', '1 hour')");
	my $s2 = sql("SELECT dlock_acquire_shared('ws:shared', 's2', '2 s')");
	is_deeply(
		briefs($w, 3, 'two shared grants and an expiry'),
		[ "granted/acquire/s1/$s1", "granted/acquire/s2/$s2", "expired/-/s2/$s2" ],
		'shared holders are notified each with its token, and a shared holder '
		  . 'that runs out with nobody calling anything');
	sql("SELECT dlock_release('ws:shared', 's1', $s1)");
	is_deeply(briefs($w, 1, 'a shared release'), ["released/-/s1/$s1"],
		'a shared holder\'s release');
	ok(quiet_for($w, 2), 'and nothing else');
	watch_stop($w);
}

# ---- a hand-over grant its waiter abandoned ----
{
	my $w = watch_start($node, 'ws:ab');
	my $ta = sql("SELECT dlock_acquire('ws:ab', 'a', '1 hour')");
	# a single-statement waiter is handed the key by the release itself;
	# its statement then fails: it never saw its token
	my $waiter = $node->background_psql('postgres', on_error_stop => 0);
	$waiter->query_until(qr/waiting/,
		"\\echo waiting\nSELECT dlock_acquire('ws:ab', 'b', '1 hour', '10 min') / 0;\n");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM dlock_waiters WHERE key = 'ws:ab'")
	  or die 'the waiter never waited';
	sql("SELECT dlock_release('ws:ab', 'a', $ta)");
	my @e = events($w, 3, 'the hand-over');
	is_deeply([ map { brief($_) } @e[ 0, 1 ] ],
		[ "granted/acquire/a/$ta", "released/-/a/$ta" ], 'a grant and its release');
	my $tb = $e[2]{token} // 'none';
	is(brief($e[2] // {}), "granted/handover/b/$tb",
		'the release handed the key over to the waiter');
	is_deeply(briefs($w, 1, 'the abandoned grant freed'), ["released/-/b/$tb"],
		'a hand-over grant its waiter abandoned is notified as released when it is freed');
	ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM dlock.lease WHERE key = 'ws:ab' AND holder IS NOT NULL"),
		'and its row is gone');
	ok(quiet_for($w, 2), 'and nothing else');
	$waiter->quit;
	watch_stop($w);
}

# ---- the same, with a waiter behind it that takes the key first ----
{
	my $w = watch_start($node, 'ws:ab2');
	my $ta = sql("SELECT dlock_acquire('ws:ab2', 'a', '1 hour')");
	my $b = $node->background_psql('postgres', on_error_stop => 0);
	$b->query_until(qr/waiting/,
		"\\echo waiting\nSELECT dlock_acquire('ws:ab2', 'b', '1 hour', '10 min') / 0;\n");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM dlock_waiters WHERE key = 'ws:ab2'")
	  or die 'b never waited';
	my $c = $node->background_psql('postgres');
	$c->query_until(qr/waiting/,
		"\\echo waiting\nSELECT 'token=' || dlock_acquire('ws:ab2', 'c', '1 hour', '10 min');\n");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 2 FROM dlock_waiters WHERE key = 'ws:ab2'")
	  or die 'c never waited';
	sql("SELECT dlock_release('ws:ab2', 'a', $ta)");
	my $out = $c->query_safe("SELECT 'got it'");
	my ($tc) = $out =~ /token=(\d+)/;
	$tc //= 'none';
	my @e = events($w, 5, 'the hand-over, its abandonment and the next grant');
	my $tb = $e[2]{token} // 'none';
	is_deeply(
		[ map { brief($_) } @e[ 0 .. 3 ] ],
		[
			"granted/acquire/a/$ta", "released/-/a/$ta",
			"granted/handover/b/$tb", "released/-/b/$tb"
		],
		'an abandoned hand-over grant is notified as released when the next waiter takes the key');
	is(join('/', $e[4]{event} // '-', $e[4]{holder} // '-', $e[4]{token} // '-'),
		"granted/c/$tc", 'then the next waiter\'s grant');
	ok(quiet_for($w, 2), 'and nothing else');
	$b->quit;
	$c->quit;
	sql("SELECT dlock_release('ws:ab2', 'c')");
	watch_stop($w);
}

watch_stop_all();
$node->stop;
done_testing();
