# Copyright: dlock contributors
#
# 080_cli.pl: the dlock command line (cli/), as real processes against a real
# server: exit codes, --json of every command, connecting by PGHOST, PGPORT,
# PGDATABASE and PGUSER, two concurrent `dlock run` never overlapping, --wait
# running out, kill -9 of dlock (the lease lapses, the next run goes on),
# force-release while CMD runs (CMD terminated, exit 70; SIGKILL after --grace
# when CMD ignores SIGTERM), SIGHUP, SIGINT and SIGTERM passed on to CMD, CMD
# killed by a signal (128 + signal), DLOCK_TOKEN being the token dlock_locks
# shows, a server restart shorter than the ttl (dlock reconnects and renews),
# a hung server (dlock stops CMD at the lease's end, not later), and running
# behind pgbouncer in transaction mode.
#
# Signals in every phase leave nothing held or queued on the server, and
# another holder then acquires the key at once: while dlock connects (the
# postmaster stopped), while it waits for the key (acquire and run; SIGHUP,
# SIGINT, SIGTERM: the wait is cancelled and dlock dies by the signal),
# when a hand-over is granted as the signal comes (the waiter's backend
# stopped meanwhile), while CMD runs (passed on; released when CMD ends),
# and while dlock run releases (the release goes on).  A cancelled
# re-acquire leaves the holder's earlier lease as it was.  Arguments,
# messages, and list and status by role are in 081_cli_args.pl.

use strict;
use warnings;

use IPC::Run;
use POSIX ();
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

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

# start dlock in the background: the harness (given up after 300 s: only a hang takes that long)
my %stderr_of;
sub dl_start
{
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ 'dlock', @_ ], '<', \undef, '>', \$out, '2>', \$err,
		IPC::Run::timeout(300));
	$stderr_of{$h} = \$err;
	return $h;
}

# wait for a background dlock to end: its exit code (-1: it did not end in time)
sub dl_finish
{
	my ($h) = @_;
	my $rc = eval { $h->finish; $h->result(0) };
	if (!defined $rc)
	{
		diag("dlock did not end: $@");
		$h->kill_kill(grace => 1);
		$rc = -1;
	}
	note("dlock's stderr: ${ $stderr_of{$h} }") if ${ $stderr_of{$h} } ne '';
	return $rc;
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

# dlock's JSON output decoded; if it is not JSON, $default (and a diagnostic)
sub dj
{
	my ($text, $default) = @_;
	my $v = eval { decode_json($text) };
	diag("not JSON: $text") unless defined $v;
	return $v // $default;
}

sub slurp_file_or_empty
{
	my ($f) = @_;
	return -e $f ? PostgreSQL::Test::Utils::slurp_file($f) : '';
}

# wait (up to 20 s) for CMD to write a file: it is then ready for signals
sub wait_file
{
	my ($f) = @_;
	for (1 .. 200)
	{
		return 1 if -s $f;
		usleep(100_000);
	}
	die "$f never written";
}

# the node's postmaster and all its children (backends and the rest)
sub postgres_pids
{
	my ($pm) = split /\n/,
	  PostgreSQL::Test::Utils::slurp_file($node->data_dir . '/postmaster.pid');
	my @pids = ($pm);
	for my $stat (glob '/proc/[0-9]*/stat')
	{
		open my $fh, '<', $stat or next;
		my $line = <$fh>;
		close $fh;
		next unless defined $line && $line =~ /^.*\)\s+\S+\s+(\d+)/;
		push @pids, ($stat =~ m{/proc/(\d+)/})[0] if $1 == $pm;
	}
	return @pids;
}

# start dlock in the background: (harness, \stderr), given up after 90 s
sub dl_bg
{
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ 'dlock', @_ ], '<', \undef, '>', \$out, '2>', \$err,
		IPC::Run::timeout(90));
	return ($h, \$err);
}

# wait for a background dlock to end: its wait status ($?; -1: it did not end)
sub dl_wait_status
{
	my ($h) = @_;
	my $st = eval { $h->finish; $h->full_result(0) };
	if (!defined $st)
	{
		diag("dlock did not end: $@");
		$h->kill_kill(grace => 1);
		return -1;
	}
	return $st;
}

