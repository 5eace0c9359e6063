
# Copyright: dlock contributors
#
# 096_bulk_release.pl: dlock_release_all frees any number of leases with
# the default max_locks_per_transaction (README "Limits and errors"), and
# keeps mutual exclusion while it does.
#
# DLOCK_BULK_N leases (default 100,000; 1,000,000 by hand) are written
# straight into dlock.lease for role bulk_role, holder many2, as superuser.
# Then, with max_locks_per_transaction at its default of 64 (a shared lock
# table of some thousands of locks):
#  - dlock_release_all('many2') runs as bulk_role in a session of its own;
#    while it runs (it frees keys in key order and gives each key lock back
#    at once), another role's acquire of a key it has freed already, and of
#    one it has not reached yet, gets NULL (the key is not free before the
#    release commits), and the holder's own renewal of a freed key waits
#    for the release and then says the lease is gone;
#  - a waiter queued on the last key (in a transaction block: it is woken,
#    not handed the lease) gets it once the release commits, with a greater
#    token;
#  - it returns N, and no lease of many2 is left; keys are acquired again;
#  - dlock_cleanup, called until it returns 0 in one transaction, deletes
#    all N idle rows (1,000 a call, each committed by its worker).
# On dlock 0.3 the release failed with "out of shared memory" and released
# nothing.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockPoll;    # within(): waits of the test's own length
use Test::More;

my $n = $ENV{DLOCK_BULK_N} || 100000;

my $node = PostgreSQL::Test::Cluster->new('bulk');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'dlock'
dlock.safety_wake = '1h'
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION dlock;
CREATE ROLE bulk_role LOGIN;
CREATE ROLE other_role LOGIN;
});
is($node->safe_psql('postgres', 'SHOW max_locks_per_transaction'),
	'64', 'max_locks_per_transaction is the default');

# keys many:0000001 .. many:N, in key order as numbered
$node->safe_psql('postgres', qq{
INSERT INTO dlock.lease (key, holder, owner, token, ttl_us, acquired_at, expires_at)
SELECT 'many:' || lpad(g::text, 7, '0'), 'many2', 'bulk_role'::regrole,
       nextval('dlock.token_seq'), 3600000000, clock_timestamp(),
       clock_timestamp() + interval '1 hour'
  FROM generate_series(1, $n) g;
});
my $last = sprintf('many:%07d', $n);
is($node->safe_psql('postgres',
		"SELECT count(*) FROM dlock_locks WHERE holder = 'many2'"),
	$n, "$n leases of many2");
my $last_token = $node->safe_psql('postgres',
	"SELECT token FROM dlock.lease WHERE key = '$last'");

# a waiter on the last key (another role), in a transaction block: the
# release frees the key rather than handing it over, and wakes it at commit
# (the release wrote too many keys to note them: it wakes the head of
# every queue)
# each query of the sessions below, and each wait for a state, lasts at
# most 300 s: only a release that never gets there (a broken promise) is
# ended by it; the release of 100,000 leases may take a minute or more on
# a loaded machine
my $query_limit = 300;

my $w = $node->background_psql('postgres', on_error_stop => 0, timeout => $query_limit);
$w->query_until(qr/started/,
	"\\echo started\nSET ROLE other_role \\; BEGIN \\;"
	  . " SELECT dlock_acquire('$last', 'waiter', '1 min', '10 min');\n");
within($node, $query_limit, "SELECT count(*) = 1 FROM dlock_waiters WHERE key = '$last'")
  or die 'the waiter never queued';

# a fence of many2's on a key half-way: the release frees the keys before
# it, then waits for the fence, so that it is surely still running (keys
# freed, keys yet to free) while the other role tries them; no timing
my $mid = sprintf('many:%07d', int($n / 2));
my $mid_token = $node->safe_psql('postgres',
	"SELECT token FROM dlock.lease WHERE key = '$mid'");
my $f = $node->background_psql('postgres', on_error_stop => 0, timeout => $query_limit);
$f->query_safe('SET ROLE bulk_role');
$f->query_safe('BEGIN');
is($f->query_safe("SELECT dlock_validate('$mid', 'many2', $mid_token)"),
	't', "a fence of many2's on $mid");

# the release, in a session of its own
my $r = $node->background_psql('postgres', on_error_stop => 0, timeout => $query_limit);
$r->query_safe('SET ROLE bulk_role');
my $rpid = $r->query_safe('SELECT pg_backend_pid()');
$r->query_until(qr/started/,
	"\\echo started\nSELECT dlock_release_all('many2') AS released;\n");

# once it waits for the fence (it has freed the keys before it, their rows
# carrying its uncommitted update)
within($node, $query_limit, "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $rpid")
  or die 'the release never came to wait for the fence';
is( $node->safe_psql('postgres', qq{
SET ROLE other_role;
SELECT dlock_acquire('many:0000001', 'other', '1 min') IS NULL,
       dlock_acquire('many:' || lpad('2', 7, '0'), 'other', '1 min') IS NULL,
       dlock_acquire('$last', 'other', '1 min') IS NULL;
}),
	't|t|t',
	'while the release runs, no other holder gets a key it freed or has yet to free');
$f->query_safe('COMMIT');

# the holder's renewal of a freed key waits for the release, then fails
my $renew = $node->background_psql('postgres', on_error_stop => 0, timeout => $query_limit);
$renew->query_safe('SET ROLE bulk_role');
my $renewed = $renew->query_safe("SELECT dlock_renew('many:0000001', 'many2')");

my $released = $r->query_until(qr/done\n/, "\\echo done\n");
$released =~ s/\n?done\n//;
is($released, $n, "dlock_release_all released all $n leases");
is($renewed, 'f', 'a renewal of a freed key says the lease is gone');
like($r->{stderr}, qr/^$/, 'no error (no "out of shared memory")');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM dlock.lease WHERE holder = 'many2'"),
	'0', 'no lease of many2 is left');

my $wt = $w->query_until(qr/waited\n/, "\\echo waited\n");
$wt =~ s/\n?waited\n//;
like($wt, qr/^\d+$/, 'the waiter got the last key once the release committed');
cmp_ok($wt, '>', $last_token, "the waiter's token is greater than many2's");
$w->query_safe('COMMIT');

is( $node->safe_psql('postgres', q{
SET ROLE other_role;
SELECT count(dlock_acquire('many:' || lpad(g::text, 7, '0'), 'other', '1 min'))
  FROM generate_series(1, 100) g;
}),
	'100', 'the freed keys are acquired again');

# and their idle rows go, a call of dlock_cleanup (1,000 rows each) after
# the other in one transaction: nothing accumulates in it
is($node->safe_psql('postgres', q{
SET ROLE other_role;
SELECT dlock_release_all('other');
RESET ROLE;
DO $$ BEGIN WHILE dlock_cleanup('0') > 0 LOOP END LOOP; END $$;
SELECT count(*) FROM dlock.lease WHERE key LIKE 'many:%' AND holder IS NULL;
}),
	"100\n0", 'dlock_cleanup deleted every idle row, one call after the other');

$w->quit;
$r->quit;
$f->quit;
$renew->quit;
$node->stop;
done_testing();
