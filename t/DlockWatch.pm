# Copyright: dlock contributors
#
# t/DlockWatch.pm: what the tests of watching keys (095_watch.pl and
# 098_watch_shapes.pl) share: `dlock watch KEY --json` started as a
# watcher, its lines read as decoded events, and the absence of lines.
#
#   use FindBin;
#   use lib $FindBin::RealBin;
#   use DlockWatch;
#
#   my $w = watch_start($node, 'k');            # once its first line is out
#   my ($e) = events($w, 1, 'the grant');       # {event, key, holder, ...}
#   ok(quiet_for($w, 2), 'nothing more');
#   watch_stop($w);
#   watch_stop_all();                           # at the end of the file

package DlockWatch;

use strict;
use warnings;

use Exporter 'import';
use IPC::Run;
use JSON::PP;
use Test::More;
use Time::HiRes qw(usleep time);

our @EXPORT = qw(watch_start events quiet_for watch_stop watch_forget watch_stop_all);

my @watchers;
# once a wait has come up short the file has failed: later waits, of any
# watcher, are short too (a mutant that stops events costs one long wait)
my $failed;

# watch_start(NODE, KEY, [USER]): `dlock watch KEY --json` on NODE's
# postgres database as USER (default: the superuser); returns the watcher
# once its first line (the key's lease now, in $w->{current}) is out, that
# is once its dlock_watch has committed.
sub watch_start
{
	my ($node, $key, $user) = @_;
	my $w = { key => $key, out => '', err => '', seen => 0 };
	my $conn = $node->connstr('postgres') . ($user ? " user=$user" : '');
	$w->{h} = IPC::Run::start([ 'dlock', 'watch', $key, '--json', '-d', $conn ],
		'<', \undef, '>', \$w->{out}, '2>', \$w->{err}, IPC::Run::timeout(900));
	push @watchers, $w;
	($w->{current}) = events($w, 1, 'its first line');
	return $w;
}

# events(W, N, WHAT): the watcher's next N lines, decoded (waits up to 180 s
# for them; once a wait has come up short, of this watcher or another, later
# waits last a second, and what came is reported with WHAT)
sub events
{
	my ($w, $n, $what) = @_;
	my $deadline = time + ($failed ? 1 : 180);
	my @lines;
	while (1)
	{
		@lines = split /\n/, $w->{out};
		last if @lines >= $w->{seen} + $n || time > $deadline;
		$w->{h}->pump_nb;
		usleep(20_000);
	}
	my @got = map { decode_json($_) } @lines[ $w->{seen} .. $#lines ];
	if (@got < $n)
	{
		diag("watcher of $w->{key}: $what: got " . scalar(@got)
			  . " of $n lines; stderr: $w->{err}");
		$failed = 1;
	}
	@got = @got[ 0 .. $n - 1 ] if @got > $n;
	$w->{seen} += scalar(@got);
	return @got;
}

# quiet_for(W, SECS): no line from W for SECS seconds (an absence: it can
# only pass wrongly, never fail wrongly)
sub quiet_for
{
	my ($w, $secs) = @_;
	my $deadline = time + $secs;
	while (time < $deadline)
	{
		$w->{h}->pump_nb;
		usleep(50_000);
	}
	return scalar(split /\n/, $w->{out}) == $w->{seen};
}

# watch_stop(W): stops the watcher
sub watch_stop
{
	my ($w) = @_;
	$w->{h}->kill_kill(grace => 1);
	eval { $w->{h}->finish };
	@watchers = grep { $_ != $w } @watchers;
	return;
}

# watch_forget(W): W ended by itself (its harness finished): not stopped
sub watch_forget
{
	my ($w) = @_;
	@watchers = grep { $_ != $w } @watchers;
	return;
}

# watch_stop_all(): stops every watcher still running
sub watch_stop_all
{
	watch_stop($_) for @watchers;
	return;
}

1;
