
# Copyright (c) dlock contributors
#
# t/030_standby_failover.pl - dlock on streaming standbys and across failover
# (issue 5, item 3).
#
# One primary and two streaming standbys (all with
# shared_preload_libraries = 'dlock'): "standby_async" (asynchronous) and
# "standby_sync" (the primary's synchronous_standby_names).  What this proves:
#
#  1. Leases replicate: after wait_for_catchup, dlock_locks on each standby is
#     row for row what it is on the primary (key, holder, owner, token,
#     acquired_at, expires_at), including a renew and a release.
#  2. On a standby every writing function (dlock_acquire, dlock_release,
#     dlock_renew, dlock_release_all, dlock_force_release, dlock_cleanup)
#     fails with SQLSTATE 25006 and a message naming the function, whatever the
#     arguments (a key the caller "holds" included), while the dlock_locks and
#     dlock_waiters views and dlock_stats() work.
#     dlock_validate and dlock_claimed are refused there too (25006): a
#     standby cannot fence a takeover on the primary.
#  3. Asynchronous failover with the standby behind: WAL replay on
#     standby_async is paused, more tokens are issued on the primary, then
#     standby_async is cut off from the primary (so that it also misses WAL
#     it never received: promotion replays whatever WAL was already streamed,
#     so a paused standby alone is not behind at promotion), more than a
#     sequence batch (32) of tokens is issued on the primary, and
#     standby_async is promoted.  It has not seen the last leases (proof that
#     it was behind), and every token it issues afterwards, for new keys and
#     for the keys whose grants it never saw, is greater than every token the
#     old primary issued: the promoted standby's sequence is moved up to its
#     clock (src/base/base_token.c).
#  4. Synchronous failover: an acquire on the primary returns after
#     standby_sync confirmed it; the primary is then stopped at once
#     (immediate) and standby_sync promoted: the lease is there with the same
#     holder, owner and token, the holder can renew and release it with that
#     token, others cannot take it, and new tokens are greater than all old.
#
# Claims (issue 3), on a table jobs(id int PRIMARY KEY, status):
#  1b. Claims replicate: after claims, a partial dlock_unclaim and a
#     dlock_renew_claims on the primary, dlock_claims on each standby is row
#     for row what it is on the primary (table, key, holder, owner, token,
#     claimed_at, expires_at, attempts), renewed expiry included, and the
#     given-back claim is gone there too.
#  2b. On a standby dlock_claim, dlock_unclaim (both forms),
#     dlock_renew_claims, dlock_reset_claims, dlock_claimed (on a row with a
#     live claim) and dlock_release_all of the claimer fail with 25006 and a
#     message naming the function; dlock_claims is unchanged afterwards, and
#     dlock_claims / dlock_dead_claims can be read there.
#  4b. Synchronous failover: a claim taken on the primary just before it is
#     stopped (immediate) is on the promoted standby_sync as it was; its
#     holder completes the rows under the dlock_claimed fence there, nobody
#     else gets any claimed row, and only unclaimed rows are handed out.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'dlock'
});
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION dlock');

# every token the old primary issued (committed or not: all must be below
# whatever a promoted standby issues)
my @old_tokens;

sub max_of { my $m; for (@_) { $m = $_ if !defined $m || $_ > $m } return $m }

sub acquire_on
{
	my ($node, $key, $holder, $ttl) = @_;
	$ttl //= '1 hour';
	my $t = $node->safe_psql('postgres',
		"SELECT dlock_acquire('$key', '$holder', '$ttl')");
	return $t;
}

# many acquires through one connection, each in its own transaction (psql
# autocommit); returns the tokens in order
sub acquire_many
{
	my ($node, @pairs) = @_;
	my $sql = join '',
	  map { "SELECT dlock_acquire('$_->[0]', '$_->[1]', '1 hour');\n" } @pairs;
	my @t = split /\n/, $node->safe_psql('postgres', $sql), -1;
	die 'acquire_many: ' . scalar(@t) . ' results for ' . scalar(@pairs) . ' acquires'
	  unless @t == @pairs;
	return @t;
}

