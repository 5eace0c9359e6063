
# Copyright (c) dlock contributors
#
# t/020_crash_midway.pl - crashes in the middle of dlock work (issue 5, item 2).
#
# What this proves, each part with shared_preload_libraries = 'dlock' (so the
# FIFO wait queue in shared memory is in play):
#
#  1. A backend killed with SIGKILL inside an open transaction right after
#     dlock_acquire (BEGIN; acquire; ... no COMMIT): after the crash-restart the
#     acquire never happened (the key is free and anyone can take it), the
#     committed leases are intact (holder, token, expiry), and every token
#     issued afterwards is greater than every committed token issued before.
#     1b: the same after a checkpoint with a slow WAL writer, so that the
#     token sequence's newest WAL record (written by the uncommitted acquire)
#     is lost in the crash: committed tokens are still beaten.
#     A release acknowledged just before a crash may be lost (dlock commits
#     releases without waiting for the flush; see README "Durability of
#     releases"): such a key is checked to be free or held by exactly the
#     released lease (same holder, same token), never anything else.
#  2. A backend killed with SIGKILL while it sleeps in a waiting
#     dlock_acquire(wait => '30 s'), in a transaction that had already taken
#     another key: after the restart the waiter is gone (dlock_waiters is
#     empty), its earlier uncommitted acquire never happened, the holder it was
#     waiting behind still holds the key with the same token, and no phantom
#     queue is left behind (after a release, a try-acquire with wait = 0 gets
#     the key at once, and a new waiter is woken by a release as usual).
#  3. stop('immediate') right after a burst of committed acquires (each in its
#     own transaction, each returned to the client): after restart every one
#     of them is there with its holder and token, and the next token is greater
#     than all of them.
#
# Tokens that an uncommitted acquire showed to its client are not part of the
# guarantee checked here: that acquire never happened (contract: "inside a
# transaction effects appear at commit"), so its token may be handed out
# again after a crash, like a sequence value of an uncommitted transaction;
# the README says to use a token only after the acquire committed.  Part 1b
# makes that case happen on purpose and checks that committed tokens are
# still beaten.
#
# Claims (issue 3), on a table jobs(id int PRIMARY KEY, status, payload):
#  4. A backend killed with SIGKILL in an open transaction that had claimed
#     rows with dlock_claim and completed them under the dlock_claimed fence,
#     while it is inside a second dlock_claim (its filter sleeps): after the
#     crash-restart its claims never happened (dlock_claims and dlock.claim
#     have nothing of that holder, its fenced completion is gone), another
#     worker claims exactly those rows with attempts = 1 (the killed claim did
#     not count as a delivery) and a token greater than every committed
#     token, and the committed claims (including one delivered twice,
#     attempts = 2) are intact: holder, owner, token, times, attempts, still
#     fencing for their holders and never handed to anyone else.
#  5. stop('immediate') right after a burst of committed claims (each in its
#     own transaction) and a claim with a 2 s ttl: the server stays down until
#     that ttl has run out.  After restart every committed claim is there
#     exactly as committed; the claim whose ttl ran out while the server was
#     down (its expiry is before the postmaster's start time) is claimable by
#     another worker, with attempts + 1 and a greater token, and no row
#     under a live claim is handed out.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;
use Time::HiRes qw(usleep time);

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'dlock'
restart_after_crash = on
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock');

# every committed token the test has seen, to compare later tokens against
my @committed_tokens;

sub max_of { my $m; for (@_) { $m = $_ if !defined $m || $_ > $m } return $m }

# acquire in its own (committed) transaction; returns the token
sub acquire_committed
{
	my ($key, $holder, $ttl) = @_;
	$ttl //= '1 hour';
	my $t = $node->safe_psql('postgres',
		"SELECT dlock_acquire('$key', '$holder', '$ttl')");
	push @committed_tokens, $t if $t ne '';
	return $t;
}

# key -> "holder|token|expires_at" for every unexpired lease whose key
# matches the regex $like (a POSIX regex for the ~ operator)
sub lease_map
{
	my ($like) = @_;
	my $out = $node->safe_psql('postgres',
		qq{SELECT key, holder, token, expires_at FROM dlock_locks
		    WHERE key ~ '$like' ORDER BY key});
	my %m;
	for my $line (split /\n/, $out)
	{
		my ($k, @rest) = split /\|/, $line;
		$m{$k} = join '|', @rest;
	}
	return \%m;
}

