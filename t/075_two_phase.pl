# Copyright: dlock contributors
#
# 075_two_phase.pl: claims, completions, fences and leases inside prepared
# transactions (two-phase commit), also across a restart of the server with
# the transactions still prepared.
#
# A prepared transaction keeps what an open one has: its claims are taken
# (nobody else gets those rows, committed or not), its fence holds off a
# takeover after the claim or lease ran out, and its completion is not seen
# until COMMIT PREPARED.  COMMIT PREPARED makes it all count, ROLLBACK
# PREPARED undoes it; a crash in between changes nothing.  A step hint
# that a prepared transaction published over its own claims lapses (a
# ROLLBACK PREPARED gives those claims back).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('two_phase');
$node->init;
$node->append_conf('postgresql.conf',
	    "shared_preload_libraries = 'dlock'\n"
	  . "max_prepared_transactions = 8\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION dlock;
	CREATE TABLE jobs (id int PRIMARY KEY, done boolean NOT NULL DEFAULT false);
	CREATE TABLE results (id int PRIMARY KEY);
	INSERT INTO jobs SELECT g, false FROM generate_series(1, 10) g;
});

sub sql { return $node->safe_psql('postgres', $_[0]); }

# rows claimed by one call, as "1,2,3" ("" for none)
sub claim
{
	my ($holder, $n, $ttl) = @_;
	return sql("SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '')"
		  . " FROM dlock_claim(NULL::jobs, '$holder', $n, '$ttl', 'NOT done')");
}

sub claims_of
{
	return sql("SELECT coalesce(string_agg(key, ',' ORDER BY key::int), '')"
		  . " FROM dlock_claims WHERE holder = '$_[0]'");
}

# --- a claim made in a prepared transaction ---
sql("BEGIN; SELECT count(*) FROM dlock_claim(NULL::jobs, 'p1', 2, '1 hour'); PREPARE TRANSACTION 'claim1'");
is(claim('other', 3, '1 hour'), '3,4,5', 'prepared claim: its rows (1, 2) go to nobody else');
sql("SELECT dlock_unclaim('jobs', 'other')");

# --- a claim made in another prepared transaction, rolled back ---
sql("BEGIN; SELECT count(*) FROM dlock_claim(NULL::jobs, 'p2', 2, '1 hour', 'id > 8'); PREPARE TRANSACTION 'claim2'");
is(claim('other', 10, '1 hour'), '3,4,5,6,7,8', 'second prepared claim: its rows (9, 10) are taken too');
sql("SELECT dlock_unclaim('jobs', 'other')");

# --- a fence in a prepared transaction, on a claim that then runs out ---
# (the fenced write goes to another table: the row itself is not locked,
# only the fence keeps the claim from being taken over)
# (the claim must still be live when the fence reads it: a machine too slow
# for a claim of 1 s gets the case again with a longer one; that it ran out
# afterwards is waited for, not slept)
my $fenced;
for my $ttl ('1 s', '4 s', '16 s', '64 s')
{
	sql("SELECT count(*) FROM dlock_claim(NULL::jobs, 'f', 1, '$ttl', 'id = 5')");
	$fenced = sql("BEGIN; INSERT INTO results SELECT 5 WHERE dlock_claimed('jobs', 5, 'f');"
		  . " SELECT count(*) FROM results; PREPARE TRANSACTION 'fence'");
	last if $fenced eq '1';
	note("the claim of $ttl ran out before the fence read it: again with a longer one");
	sql("ROLLBACK PREPARED 'fence'");
	$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM dlock_claims WHERE holder = 'f'")
	  or die 'the claim of f never ran out';
}
is($fenced, '1', 'fence: the fenced write went through before PREPARE');
$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM dlock_claims WHERE holder = 'f'")
  or die 'the claim of f never ran out';
is(claim('other', 10, '1 hour'), '3,4,6,7,8',
	'fence: the claim on row 5 ran out, but nobody takes it over while the fence is prepared');
sql("SELECT dlock_unclaim('jobs', 'other')");

# --- a completion in a prepared transaction ---
sql("SELECT count(*) FROM dlock_claim(NULL::jobs, 'c', 2, '1 hour', 'id IN (6, 7)')");
sql("BEGIN; UPDATE jobs SET done = true FROM dlock_complete('jobs', 'c', ARRAY[6]) k"
  . " WHERE jobs.id = k; PREPARE TRANSACTION 'complete'");
is(claims_of('c'), '6,7', 'prepared completion: the claim is not given back yet');

