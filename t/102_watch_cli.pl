# Copyright: dlock contributors
#
# 102_watch_cli.pl: the command line's own promises around `dlock watch`
# and its messages (issue 35 item 9, issue 36; docs/cli.md, man dlock).
#
#  - The text output of `dlock watch` (without --json): the exact line of
#    each kind, the current lease (free, held), a grant by acquire, by
#    hand-over and by takeover, a release and an expiry, also for a key
#    with quotes, a backslash and a tab.
#  - Argument ranges of `dlock watch` (--count 0, negative, huge, not a
#    number, no value, and the other commands' options) and of every other
#    option: exit 64, one line on stderr starting "dlock: ", nothing on
#    stdout; --count N ends after N changes with exit 0.
#  - Every stderr line of every exit starts with "dlock: ": a server restart
#    during `dlock watch` (exit 69), an error of the server with its DETAIL
#    and HINT.
#  - `dlock run` says why a lease was lost: the server refused the renewal,
#    and who holds the key now.
#  - --quiet-if-held: a key held by another exits 75 without a word (the
#    cron example of docs/cli.md), and says why without it.
#
# Every wait is for a state (a line printed, a lease seen, a process
# ended), never for a time.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

$ENV{PGTZ} = 'UTC';    # the current lease's time, as psql shows it too

my $node = PostgreSQL::Test::Cluster->new('watch_cli');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'dlock'
dlock.max_watches = 20
dlock.max_watches_per_role = 2
dlock.superuser_reserved_watches = 0
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock; CREATE ROLE regress_wcli LOGIN');
my $conn = $node->connstr('postgres');

sub sql { return $node->safe_psql('postgres', $_[0]) }

# run dlock to its end: (exit code, stdout, stderr)
sub dl
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'dlock', @_ ], '<', \undef, '>', \$out, '2>', \$err,
		IPC::Run::timeout(300));
	return ($? >> 8, $out, $err);
}

# every line of err starts with "dlock: " (and there is one)
sub all_prefixed
{
	my ($err) = @_;
	my @lines = split /\n/, $err;
	return @lines > 0 && !grep { !/^dlock: / } @lines;
}

# ---- a watcher in text ----

# start `dlock watch KEY` (text) and wait for its first line
sub watch_text
{
	my ($key, @more) = @_;
	my $w = { out => '', err => '', seen => 0 };
	$w->{h} = IPC::Run::start([ 'dlock', 'watch', $key, '-d', $conn, @more ],
		'<', \undef, '>', \$w->{out}, '2>', \$w->{err}, IPC::Run::timeout(600));
	return $w;
}