# A release commits without waiting for its WAL flush (dlock's documented
# choice: a release lost in a crash only keeps the key until its ttl), so a
# key released shortly before a crash may be held again afterwards, but only
# by exactly the lease that was released: same holder, same token.
sub released_or_same
{
	my ($key, $holder, $token, $what) = @_;
	my $got = $node->safe_psql('postgres',
		qq{SELECT holder || '|' || token FROM dlock_locks WHERE key = '$key'});
	ok($got eq '' || $got eq "$holder|$token",
		"$what: $key is free or, if its release was lost, held by exactly the released lease"
	) or diag "got '$got'";
	return;
}

# SIGKILL one backend and wait until the postmaster has gone through its
# crash-restart cycle and accepts connections again
sub kill_backend_and_wait
{
	my ($pid, $session) = @_;
	my $log_offset = -s $node->logfile;

	kill 'KILL', $pid or die "could not send SIGKILL to $pid: $!";
	# the postmaster notices the dead child, kills the others, re-initialises
	# shared memory and runs crash recovery
	$node->wait_for_log(qr/all server processes terminated; reinitializing/,
		$log_offset);
	$node->poll_query_until('postgres', 'SELECT true')
	  or die 'server did not come back after the crash';

	# psql of the killed session sees its connection gone; reap it
	if ($session)
	{
		eval { $session->{run}->kill_kill; };
	}
	return;
}

# a few committed leases that must survive everything below
my %held = (
	'crash/a' => 'worker-a',
	'crash/b' => 'worker-b',
	'crash/c' => 'worker-c',);
for my $k (sort keys %held)
{
	my $t = acquire_committed($k, $held{$k});
	like($t, qr/^\d+$/, "committed acquire of $k returns a token");
}
# a released one, so that its (higher) token is also "seen before"
my $released_token = acquire_committed('crash/released', 'worker-r');
# leases released later, checked with released_or_same after the next crash
my %released_before_crash;
is( $node->safe_psql('postgres',
		q{SELECT dlock_release('crash/released', 'worker-r')}),
	't',
	'release of crash/released before the crash');

my $before = lease_map('^crash/[abc]$');
is(scalar(keys %$before), 3, 'three committed leases before the first crash');

