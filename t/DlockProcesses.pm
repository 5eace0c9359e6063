# Copyright: dlock contributors
#
# t/DlockProcesses.pm: a TAP file that uses this module stops every process
# it starts, on every exit path:
#
#  - every IPC::Run harness (commands started with IPC::Run::start or run,
#    and the psql of every background_psql session) still running when the
#    file ends is stopped: SIGTERM, then SIGKILL after 2 s;
#  - every process stopped with DlockProcesses::pause (SIGSTOP) and not
#    resumed yet is continued (SIGCONT), before anything else is stopped;
#  - SIGINT, SIGTERM and SIGHUP (scripts/test.sh's time limit sends SIGTERM,
#    then SIGKILL 20 s later) end the file through exit, so that the END
#    blocks run: this module's, then PostgreSQL::Test::Cluster's, which stops
#    every node it started (immediate shutdown).
#
# Use it after PostgreSQL::Test::Cluster (END blocks run in the reverse
# order of their modules' loading: the commands are stopped before the
# servers they talk to):
#
#   use PostgreSQL::Test::Cluster;
#   use FindBin;
#   use lib $FindBin::RealBin;
#   use DlockProcesses;

package DlockProcesses;

use strict;
use warnings;

use IPC::Run;

my @harnesses;

# every harness IPC::Run starts (start, run and background_psql all go
# through IPC::Run::start) is remembered
{
	no warnings 'redefine';
	my $start = \&IPC::Run::start;
	*IPC::Run::start = sub {
		my $h = $start->(@_);
		push @harnesses, $h if ref $h;
		return $h;
	};
}

# processes paused with pause() and not resumed yet: pid => 1
my %paused;

# Stop process pid with SIGSTOP (a backend, say): it is continued by
# resume(), or when the file ends, whatever ends it.
sub pause
{
	my ($pid) = @_;
	$paused{$pid} = 1;    # first: an interrupt right after the signal still continues it
	kill('STOP', $pid) or die "could not stop process $pid: $!";
	return;
}

# Continue process pid stopped by pause().
sub resume
{
	my ($pid) = @_;
	kill('CONT', $pid);
	delete $paused{$pid};
	return;
}

# continue every paused process; returns how many there were
sub resume_all
{
	my $n = 0;
	for my $pid (keys %paused)
	{
		$n++;
		resume($pid);
	}
	return $n;
}

# stop the harnesses still running; returns how many there were
sub stop_all
{
	my %seen;
	my $n = 0;
	for my $h (reverse @harnesses)
	{
		next if $seen{"$h"}++;
		# children started and not reaped yet
		my $running = eval { $h->reap_nb; scalar $h->_running_kids } // 1;
		next unless $running;
		$n++;
		eval { $h->kill_kill(grace => 2); 1 } or eval { $h->signal('KILL') };
	}
	@harnesses = ();
	return $n;
}

for my $sig (qw(INT TERM HUP))
{
	$SIG{$sig} = sub {
		print STDERR "# stopped by SIG$sig: stopping its commands and servers\n";
		exit 1;
	};
}

END
{
	my $rc = $?;
	$SIG{$_} = 'IGNORE' for qw(INT TERM HUP);
	my $p = resume_all();
	print STDERR "# continued $p paused process(es) at the end\n" if $p;
	my $n = stop_all();
	print STDERR "# stopped $n command(s) still running at the end\n" if $n;
	$? = $rc;
}

1;