# all unexpired leases, one line per lease, comparable across nodes
sub locks_on
{
	my ($node, $where) = @_;
	$where //= 'true';
	return $node->safe_psql('postgres',
		qq{SELECT key, holder, owner, token, acquired_at, expires_at
		     FROM dlock_locks WHERE $where ORDER BY key});
}

# all unexpired claims, one line per claim, comparable across nodes
sub claims_on
{
	my ($node, $where) = @_;
	$where //= 'true';
	return $node->safe_psql('postgres',
		qq{SELECT table_name, key, holder, owner, token, claimed_at, expires_at, attempts
		     FROM dlock_claims WHERE $where ORDER BY table_name::text, key});
}

# dlock_claim on jobs in its own transaction; returns the claimed ids ("1,2")
# and adds the claim's token to @old_tokens
sub claim_on
{
	my ($node, $holder, $n, $filter) = @_;
	my ($ids, $token) = split /\n/, $node->safe_psql('postgres', qq{
SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '')
  FROM dlock_claim(NULL::jobs, '$holder', $n, '1 hour', \$f\$$filter\$f\$);
SELECT coalesce(max(token)::text, '') FROM dlock_claims WHERE holder = '$holder';}), -1;
	push @old_tokens, $token if $ids ne '' && $node == $primary;
	return $ids;
}

# the timeline a node writes WAL on now
sub timeline_of
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		q{SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int}
	);
}

# a few leases before the standbys exist (they arrive with the base backup)
for my $i (1 .. 3)
{
	push @old_tokens, acquire_on($primary, "base/$i", "holder-$i");
}

$primary->backup('b1');
my $standby_async = PostgreSQL::Test::Cluster->new('standby_async');
$standby_async->init_from_backup($primary, 'b1', has_streaming => 1);
$standby_async->start;
my $standby_sync = PostgreSQL::Test::Cluster->new('standby_sync');
$standby_sync->init_from_backup($primary, 'b1', has_streaming => 1);
$standby_sync->start;

# standby_sync becomes synchronous (cluster_name is its application_name)
$primary->safe_psql('postgres',
	q{ALTER SYSTEM SET synchronous_standby_names = 'standby_sync'});
$primary->reload;
ok( $primary->poll_query_until(
		'postgres',
		q{SELECT sync_state = 'sync' FROM pg_stat_replication
		   WHERE application_name = 'standby_sync'}),
	'standby_sync is the synchronous standby');
is( $primary->safe_psql('postgres',
		q{SELECT sync_state FROM pg_stat_replication
		   WHERE application_name = 'standby_async'}),
	'async',
	'standby_async is asynchronous');

# ---------------------------------------------------------------------------
# 1. leases replicate
# ---------------------------------------------------------------------------
push @old_tokens, acquire_many($primary, map { [ "repl/$_", "holder-$_" ] } 1 .. 5);
is($primary->safe_psql('postgres', q{SELECT dlock_renew('repl/2', 'holder-2', '2 hours')}),
	't', 'renew on the primary');
is($primary->safe_psql('postgres', q{SELECT dlock_release('repl/3', 'holder-3')}),
	't', 'release on the primary');
# releases commit without waiting for their flush; a later write flushes it
push @old_tokens, acquire_on($primary, 'repl/flush', 'holder-flush');

$primary->wait_for_catchup($standby_async);
$primary->wait_for_catchup($standby_sync);

my $primary_locks = locks_on($primary);
is(scalar(split /\n/, $primary_locks), 3 + 4 + 1,
	'the primary has the expected leases');
is(locks_on($standby_async), $primary_locks,
	'dlock_locks on standby_async equals the primary (holder, owner, token, times)');
is(locks_on($standby_sync), $primary_locks,
	'dlock_locks on standby_sync equals the primary');
is(locks_on($standby_async, q{key = 'repl/3'}), '',
	'the released lease is gone on the standby too');
like(locks_on($standby_async, q{key = 'repl/2'}), qr/^repl\/2\|holder-2\|/,
	'the renewed lease is on the standby');