# wait until holder waits in dlock_acquire: its backend's pid
sub wait_waiting
{
	my ($holder) = @_;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM dlock_waiters WHERE holder = '$holder'")
	  or die "$holder never waited";
	return $node->safe_psql('postgres', "SELECT pid FROM dlock_waiters WHERE holder = '$holder'");
}

# wait until a background dlock has a socket open (it connects, or is
# connected): it catches its signals by then
sub wait_socket
{
	my ($h) = @_;
	my $pid = $h->{KIDS}[0]{PID};
	for (1 .. 300)
	{
		return 1 if grep { (readlink($_) // '') =~ /^socket:/ } glob "/proc/$pid/fd/*";
		usleep(100_000);
	}
	die "dlock $pid never opened a socket";
}

# After dlock ended: nothing held or queued for holder, and another holder
# acquires key at once.
sub nothing_left
{
	my ($key, $holder, $name) = @_;
	is($node->safe_psql('postgres',
		"SELECT (SELECT count(*) FROM dlock_locks WHERE holder = '$holder')"
		  . " + (SELECT count(*) FROM dlock_waiters WHERE holder = '$holder')"),
		'0', "$name: nothing held or queued for $holder");
	is((dl('acquire', $key, '--holder', 'next', '--ttl', '1s', '-d', $conn))[0], 0,
		"$name: another holder acquires $key at once");
	return;
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

# --- script commands and --json (of each) ---
my ($rc, $out) = dl('acquire', 'cli:a', '--holder', 'h1', '--ttl', '1h', '--json', '-d', $conn);
is($rc, 0, 'acquire: 0');
my $j = dj($out, {});
ok($j->{acquired}, 'acquire --json says acquired');
is($j->{token}, $node->safe_psql('postgres', "SELECT token FROM dlock_locks WHERE key = 'cli:a'"),
	'acquire --json gives the token dlock_locks shows');
($rc, $out) = dl('acquire', 'cli:a', '--holder', 'h2', '-d', $conn);
is($rc, 75, 'acquire of a held key: 75');
($rc, $out) = dl('acquire', 'cli:a', '--holder', 'h2', '--json', '-d', $conn);
is_deeply([ $rc, dj($out) ],
	[ 75, { key => 'cli:a', holder => 'h2', acquired => JSON::PP::false, token => undef } ],
	'acquire --json of a held key: 75, acquired false, token null');
($rc, $out) = dl('status', 'cli:a', '--json', '-d', $conn);
$j = dj($out, {});
is($j->{holder}, 'h1', 'status --json names the holder');
ok($j->{held} && $j->{expires_in_s} > 3000 && $j->{expires_in_s} <= 3600 && $j->{owner} ne '',
	'status --json: held, expires in about an hour, with its owner');
($rc, $out) = dl('list', '--json', '-d', $conn);
is(scalar(@{ dj($out, []) }), 1, 'list --json shows the role\'s one lease');
my $tok = dj($out, [ {} ])->[0]{token} // 0;
is((dl('renew', 'cli:a', '--holder', 'h1', '--token', $tok, '-d', $conn))[0], 0,
	'renew with the token: 0');
($rc, $out) = dl('renew', 'cli:a', '--holder', 'h1', '--token', $tok, '--json', '-d', $conn);
is_deeply([ $rc, dj($out) ], [ 0, { key => 'cli:a', renewed => JSON::PP::true } ],
	'renew --json: renewed true');
is((dl('renew', 'cli:a', '--holder', 'h2', '-d', $conn))[0], 70, 'renew by another holder: 70');
($rc, $out) = dl('renew', 'cli:a', '--holder', 'h2', '--json', '-d', $conn);
is_deeply([ $rc, dj($out) ], [ 70, { key => 'cli:a', renewed => JSON::PP::false } ],
	'renew --json by another holder: 70, renewed false');
is((dl('release', 'cli:a', '--holder', 'h1', '--token', $tok - 1, '-d', $conn))[0], 70,
	'release with an older token: 70');
($rc, $out) = dl('release', 'cli:a', '--holder', 'h1', '--token', $tok, '--json', '-d', $conn);
is_deeply([ $rc, dj($out) ], [ 0, { key => 'cli:a', released => JSON::PP::true } ],
	'release --json with the token: 0, released true');
($rc, $out) = dl('status', 'cli:a', '-d', $conn);
like($out, qr/free/, 'status after release: free');
($rc, $out) = dl('status', 'cli:a', '--json', '-d', $conn);
is_deeply([ $rc, dj($out) ], [ 0, { key => 'cli:a', held => JSON::PP::false } ],
	'status --json of a free key: held false');
($rc, $out) = dl('list', '--json', '-d', $conn);
is_deeply([ $rc, dj($out) ], [ 0, [] ], 'list --json with no lease: []');
dl('acquire', 'cli:fr', '--holder', 'h1', '--ttl', '1m', '-d', $conn);
($rc, $out) = dl('force-release', 'cli:fr', '--json', '-d', $conn);
is_deeply([ $rc, dj($out) ], [ 0, { key => 'cli:fr', released => JSON::PP::true } ],
	'force-release --json of a held key: 0, released true');
($rc, $out) = dl('force-release', 'cli:fr', '--json', '-d', $conn);
is_deeply([ $rc, dj($out) ], [ 70, { key => 'cli:fr', released => JSON::PP::false } ],
	'force-release --json of a free key: 70, released false');
($rc, $out) = dl('status', 'cli:"q\\', '--json', '-d', $conn);
is(dj($out, {})->{key}, 'cli:"q\\', 'status --json escapes the key');

# --- history KEY (issue 40): the key's ended tenures, oldest first ---
($rc, $out) = dl('history', 'cli:h', '--json', '-d', $conn);
is_deeply([ $rc, dj($out) ], [ 0, [] ], 'history --json of an untracked key: 0, []');
$node->safe_psql('postgres', "SELECT dlock_history_track('cli:h')");
my $htok1 = (dl('acquire', 'cli:h', '--holder', 'h1', '--ttl', '1m', '-d', $conn))[1];
chomp $htok1;
dl('release', 'cli:h', '--holder', 'h1', '-d', $conn);
dl('acquire', 'cli:h', '--holder', 'h2', '--ttl', '1m', '-d', $conn);
dl('force-release', 'cli:h', '-d', $conn);
($rc, $out) = dl('history', 'cli:h', '-d', $conn);
is($rc, 0, 'history: 0');
like($out, qr/\Acli:h held by h1 \(role \S+\) token $htok1 from .+ to .+: released\ncli:h held by h2 .+: force_released\n\z/,
	'history: one line per tenure, oldest first, with how it ended');
($rc, $out) = dl('history', 'cli:h', '--json', '-d', $conn);
my $hist = dj($out, []);
is_deeply([ $rc, [ map { "$_->{kind} $_->{holder} $_->{ended}" } @$hist ] ],
	[ 0, [ 'lease h1 released', 'lease h2 force_released' ] ],
	'history --json: the same tenures');
is($hist->[0]{token}, $htok1, 'history --json: the token as a number');
is((dl('history', '-d', $conn))[0], 64, 'history without a KEY: 64');
is((dl('history', 'cli:h', '--ttl', '1m', '-d', $conn))[0], 64, 'history takes no --ttl: 64');
$node->safe_psql('postgres', "SELECT dlock_history_untrack('cli:h')");

# --- connection by PGHOST, PGPORT, PGDATABASE and PGUSER, without -d ---
$node->safe_psql('postgres', 'CREATE ROLE dlock_cli_env LOGIN');
{
	local $ENV{PGHOST} = $node->host;
	local $ENV{PGPORT} = $node->port;
	local $ENV{PGDATABASE} = 'postgres';
	local $ENV{PGUSER} = 'dlock_cli_env';
	is((dl('acquire', 'cli:env', '--holder', 'envh'))[0], 0, 'acquire by PG* variables: 0');
	is($node->safe_psql('postgres', "SELECT owner::text FROM dlock_locks WHERE key = 'cli:env'"),
		'dlock_cli_env', 'the lease is the PGUSER role\'s');
	is((dl('run', 'cli:env2', '--', 'true'))[0], 0, 'run by PG* variables: 0');
	is((dl('release', 'cli:env', '--holder', 'envh'))[0], 0, 'release by PG* variables: 0');
	local $ENV{PGDATABASE} = 'nodlock';
	is((dl('acquire', 'cli:env', '--holder', 'envh'))[0], 69,
		'PGDATABASE naming a database without dlock: 69');
}

# --- two concurrent runs never overlap ---
my $log = "$dir/overlap.log";
my $cmd = "echo start \$(date +%s%N) >> $log; sleep 0.7; echo end \$(date +%s%N) >> $log";
my @runs = map { dl_start('run', 'cli:o', '--ttl', '3s', '--wait', '4m', '-d', $conn, '--', 'sh', '-c', $cmd) } 1 .. 2;
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
# (CMD runs until the test has read the lease: a fixed sleep could end first)
my $h = dl_start('run', 'cli:t', '--holder', 'tok-holder', '-d', $conn, '--', 'sh', '-c',
	"echo \$DLOCK_KEY \$DLOCK_HOLDER \$DLOCK_TOKEN > $tokfile.tmp; mv $tokfile.tmp $tokfile;"
	  . " while [ ! -e $tokfile.go ]; do sleep 0.1; done");
wait_held('cli:t');
my $shown = $node->safe_psql('postgres', "SELECT token FROM dlock_locks WHERE key = 'cli:t'");
PostgreSQL::Test::Utils::append_to_file("$tokfile.go", "go\n");
is(dl_finish($h), 0, 'run exits with the command\'s status 0');
is(slurp_file_or_empty($tokfile), "cli:t tok-holder $shown\n",
	'DLOCK_KEY, DLOCK_HOLDER and DLOCK_TOKEN are the lease dlock_locks showed');

# --- the command's exit status is dlock's; 128 + the signal that killed it ---
is((dl('run', 'cli:s', '-d', $conn, '--', 'sh', '-c', 'exit 7'))[0], 7, 'CMD exit 7: dlock exits 7');
is((dl('run', 'cli:s', '-d', $conn, '--', 'sh', '-c', 'kill -KILL $$'))[0], 128 + 9,
	'CMD killed by SIGKILL: dlock exits 137');
is((dl('run', 'cli:s', '-d', $conn, '--', 'sh', '-c', 'kill -USR1 $$'))[0], 128 + 10,
	'CMD killed by SIGUSR1: dlock exits 138');
is(holder_of('cli:s'), '', 'the lease is released after CMD was killed');

# --- SIGHUP, SIGINT and SIGTERM sent to dlock are passed on to CMD ---
for my $sig (qw(HUP INT TERM))
{
	my $sigfile = "$dir/sig-$sig";
	my $h = dl_start('run', "cli:g$sig", '--holder', "sig-g$sig", '-d', $conn, '--', 'sh', '-c',
		"trap 'echo got-$sig > $sigfile; exit 3' $sig; echo ready > $sigfile.ready; "
		  . "sleep 30 >/dev/null 2>&1 & wait");
	wait_file("$sigfile.ready");
	$h->signal($sig);
	is(dl_finish($h), 3, "SIG$sig to dlock reaches CMD, whose status (3) dlock exits with");
	is(slurp_file_or_empty($sigfile), "got-$sig\n", "CMD got the SIG$sig");
	is(holder_of("cli:g$sig"), '', "the lease is released after CMD ended (SIG$sig)");
	nothing_left("cli:g$sig", "sig-g$sig", "run, holding, SIG$sig");
}

# --- a signal while dlock waits for the key cancels the wait ---
# The server must not keep the wait queued (it would get the lease later,
# held by no process) nor keep a lease granted as the signal came.  dlock
# ends by the signal, saying so; CMD never runs.
my %signo = (HUP => POSIX::SIGHUP(), INT => POSIX::SIGINT(), TERM => POSIX::SIGTERM());
my $i = 0;
for my $case ([ 'acquire', 'TERM' ], [ 'acquire', 'HUP' ], [ 'run', 'INT' ], [ 'run', 'TERM' ])
{
	my ($cmd, $sig) = @$case;
	my ($key, $holder, $ran) = ("cli:sw$i", "sig-w$i", "$dir/ran-$i");
	$i++;
	dl('acquire', $key, '--holder', 'blocker', '--ttl', '5m', '-d', $conn);
	my ($h, $err) = dl_bg($cmd, $key, '--holder', $holder, '--wait', '60s', '--ttl', '5m',
		'-d', $conn, $cmd eq 'run' ? ('--', 'sh', '-c', "echo ran > $ran") : ());
	wait_waiting($holder);
	$h->signal($sig);
	my $st = dl_wait_status($h);
	is($st & 127, $signo{$sig}, "$cmd, waiting: SIG$sig ends dlock by SIG$sig");
	like($$err, qr/^dlock: SIG$sig while acquiring $key: cancelled; it left nothing held or queued\n\z/,
		"$cmd, waiting: one line says the wait was cancelled");
	is((dl('release', $key, '--holder', 'blocker', '-d', $conn))[0], 0, "$cmd, waiting: blocker releases");
	nothing_left($key, $holder, "$cmd, waiting, SIG$sig");
	ok(!-e $ran, "$cmd, waiting: CMD never ran");
}

# --- a grant that comes as the signal does is released ---
# The waiter's backend is stopped; the blocker's release hands the key over
# to it; dlock gets SIGTERM and cancels; the backend resumes: whether it
# answers with the token or the cancel, dlock releases the lease it never
# saw the token of.
dl('acquire', 'cli:sr', '--holder', 'blocker', '--ttl', '5m', '-d', $conn);
my ($hr, $err_r) = dl_bg('acquire', 'cli:sr', '--holder', 'sig-r', '--wait', '60s', '--ttl', '5m',
	'-d', $conn);
my $waiter = wait_waiting('sig-r');
kill 'STOP', $waiter;
is((dl('release', 'cli:sr', '--holder', 'blocker', '-d', $conn))[0], 0,
	'grant race: the blocker releases while the waiter\'s backend is stopped');
note('cli:sr is now held by "' . holder_of('cli:sr') . '"');
$hr->signal('TERM');
usleep(500_000);
kill 'CONT', $waiter;
is(dl_wait_status($hr) & 127, POSIX::SIGTERM(), 'grant race: SIGTERM ends dlock');
like($$err_r, qr/^dlock: SIGTERM while acquiring cli:sr: cancelled; [^\n]*\n\z/,
	'grant race: one line says so');
nothing_left('cli:sr', 'sig-r', 'grant race');

# --- a re-acquire cancelled leaves the holder's lease as it was ---
# The holder's own live lease, blocked by a fence (dlock_validate in an open
# transaction): its re-acquire waits; a signal cancels it; the lease stays.
my $tok_k = (dl('acquire', 'cli:sk', '--holder', 'sig-k', '--ttl', '5m', '-d', $conn))[1];
chomp $tok_k;
my $fence = $node->background_psql('postgres');
$fence->query_safe("BEGIN; SELECT dlock_validate('cli:sk', 'sig-k', $tok_k)");
my ($hk, $err_k) = dl_bg('acquire', 'cli:sk', '--holder', 'sig-k', '--wait', '60s', '-d', $conn);
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE 'SELECT dlock_acquire(%'"
	  . " AND state = 'active' AND wait_event IS NOT NULL")
  or die 'the re-acquire never waited';
$hk->signal('TERM');
usleep(300_000);
$fence->query_safe('COMMIT');
$fence->quit;
is(dl_wait_status($hk) & 127, POSIX::SIGTERM(), 're-acquire, waiting: SIGTERM ends dlock');
like($$err_k, qr/^dlock: SIGTERM while acquiring cli:sk: cancelled; it left nothing held or queued\n\z/,
	're-acquire, waiting: one line says so');
is($node->safe_psql('postgres', "SELECT holder, token FROM dlock_locks WHERE key = 'cli:sk'"),
	"sig-k|$tok_k", 're-acquire, waiting: the holder keeps the lease it had, same token');

# --- a signal while dlock connects: it gives up, nothing was sent ---
my ($pm) = split /\n/, PostgreSQL::Test::Utils::slurp_file($node->data_dir . '/postmaster.pid');
kill 'STOP', $pm;
my ($hc, $err_c) = dl_bg('acquire', 'cli:sc', '--holder', 'sig-c', '--wait', '10s', '-d', $conn);
wait_socket($hc);
usleep(300_000);
$hc->signal('TERM');
my $st_c = dl_wait_status($hc);
kill 'CONT', $pm;
is($st_c & 127, POSIX::SIGTERM(), 'connecting: SIGTERM ends dlock');
like($$err_c, qr/^dlock: SIGTERM while connecting to acquire cli:sc: cancelled; it left nothing held or queued\n\z/,
	'connecting: one line says so');
nothing_left('cli:sc', 'sig-c', 'connecting');

# --- a signal while dlock run releases: the release goes on ---
# CMD ends while every server process is stopped: dlock waits to release;
# SIGTERM then does not cut the release short.
my $relfile = "$dir/rel";
my ($hl, $err_l) = dl_bg('run', 'cli:sl', '--holder', 'sig-l', '--ttl', '60s', '-d', $conn, '--',
	'sh', '-c', "echo ready > $relfile.ready; while [ ! -e $relfile.go ]; do sleep 0.1; done;"
	  . " echo done > $relfile.done");
wait_file("$relfile.ready");
my @stopped = postgres_pids();
kill 'STOP', @stopped;
PostgreSQL::Test::Utils::append_to_file("$relfile.go", "go\n");
wait_file("$relfile.done");
usleep(500_000);
$hl->signal('TERM');
usleep(300_000);
kill 'CONT', @stopped;
is(dl_wait_status($hl), 0, 'releasing: SIGTERM does not stop the release; dlock exits with CMD\'s 0');
note("dlock's stderr: $$err_l");
nothing_left('cli:sl', 'sig-l', 'run, releasing');

# --- force-release while CMD runs: CMD terminated, exit 70 ---
my $termfile = "$dir/term";
$h = dl_start('run', 'cli:f', '--ttl', '6s', '--grace', '5s', '-d', $conn, '--', 'sh', '-c',
	"trap 'echo got-term > $termfile; exit 0' TERM; sleep 30 >/dev/null 2>&1 & wait");
wait_held('cli:f');
is((dl('force-release', 'cli:f', '-d', $conn))[0], 0, 'force-release: 0');
is(dl_finish($h), 70, 'the run whose lease was taken away exits 70');
is(slurp_file_or_empty($termfile), "got-term\n", 'its command got SIGTERM');

# --- a CMD that ignores SIGTERM gets SIGKILL --grace later ---
my $gracefile = "$dir/grace";
$h = dl_start('run', 'cli:kg', '--ttl', '6s', '--grace', '2s', '-d', $conn, '--', 'sh', '-c',
	"trap 'echo got-term >> $gracefile' TERM; echo \$\$ > $gracefile.pid; "
	  . "while :; do sleep 0.1; done");
wait_file("$gracefile.pid");
my $cmdpid = slurp_file_or_empty("$gracefile.pid");
chomp $cmdpid;
my $t0 = time;
is((dl('force-release', 'cli:kg', '-d', $conn))[0], 0, 'force-release of a stubborn CMD\'s lease');
is(dl_finish($h), 70, 'its run exits 70');
my $took = time - $t0;
is(slurp_file_or_empty($gracefile), "got-term\n", 'CMD got SIGTERM (once) and went on');
# (at least --grace after it: a promise; the upper bound only catches a
# dlock that never sends SIGKILL, far above what a loaded machine takes)
ok($took >= 1.9 && $took < 60, "SIGKILL came --grace (2 s) after SIGTERM (dlock ended after ${took} s)");
ok(!kill(0, $cmdpid), 'CMD is gone');

# --- kill -9 of dlock: the lease lapses, the next run goes on ---
my $pidfile = "$dir/pid";
$h = dl_start('run', 'cli:k', '--ttl', '2s', '-d', $conn, '--', 'sh', '-c',
	"echo \$\$ > $pidfile; exec sleep 30 >/dev/null 2>&1");
wait_held('cli:k');
$h->signal('KILL');
eval { $h->finish; };
is((dl('run', 'cli:k', '--wait', '10m', '-d', $conn, '--', 'true'))[0], 0,
	'after kill -9 of dlock, the next run gets the key once the lease lapsed');
my $orphan = slurp_file_or_empty($pidfile);
chomp $orphan;
kill 'KILL', $orphan if $orphan =~ /^\d+$/;

# --- a server restart shorter than the ttl does not stop CMD ---
# ttl 30 s; CMD runs until the test lets it end.  The server goes down (for a
# second and more) right after the first renewal; once it is back, dlock
# must reconnect and renew the lease (same token, a later end than the last
# renewal before the restart gave it), and CMD then ends normally.  Without
# reconnecting and renewing, the lease would lapse and dlock stop CMD and
# exit 70.  (A restart that takes longer than the ttl on a loaded machine
# would make the case fail: 30 s is far above one.)
my $donefile = "$dir/done";
$h = dl_start('run', 'cli:r', '--ttl', '30s', '-d', $conn, '--', 'sh', '-c',
	"while [ ! -e $donefile.go ]; do sleep 0.1; done; echo done > $donefile.tmp; mv $donefile.tmp $donefile");
wait_held('cli:r');
my ($tok0, $exp0) = split /\|/,
  $node->safe_psql('postgres', "SELECT token, expires_at FROM dlock_locks WHERE key = 'cli:r'");
$node->poll_query_until('postgres',
	"SELECT expires_at > '$exp0' FROM dlock_locks WHERE key = 'cli:r'")
  or die 'cli:r never renewed';
my $exp1 = $node->safe_psql('postgres', "SELECT expires_at FROM dlock_locks WHERE key = 'cli:r'");
my $t_down = time;
$node->stop('fast');
usleep(1_000_000);
$node->start;
note(sprintf('the server was down for %.1f s', time - $t_down));
ok($node->poll_query_until('postgres',
		"SELECT token = $tok0 AND expires_at > '$exp1' FROM dlock_locks WHERE key = 'cli:r'"),
	'after the restart, dlock renewed the lease (same token, a later end)');
PostgreSQL::Test::Utils::append_to_file("$donefile.go", "go\n");
is(dl_finish($h), 0, 'a run across a server restart exits 0');
is(slurp_file_or_empty($donefile), "done\n", 'its command ran to its end');
is(holder_of('cli:r'), '', 'and the lease was released');

# --- a hung server cannot keep CMD running past the lease's end ---
# Every process of the server stopped (SIGSTOP): connections stay open, no
# answer ever comes.  dlock must give up its renewal at the lease's end,
# stop CMD and exit 70 (within ttl + grace), not wait for the server; and
# while it waits for the server, signals still reach CMD at once.  With a
# ttl of 3 s, dlock is waiting for an answer 1.5 s after the server stopped
# (since at most 1 s after), and the lease ends 2 s after the stop or later.
my $hangfile = "$dir/hang";
my $hupfile = "$dir/hang-hup";
$h = dl_start('run', 'cli:h', '--ttl', '3s', '--grace', '1s', '-d', $conn, '--', 'sh', '-c',
	"trap 'echo got-hup > $hupfile' HUP; trap 'echo got-term > $hangfile; exit 0' TERM; "
	  . "while :; do sleep 0.1; done");
wait_held('cli:h');
my @pg = postgres_pids();
my $t_hang = time;
kill 'STOP', @pg;
usleep(1_500_000);
$h->signal('HUP');
my $t_hup = time;
my ($hup_after, $term_by_then);
while (time - $t_hup < 5)
{
	if (-s $hupfile)
	{
		$hup_after = time - $t_hup;
		$term_by_then = -e $hangfile;
		last;
	}
	usleep(20_000);
}
my $hang_rc = dl_finish($h);
my $hang_took = time - $t_hang;
kill 'CONT', @pg;
ok(defined $hup_after && !$term_by_then,
	sprintf('SIGHUP reached CMD while dlock waited for the hung server (after %s s)',
		defined $hup_after ? sprintf('%.2f', $hup_after) : 'never'));
is($hang_rc, 70, 'a run whose server hangs exits 70');
# (it did not wait for the server, which answers only once resumed, after
# this; how soon after ttl + grace it ended depends on the machine's load)
ok($hang_took < 60, sprintf('... without waiting for the server (after %.1f s; ttl + grace is 4 s)', $hang_took));
is(slurp_file_or_empty($hangfile), "got-term\n", 'its command got SIGTERM');
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server goes on once resumed');

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
	is((dl('run', 'cli:b', '--ttl', '3s', '-d', $bconn, '--', 'sh', '-c',
		"sleep 2.5; echo \$DLOCK_TOKEN > $bfile"))[0], 0,
		'a run through pgbouncer, renewing twice, exits 0');
	like(slurp_file_or_empty($bfile), qr/^\d+$/, 'its command had its token');
	$bouncer->kill_kill;
}

$node->stop;
done_testing();