# ---------------------------------------------------------------------------
# Part 1: SIGKILL in an open transaction after dlock_acquire, before COMMIT
# ---------------------------------------------------------------------------
{
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe('BEGIN');
	my $t_mid = $s->query_safe(
		q{SELECT dlock_acquire('crash/midway', 'worker-mid', '1 hour')});
	like($t_mid, qr/^\d+$/,
		'acquire inside the open transaction returned a token');
	# the transaction goes on with the lease (a fenced write that would
	# commit with it), then the backend dies before COMMIT
	is( $s->query_safe(
			qq{SELECT dlock_validate('crash/midway', 'worker-mid', $t_mid)}),
		't',
		'the uncommitted lease validates inside its own transaction');
	# nobody else sees it yet (effects appear at commit)
	is( $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock_locks WHERE key = 'crash/midway'}),
		'0',
		'the uncommitted acquire is invisible to other sessions');

	kill_backend_and_wait($pid, $s);

	is( $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock_locks WHERE key = 'crash/midway'}),
		'0',
		'after the crash the uncommitted acquire never happened (no lease)');
	is( $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock.lease WHERE key = 'crash/midway'}),
		'0',
		'after the crash no row of the uncommitted acquire is left in dlock.lease');
	is_deeply(lease_map('^crash/[abc]$'), $before,
		'committed leases are intact after the crash (holder, token, expiry)');
	released_or_same('crash/released', 'worker-r', $released_token,
		'after the crash');

	# the key is free: another holder takes it at once (wait = 0)
	my $t = acquire_committed('crash/midway', 'worker-other');
	like($t, qr/^\d+$/, 'another holder takes the key of the killed acquire');
	cmp_ok($t, '>', max_of(@committed_tokens[0 .. $#committed_tokens - 1]),
		'its token is greater than every committed token issued before the crash');
	note "uncommitted token before the crash: $t_mid, first token after: $t";

	is( $node->safe_psql('postgres',
			q{SELECT dlock_release('crash/midway', 'worker-other')}),
		't', 'and releases it');
	$released_before_crash{'crash/midway'} = ['worker-other', $t];
}

# ---------------------------------------------------------------------------
# Part 1b: a crash that loses the token sequence's newest WAL record
#
# The sequence behind the tokens writes a WAL record only every 32 values (and
# at the first value after a checkpoint); that record is flushed by the
# acquire's commit.  Here the acquire that writes it never commits, and with a
# slow WAL writer the record is lost in the crash: the sequence goes back to
# the previous record.  Every committed token must still be beaten, because
# the record covering it was flushed with its commit.  (The token the
# uncommitted acquire showed to its client may be handed out again: the
# README says to use a token only after the acquire committed.)
# ---------------------------------------------------------------------------
{
	$node->safe_psql('postgres', q{ALTER SYSTEM SET wal_writer_delay = '10s'});
	$node->reload;
	$node->safe_psql('postgres', 'CHECKPOINT');

	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe('BEGIN');
	my $t_seen = $s->query_safe(
		q{SELECT dlock_acquire('crash/seen', 'worker-seen', '1 hour')});
	like($t_seen, qr/^\d+$/, 'uncommitted acquire after a checkpoint returned a token');

	kill_backend_and_wait($pid, $s);

	released_or_same('crash/midway', @{ $released_before_crash{'crash/midway'} },
		'after the second crash');
	is( $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock_locks WHERE key = 'crash/seen'}),
		'0', 'the uncommitted acquire of crash/seen never happened');
	my $t = acquire_committed('crash/seen', 'worker-after');
	cmp_ok($t, '>', max_of(@committed_tokens[0 .. $#committed_tokens - 1]),
		'token after a crash that lost the sequence\'s newest record is greater than every committed token'
	);
	note "uncommitted token before the crash: $t_seen, first token after: $t"
	  . ($t <= $t_seen ? ' (issued again, as documented)' : '');
	is( $node->safe_psql('postgres',
			q{SELECT dlock_release('crash/seen', 'worker-after')}),
		't', 'worker-after releases crash/seen');
	$node->safe_psql('postgres', 'ALTER SYSTEM RESET wal_writer_delay');
	$node->reload;
}

# ---------------------------------------------------------------------------
# Part 2: SIGKILL of a backend sleeping in dlock_acquire(wait => '30 s')
# ---------------------------------------------------------------------------
{
	my $owner_token = acquire_committed('crash/wait', 'worker-owner');
	$before = lease_map('^crash/([abc]|wait)$');

	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe('BEGIN');
	my $t_other = $s->query_safe(
		q{SELECT dlock_acquire('crash/wait-side', 'worker-waiter', '1 hour')});
	like($t_other, qr/^\d+$/,
		'the waiter first takes another key in its open transaction');
	# now it waits for crash/wait (held by worker-owner for an hour)
	$s->{stdin} .=
	  "SELECT dlock_acquire('crash/wait', 'worker-waiter', '1 hour', '30 s');\n";
	$s->{run}->pump_nb;
	ok( $node->poll_query_until(
			'postgres',
			qq{SELECT count(*) = 1 FROM dlock_waiters
			    WHERE pid = $pid AND key = 'crash/wait' AND holder = 'worker-waiter'}),
		'the waiter shows up in dlock_waiters');

	kill_backend_and_wait($pid, $s);

	is($node->safe_psql('postgres', 'SELECT count(*) FROM dlock_waiters'),
		'0', 'after the crash no waiter is left in dlock_waiters');
	is_deeply(lease_map('^crash/([abc]|wait)$'), $before,
		'after the crash the key waited for is still held by its owner with the same token'
	);
	is( $node->safe_psql('postgres',
			q{SELECT holder || '|' || token FROM dlock_locks WHERE key = 'crash/wait'}),
		"worker-owner|$owner_token",
		'crash/wait: holder and token unchanged');
	is( $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock_locks WHERE key = 'crash/wait-side'}),
		'0',
		'the waiter\'s earlier uncommitted acquire never happened');

	# no phantom queue: once the owner releases, a try-acquire gets the key
	is( $node->safe_psql('postgres',
			qq{SELECT dlock_release('crash/wait', 'worker-owner', $owner_token)}),
		't', 'the owner releases crash/wait after the crash');
	my $t = acquire_committed('crash/wait', 'worker-new');
	like($t, qr/^\d+$/,
		'a try-acquire (wait = 0) gets the released key: no phantom waiter queue');
	cmp_ok($t, '>', $owner_token, 'with a greater token than the previous owner');

	# waits still work after the restart: a new waiter is woken by a release
	my $w = $node->background_psql('postgres', on_error_stop => 0);
	my $wpid = $w->query_safe('SELECT pg_backend_pid()');
	$w->{stdin} .=
	  "SELECT dlock_acquire('crash/wait', 'worker-late', '1 hour', '30 s');\n";
	$w->{run}->pump_nb;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM dlock_waiters WHERE pid = $wpid")
	  or die 'new waiter did not show up in dlock_waiters';
	is( $node->safe_psql('postgres',
			qq{SELECT dlock_release('crash/wait', 'worker-new', $t)}),
		't', 'worker-new releases crash/wait');
	my $woken = $w->query_safe('SELECT 1');    # flushes the acquire's result
	$woken =~ s/\n1$//;
	like($woken, qr/^\d+$/, 'the new waiter is woken and gets the key');
	cmp_ok($woken, '>', $t, 'with a greater token');
	push @committed_tokens, $woken;
	$w->quit;
	is( $node->safe_psql('postgres',
			q{SELECT dlock_release('crash/wait', 'worker-late')}),
		't', 'worker-late releases crash/wait');
	$released_before_crash{'crash/wait'} = ['worker-late', $woken];
}

