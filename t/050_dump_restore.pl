
# Copyright (c) dlock contributors
#
# t/050_dump_restore.pl - pg_dump / pg_restore of a database using dlock
# (issue 5, item 7).
#
# A database with dlock, live and released leases, and a user table written
# through a dlock_validate fence is dumped with pg_dump -Fc and restored with
# pg_restore into a new database of the same cluster and into a database of a
# new cluster (and, as a plain-SQL dump, through psql with ON_ERROR_STOP).
# What this proves:
#
#  1. The restore is clean: pg_restore / psql exit 0 and print no error or
#     warning, and CREATE EXTENSION dlock comes back with its functions.
#  2. Leases are not dumped (by design: a lease belongs to a running process
#     of the source system; restoring it would resurrect holders that are not
#     there, possibly long after their ttl, or hand the key to nobody).
#     dlock_locks and dlock.lease are empty after restore; the dump's table of
#     contents has no data entry for dlock.lease.
#  3. The token sequence IS dumped (pg_extension_config_dump): the first token
#     issued in a restored database is greater than every token issued in the
#     source before the dump, so a fenced store that saw the old tokens
#     accepts the new holders and refuses the old ones.
#  4. The user's guarded table is restored with its rows, and fencing works in
#     the restored database (validate with a fresh token passes, an old token
#     from the source fails).
#
#  5. Claims (issue 3) are not dumped either: the source has live claims on
#     a user table jobs (one row completed under the dlock_claimed fence) and
#     expired claims whose attempt counts dlock.claim keeps.  The dump has no
#     data entry for dlock.claim (its rows name the claimed table by oid,
#     which a restore changes anyway); after each restore jobs comes back
#     with all its rows and the completed status, dlock_claims and
#     dlock.claim are empty, the source's holder does not pass the fence, and
#     every row is claimable again with attempts = 1 and a token greater
#     than every token issued in the source before the dump.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

sub max_of { my $m; for (@_) { $m = $_ if !defined $m || $_ > $m } return $m }

my $node = PostgreSQL::Test::Cluster->new('source');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
CREATE EXTENSION dlock;
CREATE TABLE guarded (n serial PRIMARY KEY, key text NOT NULL,
                      writer text NOT NULL, token bigint NOT NULL);
});

# tokens issued in the source: live leases, released ones, re-grants
my @tokens;
my %live;
for my $i (1 .. 5)
{
	my $t = $node->safe_psql('src',
		"SELECT dlock_acquire('dump/$i', 'holder-$i', '1 hour')");
	push @tokens, $t;
	$live{"dump/$i"} = $t;
}
# 40 grants and releases of one key, each call in its own transaction, in
# one psql run (more than a sequence batch of 32 values)
my $churn = join '', map {
	"SELECT dlock_acquire('dump/churn', 'churner', '1 hour') AS t \\gset\n"
	  . "\\echo :t\n"
	  . "SELECT dlock_release('dump/churn', 'churner', :t) \\g /dev/null\n"
} 1 .. 40;
push @tokens, split /\n/, $node->safe_psql('src', $churn);
is($node->safe_psql('src', q{SELECT count(*) FROM dlock_locks WHERE key = 'dump/churn'}),
	'0', 'source: the churned key is free');
is(scalar(grep { /^\d+$/ } @tokens), 45, 'source: every acquire got a token');

# a fenced write: only commits while the lease is held with that token
is( $node->safe_psql('src', qq{
INSERT INTO guarded (key, writer, token)
  SELECT 'dump/1', 'holder-1', $live{'dump/1'}
   WHERE dlock_validate('dump/1', 'holder-1', $live{'dump/1'})
RETURNING token}),
	$live{'dump/1'},
	'source: the fenced write commits');
is( $node->safe_psql('src', qq{
INSERT INTO guarded (key, writer, token)
  SELECT 'dump/1', 'intruder', $live{'dump/1'}
   WHERE dlock_validate('dump/1', 'intruder', $live{'dump/1'})
RETURNING token}),
	'',
	'source: a fenced write by someone else writes nothing');
is($node->safe_psql('src', 'SELECT count(*) FROM dlock_locks'),
	'5', 'source: five live leases before the dump');

# claims on a user table: rows 1-4 claimed for an hour by src-worker (row 1
# completed under the fence), rows 5-6 claimed for 100 ms, expired (their
# rows stay in dlock.claim for their attempt counts)
$node->safe_psql('src', q{
CREATE TABLE jobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0, payload text);
INSERT INTO jobs SELECT g, 0, 'job ' || g FROM generate_series(1, 10) g;
});
is( $node->safe_psql('src',
		q{SELECT string_agg(id::text, ',' ORDER BY id)
		    FROM dlock_claim(NULL::jobs, 'src-worker', 4, '1 hour', 'status = 0')}),
	'1,2,3,4', 'source: src-worker claims rows 1-4');