# --- a lease acquired, and one released, in prepared transactions ---
sql("SELECT dlock_acquire('tp:held', 'h', '1 hour')");
sql("BEGIN; SELECT dlock_acquire('tp:new', 'n', '1 hour'); PREPARE TRANSACTION 'acq'");
sql("BEGIN; SELECT dlock_release('tp:held', 'h'); PREPARE TRANSACTION 'rel'");
is(sql("SELECT coalesce(dlock_acquire('tp:new', 'x', '1 min', wait => '0')::text, 'NULL')"),
	'NULL', 'prepared acquire: nobody else gets the key');
is(sql("SELECT coalesce(dlock_acquire('tp:held', 'x', '1 min', wait => '0')::text, 'NULL')"),
	'NULL', 'prepared release: the key is not free before COMMIT PREPARED');

# --- the same after a crash, with everything still prepared ---
$node->stop('immediate');
$node->start;
is(sql("SELECT string_agg(gid, ',' ORDER BY gid) FROM pg_prepared_xacts"),
	'acq,claim1,claim2,complete,fence,rel', 'after the crash: all six still prepared');
is(claim('other', 10, '1 hour'), '3,4,8',
	'after the crash: prepared claims (1, 2, 9, 10), the fenced claim (5) and the completing claims (6, 7) are still taken');
sql("SELECT dlock_unclaim('jobs', 'other')");
is(sql("SELECT coalesce(dlock_acquire('tp:new', 'x', '1 min', wait => '0')::text, 'NULL')"),
	'NULL', 'after the crash: the prepared acquire still keeps its key');

# --- the fence's transaction ends: the claim can be taken over ---
sql("COMMIT PREPARED 'fence'");
is(sql("SELECT count(*) FROM results WHERE id = 5"), '1', 'fence: the fenced write committed');
is(claim('t', 1, '1 hour'), '3', 'after COMMIT PREPARED of the fence: the next free row first');
is(sql("SELECT count(*) FROM dlock_claim(NULL::jobs, 't', 1, '1 hour', 'id = 5')"), '1',
	'after COMMIT PREPARED of the fence: the claim that ran out is taken over');
sql("SELECT dlock_unclaim('jobs', 't')");

# --- COMMIT PREPARED / ROLLBACK PREPARED ---
sql("COMMIT PREPARED 'claim1'");
is(claims_of('p1'), '1,2', 'COMMIT PREPARED: the claims are live');
sql("ROLLBACK PREPARED 'claim2'");
is(claims_of('p2'), '', 'ROLLBACK PREPARED: the claims are gone');
is(claim('other', 10, '1 hour'), '3,4,5,8,9,10', 'ROLLBACK PREPARED: its rows are claimable at once');
sql("SELECT dlock_unclaim('jobs', 'other')");
sql("COMMIT PREPARED 'complete'");
is(claims_of('c'), '7', 'COMMIT PREPARED of a completion: that claim is given back');
is(sql("SELECT string_agg(id::text, ',' ORDER BY id) FROM jobs WHERE done"), '6',
	'COMMIT PREPARED of a completion: its write committed');
sql("COMMIT PREPARED 'acq'");
is(sql("SELECT holder FROM dlock_locks WHERE key = 'tp:new'"), 'n', 'COMMIT PREPARED: the acquire holds');
sql("ROLLBACK PREPARED 'rel'");
is(sql("SELECT holder FROM dlock_locks WHERE key = 'tp:held'"), 'h', 'ROLLBACK PREPARED: the release never happened');
is(sql("SELECT dlock_release('tp:held', 'h')"), 't', 'the holder can still release it');

# --- a step hint published by a transaction that is then prepared ---
# A's transaction claims 3,000 rows with three calls of one query (at most
# 1,000 rows a call): its second and third calls step over the rows it
# holds already and publish that stretch (claim_hint.c, from 1,000 held
# rows on) for every backend's claims of that query.  Those claims vanish
# with ROLLBACK PREPARED (run by another session): so must the hint, else
# B's claim of the same query steps over rows that are free (it would get
# 2001 on, not 1).
sql("CREATE TABLE many (id int PRIMARY KEY);"
  . " INSERT INTO many SELECT generate_series(1, 5000); ANALYZE many");
sub claim_many
{
	return "SELECT min(id) || '-' || max(id) FROM dlock_claim(NULL::many, '$_[0]', 1000, '1 hour')";
}
is( sql("BEGIN; "
		  . join('; ', (claim_many('a')) x 3)
		  . "; PREPARE TRANSACTION 'hint'"),
	"1-1000\n1001-2000\n2001-3000",
	'prepared hint: each claim of the transaction stepped over the rows of the one before');
sql("ROLLBACK PREPARED 'hint'");
is(sql(claim_many('b')), '1-1000',
	'prepared hint: after ROLLBACK PREPARED, the next claim of the same query starts at the first row');
is(sql("SELECT dlock_unclaim('many', 'b')"), '1000', 'prepared hint: its claims given back');

$node->stop;
done_testing();
