
# Copyright (c) dlock contributors
#
# t/036_semaphores.pl - holders of a counting semaphore and shared leases
# (issue 26) across a crash restart and a failover.
#
# A primary (shared_preload_libraries = 'dlock') with a synchronous
# streaming standby.  Semaphore sem:k (slots 3) has three holders of two
# roles, a lease sem:lease one holder, and sem:shared two shared holders.
#
#  1. Crash: after an immediate stop and a start of the primary, dlock_locks
#     shows the same three holders (holder, owner, token) and the lease; a
#     fourth holder gets NULL, an acquire naming other slots gets 22023,
#     each holder validates with its own token; a freed slot goes to a new
#     holder with a token greater than every token before the crash.  The
#     shared holders are there too: a third shares, the lease is refused.
#  0. The library ahead of the extension: in a database still at dlock 0.3
#     (no slot columns), leases work as before (acquire, renew, release);
#     ALTER EXTENSION dlock UPDATE keeps a held lease (slot 0), which its
#     holder then renews and releases, and semaphores work from then on.
#  2. Failover: the standby has the same holders; the primary is stopped
#     at once and the standby promoted: the holders are there with their
#     tokens, the semaphore is still full (NULL for a fifth holder), each
#     holder renews and releases its own slot only, and a slot freed there
#     goes to a new holder with a token greater than all the old primary's.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

sub max_of { my $m; for (@_) { $m = $_ if !defined $m || $_ > $m } return $m }

my $primary = PostgreSQL::Test::Cluster->new('sem_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'dlock'");
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION dlock');
$primary->safe_psql('postgres', 'CREATE ROLE regress_dlock_sem NOLOGIN');

my @all_tokens;
my %token;

# 0. a database at 0.3, then updated
$primary->safe_psql('postgres', 'CREATE DATABASE old03');
$primary->safe_psql('old03', q{CREATE EXTENSION dlock VERSION '0.3'});
my $t03 = $primary->safe_psql('old03', q{SELECT dlock_acquire('old:k', 'h', '1 hour')});
like($t03, qr/^\d+$/, 'dlock 0.3 tables: a lease is granted');
is($primary->safe_psql('old03',
		q{SELECT dlock_acquire('old:k', 'other', '1 hour') IS NULL, dlock_renew('old:k', 'h'),
		         dlock_acquire('old:free', 'h', '1 hour') IS NOT NULL, dlock_release('old:free', 'h')}),
	't|t|t|t', 'dlock 0.3 tables: refused to others, renewed, another key granted and released');
$primary->safe_psql('old03', 'ALTER EXTENSION dlock UPDATE');
is($primary->safe_psql('old03',
		q{SELECT holder, token FROM dlock_locks WHERE key = 'old:k'}),
	"h|$t03", 'after the update: the lease is still held, same token');
is($primary->safe_psql('old03',
		qq{SELECT dlock_acquire('old:k', 'other', '1 hour') IS NULL,
		          dlock_renew('old:k', 'h', NULL, $t03), dlock_release('old:k', 'h', $t03),
		          dlock_acquire('old:k', 'a', '1 hour', '0', 2) > $t03,
		          dlock_acquire('old:k', 'b', '1 hour', '0', 2) IS NOT NULL,
		          dlock_acquire('old:k', 'c', '1 hour', '0', 2) IS NULL}),
	't|t|t|t|t|t', 'after the update: the holder renews and releases it; then a semaphore of 2');
$primary->safe_psql('postgres', 'DROP DATABASE old03');

sub acquire
{
	my ($node, $holder, $role) = @_;
	my $set_role = $role ? "SET ROLE $role;" : '';
	my $t = $node->safe_psql('postgres',
		"$set_role SELECT dlock_acquire('sem:k', '$holder', '1 hour', '0', 3)");
	push @all_tokens, $t if $t ne '';
	return $t;
}

sub holders
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		q{SELECT key, holder, owner, token FROM dlock_locks
		   WHERE key LIKE 'sem:%' ORDER BY key, holder});
}

