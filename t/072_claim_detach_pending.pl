# Copyright: dlock contributors
#
# 072_claim_detach_pending.pl: no role crashes the server through a
# partition whose DETACH PARTITION ... CONCURRENTLY is pending (issue 35),
# and claims stay one per row through that state.
#
# While such a detach waits in its second transaction, and after that
# transaction was cancelled (pg_inherits.inhdetachpending stays true until
# ALTER TABLE ... DETACH PARTITION ... FINALIZE), PostgreSQL's
# get_partition_ancestors() returns no ancestor for the partition; dlock
# took the last element of that empty list in its ddl_command_start event
# trigger (which runs before PostgreSQL checks the caller's rights) and in
# every claim call, and the server crashed.  Checked, in both states:
#  - a role with no right on the tables: ALTER TABLE ... OWNER TO itself on
#    the partition and on its parent, every claim function on them, and
#    DETACH ... FINALIZE get PostgreSQL's or dlock's permission errors;
#  - a role with rights: claims through the pending partition, through a
#    partition under it (a tree of three levels) and through the old root
#    hand out each row once (a partition being detached is still in its
#    tree for dlock: its claims are keyed by the old root until the detach
#    ends), and FINALIZE moves its claims to it, as a plain DETACH does;
#  - a table dropped while a claim call waits for its lock: a clear error.
# The server must stay up: a session opened at the start is still
# connected at the end (a crash ends every session; the postmaster itself,
# and so pg_postmaster_start_time(), survives a crash), and the log has no
# server process terminated by a signal.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('detach_pending');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'dlock'");
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION dlock;
	CREATE ROLE regress_nobody LOGIN;
	CREATE ROLE regress_worker LOGIN;
	-- two levels: pp (pp1, pp2); three levels: tr (tm (tl1, tl2), t2)
	CREATE TABLE pp (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
	CREATE TABLE pp1 PARTITION OF pp FOR VALUES FROM (1) TO (100);
	CREATE TABLE pp2 PARTITION OF pp FOR VALUES FROM (100) TO (200);
	INSERT INTO pp SELECT g, 'x' FROM generate_series(1, 6) g;
	INSERT INTO pp SELECT g, 'x' FROM generate_series(101, 106) g;
	CREATE TABLE tr (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
	CREATE TABLE tm PARTITION OF tr FOR VALUES FROM (1) TO (100) PARTITION BY RANGE (id);
	CREATE TABLE tl1 PARTITION OF tm FOR VALUES FROM (1) TO (50);
	CREATE TABLE tl2 PARTITION OF tm FOR VALUES FROM (50) TO (100);
	CREATE TABLE t2 PARTITION OF tr FOR VALUES FROM (100) TO (200);
	INSERT INTO tr VALUES (1, 'x'), (2, 'x'), (3, 'x'), (51, 'x'), (52, 'x'),
	                      (101, 'x'), (102, 'x');
	GRANT SELECT, UPDATE ON pp, pp1, pp2, tr, tm, tl1, tl2, t2 TO regress_worker;
});

# a session that a crash would end
my $sentinel = $node->background_psql('postgres');
my $sentinel_pid = $sentinel->query_safe('SELECT pg_backend_pid()');

sub as_role
{
	my ($role, $sql) = @_;
	my ($ret, $out, $err) =
	  $node->psql('postgres', $sql, extra_params => [ '-U', $role ]);
	return $ret == 0 ? $out : "ERROR: $err";
}

sub worker { return as_role('regress_worker', @_); }

# claims made through the roots before any detach: w0 holds 1, 2 of pp1
# (and 101 of pp2), 1 and 51 of tm
is( worker(
		q{SELECT array_agg(id ORDER BY id) FROM dlock_claim(NULL::pp, 'w0', 2, '1 hour', 'id < 100');
		  SELECT array_agg(id ORDER BY id) FROM dlock_claim(NULL::pp, 'w0', 1, '1 hour', 'id > 100');
		  SELECT array_agg(id ORDER BY id) FROM dlock_claim(NULL::tr, 'w0', 2, '1 hour', 'id IN (1, 51)')}
	),
	"{1,2}\n{101}\n{1,51}",
	'claims through the roots');