is( $node->safe_psql('src',
		q{SELECT string_agg(id::text, ',' ORDER BY id)
		    FROM dlock_claim(NULL::jobs, 'src-short', 2, '100 ms', 'id IN (5, 6)')}),
	'5,6', 'source: src-short claims rows 5-6 for 100 ms');
push @tokens, split /\n/, $node->safe_psql('src',
	q{SELECT DISTINCT token FROM dlock.claim});
is( $node->safe_psql('src', q{
UPDATE jobs SET status = 1 WHERE id = 1 AND dlock_claimed('jobs', id, 'src-worker')
RETURNING id}),
	'1', 'source: src-worker completes row 1 under the fence');
$node->poll_query_until('src',
	q{SELECT count(*) = 0 FROM dlock_claims WHERE holder = 'src-short'})
  or die 'the 100 ms claims did not expire';
is( $node->safe_psql('src',
		q{SELECT (SELECT count(*) FROM dlock_claims) || '/' || count(*) FROM dlock.claim}),
	'4/6', 'source: 4 live claims, 6 claim rows (2 expired) before the dump');
my $max_before = max_of(@tokens);

my $tmp = PostgreSQL::Test::Utils::tempdir;
my $dumpfile = "$tmp/src.dump";

# run a client program against a node; returns (exit ok, stdout, stderr)
sub run_prog
{
	my ($n, @cmd) = @_;
	my ($stdout, $stderr) = ('', '');
	local %ENV = $n->_get_env();    # PGHOST/PGPORT of the node, as Cluster does
	my $ok = IPC::Run::run(\@cmd, '>', \$stdout, '2>', \$stderr);
	return ($ok, $stdout, $stderr);
}

my ($ok, $out, $err) = run_prog($node, 'pg_dump', '-Fc', '-d', 'src', '-f', $dumpfile);
ok($ok, 'pg_dump -Fc succeeds');
is($err, '', 'pg_dump prints nothing on stderr');

# what is in the dump
($ok, $out, $err) = run_prog($node, 'pg_restore', '-l', $dumpfile);
ok($ok, 'pg_restore -l reads the dump');
like($out, qr/EXTENSION - dlock\b/, 'the dump creates the extension');
like($out, qr/SEQUENCE SET dlock token_seq\b/,
	'the dump sets the token sequence (pg_extension_config_dump)');
unlike($out, qr/TABLE DATA dlock lease\b/,
	'the dump has no data of dlock.lease: leases are not dumped');
like($out, qr/TABLE DATA public guarded\b/, 'the dump has the guarded table\'s data');
unlike($out, qr/TABLE DATA dlock claim\b/,
	'the dump has no data of dlock.claim: claims are not dumped');
like($out, qr/TABLE DATA public jobs\b/, 'the dump has the claimed table\'s data');

# the source goes on issuing tokens after the dump: they are not in it, and
# that is fine (a restored database is a copy of the state at dump time); only
# tokens issued before the dump must be beaten by the restored database
my $after_dump = $node->safe_psql('src',
	q{SELECT dlock_acquire('dump/after', 'late', '1 hour')});
cmp_ok($after_dump, '>', $max_before, 'source keeps issuing greater tokens');

