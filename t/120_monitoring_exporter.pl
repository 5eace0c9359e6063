
# Copyright (c) dlock contributors
#
# t/120_monitoring_exporter.pl - dlock in Prometheus (issue 41): the files
# of docs/monitoring/ work as shipped.
#
#  1. `promtool check rules` accepts dlock-alerts.yml, and `promtool test
#     rules dlock-alerts.test.yml` passes: each alert fires on the series
#     that should fire it, and only then.
#  2. Debian's prometheus-postgres-exporter, started against a real node
#     with `--extend.query-path=docs/monitoring/dlock-queries.yaml`, as a
#     role in pg_monitor that may read the claim table, exports on /metrics
#     what the node holds: two leases (one of them taken over after it
#     expired, so one takeover), a waiter and how long it has waited, a live
#     and a dead claim of the table (labelled with it), a watch, and
#     dlock_stats()'s counters; and no query of the file failed
#     (pg_exporter_last_scrape_error 0).
#  3. The same exporter as a role outside pg_monitor: the watch count is
#     refused, and the exporter says a query failed.
#
# Skipped (plan skip_all) only when the exporter or promtool is not
# installed; scripts/test.sh installs both (prometheus-postgres-exporter,
# prometheus).

use strict;
use warnings;

use HTTP::Tiny;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

my $exporter = '/usr/bin/prometheus-postgres-exporter';
my $promtool = '/usr/bin/promtool';
plan skip_all => "$exporter or $promtool is not installed"
  unless -x $exporter && -x $promtool;

my $dir = "$FindBin::RealBin/../docs/monitoring";

# ---- 1. the alerting rules ----
for my $cmd ([ 'check', 'rules', 'dlock-alerts.yml' ],
	[ 'test', 'rules', 'dlock-alerts.test.yml' ])
{
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ $promtool, @$cmd ], '>', \$out, '2>', \$err,
		init => sub { chdir $dir or die "$dir: $!" });
	ok($ok, "promtool @$cmd") or diag("$out$err");
}

# ---- 2. the exporter against a node ----
my $node = PostgreSQL::Test::Cluster->new('monitoring');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'dlock'\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION dlock;
	CREATE ROLE dlock_monitor LOGIN IN ROLE pg_monitor;
	CREATE ROLE dlock_outsider LOGIN;
	CREATE TABLE jobs (id int PRIMARY KEY);
	INSERT INTO jobs VALUES (1), (2), (3);
	GRANT SELECT ON jobs TO dlock_monitor;
});

# a lease held, and a lease taken over after it expired
$node->safe_psql('postgres', q{
	SELECT dlock_acquire('m:held', 'h1', '1 hour');
	SELECT dlock_acquire('m:taken', 'h2', '10 ms');
});
$node->poll_query_until('postgres',
	q{SELECT count(*) = 0 FROM dlock_locks WHERE key = 'm:taken'})
  or die 'the 10 ms lease did not run out';
is($node->safe_psql('postgres',
		q{SELECT dlock_acquire('m:taken', 'h3', '1 hour') IS NOT NULL}),
	't', 'the expired lease is taken over');

# a live claim, and a dead one (claimed max_attempts = 1 times, given back)
$node->safe_psql('postgres', q{
	SELECT id FROM dlock_claim(NULL::jobs, 'w1', 1, '1 hour', 'id = 1');
	SELECT id FROM dlock_claim(NULL::jobs, 'w1', 1, '1 hour', 'id = 2', max_attempts => 1);
	SELECT dlock_unclaim('jobs', 'w1', ARRAY[2]);
	SELECT count(*) FROM dlock_claim(NULL::jobs, 'w1', 1, '1 hour', 'id = 2', max_attempts => 1);
});
is($node->safe_psql('postgres', q{SELECT count(*) FROM dlock_dead_claims}),
	'1', 'one dead claim');

