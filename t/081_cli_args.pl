# Copyright: dlock contributors
#
# 081_cli_args.pl: the dlock command line's arguments and messages, as real
# processes against a real server:
#  - options before or after the subcommand (-d ... list, list -d ...),
#    --name=value and -dVALUE forms;
#  - --version (META.json's version, also the man page's) and --help at any
#    position, exit 0;
#  - required options (renew and release need --holder), options a
#    subcommand does not take, a missing or extra KEY: usage errors (64);
#  - every bad value (durations inf, nan, 1e30, negative, zero, garbage,
#    out of the server's range; tokens out of range, --token
#    99999999999999999999 not clamped; empty or long KEY and holder) is a
#    usage error before any connection is made (64 also when the database
#    is unreachable), with one line naming the argument and its range;
#    the limits themselves are accepted;
#  - every non-zero exit prints one reason line on standard error, each
#    line starting "dlock: " (75, 70, 69, 64, CMD's failure);
#  - --slots, --shared and watch against a database whose dlock is 0.3 say
#    that they need 0.4 and how to update (69), not "is dlock installed?";
#  - list shows the caller's own leases whatever its role's name ("Bob" is
#    not bob; "x.y z" works); status does not call a key free when the
#    caller cannot see every role's leases (77, "held": null), and does for
#    superusers and pg_read_all_stats members.

use strict;
use warnings;

use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('cli_args');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'dlock'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dlock');
my $conn = $node->connstr('postgres');
my $nowhere = 'host=/nonexistent port=1';

# dlock's JSON output decoded; if it is not JSON, $default (and a diagnostic)
sub dj
{
	my ($text, $default) = @_;
	my $v = eval { decode_json($text) };
	diag("not JSON: $text") unless defined $v;
	return $v // $default;
}

# run dlock to its end: (exit code, stdout, stderr)
sub dl
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'dlock', @_ ], '<', \undef, '>', \$out, '2>', \$err,
		IPC::Run::timeout(60));
	return ($? >> 8, $out, $err);
}

# every line of stderr starts "dlock: ", and there is at least one
sub reason_lines_ok
{
	my ($err, $name) = @_;
	my @lines = split /\n/, $err;
	ok(@lines >= 1 && !grep(!/^dlock: \S/, @lines), "$name: stderr lines all start \"dlock: \"")
	  or diag("stderr: $err");
	return;
}

# --- --version: META.json's, wherever it is; the man page names it too ---
my ($version) = PostgreSQL::Test::Utils::slurp_file('META.json') =~ /"version":\s*"([^"]+)"/;
for my $args ([ '--version' ], [ '-V' ], [ 'list', '--version' ],
	[ '-d', $nowhere, 'acquire', 'k', '--version' ], [ 'run', 'k', '--version', '--', 'true' ])
{
	my ($rc, $out, $err) = dl(@$args);
	is_deeply([ $rc, $out, $err ], [ 0, "dlock $version\n", '' ],
		"dlock @$args: prints \"dlock $version\", exit 0");
}
like(PostgreSQL::Test::Utils::slurp_file('cli/dlock.1'), qr/^\.TH DLOCK 1 .*"dlock \Q$version\E"/m,
	'the man page names the same version');

# --- --help wherever it is (not as an option's value, not after --) ---
for my $args ([ '--help' ], [ '-h' ], [ 'acquire', 'k', '--help' ],
	[ '--ttl', 'inf', 'status', '--help' ], [ '-d', $nowhere, 'list', '-h' ])
{
	my ($rc, $out, $err) = dl(@$args);
	ok($rc == 0 && $out =~ /dlock run KEY/ && $err eq '', "dlock @$args: the usage, exit 0");
}
my ($rc, $out, $err) = dl('run', 'k', '--help', '--', 'true');
ok($rc == 0 && $out =~ /DLOCK_TOKEN/, 'run k --help: run\'s usage');
($rc, $out, $err) = dl('acquire', 'cli:hh', '--holder', '--help', '--ttl', '1ms', '-d', $conn);
ok($rc == 0 && $out =~ /^\d+$/, '--holder --help: "--help" is the holder name, not a request for help');
($rc, $out, $err) = dl('run', 'cli:run', '-d', $conn, '--', 'echo', '--help', '--version');
is_deeply([ $rc, $out ], [ 0, "--help --version\n" ], 'after --, --help and --version are CMD\'s');

