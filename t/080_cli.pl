# Copyright: dlock contributors
#
# 080_cli.pl: the dlock command line (cli/), as real processes against a real
# server: exit codes, --json, two concurrent `dlock run` never overlapping,
# --wait running out, kill -9 of dlock (the lease lapses, the next run goes
# on), force-release while CMD runs (CMD terminated, exit 70), signals passed
# on to CMD, DLOCK_TOKEN being the token dlock_locks shows, a server restart
# shorter than the ttl, and running behind pgbouncer in transaction mode.

use strict;
use warnings;

use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('cli');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'dlock'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock; CREATE DATABASE nodlock');
my $conn = $node->connstr('postgres');
my $dir = PostgreSQL::Test::Utils::tempdir;

# run dlock to its end: (exit code, stdout, stderr)
sub dl
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'dlock', @_ ], '<', \undef, '>', \$out, '2>', \$err);
	return ($? >> 8, $out, $err);
}

# start dlock in the background: the harness
sub dl_start
{
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ 'dlock', @_ ], '<', \undef, '>', \$out, '2>', \$err);
	return $h;
}

sub dl_finish
{
	my ($h) = @_;
	$h->finish;
	return $h->result(0);
}

sub holder_of
{
	my ($key) = @_;
	return $node->safe_psql('postgres', "SELECT holder FROM dlock_locks WHERE key = '$key'");
}

sub wait_held
{
	my ($key) = @_;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM dlock_locks WHERE key = '$key'")
	  or die "$key never held";
	return;
}

sub slurp_file_or_empty
{
	my ($f) = @_;
	return -e $f ? PostgreSQL::Test::Utils::slurp_file($f) : '';
}

# --- usage and connection errors ---
is((dl())[0], 64, 'no command: 64');
is((dl('frob', 'k', '-d', $conn))[0], 64, 'unknown command: 64');
is((dl('run', 'k', '-d', $conn))[0], 64, 'run without -- CMD: 64');
is((dl('acquire', 'k', '--ttl', 'soon', '-d', $conn))[0], 64, 'bad duration: 64');
is((dl('acquire', 'k', '-d', 'host=/nonexistent port=1'))[0], 69, 'unreachable database: 69');
is((dl('acquire', 'k', '-d', $node->connstr('nodlock')))[0], 69, 'dlock not installed: 69');
like((dl('--help'))[1], qr/dlock run KEY/, '--help shows the usage');
like((dl('run', '--help'))[1], qr/DLOCK_TOKEN/, 'run --help describes run');

# --- script commands and --json ---
my ($rc, $out) = dl('acquire', 'cli:a', '--holder', 'h1', '--ttl', '1m', '--json', '-d', $conn);
is($rc, 0, 'acquire: 0');
my $j = decode_json($out);
ok($j->{acquired}, 'acquire --json says acquired');
is($j->{token}, $node->safe_psql('postgres', "SELECT token FROM dlock_locks WHERE key = 'cli:a'"),
	'acquire --json gives the token dlock_locks shows');
($rc, $out) = dl('acquire', 'cli:a', '--holder', 'h2', '-d', $conn);
is($rc, 75, 'acquire of a held key: 75');
($rc, $out) = dl('status', 'cli:a', '--json', '-d', $conn);
is(decode_json($out)->{holder}, 'h1', 'status --json names the holder');
($rc, $out) = dl('list', '--json', '-d', $conn);
is(scalar(@{ decode_json($out) }), 1, 'list --json shows the role\'s one lease');
is((dl('renew', 'cli:a', '--holder', 'h1', '--token', $j->{token}, '-d', $conn))[0], 0,
	'renew with the token: 0');
is((dl('renew', 'cli:a', '--holder', 'h2', '-d', $conn))[0], 70, 'renew by another holder: 70');
is((dl('release', 'cli:a', '--holder', 'h1', '--token', $j->{token} - 1, '-d', $conn))[0], 70,
	'release with an older token: 70');
is((dl('release', 'cli:a', '--holder', 'h1', '--token', $j->{token}, '-d', $conn))[0], 0,
	'release with the token: 0');
($rc, $out) = dl('status', 'cli:a', '-d', $conn);
like($out, qr/free/, 'status after release: free');

# --- two concurrent runs never overlap ---
my $log = "$dir/overlap.log";
my $cmd = "echo start \$(date +%s%N) >> $log; sleep 0.7; echo end \$(date +%s%N) >> $log";
my @runs = map { dl_start('run', 'cli:o', '--ttl', '3s', '--wait', '20s', '-d', $conn, '--', 'sh', '-c', $cmd) } 1 .. 2;
my @rcs = map { dl_finish($_) } @runs;
is_deeply(\@rcs, [ 0, 0 ], 'both runs exit 0');
my @lines = split /\n/, slurp_file_or_empty($log);
is(scalar(@lines), 4, 'both commands ran');
my $alternate = join(' ', map { (split / /)[0] } @lines) eq 'start end start end';
my $ordered = @lines == 4 && (split / /, $lines[1])[1] <= (split / /, $lines[2])[1];
ok($alternate && $ordered, 'the second command started after the first ended');
is(holder_of('cli:o'), '', 'the lease is released after the runs');

# --- --wait runs out ---
dl('acquire', 'cli:w', '--holder', 'other', '--ttl', '1m', '-d', $conn);
is((dl('run', 'cli:w', '--wait', '500ms', '-d', $conn, '--', 'true'))[0], 75,
	'run on a held key with --wait 500ms: 75');

