# Copyright: dlock contributors
#
# 078_claims_bulk.pl: every claim call that can touch N claims works for
# large N with PostgreSQL's default settings (max_locks_per_transaction 64),
# and never holds all N keys, or their key locks, at once: dlock_renew_claims
# and dlock_unclaim of all of a holder's claims, dlock_unclaim and
# dlock_reset_claims of N given keys, dlock_release_all's claim part, and
# dlock_cleanup's claim sweep (1,000 rows a call, called until it returns 0).
#
# N is 200,000 (DLOCK_BULK_CLAIMS=1000000 for the hand run the README
# reports).  Claim rows are written straight into dlock.claim, as claims of
# role regress_bulk, so that the test does not spend minutes claiming.
#
# While dlock_unclaim and dlock_release_all give N claims back, another
# session holds the fence (dlock_claimed) of one claim in the middle of the
# order, so the call waits there, halfway: then its backend's memory
# (pg_log_backend_memory_contexts) must be far below what N keys take, and
# it must hold at most 500 key locks.  (0.3 held all N keys, and the whole
# result of the query that read them, to the end of the call: some 90 MB
# for a million claims.)

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $N = $ENV{DLOCK_BULK_CLAIMS} // 200000;
my $MID = int($N * 3 / 4);    # a key in the middle of the order

my $node = PostgreSQL::Test::Cluster->new('claims_bulk');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'dlock'");
$node->start;

is($node->safe_psql('postgres', 'SHOW max_locks_per_transaction'),
	'64', 'the default lock table size');
$node->safe_psql(
	'postgres', qq{
	CREATE EXTENSION dlock;
	CREATE ROLE regress_bulk LOGIN;
	CREATE TABLE big (id int PRIMARY KEY, v int NOT NULL DEFAULT 0);
	INSERT INTO big (id) SELECT g FROM generate_series(1, $N) g;
	GRANT SELECT, UPDATE ON big TO regress_bulk;
});

# every row of big claimed, live for an hour, by holder h of regress_bulk
sub all_live
{
	$node->safe_psql(
		'postgres', q{
		INSERT INTO dlock.claim AS c (relid, key, holder, owner, token, ttl_us,
		                              claimed_at, expires_at, attempts)
		SELECT 'big'::regclass, id::text, 'h', 'regress_bulk'::regrole, 1,
		       3600000000, clock_timestamp(), clock_timestamp() + interval '1 hour', 1
		  FROM big
		ON CONFLICT (relid, key) DO UPDATE
		   SET holder = 'h', owner = 'regress_bulk'::regrole,
		       expires_at = clock_timestamp() + interval '1 hour', poisoned_at = NULL});
	return;
}

sub as_bulk
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql,
		extra_params => [ '-U', 'regress_bulk' ]);
}

sub live_claims
{
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM dlock.claim WHERE holder IS NOT NULL"
		  . " AND expires_at > clock_timestamp()");
}

# Run $call (as regress_bulk) while another session of regress_bulk fences
# the claim of row $MID: the call waits for that key's lock, halfway
# through; measure its memory and key locks there, then let it finish.
# Returns its result, the bytes of its memory contexts, and its key locks.
sub halfway
{
	my ($call) = @_;
	my $fence = $node->background_psql('postgres',
		extra_params => [ '-U', 'regress_bulk' ]);
	$fence->query_safe("BEGIN");
	is($fence->query_safe("SELECT dlock_claimed('big', $MID, 'h')"),
		't', "the fence holds row $MID during $call");

	my $worker = $node->background_psql('postgres',
		extra_params => [ '-U', 'regress_bulk' ]);
	my $pid = $worker->query_safe('SELECT pg_backend_pid()');
	# the same kind of call on nothing first: caches and plans are made
	$worker->query_safe("SELECT dlock_unclaim('big', 'nobody'), dlock_release_all('nobody')");
	my $before = memory_of($pid);
	$worker->query_until(qr/started/, "\\echo started\n$call;\n\\echo finished\n");
	$node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $pid")
	  or die "$call never waited for the fenced key";

	my $locks = $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_locks WHERE pid = $pid AND locktype = 'advisory'");
	my $bytes = memory_of($pid) - $before;

	$fence->query_safe("COMMIT");
	$fence->quit;
	my $out = $worker->query_until(qr/finished\n/, '');
	$worker->quit;
	$out =~ s/\s*finished\s*$//;
	$out =~ s/^\s+//;
	return ($out, $bytes, $locks);
}

