#!/usr/bin/perl
# bench/handoff_driver.pl - drives the hand-off rounds of bench/handoff_bench.sh.
#
#   perl bench/handoff_driver.pl ROUNDS VARIANT...     (PGHOST/PGPORT/PGUSER set)
#
# Two psql processes, the "releaser" R and the "waiter" W, each one session.
# In every round, for each VARIANT in turn (interleaved):
#
#   R takes the lock;
#   W starts a blocking acquire that records clock_timestamp() right after it
#     returns (t1), in the same statement;
#   R waits until the server shows W waiting (dlock_waiters / pg_locks /
#     pg_stat_activity), then 10-30 ms more (a random phase for the poll loop);
#   R releases, recording clock_timestamp() just before the release (t0) and
#     right after the release function returned (t0b), in the same statement;
#   once W has returned, t0 and t1 go into table handoff (variant, round), and
#     W releases the lock again.
#
# Both timestamps are taken on the server clock; the hand-off latency t1 - t0
# is computed in SQL by bench/handoff_bench.sh. This script only sequences
# the two sessions; its own speed does not enter the measurement.
use strict;
use warnings;
use IPC::Run ();
use Time::HiRes qw(sleep time);

my ($rounds, @variants) = @ARGV;
die "usage: $0 ROUNDS VARIANT...\n" unless $rounds && @variants;

my $KEY = 'handoff';
my $ADV = 7001;

package Session {
    sub new {
        my ($class, $name) = @_;
        my $s = bless { name => $name, in => '', out => '', err => '' }, $class;
        $s->{timeout} = IPC::Run::timeout(60, name => "$name timeout");
        $s->{h} = IPC::Run::start(
            [ 'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=0', '-d', 'postgres' ],
            \$s->{in}, \$s->{out}, \$s->{err}, $s->{timeout});
        return $s;
    }
    # send SQL (psql input, may hold several lines and \gset) without waiting
    sub send {
        my ($s, $sql) = @_;
        die "$s->{name}: still busy\n" if $s->{busy};
        $s->{out} = '';
        $s->{err} = '';
        $s->{in} .= "$sql\n\\echo __DONE__\n";
        $s->{busy} = 1;
        $s->{h}->pump_nb;
    }
    # wait for the last send to finish; returns its output (without the marker)
    sub wait {
        my ($s, $secs) = @_;
        $s->{timeout}->start($secs // 30);
        $s->{h}->pump until $s->{out} =~ /__DONE__\n\z/;
        $s->{busy} = 0;
        (my $out = $s->{out}) =~ s/__DONE__\n\z//;
        if ($s->{err} =~ /ERROR|FATAL|PANIC|could not|connection/) {
            die "$s->{name}: psql reported: $s->{err}";
        }
        chomp $out;
        return $out;
    }
    sub run { my ($s, $sql, $secs) = @_; $s->send($sql); return $s->wait($secs); }
    sub close {
        my ($s) = @_;
        $s->{in} .= "\\q\n";
        eval { $s->{h}->finish; 1 } or $s->{h}->kill_kill;
    }
}

my $R = Session->new('releaser');
my $W = Session->new('waiter');
my $wpid = $W->run('SELECT pg_backend_pid();');
die "no waiter pid\n" unless $wpid =~ /^\d+$/;

sub expect {
    my ($what, $got, $want) = @_;
    die "$what: expected '$want', got '$got'\n" unless $got eq $want;
}

# poll R until the query returns 1 (W is seen waiting), up to 10 s
sub wait_until_waiting {
    my ($sql, $what) = @_;
    my $deadline = time + 10;
    while (1) {
        return if $R->run($sql) eq '1';
        die "the waiter never showed up as waiting ($what)\n" if time > $deadline;
        sleep 0.002;
    }
}

my %v = (
    dlock => {
        take    => "SELECT dlock_acquire('$KEY', 'releaser', '60 s') IS NOT NULL;",
        wait    => "SELECT dlock_acquire('$KEY', 'waiter', '60 s', '10 s') IS NOT NULL AS got, clock_timestamp() AS t1 \\gset",
        waiting => "SELECT count(*) FROM dlock_waiters WHERE pid = $wpid;",
        release => "SELECT clock_timestamp() AS t0, dlock_release('$KEY', 'releaser') AS rel, clock_timestamp() AS t0b \\gset",
        undo    => "SELECT dlock_release('$KEY', 'waiter');",
    },
    # dlock with dlock.handoff_yield off in the releasing session
    dlock_noyield => {
        take    => "SET dlock.handoff_yield = off;\nSELECT dlock_acquire('$KEY', 'releaser', '60 s') IS NOT NULL;",
        wait    => "SELECT dlock_acquire('$KEY', 'waiter', '60 s', '10 s') IS NOT NULL AS got, clock_timestamp() AS t1 \\gset",
        waiting => "SELECT count(*) FROM dlock_waiters WHERE pid = $wpid;",
        release => "SELECT clock_timestamp() AS t0, dlock_release('$KEY', 'releaser') AS rel, clock_timestamp() AS t0b \\gset\nRESET dlock.handoff_yield;",
        undo    => "SELECT dlock_release('$KEY', 'waiter');",
    },
    advisory => {
        take    => "SELECT pg_advisory_lock($ADV) IS NOT NULL;",
        wait    => "SELECT pg_advisory_lock($ADV) IS NOT NULL AS got, clock_timestamp() AS t1 \\gset",
        waiting => "SELECT count(*) FROM pg_locks WHERE pid = $wpid AND locktype = 'advisory' AND NOT granted;",
        release => "SELECT clock_timestamp() AS t0, pg_advisory_unlock($ADV) AS rel, clock_timestamp() AS t0b \\gset",
        undo    => "SELECT pg_advisory_unlock($ADV);",
    },
    poll => {
        take    => "SELECT got FROM bench_poll_try('$KEY', 'releaser');",
        wait    => "CALL bench_poll_acquire('$KEY', 'waiter', NULL, NULL, NULL) \\gset",
        waiting => "SELECT count(*) FROM pg_stat_activity WHERE pid = $wpid AND wait_event = 'PgSleep';",
        release => "SELECT t0, rel, t0b FROM bench_poll_release('$KEY', 'releaser') \\gset",
        undo    => "SELECT rel FROM bench_poll_release('$KEY', 'waiter');",
    },
);
for my $name (@variants) { die "unknown variant $name\n" unless $v{$name}; }

$| = 1;
my $t_start = time;
for my $round (1 .. $rounds) {
    for my $name (@variants) {
        my $q = $v{$name};
        expect("$name round $round: releaser takes the lock", $R->run($q->{take}), 't');
        $W->send($q->{wait});
        wait_until_waiting($q->{waiting}, $name);
        sleep 0.010 + rand(0.020);
        $R->run($q->{release});
        expect("$name round $round: waiter returns", $W->wait(30), '');
        expect("$name round $round: release result", $R->run('\echo :rel'), 't');
        $R->run("INSERT INTO handoff (variant, round, released_at, release_returned_at) VALUES ('$name', $round, :'t0', :'t0b');");
        $W->run("UPDATE handoff SET acquired_at = :'t1', got = :'got' WHERE variant = '$name' AND round = $round;");
        expect("$name round $round: waiter releases", $W->run($q->{undo}), 't');
    }
    printf STDERR "\r    round %d/%d (%.0f s)", $round, $rounds, time - $t_start
        if $round % 20 == 0 || $round == $rounds;
}
print STDERR "\n";
$R->close;
$W->close;
