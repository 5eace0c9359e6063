
# Copyright: dlock contributors
#
# 060_history.pl: a short run of the history checker (t/history), and its
# control run.
#
# t/history/*.c is compiled with libpq into this test's temporary
# directory.  Then:
#  - a ~15 s run: 6 client processes acquire, renew, validate-then-write and
#    release 3 keys with ttls of 200-500 ms, under two roles (pairs of clients
#    share a holder name under different roles), while a supervisor pauses
#    clients with SIGSTOP for longer than their ttl (some of them inside a
#    validated, uncommitted write transaction; some writes run in REPEATABLE
#    READ transactions begun before the pause).  The checker must find no
#    violation: per key, tokens of committed writes only grow in commit order;
#    no write committed with a stale or expired token or while a newer grant
#    existed; release and renew returned true only to the live holder (and
#    never refused it); no two grants of a key were held at overlapping times;
#    tokens grow across keys.  The run must have been a real one: more than
#    50 committed writes, at least one pause past the ttl, at least one stale
#    write refused by dlock_validate, no client error.
#  - a ~10 s control run with the fence off (writes only WHERE key = $key):
#    the same checker must report violations (stale writes), which proves
#    that it can fail.
# The whole file takes about 30 s.
#
# The long run is a documented command (t/history/README.md).

use strict;
use warnings;

use File::Basename qw(dirname);
use File::Glob qw(bsd_glob);
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;

my $srcdir = File::Spec->rel2abs(dirname(__FILE__) . '/..');
my @sources = sort(bsd_glob("$srcdir/t/history/*.c"));

my $node = PostgreSQL::Test::Cluster->new('history');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'dlock'");
$node->append_conf('postgresql.conf', "max_connections = 50");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock');

# --- build -------------------------------------------------------------------
my $cc;
for my $c ($ENV{CC} // (), 'cc', 'gcc')
{
	my ($out, $err) = run_command([ 'sh', '-c', "command -v $c" ]);
	if ($out ne '') { $cc = $c; last; }
}
my $incdir = $node->config_data('--includedir');
my $libdir = $node->config_data('--libdir');
if (!defined $cc || !-f "$incdir/libpq-fe.h")
{
	# scripts/lib.sh installs gcc and libpq-dev; only a hand-made
	# environment lacks them
	plan skip_all => 'no C compiler or no libpq-fe.h (install gcc and libpq-dev)';
}

ok(-f "$srcdir/t/history/main.c" && -f "$srcdir/t/history/history.h",
	't/history/main.c and history.h are there');

my $tmp = PostgreSQL::Test::Utils::tempdir();
my $bin = "$tmp/history";
my ($bout, $berr);
my $built = IPC::Run::run(
	[
		$cc, '-O2', '-Wall', '-Wextra', '-Wno-unused-parameter', "-I$incdir",
		'-o', $bin, @sources, "-L$libdir", '-lpq'
	],
	'>', \$bout, '2>', \$berr);
ok($built, 't/history/*.c compile');
is($berr, '', 't/history/*.c compile without warnings');
if (!$built)
{
	diag("cannot build history: $berr");
	done_testing();
	exit 0;
}

# runs the checker; returns (exit status, output, %summary)
sub history_run
{
	my ($name, @args) = @_;
	my ($out, $err) = ('', '');
	my @cmd = (
		$bin, '-d', $node->connstr('postgres'),
		'-o', "$tmp/$name", @args);
	note("running: @cmd");
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err,
		IPC::Run::timeout(120));
	my $rc = $? >> 8;
	note($out);
	diag("stderr of $name:\n$err") if $err ne '';
	my %s;
	if ($out =~ /^history: mode=\S+ (calls=.*)$/m)
	{
		%s = map { split /=/, $_, 2 } split / /, $1;
	}
	return ($rc, $out, $err, %s);
}

# --- the real run ------------------------------------------------------------
my ($rc, $out, $err, %s) =
  history_run('fence', '-c', '6', '-k', '3', '-t', '15');
ok(defined $s{violations}, 'fenced run printed its summary')
  or diag($out);
is($s{violations}, 0, 'fenced run: no violation');
is($rc, 0, 'fenced run: exit status 0');
cmp_ok($s{writes} // 0, '>', 50, 'fenced run: more than 50 committed writes');
cmp_ok($s{pauses_past_ttl} // 0, '>=', 1,
	'fenced run: at least one client paused past its ttl');
cmp_ok($s{stale_refused} // 0, '>=', 1,
	'fenced run: dlock_validate refused at least one stale write');
is($s{errors}, 0, 'fenced run: no client error');
is($err, '', 'fenced run: nothing on stderr');

# --- the control run: no fence ----------------------------------------------
($rc, $out, $err, %s) =
  history_run('nofence', '-c', '6', '-k', '3', '-t', '10', '--no-fence');
ok(defined $s{violations}, 'control run printed its summary')
  or diag($out);
cmp_ok($s{violations} // 0, '>', 0,
	'control run without the fence: the checker reports violations');
is($rc, 1, 'control run: exit status 1 (violations)');
like($out, qr/^VIOLATION \(\w, stale\)/m,
	'control run: stale writes are among them');

# nothing crashed meanwhile
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|was terminated by exception|PANIC/,
	'server log: no backend crashed');

$node->stop;
done_testing();