# the watcher's next n lines (waiting for them; 120 s at most, a failsafe)
sub lines
{
	my ($w, $n) = @_;
	my $deadline = time + 120;
	my @l;
	while (1)
	{
		@l = split /\n/, $w->{out};
		last if @l >= $w->{seen} + $n || time > $deadline || !$w->{h}->pumpable;
		$w->{h}->pump_nb;
		usleep(20_000);
	}
	my @got = @l[ $w->{seen} .. ($#l < $w->{seen} + $n - 1 ? $#l : $w->{seen} + $n - 1) ];
	$w->{seen} += scalar(@got);
	diag("watcher: got " . scalar(@got) . " of $n lines; stderr: $w->{err}") if @got < $n;
	return @got;
}

# a lease's expiry as the notifications have it (UTC, JSON)
sub json_time
{
	my ($where) = @_;
	return sql("SET TimeZone = 'UTC'; SELECT to_json(expires_at) #>> '{}' FROM dlock_locks WHERE $where");
}

my $key = "odd \"key\" \\ with\ttab";
(my $qkey = $key) =~ s/'/''/g;
my $w = watch_text($key);
is((lines($w, 1))[0], "$key free", 'text: the current lease, none');

my $t1 = sql("SELECT dlock_acquire('$qkey', 'h1', '1 h')");
my $e1 = json_time("key = '$qkey'");
is((lines($w, 1))[0], "$key granted to h1 token $t1 until $e1 (acquire)",
	'text: a grant by acquire');

my $w2 = watch_text($key);
my $now = sql("SELECT expires_at FROM dlock_locks WHERE key = '$qkey'");
is((lines($w2, 1))[0], "$key held by h1 token $t1 until $now", 'text: the current lease, held');
$w2->{h}->kill_kill;

# a waiter, then the release hands the key over
my $waiter = IPC::Run::start([ 'psql', '-XAtq', '-d', $conn, '-c',
	"SELECT dlock_acquire('$qkey', 'h2', '1 h', '10 min')" ],
	'<', \undef, '>', \my $wout, '2>', \my $werr);
for (1 .. 6000)
{
	last if sql("SELECT count(*) FROM dlock_waiters WHERE holder = 'h2'") eq '1';
	usleep(50_000);
}
sql("SELECT dlock_release('$qkey', 'h1')");
$waiter->finish;
chomp $wout;
my $e2 = json_time("key = '$qkey'");
is(join("\n", lines($w, 2)),
	"$key released by h1 token $t1\n$key granted to h2 token $wout until $e2 (handover)",
	'text: a release, then a grant by hand-over');
sql("SELECT dlock_release('$qkey', 'h2')");
is((lines($w, 1))[0], "$key released by h2 token $wout", 'text: a release');

# an expiry, then a takeover (of the expired lease)
my $t3 = sql("SELECT dlock_acquire('$qkey', 'h3', '1 ms')");
my @l = lines($w, 1);    # the grant: its expiry is the one to come
like($l[0], qr/^\Q$key\E granted to h3 token $t3 until \S+ \(acquire\)$/, 'text: the short grant');
my ($e3) = ($l[0] // '') =~ /until (\S+) \(acquire\)$/;
$e3 //= '?';
is((lines($w, 1))[0], "$key expired: h3 token $t3 ran out at $e3", 'text: an expiry');
my $t4 = sql("SELECT dlock_acquire('$qkey', 'h4', '1 h')");
my $e4 = json_time("key = '$qkey'");
is((lines($w, 1))[0], "$key granted to h4 token $t4 until $e4 (takeover)",
	'text: a grant over an expired lease');
$w->{h}->kill_kill;

# ---- argument ranges ----
my @bad = (
	[ [ 'watch', 'k', '--count', '0' ], qr/^dlock: invalid --count "0": a whole number from 1 to 2147483647 is expected/ ],
	[ [ 'watch', 'k', '--count', '-1' ], qr/^dlock: invalid --count "-1"/ ],
	[ [ 'watch', 'k', '--count', '99999999999999999999' ], qr/^dlock: invalid --count "9+"/ ],
	[ [ 'watch', 'k', '--count', '2147483648' ], qr/^dlock: invalid --count "2147483648"/ ],
	[ [ 'watch', 'k', '--count', 'abc' ], qr/^dlock: invalid --count "abc"/ ],
	[ [ 'watch', 'k', '--count', ' 3' ], qr/^dlock: invalid --count " 3"/ ],
	[ [ 'watch', 'k', '--count=+3' ], qr/^dlock: invalid --count "\+3"/ ],
	[ [ 'watch', 'k', '--count' ], qr/^dlock: --count needs a value/ ],
	[ [ 'watch', 'k', '-d' ], qr/^dlock: -d needs a value/ ],
	[ [ 'watch' ], qr/^dlock: watch needs a KEY/ ],
	[ [ 'watch', '' ], qr/^dlock: invalid KEY ""/ ],
	[ [ 'watch', 'x' x 1025 ], qr/^dlock: invalid KEY "x+\.\.\."|^dlock: invalid KEY/ ],
	[ [ 'watch', 'k', 'j' ], qr/^dlock: unexpected argument "j"/ ],
	[ [ 'watch', 'k', '--ttl', '5' ], qr/^dlock: watch takes no --ttl/ ],
	[ [ '--wait', '5', 'watch', 'k' ], qr/^dlock: watch takes no --wait/ ],
	[ [ 'watch', 'k', '--quiet-if-held' ], qr/^dlock: watch takes no --quiet-if-held/ ],
	[ [ 'watch', 'k', '--bogus' ], qr/^dlock: unknown option "--bogus"/ ],
	[ [ 'watch', 'k', '--', 'true' ], qr/^dlock: watch takes no command after "--"/ ],
	[ [ 'acquire', 'k', '--ttl', '0' ], qr/^dlock: invalid --ttl "0"/ ],
	[ [ 'acquire', 'k', '--ttl', '31d' ], qr/^dlock: invalid --ttl "31d"/ ],
	[ [ 'acquire', 'k', '--ttl', '-5' ], qr/^dlock: invalid --ttl "-5"/ ],
	[ [ 'acquire', 'k', '--wait', '2d' ], qr/^dlock: invalid --wait "2d"/ ],
	[ [ 'acquire', 'k', '--wait', 'soon' ], qr/^dlock: invalid --wait "soon"/ ],
	[ [ 'run', 'k', '--grace', '2d', '--', 'true' ], qr/^dlock: invalid --grace "2d"/ ],
	[ [ 'release', 'k', '--holder', 'h', '--token', '0' ], qr/^dlock: invalid --token "0"/ ],
	[ [ 'release', 'k', '--holder', 'h', '--token', '9223372036854775808' ], qr/^dlock: invalid --token/ ],
	[ [ 'acquire', 'k', '--slots', '0' ], qr/^dlock: invalid --slots "0"/ ],
	[ [ 'acquire', 'k', '--slots', '1001' ], qr/^dlock: invalid --slots "1001"/ ],
	[ [ 'acquire', 'k', '--holder', '' ], qr/^dlock: invalid --holder ""/ ],
	[ [ 'acquire', 'k', '--holder', 'h' x 257 ], qr/^dlock: invalid --holder/ ],
	[ [ 'release', 'k' ], qr/^dlock: release needs --holder/ ],
	[ [ 'status', 'k', '--quiet-if-held' ], qr/^dlock: status takes no --quiet-if-held/ ],
	[ [ 'acquire', 'k', '--quiet-if-held=yes' ], qr/^dlock: --quiet-if-held takes no value/ ],
	[ [ 'frobnicate' ], qr/^dlock: unknown command "frobnicate"/ ],
);
for my $case (@bad)
{
	my ($args, $want) = @$case;
	my $shown = join(' ', map { length($_) > 20 ? substr($_, 0, 20) . '...' : $_ } @$args);
	# a database that is not there: an argument let through fails at once
	my ($rc, $out, $err) = dl('-d', 'host=/nonexistent port=1', @$args);
	is($rc, 64, "dlock $shown: exit 64");
	like($err, $want, "dlock $shown: says what is wrong");
	is(scalar(split /\n/, $err), 1, "dlock $shown: in one line");
	is($out, '', "dlock $shown: nothing on stdout");
}

# --count N: N changes (the current lease aside), then exit 0
{
	my $c = watch_text('counted', '--count', '2');
	is((lines($c, 1))[0], 'counted free', 'watch --count 2: the current lease');
	sql("SELECT dlock_acquire('counted', 'h', '1 h')");
	sql("SELECT dlock_release('counted', 'h')");
	sql("SELECT dlock_acquire('counted', 'h', '1 h')");
	$c->{h}->finish;
	is($? >> 8, 0, 'watch --count 2: exit 0 after two changes');
	my @cl = split /\n/, $c->{out};
	is(scalar(@cl), 3, 'watch --count 2: two changes printed');
	like($cl[2] // '', qr/^counted released by h token \d+$/, '... the second a release');
}

# ---- every stderr line starts with "dlock: " ----

# an error of the server, with its DETAIL and HINT: the role's share is full
my $rconn = $node->connstr('postgres') . ' user=regress_wcli';
my @held = map { watch_text("share$_", '-d', $rconn) } 1 .. 2;
lines($_, 1) for @held;
my ($rc, $out, $err) = dl('watch', 'share3', '-d', $rconn);
is($rc, 69, 'watch over the role\'s share: exit 69');
like($err, qr/^dlock: ERROR:  too many watched keys for role "regress_wcli"\ndlock: DETAIL:  .*\ndlock: HINT:  .*dlock\.max_watches_per_role/,
	'the error, its DETAIL and its HINT, each line "dlock: "');
ok(all_prefixed($err), 'every line of it starts with "dlock: "') or diag($err);
$_->{h}->kill_kill for @held;

# a server restart during `dlock watch`
my $r = watch_text('restarted');
lines($r, 1);
$node->restart;
$r->{h}->finish;
is($? >> 8, 69, 'watch during a server restart: exit 69');
like($r->{err}, qr/^dlock: connection lost/m, 'it says the connection was lost');
ok(all_prefixed($r->{err}), 'every stderr line starts with "dlock: " (libpq\'s FATAL too)')
  or diag($r->{err});

# ---- dlock run says why the lease was lost ----
{
	my ($rout, $rerr) = ('', '');
	# (a ttl of 15 s, renewed every 5 s: a renewal up to 10 s late still
	# finds the lease unexpired, so the thief's takeover is what it sees)
	my $h = IPC::Run::start([ 'dlock', 'run', 'job4', '--ttl', '15s', '--holder', 'runner',
			'-d', $conn, '--', 'sleep', '600' ],
		'<', \undef, '>', \$rout, '2>', \$rerr, IPC::Run::timeout(600));
	for (1 .. 6000)
	{
		last if sql("SELECT count(*) FROM dlock_locks WHERE key = 'job4' AND holder = 'runner'") eq '1';
		usleep(50_000);
	}
	# in one transaction: the renewal sees the key taken, never free
	my $thief = sql("BEGIN; SELECT dlock_force_release('job4');"
		  . " SELECT dlock_acquire('job4', 'thief', '1 h'); COMMIT;");
	($thief) = $thief =~ /(\d+)$/;
	$h->finish;
	is($? >> 8, 70, 'run: the lease lost, exit 70');
	like($rerr, qr/^dlock: lease job4 lost: the server refused the renewal \(dlock_renew returned false: the lease had expired, or was released, force-released or taken over\); it is held now by thief with token $thief$/m,
		'run: says why the lease was lost, and who holds it now');
	ok(all_prefixed($rerr), 'run: every stderr line starts with "dlock: "') or diag($rerr);
}

# ---- --quiet-if-held ----
sql("SELECT dlock_acquire('nightly', 'other-host', '1 h')");
($rc, $out, $err) = dl('run', 'nightly', '--quiet-if-held', '-d', $conn, '--', 'true');
is("$rc|$err", '75|', 'run --quiet-if-held, the key held: exit 75 without a word');
($rc, $out, $err) = dl('acquire', 'nightly', '--quiet-if-held', '-d', $conn);
is("$rc|$err", '75|', 'acquire --quiet-if-held: the same');
($rc, $out, $err) = dl('run', 'nightly', '-d', $conn, '--', 'true');
is($rc, 75, 'run without it: exit 75');
like($err, qr/^dlock: nightly not acquired at once \(no --wait\)/, '... saying why');
($rc, $out, $err) = dl('run', 'nightly', '--quiet-if-held', '-d', 'host=/nonexistent port=1', '--', 'true');
is($rc, 69, 'run --quiet-if-held, the database unreachable: exit 69');
ok(all_prefixed($err), '... and it still says why');
($rc, $out, $err) = dl('run', 'free-key', '--quiet-if-held', '-d', $conn, '--', 'true');
is("$rc|$err", '0|', 'run --quiet-if-held, the key free: runs CMD');

done_testing();