# Start DETACH ... CONCURRENTLY of $part from $parent while another
# session reads $parent: the detach commits its first transaction (the
# partition is marked pending) and waits for that reader in its second.
# Returns (the detach's session, the reader's session).
sub start_pending_detach
{
	my ($parent, $part) = @_;
	my $reader = $node->background_psql('postgres');
	$reader->query_safe("BEGIN; SELECT count(*) FROM $parent");
	my $detach = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $detach->query_safe('SELECT pg_backend_pid()');
	$detach->query_until(qr/detaching/,
		"\\echo detaching\nALTER TABLE $parent DETACH PARTITION $part CONCURRENTLY;\n");
	$node->poll_query_until(
		'postgres', qq{
		SELECT EXISTS (SELECT FROM pg_inherits
		                WHERE inhrelid = '$part'::regclass AND inhdetachpending)
		   AND EXISTS (SELECT FROM pg_locks WHERE pid = $pid AND NOT granted)})
	  or die "the detach of $part never waited in its second transaction";
	return ($detach, $reader, $pid);
}

# Everything a role without rights may try on $part and $parent: errors
# only, the ones PostgreSQL and dlock give whatever the partition's state.
sub nobody_checks
{
	my ($state, $parent, $part) = @_;
	for my $tbl ($part, $parent)
	{
		like(
			as_role('regress_nobody', "ALTER TABLE $tbl OWNER TO regress_nobody"),
			qr/must be owner of table $tbl/,
			"$state: ALTER TABLE $tbl OWNER TO by a role without rights");
		for my $call (
			"SELECT * FROM dlock_claim(NULL::$tbl, 'n', 1)",
			"SELECT dlock_claimed('$tbl', 1, 'n')",
			"SELECT * FROM dlock_complete('$tbl', 'n', ARRAY[1])",
			"SELECT dlock_unclaim('$tbl', 'n')",
			"SELECT dlock_renew_claims('$tbl', 'n')")
		{
			like(as_role('regress_nobody', $call),
				qr/permission denied for table $tbl/,
				"$state: $call by a role without rights");
		}
		like(
			as_role('regress_nobody', "SELECT dlock_claim_unheld('$tbl', 1)"),
			qr/^(f|ERROR: .*permission denied.*)$/s,
			"$state: dlock_claim_unheld on $tbl by a role without rights");
	}
	return;
}

# --- pp1: its detach waiting in its second transaction ---
my ($detach, $reader, $detach_pid) = start_pending_detach('pp', 'pp1');
nobody_checks('running', 'pp', 'pp1');
is(worker(q{SELECT array_agg(id ORDER BY id) FROM dlock_claim(NULL::pp1, 'w1', 1, '1 hour')}),
	'{3}', 'running: a claim through the partition skips the rows held through the root');

# --- pp1: its detach cancelled in its second transaction ---
$node->safe_psql('postgres', "SELECT pg_cancel_backend($detach_pid)");
like($detach->query_until(qr/cancelled.*\n/, "\\echo cancelled :LAST_ERROR_SQLSTATE\n"),
	qr/cancelled 57014/, 'the detach was cancelled');
$reader->query_safe('COMMIT');
$reader->quit;
$detach->quit;
is( $node->safe_psql(
		'postgres',
		"SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = 'pp1'::regclass"),
	't',
	'pp1 is left with its detach pending');
nobody_checks('pending', 'pp', 'pp1');
like(
	as_role('regress_nobody', 'ALTER TABLE pp DETACH PARTITION pp1 FINALIZE'),
	qr/must be owner of table pp/,
	'pending: DETACH ... FINALIZE by a role without rights');
is( worker(
		q{SELECT array_agg(id ORDER BY id) FROM dlock_claim(NULL::pp1, 'w2', 10, '1 hour');
		  SELECT coalesce(array_agg(id ORDER BY id)::text, '{}') FROM dlock_claim(NULL::pp, 'w2', 10, '1 hour', 'id < 100');
		  SELECT dlock_claimed('pp1', 1, 'w0'), dlock_claimed('pp1', 3, 'w1'),
		         dlock_claimed('pp1', 4, 'w2')}
	),
	"{4,5,6}\n{}\n" . 't|t|t',
	'pending: through the partition, the rows nobody holds; its fences hold');