# --- options before or after the subcommand, in every form ---
is((dl('acquire', 'cli:o1', '--holder', 'h', '-d', $conn))[0], 0, 'acquire KEY --holder h -d ...');
($rc, $out) = dl('-d', $conn, 'list', '--json');
is(scalar @{ dj($out, []) }, 1, '-d ... list --json: the lease');
($rc, $out) = dl('--json', "--dbname=$conn", 'status', 'cli:o1');
is(dj($out, {})->{holder}, 'h', '--json --dbname=... status KEY');
is((dl("-d$conn", '--holder=h', 'release', 'cli:o1'))[0], 0, '-dCONNINFO --holder=h release KEY');
is((dl('--holder', 'h', '--ttl=1m', '--wait', '0', '-d', $conn, 'acquire', 'cli:o2'))[0], 0,
	'every option before the subcommand');
is((dl('--token', '1', '-d', $conn, 'renew', '--holder', 'h', 'cli:o2'))[0], 70,
	'options around the subcommand and KEY');

# --- usage errors: one line on stderr, exit 64, nothing on stdout ---
sub usage_error_ok
{
	my ($name, $pattern, @args) = @_;
	for my $d ($conn, $nowhere)
	{
		my ($rc, $out, $err) = dl('-d', $d, @args);
		my $where = $d eq $conn ? '' : ', database unreachable';
		ok($rc == 64 && $out eq '' && $err =~ /^dlock: [^\n]*$pattern[^\n]*\n\z/,
			"$name: 64 and one line naming it$where")
		  or diag("exit $rc, stdout \"$out\", stderr \"$err\"");
	}
	return;
}

usage_error_ok('no command', qr/no command/);
usage_error_ok('an unknown command', qr/unknown command "frob"/, 'frob', 'k');
usage_error_ok('an unknown option', qr/unknown option "--frob"/, 'list', '--frob');
usage_error_ok('renew without --holder', qr/renew needs --holder/, 'renew', 'k');
usage_error_ok('renew without --holder, with --token', qr/renew needs --holder/,
	'renew', 'k', '--token', '5');
usage_error_ok('release without --holder', qr/release needs --holder/, 'release', 'k');
usage_error_ok('acquire without KEY', qr/acquire needs a KEY/, 'acquire');
usage_error_ok('status without KEY', qr/status needs a KEY/, 'status');
usage_error_ok('force-release without KEY', qr/force-release needs a KEY/, 'force-release');
usage_error_ok('list with a KEY', qr/unexpected argument "k"/, 'list', 'k');
usage_error_ok('two KEYs', qr/unexpected argument "k2"/, 'acquire', 'k', 'k2');
usage_error_ok('run without CMD', qr/run needs -- CMD/, 'run', 'k');
usage_error_ok('run with an empty CMD', qr/run needs -- CMD/, 'run', 'k', '--');
usage_error_ok('acquire with a CMD', qr/acquire takes no command/, 'acquire', 'k', '--', 'true');
usage_error_ok('--ttl without a value', qr/--ttl needs a value/, 'acquire', 'k', '--ttl');
usage_error_ok('--json=x', qr/--json takes no value/, 'list', '--json=x');
for my $case ([ 'status', '--ttl', '1s' ], [ 'status', '--holder', 'h' ], [ 'list', '--wait', '1s' ],
	[ 'acquire', '--grace', '1s' ], [ 'acquire', '--token', '5' ], [ 'release', '--ttl', '1s' ],
	[ 'release', '--wait', '1s' ], [ 'renew', '--wait', '1s' ], [ 'force-release', '--holder', 'h' ])
{
	my ($cmd, $opt, $v) = @$case;
	my @key = $cmd eq 'list' ? () : ('k');
	my @holder = $cmd =~ /^re/ && $opt ne '--holder' ? ('--holder', 'h') : ();
	usage_error_ok("$cmd $opt", qr/$cmd takes no \Q$opt\E/, $cmd, @key, @holder, $opt, $v);
}

