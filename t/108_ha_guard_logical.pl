
# Copyright (c) dlock contributors
#
# t/108_ha_guard_logical.pl - logical replication into and out of guarded
# tables (dlock_guard, issue 40).
#
# The publisher's table is guarded, and so is the subscriber's copy.  Rows
# written on the publisher under their fences (insert, update, delete) reach
# the subscriber: its apply worker runs with session_replication_role =
# replica, where the guard's row trigger does not fire (what
# docs/guarantees.md, "Guarded tables", says bypasses a guard, and why it
# must).  On the subscriber, a local write without a fence is still refused
# (LK001), and one with a fence goes through.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

my $pub = PostgreSQL::Test::Cluster->new('guard_pub');
$pub->init(allows_streaming => 'logical');
$pub->start;
my $sub = PostgreSQL::Test::Cluster->new('guard_sub');
$sub->init;
$sub->start;

my $ddl = q{
CREATE EXTENSION dlock;
CREATE TABLE reports (id int PRIMARY KEY, body text, tok bigint);
SELECT dlock_guard('reports', $$'rep/' || id$$, token_column => 'tok');
};
$pub->safe_psql('postgres', $ddl);
$sub->safe_psql('postgres', $ddl);
$pub->safe_psql('postgres', 'CREATE PUBLICATION reports_pub FOR TABLE reports');
my $connstr = $pub->connstr . ' dbname=postgres';
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION reports_sub CONNECTION '$connstr' PUBLICATION reports_pub");
$sub->wait_for_subscription_sync($pub, 'reports_sub');

# fenced writes on the publisher
my $t1 = $pub->safe_psql('postgres', q{SELECT dlock_acquire('rep/1', 'w', '1 hour')});
my $t2 = $pub->safe_psql('postgres', q{SELECT dlock_acquire('rep/2', 'w', '1 hour')});
$pub->safe_psql('postgres', qq{
BEGIN;
SELECT dlock_validate('rep/1', 'w', $t1), dlock_validate('rep/2', 'w', $t2);
INSERT INTO reports VALUES (1, 'one', NULL), (2, 'two', NULL);
COMMIT;
BEGIN;
SELECT dlock_validate('rep/1', 'w', $t1), dlock_validate('rep/2', 'w', $t2);
UPDATE reports SET body = 'one, updated' WHERE id = 1;
DELETE FROM reports WHERE id = 2;
COMMIT;
});
my ($rc, $o, $e) = $pub->psql('postgres', q{INSERT INTO reports VALUES (3, 'three', NULL)});
like($e, qr/refused for key "rep\/3"/, 'publisher: a write without its fence is refused');
$pub->wait_for_catchup('reports_sub');

is($sub->safe_psql('postgres', q{SELECT string_agg(id || ':' || body, ',' ORDER BY id) FROM reports}),
	'1:one, updated', 'subscriber: the fenced inserts, update and delete were applied');
is($sub->safe_psql('postgres', "SELECT tok = $t1 FROM reports WHERE id = 1"), 't',
	'subscriber: the publisher\'s stamped token arrived as it was');
is($sub->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_subscription s JOIN pg_subscription p ON p.oid = s.subid
		   WHERE p.subname = 'reports_sub' AND s.pid IS NOT NULL}), '1',
	'subscriber: the apply worker is running (no error stopped it)');

# local writes on the subscriber are still guarded
($rc, $o, $e) = $sub->psql('postgres', q{UPDATE reports SET body = 'local' WHERE id = 1},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($e, qr/LK001.*refused for key "rep\/1"/s, 'subscriber: a local write without its fence is refused');
my $ts = $sub->safe_psql('postgres', q{SELECT dlock_acquire('rep/1', 'local', '1 hour')});
is($sub->safe_psql('postgres', qq{
UPDATE reports SET body = 'local' WHERE id = 1 AND dlock_validate('rep/1', 'local', $ts);
SELECT body FROM reports WHERE id = 1}), 'local', 'subscriber: a fenced local write goes through');

$sub->safe_psql('postgres', 'DROP SUBSCRIPTION reports_sub');
$sub->stop;
$pub->stop;
done_testing();