# ---------------------------------------------------------------------------
# Part 3: stop('immediate') right after a burst of committed acquires
# ---------------------------------------------------------------------------
{
	my $n = 200;
	# one transaction per acquire; psql prints each token as it returns
	my $script = join '',
	  map { "SELECT dlock_acquire('burst/$_', 'burst-holder-$_', '1 hour');\n" }
	  1 .. $n;
	my $out = $node->safe_psql('postgres', $script);
	my @tokens = split /\n/, $out;
	is(scalar(@tokens), $n, "burst: $n acquires returned");
	is(scalar(grep { /^\d+$/ } @tokens), $n, 'burst: every acquire got a token');
	my %seen;
	$seen{$_}++ for @tokens;
	is(scalar(keys %seen), $n, 'burst: all tokens are distinct');
	push @committed_tokens, @tokens;
	my $expected = lease_map('^burst/');
	is(scalar(keys %$expected), $n, "burst: $n leases before the immediate stop");

	$node->stop('immediate');
	$node->start;

	my $after = lease_map('^burst/');
	released_or_same('crash/wait', @{ $released_before_crash{'crash/wait'} },
		'after the immediate stop');
	my $missing = 0;
	for my $i (1 .. $n)
	{
		my $want = "burst-holder-$i|$tokens[$i - 1]";
		my $got = $after->{"burst/$i"} // '';
		$missing++ unless $got =~ /^\Q$want\E\|/;
	}
	is($missing, 0,
		"after stop('immediate') all $n burst leases are there with holder and token");
	is_deeply($after, $expected,
		'after the immediate stop every lease is exactly as committed');

	my $t = acquire_committed('burst/after', 'burst-late');
	cmp_ok($t, '>', max_of(@committed_tokens[0 .. $#committed_tokens - 1]),
		'first token after the immediate stop is greater than every token before');
	# a re-acquire by a burst holder extends its lease and keeps its token
	is( $node->safe_psql('postgres',
			q{SELECT dlock_acquire('burst/7', 'burst-holder-7', '1 hour')}),
		$tokens[6],
		'a burst holder re-acquiring after the restart gets its own token back');
}

# ---------------------------------------------------------------------------
# Claims: helpers
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{
CREATE TABLE jobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0, payload text);
INSERT INTO jobs SELECT g, 0, 'job ' || g FROM generate_series(1, 40) g;
-- a filter that keeps dlock_claim busy until the backend is killed
CREATE FUNCTION public.slow_filter(int) RETURNS boolean LANGUAGE plpgsql VOLATILE
  AS $$ BEGIN PERFORM pg_catalog.pg_sleep(60); RETURN true; END $$;
});

# dlock_claim in its own (committed) transaction; returns the claimed ids
# ("1,2,3", '' for none) and records the claim's token as committed
sub claim_committed
{
	my ($holder, $n, $ttl, $filter) = @_;
	my $f = defined $filter ? "\$f\$$filter\$f\$" : 'NULL';
	my ($ids, $token) = split /\n/, $node->safe_psql('postgres', qq{
SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '')
  FROM dlock_claim(NULL::jobs, '$holder', $n, '$ttl', $f);
SELECT coalesce(max(token)::text, '') FROM dlock_claims WHERE holder = '$holder';}), -1;
	push @committed_tokens, $token if $ids ne '';
	return $ids;
}