# bad values, each named with the range it must be in
my $long_key = 'k' x 1025;
my $long_holder = 'h' x 257;
my %range = (ttl => '1ms to 30d', wait => '0 to 1d', grace => '0 to 1d');
for my $opt (qw(ttl wait grace))
{
	my @cmd = $opt eq 'grace' ? ('run', 'k') : ('acquire', 'k');
	my @tail = $opt eq 'grace' ? ('--', 'true') : ();
	my @bad = ('inf', 'nan', 'infinity', '1e30', '1e3', '-1', '-1s', '+5s', 'soon', '', ' 5s',
		'5 parsecs', '5sec0', '0x10', '1..2', '.', '99999999999999999999d');
	push @bad, $opt eq 'ttl' ? ('0', '0s', '0.4ms', '30d 1ms', '2592000.001', '31d', '721h')
	  : ('1d1ms', '86401', '25h', '2d');
	for my $v (@bad)
	{
		usage_error_ok("--$opt \"$v\"", qr/invalid --$opt "\Q$v\E": a duration from \Q$range{$opt}\E/,
			@cmd, "--$opt", $v, @tail);
	}
}
for my $v ('99999999999999999999', '9223372036854775808', '-1', '0', '1.5', 'abc', '', ' 1', '+1', '1e3')
{
	usage_error_ok("--token \"$v\"", qr/invalid --token "\Q$v\E": a whole number from 1 to 9223372036854775807/,
		'release', 'k', '--holder', 'h', '--token', $v);
}
usage_error_ok('an empty KEY', qr/invalid KEY "": 1 to 1024 bytes/, 'acquire', '');
usage_error_ok('a KEY of 1025 bytes', qr/invalid KEY "k{40}\.\.\.": 1 to 1024 bytes/, 'acquire', $long_key);
usage_error_ok('an empty holder', qr/invalid --holder "": 1 to 256 bytes/, 'acquire', 'k', '--holder', '');
usage_error_ok('a holder of 257 bytes', qr/invalid --holder "h{40}\.\.\.": 1 to 256 bytes/,
	'acquire', 'k', '--holder', $long_holder);

# the limits themselves, and the forms of a duration, are accepted
($rc, $out, $err) = dl('acquire', 'k' x 1024, '--holder', 'h' x 256, '--ttl', '30d', '--wait', '1d', '-d', $conn);
is($rc, 0, 'KEY of 1024 bytes, holder of 256, --ttl 30d, --wait 1d: acquired') or diag($err);
for my $v ('1ms', '0.5s', '1.5', '2 min', '1 hour', '30 seconds', '720h', '2592000', '43200m', '30 days')
{
	is((dl('acquire', "cli:d$v", '--holder', 'h', '--ttl', $v, '-d', $conn))[0], 0, "--ttl \"$v\": accepted");
}
is((dl('acquire', 'cli:w0', '--holder', 'h', '--wait', '0', '-d', $conn))[0], 0, '--wait 0: accepted');
($rc, $out, $err) = dl('release', 'cli:w0', '--holder', 'h', '--token', '9223372036854775807', '-d', $conn);
is($rc, 70, '--token 9223372036854775807: accepted (not that grant: 70)');
# (read from the table, whose row stays after the lease ran out: dlock_locks
# shows only unexpired leases, and this one may have run out by now)
is($node->safe_psql('postgres', "SELECT expires_at - acquired_at FROM dlock.lease WHERE key = 'cli:d1.5'"),
	'00:00:01.5', '--ttl 1.5 is 1.5 seconds');

# --- every non-zero exit says why, on stderr, each line "dlock: ..." ---
dl('acquire', 'cli:held', '--holder', 'owner', '--ttl', '1h', '-d', $conn);
($rc, $out, $err) = dl('acquire', 'cli:held', '--holder', 'other', '-d', $conn);
is($rc, 75, 'acquire of a held key: 75');
like($err, qr/^dlock: cli:held not acquired at once \(no --wait\)[^\n]*\n\z/, '... one line says why');
($rc, $out, $err) = dl('acquire', 'cli:held', '--holder', 'other', '--wait', '300ms', '--json', '-d', $conn);
ok($rc == 75 && $err =~ /^dlock: cli:held not acquired within --wait 300ms[^\n]*\n\z/,
	'acquire --wait 300ms --json of a held key: 75, one line on stderr');
($rc, $out, $err) = dl('run', 'cli:held', '--wait', '300ms', '-d', $conn, '--', 'true');
ok($rc == 75 && $err =~ /^dlock: cli:held not acquired within --wait 300ms[^\n]*\n\z/,
	'run --wait 300ms of a held key: 75, one line on stderr (a cron mail is not empty)');
