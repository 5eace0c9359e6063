# Copyright: dlock contributors
#
# 101_watch_share.pl: what one role, one session and one client of a
# pooled connection can take of the watch registry, and what they can learn
# of each other's watches (issue 35 items 4 and 9, issue 36; README
# "Settings", docs/reference.md; src/watch/watch_registry.c, src/watch/watch_session.c).
#
#  - dlock.max_watches_per_role: a role's sessions together watch at most
#    that many keys (53400, naming the role, its count and the setting);
#    other roles keep their room; superusers are not bound by it; and the
#    last dlock.superuser_reserved_watches entries are only superusers'.
#  - A pooler's reset: DISCARD ALL, UNLISTEN * and UNLISTEN of the channel
#    unwatch the session's keys at commit (their entries freed), a reset
#    that rolls back keeps them, and the next dlock_watch draws a new
#    channel; through pgbouncer in session mode (server_reset_query DISCARD
#    ALL), the next client of the connection starts with nothing watched.
#  - Savepoints: watches rolled back to a savepoint free their entries, and
#    an unwatch undone by a rolled-back re-watch stays an unwatch.
#  - The channel's privacy: the next client of a connection (another role)
#    receives nothing of the keys the one before watched; a role that
#    listens on channels it can compute (from the watcher's pid, start
#    time, or its own channel) receives nothing of another role's keys.
#
# The registry's room is read through what the roles can still watch (no
# view shows it).  Notifications are awaited through a later one on the
# same session (the queue keeps commit order), never for a time.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('watch_share');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'dlock'
dlock.max_watches = 40
dlock.max_watches_per_role = 10
dlock.superuser_reserved_watches = 8
});
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION dlock;
	CREATE ROLE regress_share_a LOGIN;
	CREATE ROLE regress_share_b LOGIN;
	CREATE ROLE regress_share_c LOGIN;
	-- watch keys prefix1..prefixN; 'ok' or the error: state|message|detail|hint
	CREATE FUNCTION try_watch(prefix text, n int) RETURNS text LANGUAGE plpgsql AS $$
	DECLARE s text; m text; d text; h text;
	BEGIN
		PERFORM dlock_watch(prefix || g) FROM generate_series(1, n) g;
		RETURN 'ok';
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT,
			d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
		RETURN s || '|' || m || '|' || d || '|' || h;
	END $$;
	GRANT EXECUTE ON FUNCTION try_watch(text, int) TO PUBLIC;
});

# a session of its own, as role (undef: the superuser)
sub session
{
	my ($role) = @_;
	return $node->background_psql('postgres', on_error_stop => 0,
		$role ? (extra_params => [ '-U', $role ]) : ());
}

my $s = session();
my $a1 = session('regress_share_a');
my $a2 = session('regress_share_a');
my $b = session('regress_share_b');
my $c = session('regress_share_c');

# ---- the shares ----
is($s->query("SELECT try_watch('s', 12)"), 'ok',
	'a superuser watches more keys than dlock.max_watches_per_role');
is($a1->query("SELECT try_watch('a', 10)"), 'ok', 'role a watches its 10 keys');
my $err = $a1->query("SELECT try_watch('a-more', 1)");
like($err, qr/^53400\|too many watched keys for role "regress_share_a"\|/,
	'its 11th: 53400 naming the role');
like($err, qr/\|Role "regress_share_a" watches 10 keys, the most dlock\.max_watches_per_role \(10\) allows one role\.\|/,
	'the detail names the count and the setting');
like($err, qr/\|Unwatch keys, or raise dlock\.max_watches_per_role\.$/,
	'the hint names the setting');
like($a2->query("SELECT try_watch('a2-', 1)"), qr/^53400\|too many watched keys for role/,
	"the share is the role's, not the session's");
is($b->query("SELECT try_watch('b', 10)"), 'ok', 'another role keeps its room');
# 32 of 40 taken: the last 8 are the superusers'
$err = $c->query("SELECT try_watch('c', 1)");
like($err, qr/^53400\|too many watched keys\|All sessions together watch 32 keys of the 40 dlock\.max_watches allows; the last 8 are reserved for superusers \(dlock\.superuser_reserved_watches\)\.\|/,
	'a role under its share gets none of the reserved entries (53400 naming the reserve)');
is($s->query("SELECT try_watch('s-more', 8)"), 'ok', 'a superuser takes the reserved entries');
like($s->query("SELECT try_watch('s-full', 1)"),
	qr/^53400\|too many watched keys\|All sessions together watch 40 keys, the most dlock\.max_watches allows\./,
	'the registry full: 53400 naming dlock.max_watches');
is($s->query("SELECT dlock_unwatch()"), '20', "the superuser's watches end");

# ---- a session's end, and a pooler's reset, free a role's entries ----
$a1->quit;
is($a2->query("SELECT try_watch('a2-', 10)"), 'ok',
	"a role's entries are freed when its session ends");