# key -> "holder|owner|token|claimed_at|expires_at|attempts" for every
# unexpired claim on jobs
sub claim_map
{
	my $out = $node->safe_psql('postgres',
		q{SELECT key, holder, owner, token, claimed_at, expires_at, attempts
		    FROM dlock_claims WHERE table_name = 'jobs'::regclass ORDER BY key});
	my %m;
	for my $line (split /\n/, $out)
	{
		my ($k, @rest) = split /\|/, $line;
		$m{$k} = join '|', @rest;
	}
	return \%m;
}

# "attempts,attempts,..." of holder's live claims, in key order
sub attempts_of
{
	my ($holder) = @_;
	return $node->safe_psql('postgres',
		qq{SELECT string_agg(attempts::text, ',' ORDER BY key::int)
		     FROM dlock_claims WHERE holder = '$holder'});
}

sub claim_token_of
{
	my ($holder) = @_;
	return $node->safe_psql('postgres',
		qq{SELECT max(token) FROM dlock_claims WHERE holder = '$holder'});
}

# ---------------------------------------------------------------------------
# Part 4: SIGKILL in the middle of dlock_claim, in an open transaction that
# had already claimed rows and completed them under the fence
# ---------------------------------------------------------------------------
{
	is(claim_committed('worker-keep', 5, '1 hour', 'id <= 5'),
		'1,2,3,4,5', 'worker-keep claims rows 1-5 (committed)');
	# rows 6 and 7 are delivered twice: a claim that expires, then another
	is(claim_committed('worker-old', 2, '100 ms', 'id IN (6, 7)'),
		'6,7', 'worker-old claims rows 6-7 for 100 ms');
	usleep(300_000);
	is(claim_committed('worker-again', 2, '1 hour', 'id IN (6, 7)'),
		'6,7', 'worker-again claims rows 6-7 after worker-old\'s claim ran out');
	is(attempts_of('worker-again'), '2,2', 'rows 6-7 have attempts = 2');
	my $claims_before = claim_map();
	is(scalar(keys %$claims_before), 7, 'seven committed claims before the crash');

	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe('BEGIN');
	is( $s->query_safe(
			q{SELECT string_agg(id::text, ',' ORDER BY id)
			    FROM dlock_claim(NULL::jobs, 'worker-mid', 5, '1 hour', 'status = 0')}),
		'8,9,10,11,12',
		'worker-mid claims rows 8-12 inside its open transaction');
	is( $s->query_safe(
			q{WITH u AS (UPDATE jobs SET status = 1
			              WHERE id BETWEEN 8 AND 12 AND dlock_claimed('jobs', id, 'worker-mid')
			             RETURNING id)
			  SELECT count(*) FROM u}),
		'5',
		'worker-mid completes them under the dlock_claimed fence (uncommitted)');
	is( $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock_claims WHERE holder = 'worker-mid'}),
		'0', 'the uncommitted claims are invisible to other sessions');
	is( $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock_claim(NULL::jobs, 'worker-peek', 10, '1 hour',
			                                    'id BETWEEN 8 AND 12')}),
		'0', 'while worker-mid\'s transaction is open, nobody else gets its rows');

	# a second claim in the same transaction; its filter sleeps, so the
	# backend is killed inside dlock_claim
	$s->{stdin} .=
	  "SELECT count(*) FROM dlock_claim(NULL::jobs, 'worker-mid', 3, '1 hour', 'public.slow_filter(id)');\n";
	$s->{run}->pump_nb;
	ok( $node->poll_query_until(
			'postgres',
			qq{SELECT count(*) = 1 FROM pg_stat_activity
			    WHERE pid = $pid AND wait_event = 'PgSleep' AND query LIKE '%dlock_claim%'}),
		'worker-mid is inside its second dlock_claim (the filter sleeps)');

	kill_backend_and_wait($pid, $s);

	is( $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock_claims WHERE holder = 'worker-mid'}),
		'0', 'after the crash dlock_claims has no claim of worker-mid');
	is( $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock.claim WHERE holder = 'worker-mid'}),
		'0', 'after the crash dlock.claim has no row of worker-mid at all');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM jobs WHERE status <> 0}),
		'0', 'its fenced completion never happened either');
	is_deeply(claim_map(), $claims_before,
		'committed claims are intact after the crash (holder, owner, token, times, attempts)');
	is( $node->safe_psql('postgres',
			q{SELECT dlock_claimed('jobs', 1, 'worker-keep') AND dlock_claimed('jobs', 7, 'worker-again')}),
		't', 'the committed claims still fence for their holders');
	is(claim_committed('worker-other', 10, '1 hour', 'id <= 7'),
		'', 'rows under committed claims are not handed out after the crash');

	is(claim_committed('worker-other', 5, '1 hour', 'status = 0'),
		'8,9,10,11,12', 'another worker claims exactly the rows of the killed claim');
	is(attempts_of('worker-other'), '1,1,1,1,1',
		'with attempts = 1: the killed claim did not count as a delivery');
	cmp_ok(claim_token_of('worker-other'), '>',
		max_of(@committed_tokens[0 .. $#committed_tokens - 1]),
		'its token is greater than every committed token issued before the crash');
	is($node->safe_psql('postgres', q{SELECT dlock_unclaim('jobs', 'worker-other')}),
		'5', 'worker-other gives its claims back');
}

# ---------------------------------------------------------------------------
# Part 5: stop('immediate') after a burst of committed claims, and a claim
# whose ttl runs out while the server is down
# ---------------------------------------------------------------------------
{
	my $n = 20;
	my $script = join '',
	  map { "SELECT id FROM dlock_claim(NULL::jobs, 'claim-burst-$_', 1, '1 hour', 'id > 12');\n" }
	  1 .. $n;
	my @ids = split /\n/, $node->safe_psql('postgres', $script);
	is(join(',', @ids), join(',', 13 .. 12 + $n),
		"claim burst: $n claims, one row each, in key order");
	push @committed_tokens, split /\n/,
	  $node->safe_psql('postgres',
		q{SELECT token FROM dlock_claims WHERE holder LIKE 'claim-burst-%'});

	my $short = claim_committed('worker-short', 3, '10 s', 'id > 12');
	is($short, join(',', 13 + $n .. 15 + $n), 'worker-short claims 3 rows for 10 s (live until the stop however loaded the machine)');
	my $expected = claim_map();
	is( scalar(grep { /^worker-short\|/ } values %$expected),
		3, 'worker-short\'s claims are live right before the stop');
	my $short_expiry = $node->safe_psql('postgres',
		q{SELECT extract(epoch FROM max(expires_at)) FROM dlock.claim WHERE holder = 'worker-short'});

	$node->stop('immediate');
	# stay down until worker-short's claims have run out
	my $left = $short_expiry - time();
	usleep(int(($left + 0.2) * 1_000_000)) if $left > -0.2;
	$node->start;

	is( $node->safe_psql('postgres',
			q{SELECT bool_and(expires_at < pg_postmaster_start_time()) FROM dlock.claim
			   WHERE holder = 'worker-short'}),
		't', 'worker-short\'s claims ran out while the server was down');
	my %live = %$expected;
	delete $live{$_} for split /,/, $short;
	my $after = claim_map();
	my $missing = 0;
	for my $i (1 .. $n)
	{
		$missing++ unless ($after->{ $ids[ $i - 1 ] } // '') =~ /^claim-burst-$i\|/;
	}
	is($missing, 0, "after stop('immediate') all $n burst claims are there with their holders");
	is_deeply($after, \%live,
		'every unexpired claim is exactly as committed (holder, owner, token, times, attempts)');

	is(claim_committed('worker-next', 10, '1 hour', "id IN ($short)"),
		$short, 'the rows whose claim ran out while the server was down are claimable');
	is(attempts_of('worker-next'), '2,2,2', 'with attempts + 1');
	cmp_ok(claim_token_of('worker-next'), '>',
		max_of(@committed_tokens[0 .. $#committed_tokens - 1]),
		'and a token greater than every committed token before the immediate stop');
	# rows 1-7 (part 4) and 13-35 (this part, worker-next has 33-35 now)
	# are under live claims
	is( claim_committed('worker-late-claim', 100, '1 hour',
			'id <= 7 OR id BETWEEN 13 AND ' . (15 + $n)),
		'', 'no row under a live claim is handed out after the restart');
}

$node->stop;
done_testing();
