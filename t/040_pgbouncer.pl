
# Copyright (c) dlock contributors
#
# t/040_pgbouncer.pl - dlock behind a transaction-pooling pgbouncer
# (issue 5, item 4).
#
# The test starts Debian's pgbouncer (/usr/sbin/pgbouncer) on a free loopback
# port in front of its own node: pool_mode = transaction, default_pool_size =
# 2, auth_type = trust, ini and userlist in the test's temporary directory.
# Clients are persistent psql connections to pgbouncer.  What this proves:
#
#  1. One client acquires a lease in one transaction; while another client
#     keeps that server connection busy in an open transaction, the first
#     client's later transactions (renew with token, a validate-fenced write,
#     release with token) necessarily run on the other server connection
#     (pg_backend_pid() of every transaction is recorded and compared), and
#     all of them succeed: a dlock lease belongs to (holder, role), not to a
#     session.  A contender through the pooler gets NULL while the lease is
#     live, a stale-token fenced write is refused after the release, and the
#     next holder gets a greater token.
#  2. Several clients at once, more clients than server connections, each
#     running acquire / renew / fenced write / release in separate
#     transactions: every call succeeds, clients share server connections,
#     and a client's transactions land on more than one server connection.
#  3. Contrast: a session-level pg_advisory_lock taken through the pooler
#     outlives its client (the pooled server backend still holds it after the
#     client has gone), whereas a dlock lease of a client that went away runs
#     out after its ttl and the key is taken over, with a greater token.
#
# Skipped (plan skip_all) only when pgbouncer is not installed; the project's
# scripts/test.sh installs it.
#
#  4. Claims (issue 3) likewise: client A claims rows with dlock_claim in one
#     transaction; while client B keeps that server connection busy in an
#     open transaction, A's later transactions run on the other server
#     connection (pids recorded in the same transaction as the work and
#     compared) and all work there: dlock_renew_claims, a completion fenced
#     by dlock_claimed, dlock_unclaim.  A contender through the pooler gets
#     only the other rows while A's claims are live, its fenced completion
#     of A's rows completes nothing, A's own completion after giving the
#     claims back completes nothing, and the rows are claimable again.
#  5. Waiting claims (issue 38): a claim that waits (dlock_claim's wait) is
#     one statement, so through the pooler it holds one server connection
#     while it waits, and the other clients' transactions run on the other;
#     a row another client inserts through the pooler wakes it at the
#     insert's commit and it returns that row.  A client that goes away
#     while its claim waits leaves nothing queued in dlock_waiters once the
#     pooler has closed its server connection.

use strict;
use warnings;

use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;
use Time::HiRes qw(usleep);

my $pgbouncer_bin = '/usr/sbin/pgbouncer';
plan skip_all => "pgbouncer is not installed ($pgbouncer_bin)"
  unless -x $pgbouncer_bin;

# ---------------------------------------------------------------------------
# a persistent psql client connected through pgbouncer
# ---------------------------------------------------------------------------
package BouncerClient;

sub new
{
	my ($class, $name, $port, $user) = @_;
	my $self = bless {
		name => $name,
		in => '',
		out => '',
		err => '',
		n => 0,
		pids => [],
	}, $class;
	$self->{timer} = IPC::Run::timer($PostgreSQL::Test::Utils::timeout_default);
	$self->{h} = IPC::Run::start(
		[
			'psql', '-XAtq', '-v', 'ON_ERROR_STOP=0',
			'-h', '127.0.0.1', '-p', $port, '-U', $user, '-d', 'postgres',
			'-f', '-'
		],
		'<', \$self->{in},
		'>', \$self->{out},
		'2>', \$self->{err},
		$self->{timer});
	return $self;
}

# send SQL (one or more statements) without waiting for the answer
sub send
{
	my ($self, $sql) = @_;
	my $n = ++$self->{n};
	$self->{pending} = "__done_${n}__";
	$self->{in} .= "$sql\n;\n\\echo '$self->{pending}'\n\\warn '$self->{pending}'\n";
	$self->{h}->pump_nb;
	return;
}

