
# Copyright: dlock contributors
#
# 070_claim_exactly_once.pl: 4 concurrent claimers, driven by pgbench, drain
# a 20,000-row table.  Each pgbench script run claims a batch of up to 100
# rows in one transaction (dlock_claim, ttl 1 s, filter 'status = 0') and
# completes it in a second transaction.  The whole drain runs twice, once
# for each way of completing:
#
#   fence:     UPDATE q SET status = status + 1
#               WHERE id = ANY(batch) AND dlock_claimed('q', id, holder)
#              ... records every completed id in done_log, then dlock_unclaim;
#   complete:  UPDATE q SET status = status + 1
#                FROM dlock_complete('q', holder, batch) AS done(id)
#               WHERE q.id = done.id
#              ... records every completed id in done_log.
#
# The completion does NOT re-check status = 0: only the claim and the fence
# keep two workers from completing the same row.  To make claims expire and
# rows come back, some runs misbehave on purpose:
#   -  8%: the worker is slow (sleeps 1.2 s): its claim expires before it
#          completes, so its fenced UPDATE must complete nothing;
#   -  4%: the worker completes right around its claim's expiry (0.95-1.05 s);
#   -  4%: the worker dies (never completes nor gives back): its rows come
#          back after 1 s.
# pgbench runs in rounds until no row has status 0 (at most 100 rounds: a
# hang cap; on a loaded machine more claims expire before their completion
# and more rounds are needed, which is no failure).
#
# Checks, for each: every row was processed exactly once (20,000 log rows, 20,000
# distinct ids, every status = 1), no pgbench transaction failed, no claim
# returned more than its n rows, claims did expire and rows were delivered
# again (redeliveries > 0), and no claim is left live at the end.
#
# Then max_attempts under the same concurrency: 4 clients claim batches of
# up to 10 rows of a 200-row table with max_attempts 2 and a 50 ms ttl, and
# never complete them.  No row is delivered more than twice, every row ends
# up in dlock_dead_claims, and no batch is larger than 10.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);

my $ROWS    = 20000;
my $CLIENTS = 4;

my $node = PostgreSQL::Test::Cluster->new('claim_once');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'dlock'");
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION dlock');

my %complete_sql = (
	fence => <<'EOS',
WITH done AS (
    UPDATE q SET status = status + 1
     WHERE id = ANY (ARRAY[:ids]::bigint[]) AND dlock_claimed('q', id, 'w:client_id')
    RETURNING id)
INSERT INTO done_log (id, worker) SELECT id, :client_id FROM done;
SELECT dlock_unclaim('q', 'w:client_id', ARRAY[:ids]::bigint[]);
EOS
	complete => <<'EOS',
WITH done AS (
    UPDATE q SET status = status + 1
      FROM dlock_complete('q', 'w:client_id', ARRAY[:ids]::bigint[]) AS c(id)
     WHERE q.id = c.id
    RETURNING q.id)
INSERT INTO done_log (id, worker) SELECT id, :client_id FROM done;
EOS
);

foreach my $mode ('fence', 'complete')
{
	subtest "completing with $mode" => sub { drain($mode) };
}