($rc, $out, $err) = dl('renew', 'cli:held', '--holder', 'other', '-d', $conn);
ok($rc == 70 && $err =~ /^dlock: cli:held not renewed[^\n]*\n\z/, 'renew by another holder: 70, one line');
($rc, $out, $err) = dl('release', 'cli:held', '--holder', 'owner', '--token', '1', '-d', $conn);
ok($rc == 70 && $err =~ /^dlock: cli:held not released[^\n]*token 1\n\z/, 'release with a wrong token: 70, one line');
($rc, $out, $err) = dl('force-release', 'cli:free', '-d', $conn);
ok($rc == 70 && $err =~ /^dlock: cli:free not released[^\n]*\n\z/, 'force-release of a free key: 70, one line');
($rc, $out, $err) = dl('run', 'cli:c', '-d', $conn, '--', 'sh', '-c', 'exit 7');
ok($rc == 7 && $err =~ /^dlock: sh exited with status 7\n\z/, 'CMD exit 7: 7, one line');
($rc, $out, $err) = dl('run', 'cli:c', '-d', $conn, '--', 'sh', '-c', 'kill -KILL $$');
ok($rc == 137 && $err =~ /^dlock: sh was killed by signal 9\n\z/, 'CMD killed: 137, one line');
($rc, $out, $err) = dl('list', '-d', $nowhere);
is($rc, 69, 'unreachable: 69');
reason_lines_ok($err, 'unreachable (libpq\'s message and hint)');
($rc, $out, $err) = dl('list', '-d', 'host=/nonexistent,/nonexistent2 port=1');
reason_lines_ok($err, 'unreachable, two hosts');
$node->safe_psql('postgres', 'CREATE DATABASE nodlock');
($rc, $out, $err) = dl('acquire', 'k', '-d', $node->connstr('nodlock'));
is($rc, 69, 'dlock not installed: 69');
reason_lines_ok($err, 'dlock not installed');
($rc, $out, $err) = dl('status', 'k', '-d', $node->connstr('postgres') . ' user=nosuchrole');
is($rc, 69, 'a role that does not exist: 69');
reason_lines_ok($err, 'a role that does not exist');

# --- list and status by role: role names as the catalog spells them ---
# list shows the caller's own leases: role "Bob" sees Bob's, not bob's, and
# a role named "x.y z" works.  status of a key with no lease the caller may
# see: "free" only for a role that sees every role's leases (superuser,
# pg_read_all_stats); anyone else cannot tell, and says so (exit 77).
$node->safe_psql('postgres', q{CREATE ROLE bob LOGIN; CREATE ROLE "Bob" LOGIN;
	CREATE ROLE "x.y z" LOGIN; CREATE ROLE carol LOGIN;
	CREATE ROLE stats LOGIN IN ROLE pg_read_all_stats});
my %as = map { $_ => "$conn user='$_'" } ('bob', 'Bob', 'x.y z', 'carol', 'stats');
is((dl('acquire', 'cli:bob', '--holder', 'hb', '--ttl', '5m', '-d', $as{bob}))[0], 0, 'bob acquires');
is((dl('acquire', 'cli:Bob', '--holder', 'hB', '--ttl', '5m', '-d', $as{Bob}))[0], 0, '"Bob" acquires');
is((dl('acquire', 'cli:xyz', '--holder', 'hx', '--ttl', '5m', '-d', $as{'x.y z'}))[0], 0,
	'"x.y z" acquires');
for my $role ('bob', 'Bob', 'x.y z')
{
	my ($rc, $out, $err) = dl('list', '--json', '-d', $as{$role});
	my $key = { bob => 'cli:bob', Bob => 'cli:Bob', 'x.y z' => 'cli:xyz' }->{$role};
	is_deeply([ $rc, [ map { [ $_->{key}, $_->{owner} ] } @{ dj($out, []) } ] ],
		[ 0, [ [ $key, $role ] ] ], "list as role \"$role\": its own lease, named as it is")
	  or diag($err);
}
($rc, $out) = dl('list', '-d', $as{'x.y z'});
like($out, qr/^cli:xyz held by hx \(role x\.y z\) token \d+ until /, 'list as "x.y z": text');
($rc, $out, $err) = dl('status', 'cli:bob', '--json', '-d', $as{carol});
is_deeply([ $rc, dj($out, {}) ], [ 77, { key => 'cli:bob', held => undef, sees_all_roles => JSON::PP::false } ],
	'status as carol of a key bob holds: 77, held null (carol cannot tell), not "free"');