# wait for the answer to the last send: (stdout, stderr)
sub result
{
	my ($self) = @_;
	my $b = $self->{pending};
	$self->{timer}->start($PostgreSQL::Test::Utils::timeout_default);
	$self->{h}->pump
	  until ($self->{out} =~ /\Q$b\E\n/ && $self->{err} =~ /\Q$b\E\n/)
	  || $self->{timer}->is_expired;
	die "$self->{name}: timed out waiting for the answer" if $self->{timer}->is_expired;
	my $out = $self->{out};
	my $err = $self->{err};
	$out =~ s/\Q$b\E\n//;
	$err =~ s/\Q$b\E\n//;
	$self->{out} = '';
	$self->{err} = '';
	chomp $out;
	return ($out, $err);
}

# run SQL and return its output; dies on any error output
sub query
{
	my ($self, $sql) = @_;
	$self->send($sql);
	my ($out, $err) = $self->result;
	die "$self->{name}: error for [$sql]: $err" if $err ne '';
	return $out;
}

# run one transaction whose first output line is pg_backend_pid(); records
# the pid and returns (pid, rest of the output)
sub txn
{
	my ($self, $sql) = @_;
	my $out = $self->query($sql);
	my ($pid, @rest) = split /\n/, $out;
	die "$self->{name}: no backend pid in [$out]" unless defined $pid && $pid =~ /^\d+$/;
	push @{ $self->{pids} }, $pid;
	return ($pid, join("\n", @rest));
}

sub quit
{
	my ($self) = @_;
	$self->{in} .= "\\q\n";
	$self->{h}->finish;
	return;
}

package main;

# ---------------------------------------------------------------------------
# the node and pgbouncer in front of it
# ---------------------------------------------------------------------------
my $node = PostgreSQL::Test::Cluster->new('pooled');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'dlock'
max_connections = 20
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION dlock;
CREATE TABLE guarded (n serial PRIMARY KEY, key text, writer text, token bigint);
});
my $user = $node->safe_psql('postgres', 'SELECT current_user');

my $dir = PostgreSQL::Test::Utils::tempdir;
my $bouncer_port = PostgreSQL::Test::Cluster::get_free_port();
my $sockdir = $node->host;    # the node listens on a Unix socket there
my $node_port = $node->port;

PostgreSQL::Test::Utils::append_to_file("$dir/userlist.txt", qq{"$user" ""\n});
PostgreSQL::Test::Utils::append_to_file(
	"$dir/pgbouncer.ini", qq{
[databases]
postgres = host=$sockdir port=$node_port dbname=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bouncer_port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = 2
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 50
server_round_robin = 0
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
});

my ($b_out, $b_err) = ('', '');
my $bouncer = IPC::Run::start([ $pgbouncer_bin, "$dir/pgbouncer.ini" ],
	'>', \$b_out, '2>', \$b_err);
END
{
	# never leave pgbouncer running, whatever happened
	eval { $bouncer->kill_kill if $bouncer; };
}