is( $standby_async->safe_psql('postgres',
		q{SELECT expires_at - acquired_at > interval '90 minutes' FROM dlock_locks WHERE key = 'repl/2'}),
	't',
	'with the renewed expiry');

# claims replicate too
$primary->safe_psql('postgres', q{
CREATE TABLE jobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0);
INSERT INTO jobs SELECT generate_series(1, 10);
});
is(claim_on($primary, 'repl-claimer', 4, 'status = 0'), '1,2,3,4',
	'repl-claimer claims rows 1-4 on the primary');
is(claim_on($primary, 'repl-other', 2, 'status = 0'), '5,6',
	'repl-other claims rows 5-6 on the primary');
is( $primary->safe_psql('postgres',
		q{SELECT dlock_unclaim('jobs', 'repl-other', '{6}'::int[])}),
	'1', 'repl-other gives row 6 back on the primary');
is( $primary->safe_psql('postgres',
		q{SELECT dlock_renew_claims('jobs', 'repl-claimer', '2 hours')}),
	'4', 'repl-claimer renews its claims on the primary');
$primary->wait_for_catchup($standby_async);
$primary->wait_for_catchup($standby_sync);

my $primary_claims = claims_on($primary);
is(scalar(split /\n/, $primary_claims), 5, 'the primary has the expected claims');
is(claims_on($standby_async), $primary_claims,
	'dlock_claims on standby_async equals the primary (holder, owner, token, times, attempts)');
is(claims_on($standby_sync), $primary_claims,
	'dlock_claims on standby_sync equals the primary');
is(claims_on($standby_async, q{key = '6'}), '',
	'the claim given back is gone on the standby too');
is( $standby_async->safe_psql('postgres',
		q{SELECT count(*) FROM dlock_claims
		   WHERE holder = 'repl-claimer' AND expires_at - claimed_at > interval '90 minutes'}),
	'4',
	'the renewed claims are on the standby with the renewed expiry');

