
# Copyright (c) dlock contributors
#
# t/107_dump_guard.pl - pg_dump / pg_restore of guarded tables (dlock_guard,
# issue 40).
#
# The source has a guarded table (key expression, a subset of the
# operations, a token column, rows stamped under fences) and a guarded
# partitioned table with two partitions.  It is dumped with pg_dump -Fc and
# restored with pg_restore into a new database, and as a plain-SQL dump
# through psql with ON_ERROR_STOP.  What this proves:
#
#  1. The restore is clean (exit 0, no ERROR): pg_restore loads the rows
#     before it creates the guard's triggers, so the guard refuses nothing
#     of the restore.
#  2. The guard comes back whole: dlock_guards shows the same key,
#     operations and token column, the rows and their tokens are there.
#  3. It works in the restored database: a write without a fence is refused
#     with LK001, a fenced one goes through and is stamped; on the
#     partitioned table too, and TRUNCATE is refused.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('guard_dump');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
CREATE EXTENSION dlock;
CREATE TABLE reports (id int PRIMARY KEY, body text, tok bigint);
SELECT dlock_guard('reports', $$'rep/' || id$$, '{update,delete}', 'tok');
INSERT INTO reports VALUES (1, 'one', NULL), (2, 'two', NULL);
CREATE TABLE parts (id int PRIMARY KEY, body text) PARTITION BY RANGE (id);
CREATE TABLE parts_a PARTITION OF parts FOR VALUES FROM (0) TO (10);
CREATE TABLE parts_b PARTITION OF parts FOR VALUES FROM (10) TO (20);
SELECT dlock_guard('parts', $$'part'$$);
});
my $t = $node->safe_psql('src', q{SELECT dlock_acquire('rep/1', 'w', '1 hour')});
$node->safe_psql('src', qq{
UPDATE reports SET body = 'one, fenced' WHERE id = 1 AND dlock_validate('rep/1', 'w', $t);
});
my $tp = $node->safe_psql('src', q{SELECT dlock_acquire('part', 'w', '1 hour')});
$node->safe_psql('src', qq{
BEGIN;
SELECT dlock_validate('part', 'w', $tp);
INSERT INTO parts VALUES (1, 'a'), (11, 'b');
COMMIT;
});
is($node->safe_psql('src', "SELECT tok = $t FROM reports WHERE id = 1"), 't',
	'source: the fenced update stamped its token');

my $guards = q{SELECT table_name, key, operations, token_column FROM dlock_guards ORDER BY table_name::text};
my $source_guards = $node->safe_psql('src', $guards);
is($source_guards, "parts|'part'|{insert,update,delete}|\nreports|'rep/' || id|{update,delete}|tok",
	'source: dlock_guards shows both guards');

my $dir = PostgreSQL::Test::Utils::tempdir;
my ($out, $err);

sub check_restored
{
	my ($db, $how) = @_;
	is($node->safe_psql($db, $guards), $source_guards, "$how: the guards are back");
	is($node->safe_psql($db, q{SELECT string_agg(id || ':' || body, ',' ORDER BY id) FROM reports}),
		'1:one, fenced,2:two', "$how: the rows are back");
	is($node->safe_psql($db, "SELECT tok = $t FROM reports WHERE id = 1"), 't',
		"$how: the stamped token is back");
	is($node->safe_psql($db, q{SELECT string_agg(id::text, ',' ORDER BY id) FROM parts}),
		'1,11', "$how: the partitions' rows are back");
	my ($rc, $o, $e) = $node->psql($db, q{UPDATE reports SET body = 'x' WHERE id = 2},
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($e, qr/LK001.*refused for key "rep\/2"/s, "$how: a write without its fence is refused");
	($rc, $o, $e) = $node->psql($db, q{INSERT INTO parts VALUES (12, 'c')},
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($e, qr/LK001.*refused for key "part"/s, "$how: a partition's write without its fence is refused");
	($rc, $o, $e) = $node->psql($db, q{TRUNCATE parts_b});
	like($e, qr/truncate of guarded table public\.parts_b refused/, "$how: TRUNCATE of a partition is refused");
	my $t2 = $node->safe_psql($db, q{SELECT dlock_acquire('rep/2', 'w', '1 hour')});
	is($node->safe_psql($db, qq{
UPDATE reports SET body = 'two, fenced' WHERE id = 2 AND dlock_validate('rep/2', 'w', $t2);
SELECT tok = $t2 AND tok > $t FROM reports WHERE id = 2}), 't',
		"$how: a fenced write goes through, stamped with a newer token");
	# inserts are not guarded on reports
	$node->safe_psql($db, q{INSERT INTO reports VALUES (3, 'three', NULL)});
	pass("$how: an operation the guard does not name goes through");
}

# custom format, pg_restore into a new database
command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('src'), '-f', "$dir/src.dump" ],
	'pg_dump -Fc');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
my $ok = IPC::Run::run([ 'pg_restore', '-d', $node->connstr('restored'), "$dir/src.dump" ],
	'>', \$out, '2>', \$err);
ok($ok, 'pg_restore exits 0');
unlike($err // '', qr/ERROR|WARNING/, 'pg_restore prints no error');
check_restored('restored', 'pg_restore');

# plain SQL through psql, ON_ERROR_STOP
command_ok([ 'pg_dump', '-d', $node->connstr('src'), '-f', "$dir/src.sql" ], 'pg_dump (plain)');
$node->safe_psql('postgres', 'CREATE DATABASE restored_sql');
$ok = IPC::Run::run([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d',
		$node->connstr('restored_sql'), '-f', "$dir/src.sql" ], '>', \$out, '2>', \$err);
ok($ok, 'the plain dump restores through psql with ON_ERROR_STOP');
unlike($err // '', qr/ERROR/, 'psql prints no error');
check_restored('restored_sql', 'psql');

$node->stop;
done_testing();