# a waiter for the held key, and a watch of it: sessions kept open
my $waiter = $node->background_psql('postgres');
$waiter->query_until(qr/waiting/, q{
	\echo waiting
	SELECT dlock_acquire('m:held', 'w', '1 min', '1 hour');
});
$node->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM dlock_waiters WHERE key = 'm:held'})
  or die 'the waiter did not queue';
my $watcher = $node->background_psql('postgres');
$watcher->query_safe(q{SELECT dlock_watch('m:held')});

# scrape(ROLE): /metrics of an exporter connected as ROLE, as a hash of
# "name{labels}" => value (without the exporter's server label), once it
# has scraped the node
sub scrape
{
	my ($role) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $dsn = sprintf('host=%s port=%d user=%s dbname=postgres sslmode=disable',
		$node->host, $node->port, $role);
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			$exporter, "--extend.query-path=$dir/dlock-queries.yaml",
			"--web.listen-address=127.0.0.1:$port", '--disable-default-metrics',
			'--disable-settings-metrics'
		],
		'>', \$out, '2>', \$err,
		init => sub { $ENV{DATA_SOURCE_NAME} = $dsn });
	my $http = HTTP::Tiny->new(timeout => 30);
	my %m;
	for my $try (1 .. 600)
	{
		my $r = $http->get("http://127.0.0.1:$port/metrics");
		if ($r->{success} && $r->{content} =~ /^pg_exporter_last_scrape_error /m)
		{
			for (split /\n/, $r->{content})
			{
				next if /^#/ || !/^(\S+)\s+(\S+)$/;
				my ($name, $value) = ($1, $2);
				# the exporter labels each series with the server
				$name =~ s/server="[^"]*",?//;
				$name =~ s/,\}/}/;
				$name =~ s/\{\}//;
				$m{$name} = $value;
			}
			last;
		}
		select(undef, undef, undef, 0.1);
	}
	$h->kill_kill;
	diag("exporter as $role:\n$err") unless %m;
	return \%m;
}

my $m = scrape('dlock_monitor');
ok(%$m, 'the exporter answered on /metrics');
is($m->{pg_exporter_last_scrape_error}, 0, 'no query of dlock-queries.yaml failed');
is($m->{pg_up}, 1, 'the exporter reached the node');
is($m->{dlock_leases_held}, 2, 'leases held: 2');
is($m->{dlock_leases_keys}, 2, 'keys held: 2');
is($m->{dlock_waiters_leases}, 1, 'one backend waits for a key');
is($m->{dlock_waiters_claims}, 0, 'no claim waits');
cmp_ok($m->{dlock_waiters_oldest_wait_seconds}, '>', 0, 'the oldest wait is counted');
is($m->{'dlock_claims_live{table_name="jobs"}'}, 1, 'one live claim on jobs');
is($m->{'dlock_claims_dead{table_name="jobs"}'}, 1, 'one dead claim on jobs');
is($m->{dlock_watches_count}, 1, 'one watch');
is($m->{dlock_stats_takeovers}, 1, 'one takeover');
is($m->{dlock_stats_claims}, 2, 'two rows claimed (the call that set row 2 aside claimed none)');
is($m->{dlock_stats_waits}, 1, 'one wait');
for my $c (qw(acquired extended contended wait_seconds wait_timeouts handoffs
	releases renewals validation_failures redeliveries claim_waits claim_wakeups))
{
	ok(defined $m->{"dlock_stats_$c"}, "dlock_stats_$c is exported");
}

# ---- 3. a role outside pg_monitor ----
my $o = scrape('dlock_outsider');
is($o->{pg_exporter_last_scrape_error}, 1,
	'as a role outside pg_monitor, the exporter reports a failed query');
ok(!defined $o->{dlock_watches_count}, 'and exports no watch count');

# the waiter gets the key once it is released, and its session can end
$node->safe_psql('postgres', q{SELECT dlock_release('m:held', 'h1')});
$waiter->quit;
$watcher->quit;
$node->stop;
done_testing();