# the bytes of the memory contexts of backend $pid (it logs them)
sub memory_of
{
	my ($pid) = @_;
	my $offset = -s $node->logfile;
	my $bytes;

	$node->safe_psql('postgres', "SELECT pg_log_backend_memory_contexts($pid)");
	$node->poll_query_until('postgres', 'SELECT true')
	  until ($bytes) = slurp_file($node->logfile, $offset) =~ /Grand total: (\d+) bytes/;
	return $bytes;
}

# what N claim keys take in memory (a key, its pointer, its SPI tuple):
# a call that held them all would grow by far more than a tenth of this
# (and a megabyte for what the first real call caches: plans, relations)
my $keys_bytes = $N * 60;

all_live();
is(as_bulk("SELECT dlock_renew_claims('big', 'h', '2 hours')"),
	$N, "dlock_renew_claims renews $N claims");
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM dlock.claim WHERE expires_at > clock_timestamp() + interval '90 min'"),
	$N, 'all of them');

my ($n, $bytes, $locks) = halfway("SELECT dlock_unclaim('big', 'h')");
is($n, $N, "dlock_unclaim gives back $N claims");
cmp_ok($bytes, '<', 1_000_000 + $keys_bytes / 10,
	"dlock_unclaim holds a page of keys, not all $N ($bytes more bytes halfway)");
cmp_ok($locks, '<=', 500, "dlock_unclaim holds at most 500 key locks ($locks)");
is(live_claims(), 0, 'no claim is left live');

all_live();
($n, $bytes, $locks) = halfway("SELECT dlock_release_all('h')");
is($n, $N, "dlock_release_all gives back $N claims");
cmp_ok($bytes, '<', 1_000_000 + $keys_bytes / 10,
	"dlock_release_all holds a page of keys, not all $N ($bytes more bytes halfway)");
cmp_ok($locks, '<=', 500, "dlock_release_all holds at most 500 key locks ($locks)");
is(live_claims(), 0, 'no claim is left live');

all_live();
is( as_bulk(
		"SELECT dlock_unclaim('big', 'h', (SELECT array_agg(id) FROM big))"),
	$N,
	"dlock_unclaim of $N given keys");
is(live_claims(), 0, 'no claim is left live');

all_live();
is( $node->safe_psql('postgres',
		"SELECT dlock_reset_claims('big', (SELECT array_agg(id) FROM big))"),
	$N,
	"dlock_reset_claims of $N keys");
is($node->safe_psql('postgres', 'SELECT count(*) FROM dlock.claim'),
	0, 'no claim row is left');

# N idle claim rows: the sweep deletes at most 1,000 a call, until none is left
all_live();
$node->safe_psql('postgres',
	"UPDATE dlock.claim SET holder = NULL, owner = NULL,"
	  . " expires_at = clock_timestamp() - interval '2 days'");
my ($calls, $deleted, $most) = (0, 0, 0);
while (1)
{
	my $d = $node->safe_psql('postgres', "SELECT dlock_cleanup('1 hour')");
	$calls++;
	$deleted += $d;
	$most = $d if $d > $most;
	last if $d == 0 || $calls > $N / 1000 + 10;
}
is($deleted, $N, "dlock_cleanup deleted all $N idle claim rows");
cmp_ok($most, '<=', 2000, "at most 1,000 claim rows (and 1,000 lease rows) a call");
is($node->safe_psql('postgres', 'SELECT count(*) FROM dlock.claim'),
	0, 'no claim row is left');

# and real claims of the rows after all that
is(as_bulk("SELECT count(*) FROM dlock_claim(NULL::big, 'w', 1000)"),
	1000, 'claims work after the bulk calls');

$node->stop;
done_testing();