# --- the owner finalizes: the claims follow the partition out ---
$node->safe_psql('postgres', 'ALTER TABLE pp DETACH PARTITION pp1 FINALIZE');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(table_name || ':' || key || '=' || holder, ' '
		                    ORDER BY table_name::text, key)
		    FROM dlock_claims WHERE table_name IN ('pp'::regclass, 'pp1'::regclass)}),
	'pp:101=w0 pp1:1=w0 pp1:2=w0 pp1:3=w1 pp1:4=w2 pp1:5=w2 pp1:6=w2',
	'finalized: the claims of pp1 rows moved to pp1');
is( worker(
		q{SELECT coalesce(array_agg(id ORDER BY id)::text, '{}') FROM dlock_claim(NULL::pp1, 'w3', 10, '1 hour');
		  SELECT dlock_claimed('pp1', 1, 'w0'), dlock_claimed('pp', 1, 'w0')}
	),
	"{}\nt|f",
	'finalized: no row of pp1 claimable again; fences through pp1 only');

# --- three levels: tm's detach pending under tr ---
($detach, $reader, $detach_pid) = start_pending_detach('tr', 'tm');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($detach_pid)");
like($detach->query_until(qr/cancelled.*\n/, "\\echo cancelled :LAST_ERROR_SQLSTATE\n"),
	qr/cancelled 57014/, 'three levels: the detach was cancelled');
$reader->query_safe('COMMIT');
$reader->quit;
$detach->quit;
nobody_checks('pending, three levels', 'tr', 'tm');
nobody_checks('pending, three levels, leaf', 'tm', 'tl1');
is( worker(
		q{SELECT array_agg(id ORDER BY id) FROM dlock_claim(NULL::tl1, 'w4', 10, '1 hour');
		  SELECT array_agg(id ORDER BY id) FROM dlock_claim(NULL::tm, 'w4', 10, '1 hour');
		  SELECT array_agg(id ORDER BY id) FROM dlock_claim(NULL::tr, 'w4', 10, '1 hour');
		  SELECT dlock_claimed('tl1', 1, 'w0'), dlock_claimed('tm', 51, 'w0')}
	),
	"{2,3}\n{52}\n{101,102}\nt|t",
	'pending, three levels: through the leaf, the middle and the root, each row once');
$node->safe_psql('postgres', 'ALTER TABLE tr DETACH PARTITION tm FINALIZE');
is( worker(
		q{SELECT coalesce(array_agg(id ORDER BY id)::text, '{}') FROM dlock_claim(NULL::tl2, 'w5', 10, '1 hour');
		  SELECT dlock_claimed('tm', 1, 'w0'), dlock_claimed('tl2', 51, 'w0'),
		         dlock_claimed('tl1', 2, 'w4'), dlock_claimed('tr', 1, 'w0')}
	),
	"{}\nt|t|t|f",
	'finalized, three levels: the claims of the middle tree followed it');

# --- a table dropped while a claim call waits for its lock ---
$node->safe_psql(
	'postgres', q{
	CREATE TABLE gone (id int PRIMARY KEY);
	INSERT INTO gone VALUES (1);
	GRANT SELECT, UPDATE ON gone TO regress_worker;
});
my $dropper = $node->background_psql('postgres');
$dropper->query_safe('BEGIN; DROP TABLE gone');
my $claimer = $node->background_psql('postgres', on_error_stop => 0);
my $claimer_pid = $claimer->query_safe('SELECT pg_backend_pid()');
$claimer->query_until(qr/claiming/,
	"\\echo claiming\nSELECT dlock_claimed('gone', 1, 'h');\n"
	  . "\\echo claimed :LAST_ERROR_SQLSTATE :LAST_ERROR_MESSAGE\n");
$node->poll_query_until('postgres',
	"SELECT EXISTS (SELECT FROM pg_locks WHERE pid = $claimer_pid AND NOT granted)")
  or die 'the claim call never waited for the dropped table';
$dropper->query_safe('COMMIT');
$dropper->quit;
like($claimer->query_until(qr/claimed.*\n/, ''),
	qr/claimed 42P01 relation with OID \d+ does not exist/,
	'dropped while waiting: a clear error');
$claimer->quit;

# --- the server stayed up all along ---
is($sentinel->query_safe('SELECT pg_backend_pid()'),
	$sentinel_pid, 'the session opened at the start is still connected');
$sentinel->quit;
ok(!$node->log_contains(qr/terminated by signal/),
	'no server process was terminated by a signal');

done_testing();
