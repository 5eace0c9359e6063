# Copyright: dlock contributors
#
# 106_history_crash.pl: dlock.history across a crash (an immediate stop,
# no checkpoint) and restart (issue 40).  The rows of dlock.history are
# written in the transaction of the ending they record, so after the
# restart:
#  - every ending committed before the crash has its row: releases,
#    force releases and release_all committed in transaction blocks,
#    takeovers, claim completions and give-backs, and a burst of 50
#    acquire/release pairs in transaction blocks just before the crash;
#  - a release committed on its own (autocommit) may be lost with its row
#    (dlock commits it without waiting for its flush: README "Durability of
#    releases"): then the lease is back with its holder and token and there
#    is no row; otherwise the key is free and the row is there, never one
#    without the other;
#  - an ending whose transaction was open at the crash has no row, and its
#    lease or claim is still held;
#  - each ended tenure has exactly one row.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('history_crash');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'dlock'");
$node->start;

$node->safe_psql('postgres', q{
	CREATE EXTENSION dlock;
	CREATE TABLE hjobs (id int PRIMARY KEY);
	INSERT INTO hjobs SELECT generate_series(1, 10);
	SELECT dlock_history_track('hc:');
	SELECT dlock_history_track_claims('hjobs');
});

my %token;
sub acquire
{
	my ($key, $holder, $ttl) = @_;
	$token{$key} = $node->safe_psql('postgres',
		"SELECT dlock_acquire('$key', '$holder', '$ttl')");
	like($token{$key}, qr/^\d+$/, "$key acquired by $holder");
}

# endings committed in transaction blocks (flushed at commit)
acquire('hc:rel', 'h1', '1 hour');
is($node->safe_psql('postgres',
	"BEGIN; SELECT dlock_release('hc:rel', 'h1'); COMMIT;"), 't', 'hc:rel released');
acquire('hc:force', 'h1', '1 hour');
is($node->safe_psql('postgres',
	"BEGIN; SELECT dlock_force_release('hc:force'); COMMIT;"), 't', 'hc:force force-released');
acquire('hc:all', 'hall', '1 hour');
is($node->safe_psql('postgres',
	"BEGIN; SELECT dlock_release_all('hall'); COMMIT;"), '1', 'hc:all released by release_all');
acquire('hc:take', 'h1', '1 s');
$node->poll_query_until('postgres',
	"SELECT expires_at < clock_timestamp() FROM dlock.lease WHERE key = 'hc:take'")
  or die 'hc:take did not run out';
acquire('hc:take', 'h2', '1 hour');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM dlock_claim(NULL::hjobs, 'w1', 3, '1 hour', 'id <= 3')}),
	'3', 'three rows claimed');
is($node->safe_psql('postgres', q{
	BEGIN; SELECT count(*) FROM dlock_complete('hjobs', 'w1', ARRAY[1, 2]); COMMIT;}),
	'2', 'two claims completed');
is($node->safe_psql('postgres', q{
	BEGIN; SELECT dlock_unclaim('hjobs', 'w1'); COMMIT;}),
	'1', 'one claim given back');

# a burst of pairs, each in a transaction block, just before the crash
my $burst = '';
$burst .= "BEGIN; SELECT dlock_acquire('hc:burst:$_', 'b', '1 hour') > 0;"
  . " SELECT dlock_release('hc:burst:$_', 'b'); COMMIT;\n" for 1 .. 50;
$node->safe_psql('postgres', $burst);

# releases committed on their own: they may be lost, with their rows
acquire("hc:auto:$_", 'ha', '1 hour') for 1 .. 5;
is($node->safe_psql('postgres', "SELECT dlock_release('hc:auto:$_', 'ha')"), 't',
	"hc:auto:$_ released (autocommit)") for 1 .. 5;

# endings in transactions open at the crash
acquire('hc:open', 'h1', '1 hour');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM dlock_claim(NULL::hjobs, 'w2', 1, '1 hour', 'id = 9')}),
	'1', 'row 9 claimed');
my $s = $node->background_psql('postgres', on_error_stop => 0);
$s->query_safe('BEGIN');
is($s->query_safe("SELECT dlock_release('hc:open', 'h1')"), 't',
	'hc:open released in an open transaction');
is($s->query_safe("SELECT count(*) FROM dlock_complete('hjobs', 'w2', ARRAY[9])"), '1',
	'row 9 completed in an open transaction');
is($s->query_safe("SELECT count(*) FROM dlock.history WHERE key IN ('hc:open', '9')"), '2',
	'the open transaction sees its two rows');

my $committed = $node->safe_psql('postgres', q{
	SELECT kind || ' ' || key || ' ' || holder || ' ' || token || ' ' || ended
	  FROM dlock.history WHERE key NOT LIKE 'hc:auto:%' ORDER BY kind, key, token});
my @committed = split /\n/, $committed;
is(scalar(@committed), 4 + 50 + 3, 'the committed endings have their rows before the crash');

$node->stop('immediate');
$s->quit;
$node->start;

is($node->safe_psql('postgres', q{
	SELECT kind || ' ' || key || ' ' || holder || ' ' || token || ' ' || ended
	  FROM dlock.history WHERE key NOT LIKE 'hc:auto:%' ORDER BY kind, key, token}),
	$committed, 'every committed ending is still there, and nothing else');
is($node->safe_psql('postgres', q{
	SELECT string_agg(key || ':' || ended, ',' ORDER BY key) FROM dlock.history
	 WHERE key IN ('hc:rel', 'hc:force', 'hc:all', 'hc:take', '1', '2', '3')}),
	'1:completed,2:completed,3:given_back,hc:all:released_all,hc:force:force_released,'
	  . 'hc:rel:released,hc:take:taken_over',
	'each kind of ending, as it was written');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT key, token FROM dlock.history
	 GROUP BY key, token HAVING count(*) > 1) d}), '0', 'one row per tenure');

# open at the crash: no row, still held
is($node->safe_psql('postgres',
	"SELECT count(*) FROM dlock.history WHERE key IN ('hc:open', '9')"), '0',
	'the endings open at the crash have no row');
is($node->safe_psql('postgres',
	"SELECT holder || ' ' || token FROM dlock_locks WHERE key = 'hc:open'"),
	"h1 $token{'hc:open'}", 'hc:open is still held with its token');
is($node->safe_psql('postgres',
	"SELECT holder FROM dlock_claims WHERE table_name = 'hjobs'::regclass AND key = '9'"),
	'w2', 'row 9 is still claimed');

# autocommit releases: the row if and only if the release survived
for my $i (1 .. 5)
{
	my $k = "hc:auto:$i";
	my $held = $node->safe_psql('postgres',
		"SELECT holder || ' ' || token FROM dlock_locks WHERE key = '$k'");
	my $rows = $node->safe_psql('postgres',
		"SELECT count(*) FROM dlock.history WHERE key = '$k'");
	if ($held eq '')
	{
		is($rows, '1', "$k: released, and its row is there");
	}
	else
	{
		is("$held $rows", "ha $token{$k} 0", "$k: the release was lost, and so was its row");
	}
}

# and the history goes on after the restart
acquire('hc:after', 'h1', '1 hour');
is($node->safe_psql('postgres', q{
	SELECT dlock_release('hc:after', 'h1');
	SELECT ended FROM dlock_history WHERE key = 'hc:after'}), "t\nreleased",
	'a release after the restart writes its row');

$node->stop;
done_testing();