# DISCARD ALL (pgbouncer's server_reset_query)
my $ch = $b->query("SELECT dlock_watch('b1')");
$b->query('DISCARD ALL');
is($b->query('SELECT count(*) FROM pg_listening_channels()'), '0', 'DISCARD ALL: no LISTEN left');
is($b->query('SELECT dlock_unwatch()'), '0', 'DISCARD ALL: no key watched');
is($b->query("SELECT try_watch('b-again', 10)"), 'ok', 'DISCARD ALL: the entries are freed');
isnt($b->query("SELECT dlock_watch('b-again1')"), $ch, 'DISCARD ALL: a new channel is drawn');

# UNLISTEN *, in a transaction that rolls back, then commits
$b->query('BEGIN; UNLISTEN *; ROLLBACK');
is($b->query("SELECT try_watch('b-more', 1)") =~ /^53400/ ? 'full' : 'room', 'full',
	'UNLISTEN * rolled back: the keys stay watched');
$ch = $b->query("SELECT dlock_watch('b-again1')");
$b->query('UNLISTEN *');
is($b->query("SELECT try_watch('b-third', 10)"), 'ok', 'UNLISTEN *: the entries are freed');
isnt($b->query("SELECT dlock_watch('b-third1')"), $ch, 'UNLISTEN *: a new channel is drawn');

# UNLISTEN of another channel keeps them; UNLISTEN of the channel frees them
$ch = $b->query("SELECT dlock_watch('b-third1')");
$b->query('UNLISTEN dlock_not_mine');
like($b->query("SELECT try_watch('b-x', 1)"), qr/^53400/, 'UNLISTEN of another channel: the keys stay');
$b->query(qq{UNLISTEN "$ch"});
is($b->query("SELECT try_watch('b-fourth', 10)"), 'ok', 'UNLISTEN of the channel: the entries are freed');
is($b->query('SELECT dlock_unwatch()'), '10', 'only the keys watched since stay');

# UNLISTEN * then a watch in one transaction: that key stays watched
$b->query("SELECT dlock_watch('k1'), dlock_watch('k2')");
$b->query("BEGIN; UNLISTEN *; SELECT dlock_watch('k2'); COMMIT");
is($b->query('SELECT dlock_unwatch()'), '1', 'UNLISTEN *, then a watch: only that key stays');

# ---- savepoints ----
$b->query("BEGIN; SAVEPOINT p; SELECT try_watch('sp', 10); ROLLBACK TO SAVEPOINT p; COMMIT");
is($b->query("SELECT try_watch('sp-after', 10)"), 'ok', 'watches rolled back to a savepoint free their entries');
is($b->query('SELECT dlock_unwatch()'), '10', 'and are not watched');
$b->query("SELECT dlock_watch('u1')");
$b->query("BEGIN; SELECT dlock_unwatch('u1'); SAVEPOINT p; SELECT dlock_watch('u1'); ROLLBACK TO SAVEPOINT p; COMMIT");
is($b->query('SELECT dlock_unwatch()'), '0', 'an unwatch whose re-watch rolled back stays');
$b->query("SELECT dlock_watch('u2')");
$b->query("BEGIN; UNLISTEN *; SAVEPOINT p; SELECT dlock_watch('u2'); ROLLBACK TO SAVEPOINT p; COMMIT");
is($b->query('SELECT count(*) FROM pg_listening_channels()'), '0', 'UNLISTEN *, re-watch rolled back: not listening');
is($b->query("SELECT try_watch('u-after', 10)"), 'ok', '... and no entry left behind');
$b->query('SELECT dlock_unwatch()');
$a2->query('SELECT dlock_unwatch()');

# ---- the channel's privacy ----

# wait (on session $w) for a notification whose payload matches $until;
# returns all the notifications printed meanwhile
sub notifications_until
{
	my ($w, $until) = @_;
	my $got = '';
	for (1 .. 6000)
	{
		$got .= $w->query('SELECT 1');
		last if $got =~ $until;
		usleep(50_000);
	}
	return $got;
}

# one connection, two clients: role a watches a key, the pooler resets the
# connection, role b watches a key of its own
my $pooled = session();
my $ch_a = $pooled->query(
	"SET SESSION AUTHORIZATION regress_share_a; SELECT dlock_watch('secret-a')");
$pooled->query('RESET SESSION AUTHORIZATION; DISCARD ALL');
my $ch_b = $pooled->query(
	"SET SESSION AUTHORIZATION regress_share_b; SELECT dlock_watch('pub-b')");
isnt($ch_b, $ch_a, 'the next client of a reset connection gets another channel');
$node->safe_psql('postgres',
	"SELECT dlock_acquire('secret-a', 'h', '1 h'); SELECT dlock_release('secret-a', 'h')",
	extra_params => [ '-U', 'regress_share_a' ]);