# wait until pgbouncer accepts connections and reaches the node
my $ready = 0;
for (1 .. 100)
{
	my ($stdout, $stderr);
	IPC::Run::run(
		[
			'psql', '-XAtq', '-h', '127.0.0.1', '-p', $bouncer_port,
			'-U', $user, '-d', 'postgres', '-c', 'SELECT 42'
		],
		'>', \$stdout, '2>', \$stderr);
	if (($stdout // '') =~ /^42$/m) { $ready = 1; last; }
	usleep(100_000);
}
ok($ready, "pgbouncer answers on 127.0.0.1:$bouncer_port")
  or BAIL_OUT("pgbouncer did not start: $b_err "
	  . (-f "$dir/pgbouncer.log" ? slurp_file("$dir/pgbouncer.log") : ''));

sub client { return BouncerClient->new($_[0], $bouncer_port, $user) }

# ---------------------------------------------------------------------------
# 1. acquire, then renew / fenced write / release on another server connection
# ---------------------------------------------------------------------------
{
	my $a = client('A');
	my $b = client('B');
	my $c = client('C');

	my ($pid_acq, $tok) = $a->txn(
		q{SELECT pg_backend_pid(); SELECT dlock_acquire('pool/key', 'worker-A', '1 min')});
	like($tok, qr/^\d+$/, 'A acquires pool/key through pgbouncer');

	# B opens a transaction: in transaction pooling it keeps a server
	# connection until it ends.  The only idle one is the connection A just
	# used, so from now on A's transactions must run on the other one.
	my $pid_b = $b->query('BEGIN; SELECT pg_backend_pid()');
	is($pid_b, $pid_acq,
		'B, in an open transaction, holds the server connection of A\'s acquire');

	my ($pid_renew, $renewed) = $a->txn(
		qq{SELECT pg_backend_pid(); SELECT dlock_renew('pool/key', 'worker-A', '2 min', $tok)});
	isnt($pid_renew, $pid_acq, 'A\'s renew runs on another server connection');
	is($renewed, 't', 'renew with the token succeeds there');

	my ($pid_c, $contended) = $c->txn(
		q{SELECT pg_backend_pid(); SELECT dlock_acquire('pool/key', 'worker-C')});
	is($contended, '', 'C cannot take pool/key while A holds it (NULL)');

	my ($pid_fence, $written) = $a->txn(qq{
BEGIN;
SELECT pg_backend_pid();
INSERT INTO guarded (key, writer, token)
  SELECT 'pool/key', 'A', $tok WHERE dlock_validate('pool/key', 'worker-A', $tok)
  RETURNING token;
COMMIT;});
	isnt($pid_fence, $pid_acq, 'A\'s fenced write runs on another server connection');
	is($written, $tok, 'the fenced write passes dlock_validate and commits');

	my ($pid_locks, $listed) = $a->txn(
		q{SELECT pg_backend_pid(); SELECT holder || '|' || token FROM dlock_locks WHERE key = 'pool/key'});
	is($listed, "worker-A|$tok", 'dlock_locks shows A\'s lease from any connection');

	my ($pid_rel, $released) = $a->txn(
		qq{SELECT pg_backend_pid(); SELECT dlock_release('pool/key', 'worker-A', $tok)});
	isnt($pid_rel, $pid_acq, 'A\'s release runs on another server connection');
	is($released, 't', 'release with the token succeeds there');

	$b->query('COMMIT');

	my ($pid_stale, $stale) = $a->txn(qq{
BEGIN;
SELECT pg_backend_pid();
INSERT INTO guarded (key, writer, token)
  SELECT 'pool/key', 'A-late', $tok WHERE dlock_validate('pool/key', 'worker-A', $tok)
  RETURNING token;
COMMIT;});
	is($stale, '', 'after the release, a fenced write with the old token writes nothing');

	my (undef, $tok_c) = $c->txn(
		q{SELECT pg_backend_pid(); SELECT dlock_acquire('pool/key', 'worker-C', '1 min')});
	cmp_ok($tok_c, '>', $tok, 'C takes pool/key next, with a greater token');
	my (undef, $rel_c) = $c->txn(
		qq{SELECT pg_backend_pid(); SELECT dlock_release('pool/key', 'worker-C', $tok_c)});
	is($rel_c, 't', 'C releases it');

	is( $node->safe_psql('postgres', q{SELECT string_agg(writer, ',' ORDER BY n) FROM guarded}),
		'A', 'exactly one fenced write reached the table');

	$_->quit for ($a, $b, $c);
}

# ---------------------------------------------------------------------------
# 2. several clients at once, more clients than server connections
# ---------------------------------------------------------------------------
{
	my $nclients = 5;
	my $rounds = 8;
	my @clients = map { client("W$_") } 1 .. $nclients;

	# every client sends its whole script at once; pgbouncer interleaves
	# their transactions over its two server connections
	for my $i (1 .. $nclients)
	{
		my $k = "multi/$i";
		my $h = "worker-$i";
		# the worker keeps the token its acquire returned (\gset) and fences
		# every write with it, as a real client does
		my $sql =
		    "SELECT coalesce(dlock_acquire('$k', '$h', '1 min')::text, 'NULL') AS tok \\gset\n"
		  . "SELECT pg_backend_pid() || ' acquire ' || :'tok';\n";
		for my $r (1 .. $rounds)
		{
			$sql .=
			  "SELECT pg_backend_pid() || ' renew ' || dlock_renew('$k', '$h', '1 min', :'tok'::bigint);\n";
			$sql .= "BEGIN;\n"
			  . "WITH w AS (INSERT INTO guarded (key, writer, token)"
			  . " SELECT '$k', '$h', :'tok'::bigint"
			  . " WHERE dlock_validate('$k', '$h', :'tok'::bigint) RETURNING 1)"
			  . " SELECT pg_backend_pid() || ' fenced ' || count(*) FROM w;\n"
			  . "COMMIT;\n";
		}
		$sql .=
		  "SELECT pg_backend_pid() || ' release ' || dlock_release('$k', '$h');";
		$clients[ $i - 1 ]->send($sql);
	}

	my (%pids_of_client, %clients_of_pid);
	my ($calls, $ok_calls, $errors) = (0, 0, '');
	for my $i (1 .. $nclients)
	{
		my ($out, $err) = $clients[ $i - 1 ]->result;
		$errors .= $err;
		for my $line (split /\n/, $out)
		{
			my ($pid, $op, $res) = split / /, $line;
			$calls++;
			$pids_of_client{$i}{$pid} = 1;
			$clients_of_pid{$pid}{$i} = 1;
			$ok_calls++
			  if ($op eq 'acquire' && $res =~ /^\d+$/)
			  || ($op =~ /^(renew|release)$/ && $res eq 'true')
			  || ($op eq 'fenced' && $res eq '1');
		}
	}
	is($errors, '', 'no client got an error');
	is($calls, $nclients * (2 + 2 * $rounds), 'every call answered');
	is($ok_calls, $calls,
		'every acquire, renew, fenced write and release succeeded across server connections'
	);
	cmp_ok(scalar(keys %clients_of_pid), '<=', 2,
		'all clients were served by at most the 2 pooled server connections');
	ok((grep { keys %{ $clients_of_pid{$_} } > 1 } keys %clients_of_pid),
		'clients shared a server connection');
	my @moved = grep { keys %{ $pids_of_client{$_} } > 1 } keys %pids_of_client;
	ok(@moved > 0,
		'a client\'s transactions ran on more than one server connection ('
		  . scalar(@moved) . " of $nclients clients)");
	is($node->safe_psql('postgres', q{SELECT count(*) FROM dlock_locks WHERE key LIKE 'multi/%'}),
		'0', 'all leases released');
	is( $node->safe_psql('postgres',
			q{SELECT count(*) FROM guarded WHERE key LIKE 'multi/%'}),
		$nclients * $rounds,
		'every fenced write is in the table');

	$_->quit for @clients;
}

# ---------------------------------------------------------------------------
# 3. contrast: a session advisory lock leaks behind the pooler, a lease expires
# ---------------------------------------------------------------------------
{
	my $a = client('A2');
	my ($pid_adv, $got) =
	  $a->txn(q{SELECT pg_backend_pid(); SELECT pg_advisory_lock(4242)});
	my ($pid_lease, $tok) = $a->txn(
		q{SELECT pg_backend_pid(); SELECT dlock_acquire('pool/gone', 'worker-gone', '1 s')});
	like($tok, qr/^\d+$/, 'a client takes a 1 s lease through the pooler');
	$a->quit;    # the client goes away, its server connections stay pooled

	ok( $node->poll_query_until(
			'postgres',
			qq{SELECT count(*) = 1 FROM pg_locks
			    WHERE locktype = 'advisory' AND objid = 4242 AND granted
			      AND pid = $pid_adv}),
		'the session advisory lock is still held by the pooled backend after its client left'
	);

	my $c = client('C2');
	my (undef, $tok2) = $c->txn(
		q{SELECT pg_backend_pid(); SELECT dlock_acquire('pool/gone', 'worker-next', '1 min', '5 min')});
	like($tok2, qr/^\d+$/,
		'the lease of the client that left runs out and the key is taken over');
	cmp_ok($tok2, '>', $tok, 'with a greater token');
	$c->quit;
}

# ---------------------------------------------------------------------------
# 4. claims: claim, then renew / fenced completion / unclaim on another
#    server connection
# ---------------------------------------------------------------------------
{
	$node->safe_psql('postgres', q{
CREATE TABLE jobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0, done_by text);
INSERT INTO jobs (id) SELECT generate_series(1, 6);
});
	my $a = client('CA');
	my $b = client('CB');
	my $c = client('CC');

	# every transaction below is BEGIN ... COMMIT, so that its pid is the
	# pid of the server connection that did the work
	my ($pid_claim, $ids) = $a->txn(q{
BEGIN;
SELECT pg_backend_pid();
SELECT string_agg(id::text, ',' ORDER BY id)
  FROM dlock_claim(NULL::jobs, 'worker-A', 3, '1 min', 'status = 0');
COMMIT;});
	is($ids, '1,2,3', 'A claims rows 1-3 through pgbouncer');

	my $pid_b = $b->query('BEGIN; SELECT pg_backend_pid()');
	is($pid_b, $pid_claim,
		'B, in an open transaction, holds the server connection of A\'s claim');

	my ($pid_renew, $renewed) = $a->txn(q{
BEGIN;
SELECT pg_backend_pid();
SELECT dlock_renew_claims('jobs', 'worker-A', '2 min');
COMMIT;});
	isnt($pid_renew, $pid_claim, 'A\'s dlock_renew_claims runs on another server connection');
	is($renewed, '3', 'and renews its 3 claims there');
	is( $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock_claims WHERE holder = 'worker-A'
			    AND expires_at - clock_timestamp() > interval '90 s'}),
		'3', 'the renewed claims run 2 minutes');

	my ($pid_c, $c_ids) = $c->txn(q{
BEGIN;
SELECT pg_backend_pid();
SELECT string_agg(id::text, ',' ORDER BY id)
  FROM dlock_claim(NULL::jobs, 'worker-C', 10, '1 min');
COMMIT;});
	is($c_ids, '4,5,6', 'C, claiming through the pooler, gets only the rows A has not claimed');
	my (undef, $c_steal) = $c->txn(q{
BEGIN;
SELECT pg_backend_pid();
WITH u AS (UPDATE jobs SET status = 1, done_by = 'C'
            WHERE id IN (1, 2, 3) AND dlock_claimed('jobs', id, 'worker-C')
           RETURNING id)
SELECT count(*) FROM u;
COMMIT;});
	is($c_steal, '0', 'C\'s fenced completion of A\'s rows completes nothing');

	my ($pid_done, $done) = $a->txn(q{
BEGIN;
SELECT pg_backend_pid();
WITH u AS (UPDATE jobs SET status = 1, done_by = 'A'
            WHERE id IN (1, 2, 3) AND dlock_claimed('jobs', id, 'worker-A')
           RETURNING id)
SELECT string_agg(id::text, ',' ORDER BY id) FROM u;
COMMIT;});
	isnt($pid_done, $pid_claim,
		'A\'s completion fenced by dlock_claimed runs on another server connection');
	is($done, '1,2,3', 'and completes its 3 rows there');

	my ($pid_unclaim, $unclaimed) = $a->txn(q{
BEGIN;
SELECT pg_backend_pid();
SELECT dlock_unclaim('jobs', 'worker-A');
COMMIT;});
	isnt($pid_unclaim, $pid_claim, 'A\'s dlock_unclaim runs on another server connection');
	is($unclaimed, '3', 'and gives its 3 claims back there');

	note "server pids: claim $pid_claim, renew $pid_renew, completion $pid_done, unclaim $pid_unclaim";
	$b->query('COMMIT');

	is( $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock_claims WHERE holder = 'worker-A'}),
		'0', 'A has no claims left');
	my (undef, $late) = $a->txn(q{
BEGIN;
SELECT pg_backend_pid();
WITH u AS (UPDATE jobs SET status = 2, done_by = 'A-late'
            WHERE id IN (1, 2, 3) AND dlock_claimed('jobs', id, 'worker-A')
           RETURNING id)
SELECT count(*) FROM u;
COMMIT;});
	is($late, '0', 'after dlock_unclaim, A\'s fenced completion completes nothing');

	my (undef, $again) = $c->txn(q{
BEGIN;
SELECT pg_backend_pid();
SELECT string_agg(id::text, ',' ORDER BY id)
  FROM dlock_claim(NULL::jobs, 'worker-C', 10, '1 min');
COMMIT;});
	is($again, '1,2,3', 'the rows A gave back are claimable again');
	my (undef, $c_unclaimed) =
	  $c->txn(q{SELECT pg_backend_pid(); SELECT dlock_unclaim('jobs', 'worker-C')});
	is($c_unclaimed, '6', 'C gives its claims back');

	is( $node->safe_psql('postgres',
			q{SELECT string_agg(id || ':' || status || ':' || coalesce(done_by, '-'), ',' ORDER BY id)
			    FROM jobs}),
		'1:1:A,2:1:A,3:1:A,4:0:-,5:0:-,6:0:-',
		'exactly A\'s fenced completion reached the table');

	$_->quit for ($a, $b, $c);
}

