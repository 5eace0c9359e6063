
# Copyright: dlock contributors
#
# 001_crash_restart.pl: leases are WAL-logged rows and tokens only grow.
#
# For a node without dlock in shared_preload_libraries and one with it:
#  - leases committed before an immediate shutdown (a crash: no checkpoint)
#    are all there after restart, with the same holders, owners and tokens,
#    and still validate;
#  - an acquire that was not committed at the crash never happened (its token
#    may be handed out again, like any value of a PostgreSQL sequence used by
#    a transaction that never committed: a client must not use a token before
#    its acquire committed, so that token is not compared with later ones);
#  - a release committed in an explicit transaction block survives the crash;
#    a release committed on its own (autocommit) may be lost (dlock commits
#    such a transaction without waiting for its WAL flush, see src/lease/lease_xact.c),
#    and then the lease is back with its releasing holder and the very same
#    token, never with anybody else;
#  - every token issued after the restart is greater than every token issued
#    before it, including a burst of 100 acquire/release pairs committed just
#    before the crash (the token sequence only writes WAL every 32 values);
#  - tokens are kept at or above the server's clock in microseconds since
#    1970 (less at most 10 ms), see src/base/base_token.c.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

sub crash_restart_test
{
	my ($name, $preload) = @_;

	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'dlock'") if $preload;
	$node->start;

	$node->safe_psql('postgres', 'CREATE EXTENSION dlock');
	$node->safe_psql('postgres', 'CREATE ROLE regress_dlock_worker NOLOGIN');

	# five leases with a long ttl: three of the superuser, two of another role
	my %token;
	for my $i (1 .. 5)
	{
		my $set_role = $i > 3 ? 'SET ROLE regress_dlock_worker;' : '';
		$token{"crash:$i"} = $node->safe_psql('postgres',
			"$set_role SELECT dlock_acquire('crash:$i', 'holder-$i', '1 hour')");
		like($token{"crash:$i"}, qr/^\d+$/, "$name: lease crash:$i granted");
	}
	my $leases_sql = "SELECT key, holder, owner, token FROM dlock_locks"
	  . " WHERE key ~ '^crash:[0-9]+\$' ORDER BY key";
	my $before = $node->safe_psql('postgres', $leases_sql);
	my @before_rows = split /\n/, $before;
	is(scalar(@before_rows), 5, "$name: five leases before the crash");

	# releases committed in explicit transaction blocks
	my @xrel_tokens;
	for my $k ('crash:xrel', 'crash:xrel_all')
	{
		push @xrel_tokens, $node->safe_psql('postgres',
			"SELECT dlock_acquire('$k', '$k', '1 hour')");
		like($xrel_tokens[-1], qr/^\d+$/, "$name: lease $k granted");
	}
	is($node->safe_psql('postgres',
		"BEGIN; SELECT dlock_release('crash:xrel', 'crash:xrel'); COMMIT;"),
		't', "$name: crash:xrel released in a transaction block");
	is($node->safe_psql('postgres',
		"BEGIN; SELECT dlock_release_all('crash:xrel_all'); COMMIT;"),
		'1', "$name: crash:xrel_all released by release_all in a transaction block");

	# 100 acquire/release pairs, each committed on its own
	my $sql = '';
	for my $i (1 .. 100)
	{
		$sql .= "SELECT dlock_acquire('crash:burst', 'burst', '1 hour');\n"
		  . "SELECT dlock_release('crash:burst', 'burst');\n";
	}
	my @lines = split /\n/, $node->safe_psql('postgres', $sql);
	is(scalar(@lines), 200, "$name: burst ran 200 statements");
	my @burst = @lines[ grep { $_ % 2 == 0 } 0 .. $#lines ];
	my @released = @lines[ grep { $_ % 2 == 1 } 0 .. $#lines ];
	is(scalar(grep { $_ eq 't' } @released), 100, "$name: burst released 100 times");
	my $increasing = 1;
	for my $i (1 .. $#burst)
	{
		$increasing = 0 unless $burst[$i] =~ /^\d+$/ && $burst[$i] > $burst[ $i - 1 ];
	}
	ok($increasing, "$name: burst tokens strictly increase");

	# the greatest token issued so far, computed by the server (bigint)
	my $all_tokens = join(',', values(%token), @xrel_tokens, @burst);
	my $max_before = $node->safe_psql('postgres',
		"SELECT max(t) FROM unnest(ARRAY[$all_tokens]::bigint[]) t");
	is($max_before, $burst[-1], "$name: the last burst token is the greatest");

	is($node->safe_psql('postgres',
		"SELECT bool_and(t BETWEEN (extract(epoch FROM clock_timestamp() - interval '10 min') * 1e6)::bigint"
		  . " AND (extract(epoch FROM clock_timestamp()) * 1e6)::bigint + 100000)"
		  . " FROM unnest(ARRAY[$all_tokens]::bigint[]) t"),
		't', "$name: tokens follow the server's clock in microseconds since 1970");

	# an acquire still open at the crash
	my $open = $node->background_psql('postgres');
	$open->query_safe('BEGIN');
	my $open_token = $open->query_safe(
		"SELECT dlock_acquire('crash:open', 'open', '1 hour')");
	like($open_token, qr/^\d+$/, "$name: uncommitted acquire got a token");

	# crash
	$node->stop('immediate');
	$open->quit;
	$node->start;

	my $after = $node->safe_psql('postgres', $leases_sql);
	is($after, $before,
		"$name: after the crash, the same leases with the same holders, owners and tokens");

	for my $i (1 .. 5)
	{
		my $set_role = $i > 3 ? 'SET ROLE regress_dlock_worker;' : '';
		is($node->safe_psql('postgres',
			"$set_role SELECT dlock_validate('crash:$i', 'holder-$i', $token{\"crash:$i\"})"),
			't', "$name: lease crash:$i still validates");
	}
	is($node->safe_psql('postgres',
		"SELECT count(*) FROM dlock_locks WHERE key IN ('crash:xrel', 'crash:xrel_all')"),
		'0', "$name: releases committed in transaction blocks survived the crash");
	my $burst_after = $node->safe_psql('postgres',
		"SELECT holder || ' ' || token FROM dlock_locks WHERE key = 'crash:burst'");
	ok($burst_after eq '' || $burst_after eq "burst $burst[-1]",
		"$name: the burst key is free, or (autocommit release lost) held by its"
		  . " releasing holder with the last burst token");
	note("$name: burst key after the crash: "
		  . ($burst_after eq '' ? 'free' : "held again ($burst_after): the last release was lost"));
	is($node->safe_psql('postgres',
		"SELECT count(*) FROM dlock_locks WHERE key = 'crash:open'"),
		'0', "$name: the uncommitted acquire never happened");
	is($node->safe_psql('postgres',
		"SELECT dlock_acquire('crash:1', 'someone-else', '1 hour') IS NULL"),
		't', "$name: a lease from before the crash still keeps others out");

	# new grants: all greater than anything from before the crash
	my $t_open = $node->safe_psql('postgres',
		"SELECT dlock_acquire('crash:open', 'open2', '1 hour')");
	like($t_open, qr/^\d+$/, "$name: the key of the uncommitted acquire is free");
	is($node->safe_psql('postgres', "SELECT ${t_open}::bigint > ${max_before}::bigint"),
		't', "$name: first token after restart greater than every token before the crash");

	is($node->safe_psql('postgres', "SELECT dlock_release('crash:1', 'holder-1')"),
		't', "$name: release of a lease from before the crash");
	my $t1 = $node->safe_psql('postgres',
		"SELECT dlock_acquire('crash:1', 'holder-1', '1 hour')");
	is($node->safe_psql('postgres',
		"SELECT ${t1}::bigint > ${max_before}::bigint AND ${t1}::bigint > ${t_open}::bigint"),
		't', "$name: release + acquire gives a token greater than every earlier one");
	my $t_burst = $node->safe_psql('postgres',
		"SELECT dlock_acquire('crash:burst', 'burst2', '1 hour', '0')");
	if ($burst_after eq '')
	{
		is($node->safe_psql('postgres', "SELECT ${t_burst}::bigint > ${t1}::bigint"),
			't', "$name: the burst key's next token is greater still");
	}
	else
	{
		# the lost release left the lease to 'burst'; release it as 'burst'
		is($t_burst, '', "$name: the burst key's lease keeps others out");
		is($node->safe_psql('postgres', "SELECT dlock_release('crash:burst', 'burst')"),
			't', "$name: the burst holder releases it again");
		$t_burst = $node->safe_psql('postgres',
			"SELECT dlock_acquire('crash:burst', 'burst2', '1 hour', '0')");
		is($node->safe_psql('postgres', "SELECT ${t_burst}::bigint > ${t1}::bigint"),
			't', "$name: the burst key's next token is greater still");
	}

	# a second crash, right after new tokens were issued
	$node->stop('immediate');
	$node->start;
	my $t_again = $node->safe_psql('postgres',
		"SELECT dlock_acquire('crash:again', 'again', '1 hour')");
	is($node->safe_psql('postgres', "SELECT ${t_again}::bigint > ${t_burst}::bigint"),
		't', "$name: after a second crash, tokens still grow");
	is($node->safe_psql('postgres',
		"SELECT count(*) FROM dlock_locks WHERE key LIKE 'crash:%'"),
		'8', "$name: all committed leases survived the second crash");

	$node->stop;
	return;
}

crash_restart_test('no_preload', 0);
crash_restart_test('preload', 1);

done_testing();