like($err, qr/^dlock: cli:bob: no lease that role carol may see; [^\n]*\n\z/, '... one line says why');
($rc, $out) = dl('status', 'cli:bob', '-d', $as{carol});
is_deeply([ $rc, $out ], [ 77, "cli:bob not held by any role visible to you\n" ], '... and in text');
($rc, $out) = dl('status', 'cli:nobody', '--json', '-d', $as{carol});
is_deeply([ $rc, dj($out, {}) ], [ 77, { key => 'cli:nobody', held => undef, sees_all_roles => JSON::PP::false } ],
	'status as carol of a free key: the same (carol cannot tell it from a hidden lease)');
($rc, $out) = dl('status', 'cli:bob', '--json', '-d', $as{stats});
my $j = dj($out, {});
is_deeply([ $rc, $j->{held}, $j->{holder}, $j->{owner} ], [ 0, JSON::PP::true, 'hb', 'bob' ],
	'status as a pg_read_all_stats member: held by hb, role bob');
($rc, $out) = dl('status', 'cli:nobody', '--json', '-d', $as{stats});
is_deeply([ $rc, dj($out, {}) ], [ 0, { key => 'cli:nobody', held => JSON::PP::false } ],
	'status as a pg_read_all_stats member of a free key: free');
($rc, $out) = dl('status', 'cli:Bob', '--json', '-d', $as{Bob});
is(dj($out, {})->{owner}, 'Bob', 'status as "Bob" of its own lease: owner Bob');
($rc, $out, $err) = dl('acquire', 'cli:bob', '--holder', 'hc', '-d', $as{carol});
ok($rc == 75 && $err =~ /^dlock: cli:bob not acquired/, 'carol\'s acquire of bob\'s key: 75, with a reason');
dl('force-release', $_, '-d', $conn) for ('cli:bob', 'cli:Bob', 'cli:xyz');

# --- --slots N and --shared (semaphores and shared leases, issue 26) ---
for my $v ('0', '1001', '-1', '1.5', 'abc', '', ' 2', '+2', '99999999999999999999')
{
	usage_error_ok("--slots \"$v\"", qr/invalid --slots "\Q$v\E": a whole number from 1 to 1000/,
		'acquire', 'k', '--slots', $v);
}
usage_error_ok('--slots with --shared', qr/--slots and --shared cannot go together/,
	'run', 'k', '--slots', '2', '--shared', '--', 'true');
usage_error_ok('renew --slots', qr/renew takes no --slots/, 'renew', 'k', '--holder', 'h', '--slots', '2');
usage_error_ok('release --shared', qr/release takes no --shared/, 'release', 'k', '--holder', 'h', '--shared');
usage_error_ok('--shared=x', qr/--shared takes no value/, 'acquire', 'k', '--shared=x');
my @slot_tok;
for my $h ('s1', 's2')
{
	($rc, $out, $err) = dl('acquire', 'cli:sem', '--holder', $h, '--slots', '2', '--ttl', '5m', '-d', $conn);
	ok($rc == 0 && $out =~ /^(\d+)$/, "acquire --slots 2 as $h: a token") or diag($err);
	push @slot_tok, $1;
}
($rc, $out, $err) = dl('acquire', 'cli:sem', '--holder', 's3', '--slots=2', '-d', $conn);
ok($rc == 75 && $err =~ /^dlock: cli:sem not acquired/, 'a third holder of --slots 2: 75');
($rc, $out, $err) = dl('run', 'cli:sem', '--slots', '3', '-d', $conn, '--', 'true');
ok($rc == 64 && $err =~ /slots does not match/, 'run --slots 3 of a key held with 2 slots: the error, 64');
is($node->safe_psql('postgres',
		q{SELECT string_agg(holder, ',' ORDER BY holder) FROM dlock_locks WHERE key = 'cli:sem'}),
	's1,s2', 'both holders of the semaphore in dlock_locks');
is((dl('release', 'cli:sem', '--holder', 's1', '--token', $slot_tok[0], '-d', $conn))[0], 0,
	'release of one slot by its holder and token');