# ---------------------------------------------------------------------------
# 2. a standby is read-only for dlock; the views work
# ---------------------------------------------------------------------------
sub expect_read_only
{
	my ($node, $sql, $fn) = @_;
	my ($stdout, $stderr);
	my $rc = $node->psql(
		'postgres', $sql,
		stdout => \$stdout,
		stderr => \$stderr,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	isnt($rc, 0, "$fn fails on a standby");
	like(
		$stderr,
		qr/ERROR:\s+25006: cannot execute \Q$fn\E during recovery/,
		"$fn on a standby: SQLSTATE 25006, message names the function");
	return;
}

my $tok1 = $primary->safe_psql('postgres',
	q{SELECT token FROM dlock_locks WHERE key = 'repl/1'});
for my $case (
	[ q{SELECT dlock_acquire('standby/new', 'holder-x')}, 'dlock_acquire()' ],
	[ q{SELECT dlock_acquire('repl/1', 'holder-1')}, 'dlock_acquire()' ],
	[ q{SELECT dlock_acquire('repl/1', 'holder-other', '1 min', '1 s')}, 'dlock_acquire()' ],
	[ q{SELECT dlock_release('repl/1', 'holder-1')}, 'dlock_release()' ],
	[ qq{SELECT dlock_release('repl/1', 'holder-1', $tok1)}, 'dlock_release()' ],
	[ q{SELECT dlock_renew('repl/1', 'holder-1')}, 'dlock_renew()' ],
	[ qq{SELECT dlock_renew('repl/1', 'holder-1', '1 hour', $tok1)}, 'dlock_renew()' ],
	[ q{SELECT dlock_release_all('holder-1')}, 'dlock_release_all()' ],
	[ q{SELECT dlock_release_all('nobody')}, 'dlock_release_all()' ],
	[ q{SELECT dlock_force_release('repl/1')}, 'dlock_force_release()' ],
	[ q{SELECT dlock_force_release('no/such/key')}, 'dlock_force_release()' ],
	[ q{SELECT dlock_cleanup('0')}, 'dlock_cleanup()' ],)
{
	expect_read_only($standby_async, @$case);
}
is(locks_on($standby_async), $primary_locks,
	'nothing changed on the standby after the refused calls');

# claims on a standby: every writing function and the fence are refused
for my $case (
	[ q{SELECT * FROM dlock_claim(NULL::jobs, 'standby-worker', 1)}, 'dlock_claim()' ],
	[ q{SELECT id FROM dlock_claim(NULL::jobs, 'repl-claimer', 10, '1 hour', 'id > 6')},
		'dlock_claim()' ],
	[ q{SELECT dlock_unclaim('jobs', 'repl-claimer')}, 'dlock_unclaim()' ],
	[ q{SELECT dlock_unclaim('jobs', 'repl-claimer', '{1,2}'::int[])}, 'dlock_unclaim()' ],
	[ q{SELECT dlock_renew_claims('jobs', 'repl-claimer')}, 'dlock_renew_claims()' ],
	[ q{SELECT dlock_renew_claims('jobs', 'repl-claimer', '3 hours')}, 'dlock_renew_claims()' ],
	[ q{SELECT dlock_reset_claims('jobs', '{1}'::int[])}, 'dlock_reset_claims()' ],
	[ q{SELECT dlock_claimed('jobs', 1, 'repl-claimer')}, 'dlock_claimed()' ],
	[ q{SELECT dlock_release_all('repl-claimer')}, 'dlock_release_all()' ],)
{
	expect_read_only($standby_async, @$case);
}
is(claims_on($standby_async), $primary_claims,
	'no claim changed on the standby after the refused calls');
is( $standby_async->safe_psql('postgres',
		q{SELECT (SELECT count(*) FROM dlock_claims) || '/' || count(*) FROM dlock_dead_claims}),
	'5/0', 'dlock_claims and dlock_dead_claims can be read on a standby');

is($standby_async->safe_psql('postgres', 'SELECT count(*) FROM dlock_waiters'),
	'0', 'dlock_waiters works on a standby');
is( $standby_async->safe_psql('postgres',
		'SELECT count(*), bool_and(acquired >= 0 AND releases >= 0) FROM dlock_stats()'),
	'1|t',
	'dlock_stats() works on a standby (one row)');

# dlock_validate and dlock_claimed on a standby are refused with 25006: a
# standby cannot hold off a takeover on the primary, so a "true" there would
# be a fence that does not hold.
foreach my $q (
	qq{SELECT dlock_validate('repl/1', 'holder-1', $tok1)},
	q{SELECT dlock_claimed('pg_class', 1, 'holder-1')})
{
	my ($v_out, $v_err);
	my $v_rc = $standby_async->psql(
		'postgres', $q,
		stdout => \$v_out,
		stderr => \$v_err,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	isnt($v_rc, 0, "refused on a standby: $q");
	like($v_err, qr/ERROR:\s+25006: /,
		"refused with SQLSTATE 25006 on a standby: $q");
}

# ---------------------------------------------------------------------------
# 3. asynchronous failover: standby_async behind, then promoted
# ---------------------------------------------------------------------------
$standby_async->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
ok( $standby_async->poll_query_until(
		'postgres', q{SELECT pg_get_wal_replay_pause_state() = 'paused'}),
	'WAL replay on standby_async is paused');

# batch 1: streamed to standby_async but not replayed
push @old_tokens, acquire_many($primary,
	map { [ "async1/$_", "a1-$_" ] } 1 .. 40);

# cut standby_async off: it will miss everything from here on.  Changing
# primary_conninfo does not restart the WAL receiver while replay is paused,
# so the primary also ends the walsender; the WAL receiver exits with it and
# a paused startup process does not start another one (nor would it connect
# anywhere with an empty primary_conninfo).
$standby_async->append_conf('postgresql.conf', q{primary_conninfo = ''});
$standby_async->reload;
$primary->safe_psql('postgres',
	q{SELECT pg_terminate_backend(pid) FROM pg_stat_replication
	   WHERE application_name = 'standby_async'});
ok( $primary->poll_query_until(
		'postgres',
		q{SELECT count(*) = 0 FROM pg_stat_replication
		   WHERE application_name = 'standby_async'}),
	'standby_async is disconnected from the primary');
ok( $standby_async->poll_query_until(
		'postgres', q{SELECT count(*) = 0 FROM pg_stat_wal_receiver}),
	'standby_async has no WAL receiver any more');

# batch 2: never reaches standby_async; more than a sequence batch (32 values)
# so that the sequence on the primary runs past anything the standby saw,
# including re-grants of keys the standby saw held
my %batch2;
my @b2 = acquire_many($primary, map { [ "async2/$_", "a2-$_" ] } 1 .. 60);
$batch2{"async2/$_"} = $b2[ $_ - 1 ] for 1 .. 60;
push @old_tokens, @b2;
# and new grants of a key the standby saw held
is($primary->safe_psql('postgres', q{SELECT dlock_release('base/1', 'holder-1')}),
	't', 'base/1 released on the old primary after the standby was cut off');
my $base1_lost = acquire_on($primary, 'base/1', 'holder-1b');
push @old_tokens, $base1_lost;
is(scalar(grep { /^\d+$/ } @old_tokens), scalar(@old_tokens),
	'every acquire on the old primary got a token');
my $old_max = max_of(@old_tokens);
note "highest token issued by the old primary: $old_max";

$standby_async->promote;
ok( $standby_async->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'standby_async is promoted');

is( $standby_async->safe_psql('postgres',
		q{SELECT count(*) FROM dlock_locks WHERE key LIKE 'async2/%'}),
	'0',
	'the promoted standby never saw the last leases of the old primary (it was behind)'
);
my $new_tli = timeline_of($standby_async);
cmp_ok($new_tli, '>', timeline_of($primary),
	'the promoted standby writes on a new timeline');

# what makes this test bite: the promoted standby's token sequence is behind
# the old primary's, so a bare sequence would hand out old tokens again
cmp_ok(
	$standby_async->safe_psql('postgres', 'SELECT last_value FROM dlock.token_seq'),
	'<', $old_max,
	'the promoted standby\'s token sequence is behind the old primary\'s last token');

# new tokens on the promoted standby: new keys, and the keys whose newest
# grants it never saw (their old holders wrote with those tokens)
my @new_tokens;
push @new_tokens, acquire_on($standby_async, 'after/1', 'new-1');
push @new_tokens, acquire_on($standby_async, "async2/$_", "new-holder-$_")
  for (1, 30, 60);
push @new_tokens, acquire_on($standby_async, 'after/2', 'new-2');
# base/1: the promoted standby still has holder-1's lease (it never saw the
# release nor holder-1b's grant): after an asynchronous failover two clients
# may believe they hold base/1, and only the fencing token tells them apart:
# holder-1's token is lower than holder-1b's, so a store that has seen
# holder-1b's writes refuses holder-1's.  The next grant beats both.
my $base1_kept = $standby_async->safe_psql('postgres',
	q{SELECT token FROM dlock_locks WHERE key = 'base/1' AND holder = 'holder-1'});
cmp_ok($base1_kept, '<', $base1_lost,
	'base/1 on the promoted standby is the older grant, with the lower token');
is( $standby_async->safe_psql('postgres',
		q{SELECT dlock_release('base/1', 'holder-1')}),
	't', 'holder-1 releases base/1 on the promoted standby');
push @new_tokens, acquire_on($standby_async, 'base/1', 'new-base-holder');
is(scalar(grep { /^\d+$/ } @new_tokens), 6,
	'the promoted standby grants new keys and the keys it never saw taken');
my $low = (sort { $a <=> $b } @new_tokens)[0];
cmp_ok($low, '>', $old_max,
	'every token the promoted standby issues is greater than every token the old primary issued'
);
cmp_ok($new_tokens[1], '>', $batch2{'async2/1'},
	'async2/1: the new grant has a greater token than the lost grant on the old primary');
cmp_ok($new_tokens[5], '>', $base1_lost,
	'base/1: the new grant has a greater token than the lost grant on the old primary');
is( $standby_async->safe_psql('postgres',
		"SELECT $low >= (extract(epoch FROM clock_timestamp() - interval '10 min') * 1e6)::bigint"),
	't', 'the promoted standby\'s tokens start again at its clock');
# leases the standby had replayed are still held: not up for grabs
is( $standby_async->safe_psql('postgres',
		q{SELECT dlock_acquire('repl/2', 'someone-else')}),
	'',
	'a lease the promoted standby had replayed is still held (acquire by another holder: NULL)'
);

# ---------------------------------------------------------------------------
# 4. synchronous failover: the acquired lease survives
# ---------------------------------------------------------------------------
is( $primary->safe_psql('postgres',
		q{SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby_sync'}),
	'sync',
	'standby_sync is still the synchronous standby');
my $sync_token = acquire_on($primary, 'sync/key', 'sync-holder', '1 hour');
like($sync_token, qr/^\d+$/, 'acquire on the primary (synchronous commit)');
push @old_tokens, $sync_token;
my $sync_lease = locks_on($primary, q{key = 'sync/key'});
is(claim_on($primary, 'sync-claimer', 2, 'id IN (7, 8)'), '7,8',
	'claim of rows 7-8 on the primary (synchronous commit)');
my $sync_claims = claims_on($primary, q{holder = 'sync-claimer'});
# all tokens the primary issued, also those standby_sync has seen
$old_max = max_of(@old_tokens);

# fail over at once: no catch-up wait, no clean shutdown
$primary->stop('immediate');
$standby_sync->promote;
ok( $standby_sync->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'standby_sync is promoted');

is(locks_on($standby_sync, q{key = 'sync/key'}), $sync_lease,
	'the lease acquired just before the failover is on the new primary (holder, owner, token, times)'
);
is( $standby_sync->safe_psql('postgres',
		q{SELECT dlock_acquire('sync/key', 'other-holder')}),
	'', 'another holder cannot take it on the new primary');
is( $standby_sync->safe_psql('postgres',
		q{SELECT dlock_acquire('sync/key', 'sync-holder', '1 hour')}),
	$sync_token,
	'its holder re-acquiring on the new primary gets the same token back');
is( $standby_sync->safe_psql('postgres',
		qq{SELECT dlock_renew('sync/key', 'sync-holder', '1 hour', $sync_token)}),
	't', 'its holder renews it with its token on the new primary');
is( $standby_sync->safe_psql('postgres',
		qq{SELECT dlock_validate('sync/key', 'sync-holder', $sync_token)}),
	't', 'and validates it');
my $t_new = acquire_on($standby_sync, 'sync/after', 'new-holder');
cmp_ok($t_new, '>', $old_max,
	'a new token on the new primary is greater than every token the old primary issued');
is( $standby_sync->safe_psql('postgres',
		qq{SELECT dlock_release('sync/key', 'sync-holder', $sync_token)}),
	't', 'its holder releases it on the new primary');
my $t_again = acquire_on($standby_sync, 'sync/key', 'other-holder');
cmp_ok($t_again, '>', $sync_token,
	'the next holder of sync/key gets a greater token');

is(claims_on($standby_sync, q{holder = 'sync-claimer'}), $sync_claims,
	'the claim taken just before the failover is on the new primary (token, times, attempts)');
is( $standby_sync->safe_psql('postgres', q{
WITH u AS (UPDATE jobs SET status = 1
            WHERE id IN (7, 8) AND dlock_claimed('jobs', id, 'sync-claimer')
           RETURNING id)
SELECT string_agg(id::text, ',' ORDER BY id) FROM u}),
	'7,8', 'its holder completes the rows under the fence on the new primary');
is(claim_on($standby_sync, 'sync-other', 100, 'true'), '6,9,10',
	'another worker on the new primary gets only the rows nobody had claimed');
is( $standby_sync->safe_psql('postgres',
		q{SELECT dlock_unclaim('jobs', 'sync-claimer')}),
	'2', 'the holder gives its claims back on the new primary');

$standby_async->stop;
$standby_sync->stop;
done_testing();