sub drain
{
	my ($mode) = @_;

	$node->safe_psql(
		'postgres', qq{
	DROP TABLE IF EXISTS q, done_log;
	CREATE TABLE q (
	    id         bigint PRIMARY KEY,
	    status     int NOT NULL DEFAULT 0,
	    created_at timestamptz NOT NULL DEFAULT now(),
	    payload    text
	);
	INSERT INTO q (id, payload) SELECT g, md5(g::text) FROM generate_series(1, $ROWS) g;
	CREATE TABLE done_log (id bigint NOT NULL, worker int NOT NULL,
	                       at timestamptz NOT NULL DEFAULT clock_timestamp());
	DROP TABLE IF EXISTS oversize;
	CREATE TABLE oversize (n bigint NOT NULL);
	ANALYZE q;
});
	my $stats0 = $node->safe_psql('postgres',
		'SELECT claims, redeliveries FROM dlock_stats()');
	my ($claims0, $redeliv0) = split /\|/, $stats0;
	ok(defined $redeliv0, 'dlock_stats() has a row (dlock is preloaded)');

	my $script = <<'EOS' . $complete_sql{$mode} . "COMMIT;\n\\endif\n";
\set r random(1, 100)
\set s random(950, 1050)
BEGIN;
SELECT coalesce(string_agg(id::text, ','), 'NULL') AS ids, count(*) AS n
  FROM dlock_claim(NULL::q, 'w:client_id', 100, '1 s', 'status = 0') \gset
COMMIT;
\if :n > 100
INSERT INTO oversize VALUES (:n);
\endif
\if :r <= 8
\sleep 1200 ms
\elif :r <= 12
\sleep :s ms
\endif
\if :r > 96
\elif :n > 0
BEGIN;
EOS

	my $script_file = $node->basedir . "/claim_once_$mode.pgb";
	open(my $fh, '>', $script_file) or die "could not write $script_file: $!";
	print $fh $script;
	close $fh;

	my $start = time;
	my ($rounds, $failed_rounds, $left) = (0, 0, $ROWS);
	my ($processed_ok, $tx_total, $tx_done, $failed_tx) = (1, 0, 0, 0);
	while ($left > 0 && $rounds < 100)
	{
		$rounds++;
		my ($out, $err) = ('', '');
		my @cmd = (
			'pgbench', '-n', '-h', $node->host, '-p', $node->port,
			'-c', $CLIENTS, '-j', $CLIENTS, '-t', 25, '-f', $script_file, 'postgres');
		my $ok = IPC::Run::run(\@cmd, '>', \$out, '2>', \$err);
		if (!$ok)
		{
			$failed_rounds++;
			diag("pgbench round $rounds failed (exit $?):\n$err");
		}
		if ($err =~ /ERROR|FATAL|aborted/)
		{
			$failed_rounds++;
			diag("pgbench round $rounds reported errors:\n$err");
		}
		if ($out =~ m{number of transactions actually processed: (\d+)/(\d+)})
		{
			$tx_done  += $1;
			$tx_total += $2;
			$processed_ok = 0 if $1 != $2;
		}
		else
		{
			$processed_ok = 0;
			diag("pgbench round $rounds: no summary:\n$out\n$err");
		}
		if ($out =~ /number of failed transactions: (\d+)/)
		{
			$failed_tx += $1;
		}
		$left = $node->safe_psql('postgres', 'SELECT count(*) FROM q WHERE status = 0');
		# rows of workers that died are claimed for 1 s more: wait for them
		# rather than spinning a round of empty claims
		if ($left > 0 && $left < 1000)
		{
			my $live = $node->safe_psql('postgres',
				"SELECT count(*) FROM dlock_claims WHERE table_name = 'q'::regclass");
			sleep(1) if $live >= $left;
		}
	}
	my $elapsed = time - $start;
	note(sprintf('%d pgbench rounds, %d of %d script runs done, %.1f s',
			$rounds, $tx_done, $tx_total, $elapsed));

	is($failed_rounds, 0, 'every pgbench round exited cleanly, without errors');
	ok($processed_ok, 'pgbench processed every transaction it was asked to');
	is($failed_tx, 0, 'no failed transaction in pgbench output');
	is($left, 0, 'the table was drained (no row left with status 0)');

	my $res = $node->safe_psql(
		'postgres', q{
		SELECT (SELECT count(*) FROM done_log),
		       (SELECT count(DISTINCT id) FROM done_log),
		       (SELECT count(*) FROM (SELECT id FROM done_log GROUP BY id HAVING count(*) > 1) d),
		       (SELECT count(*) FROM q WHERE status = 1),
		       (SELECT count(*) FROM q WHERE status > 1),
		       (SELECT count(*) FROM done_log l LEFT JOIN q USING (id) WHERE q.id IS NULL),
		       (SELECT count(DISTINCT worker) FROM done_log)
	});
	my ($log_rows, $log_distinct, $dups, $done1, $done_more, $strays, $workers)
	  = split /\|/, $res;
	is($log_rows,     $ROWS, "$ROWS rows recorded as processed");
	is($log_distinct, $ROWS, "$ROWS distinct ids recorded (every row processed)");
	is($dups,         0,     'no row processed twice');
	is($done1,        $ROWS, 'every row has status 1');
	is($done_more,    0,     'no row completed more than once (status > 1)');
	is($strays,       0,     'the log holds only ids of the table');
	is($workers, $CLIENTS, "all $CLIENTS workers processed rows");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM oversize'),
		0, 'no claim returned more than n (100) rows');

	my $stats1 = $node->safe_psql('postgres',
		'SELECT claims, redeliveries FROM dlock_stats()');
	my ($claims1, $redeliv1) = split /\|/, $stats1;
	cmp_ok($claims1 - $claims0, '>=', $ROWS, 'dlock_stats().claims counted at least one claim per row');
	cmp_ok($redeliv1 - $redeliv0, '>', 0,
		'claims expired and rows were delivered again (redeliveries > 0)');
	note('claims: ' . ($claims1 - $claims0) . ', redeliveries: ' . ($redeliv1 - $redeliv0));

	is($node->safe_psql('postgres',
			"SELECT count(*) FROM dlock_claims WHERE table_name = 'q'::regclass"),
		0, 'no claim left live on the drained table');
	my ($rc, $stored) = $node->psql('postgres', 'SELECT count(*) FROM dlock.claim');
	note("rows left in dlock.claim (expired claims kept for their attempt counts): $stored");
	note(sprintf('drained in %.1f s', $elapsed));
}