$node->safe_psql('postgres', "SELECT dlock_acquire('pub-b', 'h', '1 h')",
	extra_params => [ '-U', 'regress_share_b' ]);
my $got = notifications_until($pooled, qr/pub-b/);
like($got, qr/pub-b/, "the next client gets its own key's news");
unlike($got, qr/secret-a/, 'and nothing of the keys the client before watched');
$pooled->quit;

# a role that computes channels from what it can see of the watcher
my $watcher = session('regress_share_a');
my $wch = $watcher->query("SELECT dlock_watch('secret-a')");
like($wch, qr/^dlock_[0-9a-f]{32}$/, "the watcher's channel");
my ($wpid, $wstart) = split /\|/,
  $watcher->query("SELECT pg_backend_pid(), backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()");
is($node->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%$wch%' AND pid <> pg_backend_pid()"),
	'0', 'no statement text shows the channel');
my $spy = session('regress_share_b');
my $own = $spy->query("SELECT dlock_watch('pub-b')");
isnt($own, $wch, 'another role draws another channel');
my @guesses = (
	"dlock_$wpid",
	'dlock_' . sprintf('%032x', $wpid),
	$spy->query("SELECT 'dlock_' || md5('$wpid')"),
	$spy->query("SELECT 'dlock_' || md5('$wstart')"),
	$spy->query("SELECT 'dlock_' || md5('$wpid' || '$wstart')"),
	$spy->query("SELECT 'dlock_' || md5('secret-a')"),
	$own =~ s/.$/$& eq '0' ? '1' : '0'/er,
	'dlock', 'dlock_', 'dlock_watch', 'secret-a');
$spy->query(qq{LISTEN "$_"}) for @guesses;
$node->safe_psql('postgres',
	"SELECT dlock_acquire('secret-a', 'h', '1 h'); SELECT dlock_release('secret-a', 'h')",
	extra_params => [ '-U', 'regress_share_a' ]);
$node->safe_psql('postgres', "SELECT dlock_release('pub-b', 'h')",
	extra_params => [ '-U', 'regress_share_b' ]);
$got = notifications_until($spy, qr/released/);
like($got, qr/pub-b/, 'the spy gets its own key');
unlike($got, qr/secret-a/, "and nothing of another role's key on any channel it computed");
like(notifications_until($watcher, qr/released/), qr/secret-a/,
	'while the watcher got it');

$_->quit for ($s, $a2, $b, $c, $watcher, $spy);

# ---- through pgbouncer, session mode: the next client starts clean ----
my $pgbouncer_bin = '/usr/sbin/pgbouncer';
SKIP:
{
	skip "pgbouncer is not installed ($pgbouncer_bin)", 4 unless -x $pgbouncer_bin;
	my $user = $node->safe_psql('postgres', 'SELECT current_user');
	my $dir = PostgreSQL::Test::Utils::tempdir;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my ($host, $nport) = ($node->host, $node->port);
	PostgreSQL::Test::Utils::append_to_file("$dir/userlist.txt", qq{"$user" ""\n});
	PostgreSQL::Test::Utils::append_to_file("$dir/pgbouncer.ini", qq{
[databases]
postgres = host=$host port=$nport dbname=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = session
server_reset_query = DISCARD ALL
default_pool_size = 1
min_pool_size = 0
reserve_pool_size = 0
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
});
	my $bouncer = IPC::Run::start([ $pgbouncer_bin, "$dir/pgbouncer.ini" ],
		'>', \my $bo, '2>', \my $be);
	my @psql = ('psql', '-XAtq', '-h', '127.0.0.1', '-p', $port, '-U', $user,
		'-d', 'postgres');
	my $run = sub {
		my ($sql) = @_;
		my ($out, $e) = ('', '');
		IPC::Run::run([ @psql, '-c', $sql ], '>', \$out, '2>', \$e);
		chomp $out;
		return $out;
	};
	my $first = '';
	for (1 .. 600)
	{
		$first = $run->("SELECT pg_backend_pid() || '|' || dlock_watch('pooled')");
		last if $first =~ /\|/;
		usleep(100_000);
	}
	my ($pid1, $ch1) = split /\|/, $first;
	like($ch1 // '', qr/^dlock_/, 'a client watches a key through pgbouncer');
	my ($pid2, $n, $listening) = split /\|/, $run->(
		"SELECT pg_backend_pid() || '|' || dlock_unwatch() || '|' || (SELECT count(*) FROM pg_listening_channels())");
	is($pid2, $pid1, 'the next client gets the same server connection');
	is("$n|$listening", '0|0', 'and finds no key watched, no channel listened on');
	isnt($run->("SELECT dlock_watch('pooled')"), $ch1, 'and draws a channel of its own');
	$bouncer->kill_kill;
}

done_testing();