# ---------------------------------------------------------------------------
# 5. a waiting claim through the pooler, woken by an insert through it
# ---------------------------------------------------------------------------
{
	$node->safe_psql('postgres', q{
CREATE TABLE wjobs (id int PRIMARY KEY, payload text);
SELECT dlock_claim_wakeup('wjobs');
});
	my $w = client('W');
	my $i = client('I');
	# one waiting claim: it holds one of the pool's two server connections
	$w->send(q{SELECT string_agg(id::text, ',') FROM dlock_claim(NULL::wjobs, 'waiter', 5, '1 min', wait => '60 s')});
	my $queued = 0;
	for (1 .. 300)
	{
		$queued = $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock_waiters WHERE holder = 'waiter'});
		last if $queued eq '1';
		usleep(50_000);
	}
	is($queued, '1', 'the claim waits in the server, seen in dlock_waiters');
	my ($pid_ins, $ins) = $i->txn(q{
BEGIN;
SELECT pg_backend_pid();
INSERT INTO wjobs VALUES (7, 'x') RETURNING id;
COMMIT;});
	is($ins, '7', 'another client inserts a row through the pooler meanwhile');
	my ($got, $err) = $w->result;
	is($got, '7', 'the waiting claim returns the inserted row');
	is($err, '', 'without an error');
	is( $node->safe_psql('postgres',
			q{SELECT string_agg(holder || ':' || key, ',') FROM dlock_claims WHERE table_name = 'wjobs'::regclass}),
		'waiter:7', 'and holds its claim');

	# a client that goes away while its claim waits leaves nothing queued
	my $gone = client('G');
	$gone->send(q{SELECT count(*) FROM dlock_claim(NULL::wjobs, 'gone', 1, '1 min', wait => '60 s')});
	for (1 .. 300)
	{
		last if $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock_waiters WHERE holder = 'gone'}) eq '1';
		usleep(50_000);
	}
	$gone->{h}->kill_kill;
	my $left = '1';
	for (1 .. 600)
	{
		$left = $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock_waiters WHERE holder = 'gone'});
		last if $left eq '0';
		usleep(50_000);
	}
	is($left, '0', 'a client gone while its claim waited leaves no waiter behind');
	my ($pid_after, $after) = $i->txn(q{
BEGIN;
SELECT pg_backend_pid();
INSERT INTO wjobs VALUES (8, 'y') RETURNING id;
COMMIT;});
	is($after, '8', 'and the pool serves the other clients afterwards');
	is( $node->safe_psql('postgres',
			q{SELECT count(*) FROM dlock_claims WHERE holder = 'gone'}),
		'0', 'the gone client claimed nothing');

	$_->quit for ($w, $i);
}

$bouncer->kill_kill;
$bouncer = undef;
$node->stop;
done_testing();
