
# Copyright (c) dlock contributors
#
# t/021_multi_crash.pl - dlock_acquire_all across a crash (issue 26).
#
#  1. A committed dlock_acquire_all of three keys, then stop('immediate'):
#     after the restart all three leases are there, with their holder and
#     tokens.
#  2. A dlock_acquire_all inside an open transaction (its tokens shown to
#     the client, no COMMIT), then stop('immediate'): after the restart
#     none of its keys is held, and another holder gets them all at once
#     (wait = 0), with tokens greater than every committed token.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('multi_crash');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'dlock'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock');

# "key|holder|token" of every live lease whose key starts with $prefix
sub leases
{
	my ($prefix) = @_;
	return $node->safe_psql('postgres',
		qq{SELECT string_agg(key || '|' || holder || '|' || token, ',' ORDER BY key)
		     FROM dlock_locks WHERE key LIKE '$prefix%'});
}

# 1. committed: kept
my $t = $node->safe_psql('postgres',
	q{SELECT array_to_string(dlock_acquire_all('{mc:c,mc:a,mc:b}', 'w1', '1 hour'), ',')});
my @tok = split /,/, $t;
is(scalar(@tok), 3, 'committed dlock_acquire_all returned three tokens');
my $before = leases('mc:');
is($before, "mc:a|w1|$tok[1],mc:b|w1|$tok[2],mc:c|w1|$tok[0]",
	'the three leases are held, each with its token');

$node->stop('immediate');
$node->start;
is(leases('mc:'), $before,
	'after a crash the committed leases are all there, same holder and tokens');

# 2. uncommitted: gone
my $s = $node->background_psql('postgres', on_error_stop => 0);
$s->query_safe('BEGIN');
my $u = $s->query_safe(
	q{SELECT array_to_string(dlock_acquire_all('{mc:x,mc:y}', 'w2', '1 hour'), ',')});
like($u, qr/^\d+,\d+$/, 'dlock_acquire_all in an open transaction returned tokens');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM dlock_locks WHERE key IN ('mc:x', 'mc:y')}),
	'0',
	'the uncommitted leases are invisible to other sessions');

$node->stop('immediate');
eval { $s->quit; };
$node->start;

is(leases('mc:'), $before, 'after a crash before COMMIT: only the committed leases');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM dlock.lease WHERE key IN ('mc:x', 'mc:y') AND holder IS NOT NULL}),
	'0',
	'no row holds mc:x or mc:y');
my $v = $node->safe_psql('postgres',
	q{SELECT array_to_string(dlock_acquire_all('{mc:x,mc:y}', 'w3', '1 hour', '0'), ',')});
my @vt = split /,/, $v;
is(scalar(@vt), 2, 'another holder gets both keys at once');
my $max_committed = (sort { $b <=> $a } @tok)[0];
ok($vt[0] > $max_committed && $vt[1] > $max_committed,
	'with tokens greater than every committed token');

$node->stop;
done_testing();