subtest 'max_attempts under concurrency' => \&poison;

sub poison
{
	$node->safe_psql(
		'postgres', q{
	CREATE TABLE p (id bigint PRIMARY KEY, status int NOT NULL DEFAULT 0);
	INSERT INTO p SELECT g FROM generate_series(1, 200) g;
	CREATE TABLE deliveries (id bigint NOT NULL);
	CREATE TABLE batches (n bigint NOT NULL);
});
	my $script_file = $node->basedir . '/claim_poison.pgb';
	open(my $fh, '>', $script_file) or die "could not write $script_file: $!";
	print $fh <<'EOS';
WITH c AS (SELECT id FROM dlock_claim(NULL::p, 'w:client_id', 10, '50 ms', 'status = 0', NULL, 2)),
     d AS (INSERT INTO deliveries SELECT id FROM c)
INSERT INTO batches SELECT count(*) FROM c;
\sleep 60 ms
EOS
	close $fh;

	my ($rounds, $errors, $dead) = (0, 0, 0);
	while ($dead < 200 && $rounds < 100)
	{
		$rounds++;
		my ($out, $err) = ('', '');
		IPC::Run::run(
			[
				'pgbench', '-n', '-h', $node->host, '-p', $node->port,
				'-c', $CLIENTS, '-j', $CLIENTS, '-t', 20, '-f', $script_file, 'postgres'
			],
			'>', \$out, '2>', \$err)
		  or $errors++;
		$errors++ if $err =~ /ERROR|FATAL|aborted/;
		$dead = $node->safe_psql('postgres',
			"SELECT count(*) FROM dlock_dead_claims WHERE table_name = 'p'::regclass");
	}
	note("$rounds pgbench rounds");
	is($errors, 0, 'every pgbench round exited cleanly, without errors');
	is($node->safe_psql('postgres',
			'SELECT count(*) FROM (SELECT id FROM deliveries GROUP BY id HAVING count(*) > 2) x'),
		0, 'no row delivered more than max_attempts (2) times');
	is($dead, 200, 'every row was set aside in dlock_dead_claims');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM deliveries'),
		400, 'each row delivered exactly twice');
	is($node->safe_psql('postgres', 'SELECT max(n) <= 10 FROM batches'),
		't', 'no claim returned more than n (10) rows');
	return;
}

$node->stop;
done_testing();