($rc, $out, $err) = dl('run', 'cli:sem', '--slots', '2', '--holder', 'r', '-d', $conn, '--',
	'sh', '-c', 'test "$DLOCK_TOKEN" -gt ' . $slot_tok[1]);
is($rc, 0, 'run --slots 2: CMD runs in the freed slot with a greater token') or diag($err);
dl('release', 'cli:sem', '--holder', 's2', '-d', $conn);
for my $h ('r1', 'r2')
{
	is((dl('acquire', 'cli:sh', '--holder', $h, '--shared', '--ttl', '5m', '-d', $conn))[0], 0,
		"acquire --shared as $h");
}
($rc, $out, $err) = dl('acquire', 'cli:sh', '--holder', 'w', '-d', $conn);
is($rc, 75, 'the lease of a key with shared holders: 75');
($rc, $out, $err) = dl('run', 'cli:sh', '--shared', '--holder', 'r3', '-d', $conn, '--',
	'sh', '-c', 'test -n "$DLOCK_TOKEN"');
is($rc, 0, 'run --shared beside two shared holders') or diag($err);
is($node->safe_psql('postgres', q{SELECT count(*) FROM dlock_locks WHERE key = 'cli:sh'}),
	'2', 'run --shared released its lease at the end');
dl('release', 'cli:sh', '--holder', $_, '-d', $conn) for ('r1', 'r2');

# --- --slots and --shared against dlock 0.3 (no 5-argument dlock_acquire,
# no dlock_acquire_shared): the version found and how to update, exit 69 ---
$node->safe_psql('postgres', 'CREATE DATABASE old03');
$node->safe_psql('old03', "CREATE EXTENSION dlock VERSION '0.3'");
my $old03 = $node->connstr('old03');
for my $opt ([ '--slots', '2' ], [ '--shared' ])
{
	for my $cmd ([ 'acquire', 'cli:old' ], [ 'run', 'cli:old' ])
	{
		($rc, $out, $err) = dl(@$cmd, @$opt, '-d', $old03,
			$cmd->[0] eq 'run' ? ('--', 'true') : ());
		ok( $rc == 69
			  && $err =~ /^dlock: \Q$opt->[0]\E needs the dlock extension 0\.4 or later; this database has 0\.3$/m
			  && $err =~ /^dlock: HINT:  .*ALTER EXTENSION dlock UPDATE/m
			  && $err !~ /is the dlock extension installed/,
			"$cmd->[0] $opt->[0] against dlock 0.3: the version and the update, 69")
		  or diag("exit $rc, stderr: $err");
		reason_lines_ok($err, "$cmd->[0] $opt->[0] against dlock 0.3");
	}
}
# dlock watch (dlock_leader and dlock_watch came with 0.4) says the same
($rc, $out, $err) = dl('watch', 'cli:old', '-d', $old03);
ok( $rc == 69
	  && $err =~ /^dlock: dlock watch needs the dlock extension 0\.4 or later; this database has 0\.3$/m
	  && $err =~ /^dlock: HINT:  .*ALTER EXTENSION dlock UPDATE/m
	  && $err !~ /is the dlock extension installed/,
	'watch against dlock 0.3: the version and the update, 69')
  or diag("exit $rc, stderr: $err");
reason_lines_ok($err, 'watch against dlock 0.3');
# a lease is there in 0.3, and a database without dlock still gets asked
($rc, $out, $err) = dl('acquire', 'cli:old', '--holder', 'h', '-d', $old03);
ok($rc == 0 && $out =~ /^\d+$/, 'acquire without --slots against dlock 0.3: a token') or diag($err);
($rc, $out, $err) = dl('acquire', 'cli:old', '--slots', '2', '-d', $node->connstr('nodlock'));
ok($rc == 69 && $err =~ /is the dlock extension installed in this database\?/
	  && $err !~ /needs the dlock extension/,
	'--slots where dlock is not installed: asks whether it is, 69')
  or diag("exit $rc, stderr: $err");
# updated, the same call works
$node->safe_psql('old03', 'ALTER EXTENSION dlock UPDATE');
($rc, $out, $err) = dl('acquire', 'cli:old2', '--slots', '2', '-d', $old03);
ok($rc == 0 && $out =~ /^\d+$/, 'acquire --slots 2 after ALTER EXTENSION dlock UPDATE: a token')
  or diag($err);

$node->stop;
done_testing();