$token{a} = acquire($primary, 'a');
$token{b} = acquire($primary, 'b', 'regress_dlock_sem');
$token{c} = acquire($primary, 'c');
like($token{$_}, qr/^\d+$/, "slot granted to $_") for qw(a b c);
ok($token{a} < $token{b} && $token{b} < $token{c}, 'tokens grow across holders');
is(acquire($primary, 'd'), '', 'a fourth holder gets NULL');
push @all_tokens, $primary->safe_psql('postgres',
	q{SELECT dlock_acquire('sem:lease', 'l', '1 hour')});
push @all_tokens, split /\n/, $primary->safe_psql('postgres',
	q{SELECT dlock_acquire_shared('sem:shared', 'r1', '1 hour');
	  SELECT dlock_acquire_shared('sem:shared', 'r2', '1 hour')});
my $before = holders($primary);
is(scalar(split /\n/, $before), 6, 'three holders, a lease and two shared holders before the crash');

# 1. crash restart
$primary->stop('immediate');
$primary->start;
is(holders($primary), $before, 'after a crash restart: the same holders, owners and tokens');
is(acquire($primary, 'd'), '', 'after the crash: still full, a fourth holder gets NULL');
is($primary->safe_psql('postgres',
		q{SELECT dlock_acquire('sem:shared', 'w', '1 hour') IS NULL,
		         dlock_acquire_shared('sem:shared', 'r3', '1 hour') IS NOT NULL,
		         dlock_release('sem:shared', 'r3')}),
	't|t|t', 'after the crash: the shared holders keep the lease out, a third shares');
my ($ret, $out, $err) = $primary->psql('postgres',
	q{SELECT dlock_acquire('sem:k', 'd', '1 hour', '0', 2)},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/22023/, 'after the crash: other slots are an error (22023)');
is($primary->safe_psql('postgres',
		"SELECT dlock_validate('sem:k', 'a', $token{a}), dlock_validate('sem:k', 'c', $token{c});"
		  . "SET ROLE regress_dlock_sem; SELECT dlock_validate('sem:k', 'b', $token{b})"),
	"t|t\nt", 'after the crash: each holder validates with its own token');
is($primary->safe_psql('postgres', "SELECT dlock_release('sem:k', 'c', $token{c})"),
	't', 'c releases its slot');
my $max_before = max_of(@all_tokens);
$token{d} = acquire($primary, 'd');
ok($token{d} > $max_before, 'the freed slot goes to d, with a token greater than all before the crash');

# 2. a synchronous standby, then failover
$primary->backup('sem_b');
my $standby = PostgreSQL::Test::Cluster->new('sem_standby');
$standby->init_from_backup($primary, 'sem_b', has_streaming => 1);
$standby->append_conf('postgresql.conf', "shared_preload_libraries = 'dlock'");
$standby->start;
$primary->append_conf('postgresql.conf', "synchronous_standby_names = '*'");
$primary->reload;
$primary->safe_psql('postgres', q{SELECT dlock_renew('sem:k', 'a', '2 hours')});
$primary->wait_for_catchup($standby);
my $on_primary = holders($primary);
is(scalar(split /\n/, $on_primary), 6, 'three holders (a, b, d), a lease and two shared holders on the primary');
is(holders($standby), $on_primary, 'the standby shows the same holders');

$primary->stop('immediate');
$standby->promote;
is(holders($standby), $on_primary, 'after promotion: the same holders, owners and tokens');
is(acquire($standby, 'e'), '', 'after promotion: still full, a fifth holder gets NULL');
is($standby->safe_psql('postgres',
		"SELECT dlock_renew('sem:k', 'a', NULL, $token{b}), dlock_release('sem:k', 'a', $token{b}),"
		  . " dlock_release('sem:k', 'b'), dlock_renew('sem:k', 'a', NULL, $token{a})"),
	'f|f|f|t', 'after promotion: a holder renews its own slot only; b is another role');
is($standby->safe_psql('postgres',
		"SET ROLE regress_dlock_sem; SELECT dlock_release('sem:k', 'b', $token{b})"),
	't', 'b releases its own slot');
my $max_old = max_of(@all_tokens);
my $te = acquire($standby, 'e');
ok($te > $max_old, 'the freed slot goes to e, with a token greater than all the old primary issued');
is($standby->safe_psql('postgres',
		q{SELECT count(*) FROM dlock_locks WHERE key = 'sem:k'}),
	'3', 'three holders after the failover');

$standby->stop;
done_testing();