# checks for a restored database
sub check_restored
{
	my ($n, $db, $what) = @_;

	is($n->safe_psql($db, 'SELECT count(*) FROM dlock_locks'),
		'0', "$what: dlock_locks is empty (leases are not restored)");
	is($n->safe_psql($db, 'SELECT count(*) FROM dlock.lease'),
		'0', "$what: dlock.lease has no rows");
	is( $n->safe_psql($db,
			q{SELECT string_agg(writer || ':' || token, ',' ORDER BY n) FROM guarded}),
		"holder-1:$live{'dump/1'}",
		"$what: the guarded table is restored with its row");
	is( $n->safe_psql($db,
			q{SELECT count(*) FROM pg_proc WHERE proname LIKE 'dlock\_%'}),
		$node->safe_psql('src',
			q{SELECT count(*) FROM pg_proc WHERE proname LIKE 'dlock\_%'}),
		"$what: all dlock functions are there");

	# a source holder's old token means nothing here
	is( $n->safe_psql($db,
			qq{SELECT dlock_validate('dump/1', 'holder-1', $live{'dump/1'})}),
		'f', "$what: the source lease does not validate");

	# new grants, for an old key and a new one
	my $t1 = $n->safe_psql($db,
		q{SELECT dlock_acquire('dump/1', 'new-holder', '1 hour')});
	my $t2 = $n->safe_psql($db,
		q{SELECT dlock_acquire('fresh', 'new-holder', '1 hour')});
	like($t1, qr/^\d+$/, "$what: a key leased in the source is free and granted");
	cmp_ok($t1, '>', $max_before,
		"$what: the first token after restore is greater than every token issued before the dump"
	);
	cmp_ok($t2, '>', $t1, "$what: and tokens keep growing");
	is( $n->safe_psql($db, qq{
INSERT INTO guarded (key, writer, token)
  SELECT 'dump/1', 'new-holder', $t1
   WHERE dlock_validate('dump/1', 'new-holder', $t1)
RETURNING token}),
		$t1,
		"$what: a fenced write with the new token commits");
	is( $n->safe_psql($db, qq{SELECT dlock_release('dump/1', 'new-holder', $t1)}),
		't', "$what: release works");

	# claims
	is( $n->safe_psql($db,
			q{SELECT string_agg(id || ':' || status, ',' ORDER BY id) FROM jobs}),
		'1:1,2:0,3:0,4:0,5:0,6:0,7:0,8:0,9:0,10:0',
		"$what: the claimed table is restored with all its rows and the completed status");
	is( $n->safe_psql($db,
			q{SELECT (SELECT count(*) FROM dlock_claims) || '/' || count(*) FROM dlock.claim}),
		'0/0', "$what: dlock_claims and dlock.claim are empty (claims are not restored)");
	is($n->safe_psql($db, q{SELECT dlock_claimed('jobs', 2, 'src-worker')}),
		'f', "$what: the source's claim does not pass the fence");
	is( $n->safe_psql($db,
			q{SELECT string_agg(id::text, ',' ORDER BY id)
			    FROM dlock_claim(NULL::jobs, 'new-worker', 100, '1 hour')}),
		'1,2,3,4,5,6,7,8,9,10', "$what: every row is claimable again");
	is( $n->safe_psql($db,
			q{SELECT count(*) || '|' || bool_and(attempts = 1) || '|' || count(DISTINCT token)
			    FROM dlock_claims WHERE holder = 'new-worker'}),
		'10|true|1', "$what: all 10 claimed once (attempts = 1), with one token");
	cmp_ok($n->safe_psql($db, q{SELECT max(token) FROM dlock_claims}),
		'>', $t2, "$what: the claim's token is greater than the tokens before it");
	is($n->safe_psql($db, q{SELECT dlock_unclaim('jobs', 'new-worker')}),
		'10', "$what: unclaim works");
	return;
}

# 1. into a new database of the same cluster
$node->safe_psql('postgres', 'CREATE DATABASE dst');
($ok, $out, $err) = run_prog($node, 'pg_restore', '--exit-on-error', '-d', 'dst', $dumpfile);
ok($ok, 'pg_restore into a new database succeeds');
is($err, '', 'pg_restore into a new database prints no error or warning');
check_restored($node, 'dst', 'new database');

# 2. into a new cluster, in one transaction
my $node2 = PostgreSQL::Test::Cluster->new('target');
$node2->init;
$node2->append_conf('postgresql.conf', q{shared_preload_libraries = 'dlock'});
$node2->start;
$node2->safe_psql('postgres', 'CREATE DATABASE dst2');
($ok, $out, $err) = run_prog($node2, 'pg_restore', '--exit-on-error', '--single-transaction',
	'-d', 'dst2', $dumpfile);
ok($ok, 'pg_restore into a new cluster succeeds');
is($err, '', 'pg_restore into a new cluster prints no error or warning');
check_restored($node2, 'dst2', 'new cluster');

# 3. a plain SQL dump restored with psql, stopping at the first error
($ok, $out, $err) = run_prog($node, 'pg_dump', '-d', 'src', '-f', "$tmp/src.sql");
ok($ok, 'pg_dump (plain SQL) succeeds');
unlike(slurp_file("$tmp/src.sql"), qr/COPY dlock\.lease\b/,
	'the plain dump has no COPY of dlock.lease');
$node2->safe_psql('postgres', 'CREATE DATABASE dst3');
($ok, $out, $err) = run_prog($node2, 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1',
	'-d', 'dst3', '-f', "$tmp/src.sql");
ok($ok, 'the plain dump restores with psql -v ON_ERROR_STOP=1');
is($err, '', 'the plain restore prints no error or warning');
is($node2->safe_psql('dst3', 'SELECT count(*) FROM dlock_locks'),
	'0', 'plain restore: dlock_locks is empty');
unlike(slurp_file("$tmp/src.sql"), qr/COPY dlock\.claim\b/,
	'the plain dump has no COPY of dlock.claim');
is( $node2->safe_psql('dst3',
		q{SELECT (SELECT count(*) FROM jobs) || '/' || (SELECT count(*) FROM dlock.claim)}),
	'10/0', 'plain restore: jobs has its 10 rows, dlock.claim is empty');
cmp_ok($node2->safe_psql('dst3', q{SELECT dlock_acquire('x', 'h')}),
	'>', $after_dump,
	'plain restore: the first token is greater than every token issued before that dump');

$node2->stop;
$node->stop;
done_testing();
