
# Copyright: dlock contributors
#
# 085_proxy.pl: dlock_proxy, the lease functions sharded by key over three
# dlock servers with PL/Proxy (docs/sharding.md).
#
# Three nodes run dlock (preloaded); a fourth, the proxy, has plproxy and
# dlock_proxy and a PL/Proxy server "dlock" over the three (modular
# mapping).  Through the proxy:
#  - 300 acquires land on the three servers, each key on server
#    abs(hashtext(key) % 3) and only there, and all three get some;
#  - a key always goes to the same server: re-acquiring returns its token,
#    and after a release the next grant's token is greater;
#  - the proxy's dlock_locks shows the leases of all servers;
#  - roles pass through: another role can neither release nor take a
#    role's lease, and dlock_force_release is not granted to PUBLIC;
#  - a wait through the proxy is woken by a release through the proxy, and
#    the proxy's dlock_waiters shows it meanwhile;
#  - dlock_release_all frees a holder's leases on every server.
# Skipped (plan skip_all) only when PL/Proxy is not installed; the project's
# scripts/test.sh installs it.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

my @servers;
for my $i (0 .. 2)
{
	my $n = PostgreSQL::Test::Cluster->new("server$i");
	$n->init;
	$n->append_conf('postgresql.conf', "shared_preload_libraries = 'dlock'");
	$n->start;
	$n->safe_psql('postgres',
		'CREATE EXTENSION dlock; CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN');
	push @servers, $n;
}

my $proxy = PostgreSQL::Test::Cluster->new('proxy');
$proxy->init;
$proxy->start;
my $sharedir = $proxy->config_data('--sharedir');
if (!-f "$sharedir/extension/plproxy.control")
{
	plan skip_all => "PL/Proxy is not installed ($sharedir/extension/plproxy.control)";
}

my $parts = join(', ',
	map { "p$_ 'host=" . $servers[$_]->host . " port=" . $servers[$_]->port . " dbname=postgres'" }
	  0 .. 2);
$proxy->safe_psql(
	'postgres', qq{
	CREATE EXTENSION plproxy;
	CREATE EXTENSION dlock_proxy;
	CREATE SERVER dlock FOREIGN DATA WRAPPER plproxy OPTIONS (modular_mapping '1', $parts);
	CREATE USER MAPPING FOR PUBLIC SERVER dlock;
	CREATE ROLE alice LOGIN;
	CREATE ROLE bob LOGIN;
	GRANT USAGE ON FOREIGN SERVER dlock TO alice, bob;
});

# --- routing -------------------------------------------------------------
is( $proxy->safe_psql(
		'postgres',
		"SELECT count(dlock_acquire('k' || g, 'h', '1 hour')) FROM generate_series(1, 300) g"),
	'300',
	'300 acquires through the proxy each return a token');

my $total = 0;
for my $i (0 .. 2)
{
	my ($n, $misplaced) = split /\|/,
	  $servers[$i]->safe_psql('postgres',
		"SELECT count(*), count(*) FILTER (WHERE abs(hashtext(key) % 3) <> $i)"
		  . " FROM dlock_locks WHERE key LIKE 'k%'");
	cmp_ok($n, '>', 0, "server $i got some of the keys ($n)");
	is($misplaced, '0', "every key on server $i belongs there (abs(hashtext(key) % 3) = $i)");
	$total += $n;
}
is($total, 300, 'every key is on exactly one server');

my $t1 = $proxy->safe_psql('postgres', "SELECT dlock_acquire('k7', 'h', '1 hour')");
my $on = $proxy->safe_psql('postgres', "SELECT abs(dlock_shard_hash('k7') % 3)");
is($servers[$on]->safe_psql('postgres', "SELECT token FROM dlock_locks WHERE key = 'k7'"),
	$t1, 're-acquiring k7 through the proxy returns its token from its server');
is($proxy->safe_psql('postgres', "SELECT dlock_release('k7', 'h', $t1)"),
	't', 'k7 released through the proxy');
my $t2 = $proxy->safe_psql('postgres', "SELECT dlock_acquire('k7', 'other', '1 hour')");
cmp_ok($t2, '>', $t1, 'the next grant of k7 has a greater token');
is($proxy->safe_psql('postgres', "SELECT dlock_renew('k7', 'other', '2 hours', $t2)"),
	't', 'renewed through the proxy');

is($proxy->safe_psql('postgres', "SELECT count(*) FROM dlock_locks WHERE key LIKE 'k%'"),
	'300', "the proxy's dlock_locks shows the leases of all servers");

# --- roles ---------------------------------------------------------------
is($proxy->safe_psql('postgres', "SELECT dlock_acquire('r1', 'ha', '1 hour') IS NOT NULL",
		extra_params => [ '-U', 'alice' ]),
	't', 'alice acquires r1 through the proxy');
is($servers[ $proxy->safe_psql('postgres', "SELECT abs(dlock_shard_hash('r1') % 3)") ]
	  ->safe_psql('postgres', "SELECT owner FROM dlock_locks WHERE key = 'r1'"),
	'alice', 'on its server the lease belongs to alice');
is( $proxy->safe_psql(
		'postgres',
		"SELECT dlock_release('r1', 'ha'), dlock_acquire('r1', 'hb', '1 hour') IS NULL",
		extra_params => [ '-U', 'bob' ]),
	'f|t',
	'bob can neither release nor take it through the proxy');
is($proxy->safe_psql('postgres', "SELECT dlock_release('r1', 'ha')",
		extra_params => [ '-U', 'alice' ]),
	't', 'alice releases it');
is( $proxy->safe_psql(
		'postgres',
		"SELECT has_function_privilege('bob', 'dlock_force_release(text)', 'EXECUTE')"),
	'f',
	'dlock_force_release is not granted to PUBLIC on the proxy');

# --- waits ---------------------------------------------------------------
my $th = $proxy->safe_psql('postgres', "SELECT dlock_acquire('w1', 'holder', '1 hour')");
my $bg = $proxy->background_psql('postgres', on_error_stop => 0);
$bg->query_until(qr/starting wait/,
	"\\echo starting wait\nSELECT dlock_acquire('w1', 'waiter', '1 hour', '10 min');\n");
ok( $proxy->poll_query_until(
		'postgres', "SELECT count(*) = 1 FROM dlock_waiters WHERE key = 'w1' AND holder = 'waiter'"),
	"the waiter shows in the proxy's dlock_waiters");
is($proxy->safe_psql('postgres', "SELECT dlock_release('w1', 'holder')"),
	't', 'the holder releases w1 through the proxy');
my $tw = $bg->query_until(qr/wait finished\n/, "\\echo wait finished\n");
$tw =~ s/\nwait finished\n//;
$bg->quit;
cmp_ok($tw, '>', $th, 'the waiter got w1 through the proxy, with a greater token');

# --- release_all -----------------------------------------------------------
is( $proxy->safe_psql(
		'postgres',
		"SELECT count(dlock_acquire('ra' || g, 'ra', '1 hour')) FROM generate_series(1, 30) g;"
		  . " SELECT dlock_release_all('ra');"
		  . " SELECT count(*) FROM dlock_locks WHERE holder = 'ra'"),
	"30\n30\n0",
	'dlock_release_all frees the holder\'s leases on every server');

$proxy->stop;
$_->stop for @servers;
done_testing();