# --- DLOCK_TOKEN is the token dlock_locks shows ---
my $tokfile = "$dir/token";
my $h = dl_start('run', 'cli:t', '--holder', 'tok-holder', '-d', $conn, '--', 'sh', '-c',
	"echo \$DLOCK_KEY \$DLOCK_HOLDER \$DLOCK_TOKEN > $tokfile.tmp; mv $tokfile.tmp $tokfile; sleep 1");
wait_held('cli:t');
my $shown = $node->safe_psql('postgres', "SELECT token FROM dlock_locks WHERE key = 'cli:t'");
is(dl_finish($h), 0, 'run exits with the command\'s status 0');
is(slurp_file_or_empty($tokfile), "cli:t tok-holder $shown\n",
	'DLOCK_KEY, DLOCK_HOLDER and DLOCK_TOKEN are the lease dlock_locks showed');

# --- the command's exit status is dlock's ---
is((dl('run', 'cli:s', '-d', $conn, '--', 'sh', '-c', 'exit 7'))[0], 7, 'CMD exit 7: dlock exits 7');

# --- signals are passed on ---
my $sigfile = "$dir/sig";
$h = dl_start('run', 'cli:g', '-d', $conn, '--', 'sh', '-c',
	"trap 'echo got-hup > $sigfile; exit 3' HUP; sleep 30 & wait");
wait_held('cli:g');
usleep(300_000);
$h->signal('HUP');
is(dl_finish($h), 3, 'SIGHUP to dlock reaches CMD, whose status (3) dlock exits with');
is(slurp_file_or_empty($sigfile), "got-hup\n", 'CMD got the SIGHUP');
is(holder_of('cli:g'), '', 'the lease is released after CMD ended');

# --- force-release while CMD runs: CMD terminated, exit 70 ---
my $termfile = "$dir/term";
$h = dl_start('run', 'cli:f', '--ttl', '1500ms', '--grace', '5s', '-d', $conn, '--', 'sh', '-c',
	"trap 'echo got-term > $termfile; exit 0' TERM; sleep 30 & wait");
wait_held('cli:f');
is((dl('force-release', 'cli:f', '-d', $conn))[0], 0, 'force-release: 0');
is(dl_finish($h), 70, 'the run whose lease was taken away exits 70');
is(slurp_file_or_empty($termfile), "got-term\n", 'its command got SIGTERM');

# --- kill -9 of dlock: the lease lapses, the next run goes on ---
my $pidfile = "$dir/pid";
$h = dl_start('run', 'cli:k', '--ttl', '2s', '-d', $conn, '--', 'sh', '-c',
	"echo \$\$ > $pidfile; exec sleep 30");
wait_held('cli:k');
$h->signal('KILL');
eval { $h->finish; };
is((dl('run', 'cli:k', '--wait', '20s', '-d', $conn, '--', 'true'))[0], 0,
	'after kill -9 of dlock, the next run gets the key once the lease lapsed');
my $orphan = slurp_file_or_empty($pidfile);
chomp $orphan;
kill 'KILL', $orphan if $orphan =~ /^\d+$/;

# --- a server restart shorter than the ttl does not stop CMD ---
my $donefile = "$dir/done";
$h = dl_start('run', 'cli:r', '--ttl', '8s', '-d', $conn, '--', 'sh', '-c',
	"sleep 6; echo done > $donefile");
wait_held('cli:r');
$node->restart;
is(dl_finish($h), 0, 'a run across a server restart exits 0');
is(slurp_file_or_empty($donefile), "done\n", 'its command ran to its end');

# --- behind pgbouncer in transaction mode ---
SKIP:
{
	my $pgbouncer = '/usr/sbin/pgbouncer';
	skip 'pgbouncer is not installed', 3 unless -x $pgbouncer;
	my $user = $node->safe_psql('postgres', 'SELECT current_user');
	my $bport = PostgreSQL::Test::Cluster::get_free_port();
	my ($sockdir, $nport) = ($node->host, $node->port);
	PostgreSQL::Test::Utils::append_to_file("$dir/userlist.txt", qq{"$user" ""\n});
	PostgreSQL::Test::Utils::append_to_file("$dir/pgbouncer.ini", qq{
[databases]
postgres = host=$sockdir port=$nport dbname=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bport
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = 1
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
});
	my $bouncer = IPC::Run::start([ $pgbouncer, "$dir/pgbouncer.ini" ], '>', \my $bo, '2>', \my $be);
	my $bconn = "host=127.0.0.1 port=$bport dbname=postgres user=$user";
	my $up = 0;
	for (1 .. 50) { $up = 1, last if (dl('status', 'x', '-d', $bconn))[0] == 0; usleep(100_000); }
	ok($up, 'pgbouncer answers');
	my $bfile = "$dir/bouncer";
	is((dl('run', 'cli:b', '--ttl', '1s', '-d', $bconn, '--', 'sh', '-c',
		"sleep 2.5; echo \$DLOCK_TOKEN > $bfile"))[0], 0,
		'a run through pgbouncer, renewing twice, exits 0');
	like(slurp_file_or_empty($bfile), qr/^\d+$/, 'its command had its token');
	$bouncer->kill_kill;
}

$node->stop;
done_testing();
