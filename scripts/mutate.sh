#!/usr/bin/env bash
# scripts/mutate.sh - mutation testing: does the suite notice when a promise
# of the README is broken?
#
#   sudo bash scripts/mutate.sh              # every mutant, about 25 minutes (2 cores)
#   sudo bash scripts/mutate.sh no-fifo      # only the ones named
#   sudo bash scripts/mutate.sh --all-tests [NAME...]   # which tests kill each one
#   bash scripts/mutate.sh --check [NAME...]  # each one's text is in one place
#
# Each mutant of scripts/mutants.txt is one small deliberate breakage of one
# promise, made in a copy of the source (the repository is not touched),
# and the tests that guard that promise.  A mutant names the function its
# text is in, not the file (scripts/mutants.txt says how): the script
# finds the function's definition in the copy and changes the text there
# (the mutant is broken if the function is not found, or found twice, or
# if the text is not in it exactly once: update the list with the code),
# runs scripts/test.sh on the copy with DLOCK_ONLY set to those tests, and
# expects it to fail.  A mutant the tests let through "survived": the
# promise is not tested, and the exit status is non-zero.
# A mutant that does not build counts as a failure of this script, not as
# killed.  A mutant may take several lines (the same name on consecutive
# lines): all their changes are made in one copy, and it runs the tests of
# all of them.
#
# --all-tests (or MUTANTS_ALL_TESTS=1): each mutant runs the whole regress
# and isolation suite (every sql/*.sql and specs/*.spec, in the Makefile's
# order) plus the other tests its lines name (TAP files, `clients`), and the
# script reports which
# tests killed it: a mutant killed by a single test is flagged ("SINGLE":
# one edited expected file and the promise is unguarded).  A mutant killed
# by none survived, as above; a single killer is reported, not a failure.
# Cost: every mutant is a build and the whole regress and isolation suite,
# about 1.5 minutes on 2 cores (plus its TAP files): over an hour for the
# whole list, too slow for CI; run it on a few names, or before a release.
#
# Control run: before any mutant, the unmutated source runs the union of
# the selected mutants' tests.  If that fails (a flaky or renamed test, a
# time limit too short), a failure of a mutant would prove nothing: the
# script says "control run failed" and stops, with a non-zero status.
# MUTANTS_CONTROL=0 skips it: .ci/run sets it when scripts/test.sh has
# just passed the whole suite on the same source.  Every test a mutant
# names must exist in any case (checked first).
#
# PostgreSQL: with DLOCK_PG_BIN (another installation's bin directory) the
# builds are installed there, and the unmutated dlock is reinstalled there
# at the end.  Without it, the script copies this machine's PostgreSQL
# (the major version scripts/lib.sh picks) into its work directory and
# installs every build into that copy: the machine's own installation is
# never touched.
#
# Processes: each scripts/test.sh run is a session of its own.  Interrupted
# (SIGINT, SIGTERM, SIGHUP), the script stops that session's processes
# (SIGTERM, then SIGKILL after 30 s) and any PostgreSQL server left running
# in the run's build or test directories, then removes its copies.  After
# every run, a server left running there is stopped and reported.
#
# MUTANTS_BUDGET=SECONDS (CI: what is left of its 45 minutes) starts no
# mutant once that time is spent, and runs first the mutants whose
# functions are in files changed since the last release (below,
# "MUTANTS_BUDGET").
#
# MUTANTS_JOBS=N (CI: 2) runs the mutants in N lanes side by side, each
# with its own copy of PostgreSQL (not with DLOCK_PG_BIN).  Mutants share
# one build: each starts from the control run's and recompiles only the
# files it changed (DLOCK_BUILD_CACHE, scripts/lib.sh).
#
# --check: no test is run and no root is needed; every mutant (or the ones
# named) must find its text exactly once in its place, and every test the
# mutants name must exist.  Prints what is wrong, and fails if anything is;
# t/090_readme.pl runs it on every scripts/test.sh run.
#
# Run it before every release; add a mutant with every promise the README
# makes.  Environment: MUTANTS_KEEP=1 keeps the copies and logs;
# MUTANTS_REINSTALL=0 skips the reinstall into DLOCK_PG_BIN; MUTANTS_LIST=FILE
# runs the mutants of FILE instead of scripts/mutants.txt.  The directories
# of every scripts/test.sh run (build, test) are removed after it, whatever
# its outcome; its log stays in the work directory while the script runs.
# scripts/test-mutate.sh tests this script.
# The last line is `N passed, N failed` (killed; survived, broken, or a
# failed control run), which .ci/run reads.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

ALL_TESTS=${MUTANTS_ALL_TESTS:-0}
CHECK=0
args=()
for a in "$@"; do
    case "$a" in
        --all-tests) ALL_TESTS=1 ;;
        --check) CHECK=1 ;;
        -*) echo "scripts/mutate.sh: unknown option $a" >&2; exit 64 ;;
        *) args+=("$a") ;;
    esac
done
set -- ${args[@]+"${args[@]}"}

# ---- the list: scripts/mutants.txt (MUTANTS_LIST=FILE: FILE's instead) ----
# name @ where @ text to replace @ replacement @ tests, where naming the
# function the text is in (scripts/mutants.txt says how); a line that
# starts with # is a comment (scripts/test-mutate.sh tests this script with
# a few mutants of its own)
LIST=${MUTANTS_LIST:-$REPO/scripts/mutants.txt}
if ! MUTANTS=$(grep -v '^#' "$LIST" 2>/dev/null) || ! grep -q '@' <<<"$MUTANTS"; then
    echo "scripts/mutate.sh: $LIST has no mutant" >&2
    echo "0 passed, 1 failed"
    exit 1
fi

# PLACE_PL MODE ROOT, mutant lines on stdin: for each line, "ok<TAB>FILE"
# (the file its text is in) or "broken<TAB>WHY".  MODE where only finds the
# places in ROOT; apply makes the changes there, line after line, and stops
# at the first broken one (exit status 3).  The places are found as
# scripts/mutants.txt describes: a function is looked for in src/ and cli/
# (*.c, *.h), clients/python/src/ (*.py), clients/node/lib/ (*.js) and
# clients/go/ (*.go, not *_test.go) and clients/java/src/main/java/ (*.java).
PLACE_PL=$(cat <<'PERL'
use strict;
use warnings;
use File::Find;

my ($mode, $root) = @ARGV;
chdir $root or die "$root: $!\n";

my %text;    # path => contents (as changed so far)
sub slurp
{
	my ($f) = @_;
	return $text{$f} if exists $text{$f};
	open(my $h, '<', $f) or return $text{$f} = undef;
	local $/;
	return $text{$f} = <$h>;
}

# the tree's code, where a function named alone is looked for
my @code;
find(
	{
		no_chdir => 1,
		wanted => sub {
			$File::Find::prune = 1 if /\/(?:node_modules|__pycache__|\.git)$/;
			push @code, $File::Find::name
			  if -f $_ && m{^(?:src/.*\.[ch]|cli/.*\.[ch]|clients/python/src/.*\.py|clients/node/lib/.*\.js|clients/go/[^/]*(?<!_test)\.go|clients/java/src/main/java/.*\.java)$};
		}
	},
	grep { -d } qw(src cli clients/python/src clients/node/lib clients/go clients/java/src/main/java));
@code = sort @code;

sub lang
{
	my ($f) = @_;
	return $f =~ /\.[ch]$/ ? 'c' : $f =~ /\.py$/ ? 'py' : $f =~ /\.[cm]?js$/ ? 'js' : $f =~ /\.go$/ ? 'go' : $f =~ /\.java$/ ? 'java' : undef;
}

# the offset just past the parenthesis that closes the one at $i in $s
sub close_paren
{
	my ($s, $i) = @_;
	my $d = 0;
	for (my $j = $i; $j < length $s; $j++)
	{
		my $c = substr($s, $j, 1);
		$d++ if $c eq '(';
		$d-- if $c eq ')';
		return $j + 1 if $d == 0;
	}
	return undef;
}

# defs(LANG, TEXT, NAME): [start, end] of each definition of NAME in TEXT
#  C: a line "NAME(" at column 0 whose parameters are followed by a line
#     "{", to the next line "}" (PostgreSQL's style; static inline too)
#  Python: "def NAME(" or "class NAME" at any indentation, to the next line
#     indented no deeper
#  JavaScript: "function NAME(", "class NAME", or a method "NAME(...) {"
#     (async, static, get, set, *), to the next "}" at its indentation
#  Go: "func NAME(" or a method "func (RECV) NAME(" at column 0, to the
#     next line "}" (gofmt's style)
#  Java: "class NAME" (interface, enum, record) or a method or constructor
#     "NAME(...) {" after its modifiers and type (a throws clause too), to
#     the next "}" at its indentation; a class's name alone is the class,
#     Class.Class its constructor
sub defs
{
	my ($lang, $s, $name) = @_;
	my @r;
	if ($lang eq 'c')
	{
		while ($s =~ /^\Q$name\E\(/mg)
		{
			my $start = $-[0];
			my $p = close_paren($s, $+[0] - 1) // next;
			next unless substr($s, $p) =~ /\A[^;{\n]*\n\{\n/;
			my $e = index($s, "\n}", $p);
			next if $e < 0;
			push @r, [ $start, $e + 2 ];
		}
	}
	elsif ($lang eq 'py')
	{
		while ($s =~ /^([ \t]*)(?:async[ \t]+)?(?:def|class)[ \t]+\Q$name\E\b/mg)
		{
			my ($ind, $start) = (length $1, $-[0]);
			my $hdr = $+[0];
			if (substr($s, $hdr, 1) eq '(')
			{
				$hdr = close_paren($s, $hdr) // next;
			}
			my $e = index($s, "\n", $hdr);
			$e = length $s if $e < 0;
			my $end = $e;
			pos($s) = $e;
			while ($s =~ /\G\n([ \t]*)([^\n]*)/gc)
			{
				next if $2 eq '' || $2 =~ /^#/;
				last if length $1 <= $ind;
				$end = $+[0];
			}
			push @r, [ $start, $end ];
			pos($s) = $hdr;
		}
	}
	elsif ($lang eq 'js')
	{
		while ($s =~ /^([ \t]*)(?:export[ \t]+)?(?:(class)[ \t]+\Q$name\E\b|(?:(?:static|async|get|set)[ \t]+)*(?:function[ \t]*)?\*?[ \t]*\Q$name\E[ \t]*\()/mg)
		{
			my ($ind, $start, $hdr) = ($1, $-[0], $+[0]);
			if (!defined $2)
			{
				$hdr = close_paren($s, $hdr - 1) // next;
			}
			my $rest = substr($s, $hdr);
			next unless $rest =~ /\A[^\n;]*\{[ \t]*\n/ && $rest =~ /^\Q$ind\E\}/m;
			push @r, [ $start, $hdr + $+[0] ];
		}
	}
	elsif ($lang eq 'go')
	{
		while ($s =~ /^func[ \t]+(?:\([^)\n]*\)[ \t]*)?\Q$name\E\(/mg)
		{
			my $start = $-[0];
			my $e = index($s, "\n}", $+[0]);
			next if $e < 0;
			push @r, [ $start, $e + 2 ];
		}
	}
	elsif ($lang eq 'java')
	{
		my $mods = qr/(?:(?:public|protected|private|static|final|abstract|synchronized|native|default)[ \t]+)*/;
		while ($s =~ /^([ \t]*)$mods(?:(class|interface|enum|record)[ \t]+\Q$name\E\b|(?:<[^>\n]*>[ \t]*)?(?:[\w.]+(?:<[^;(){}=\n]*>)?(?:\[\])*[ \t]+)?\Q$name\E[ \t]*\()/mg)
		{
			my ($ind, $start, $hdr) = ($1, $-[0], $+[0]);
			if (!defined $2)
			{
				$hdr = close_paren($s, $hdr - 1) // next;
			}
			my $class = defined $2;
			my $rest = substr($s, $hdr);
			next unless $rest =~ /\A[^;{}]*\{[ \t]*\n/ && $rest =~ /^\Q$ind\E\}/m;
			# a class searched within itself (Class.Class): its constructor
			next if $class && $start == 0;
			push @r, [ $start, $hdr + $+[0], $class ];
		}
		# a class and its constructors share the name: the class
		my @classes = grep { $_->[2] } @r;
		@r = grep {
			my $m = $_;
			$m->[2] || !grep { $_->[0] <= $m->[0] && $m->[1] <= $_->[1] } @classes
		} @r;
		@r = map { [ $_->[0], $_->[1] ] } @r;
	}
	return @r;
}

# places(KEY): [file, start, end] for each place KEY names, or an error
sub places
{
	my ($key) = @_;
	return [ [ $key, 0, length slurp($key) ] ] if -f $key && defined slurp($key);
	my @files = @code;
	my $path;
	($path, $key) = ($1, $2) if $key =~ /^(.+?)::(.+)$/;
	if (defined $path)
	{
		return "no file $path" unless -f $path && defined slurp($path);
		return "$path is not C, Python, JavaScript, Go or Java: key the whole file" unless lang($path);
		@files = ($path);
	}
	my @parts = split /\./, $key, -1;
	return "\"$key\" is neither a file of the tree, PATH::FUNCTION nor a function name"
	  if grep { !/^[A-Za-z_\$][\w\$]*$/ } @parts;
	my @found;
	for my $f (@files)
	{
		my $l = lang($f);
		next if @parts > 1 && $l eq 'c';
		my $s = slurp($f);
		next if index($s, $parts[-1]) < 0;
		my @in = ([ 0, length $s ]);
		for my $p (@parts)
		{
			@in = map {
				my ($from, $to) = @$_;
				map { [ $from + $_->[0], $from + $_->[1] ] } defs($l, substr($s, $from, $to - $from), $p)
			} @in;
		}
		push @found, map { [ $f, @$_ ] } @in;
	}
	return "no function $key in " . ($path // "src/, cli/, clients/python/src/, clients/node/lib/, clients/go/ or clients/java/src/main/java/")
	  unless @found;
	return "$key is defined " . scalar(@found) . " times (" . join(', ', map { $_->[0] } @found)
	  . "): key it as PATH::$key" if @found > 1;
	return \@found;
}

sub unescape
{
	my ($t) = @_;
	$t =~ s/\\([\\tn])/$1 eq 't' ? "\t" : $1 eq 'n' ? "\n" : "\\"/ge;
	return $t;
}

my $broken = 0;
while (my $line = <STDIN>)
{
	chomp $line;
	my (undef, $key, $old, $new) = split /@/, $line, -1;
	next if $line eq '' || $line =~ /^#/;
	$old = unescape($old // '');
	$new = unescape($new // '');
	my $p = places($key);
	if (!ref $p)
	{
		print "broken\t$p\n";
		$broken = 1;
		last if $mode eq 'apply';
		next;
	}
	my ($f, $from, $to) = @{ $p->[0] };
	my $s = slurp($f);
	my $region = substr($s, $from, $to - $from);
	my $n = () = $region =~ /\Q$old\E/g;
	if ($n != 1)
	{
		my $where = $key eq $f ? $f : "$key ($f)";
		print "broken\tthe text to change is in $where $n times, not once\n";
		$broken = 1;
		last if $mode eq 'apply';
		next;
	}
	if ($mode eq 'apply')
	{
		$region =~ s/\Q$old\E/$new/;
		substr($s, $from, $to - $from) = $region;
		$text{$f} = $s;
		open(my $h, '>', $f) or die "$f: $!\n";
		print $h $s;
		close $h or die "$f: $!\n";
	}
	print "ok\t$f\n";
}
exit($broken ? 3 : 0);
PERL
)

# missing_tests TEST...: the tests named that do not exist (a misspelt one
# fails the run of every mutant that names it, which would count as
# killing them)
missing_tests() {
    local t f missing=
    for t in "$@"; do
        case "$t" in
            regress:*) f=sql/${t#regress:}.sql ;;
            isolation:*) f=specs/${t#isolation:}.spec ;;
            tap:*) f=t/${t#tap:}.pl ;;
            clients|clients:python|clients:node|clients:go|clients:java) f=scripts/test-clients.sh ;;   # the clients' tests
            clients:python:*)   # a test function whose name holds NAME (pytest -k)
                f=scripts/test-clients.sh
                grep -qE "^(async )?def [A-Za-z0-9_]*${t#clients:python:}" "$REPO"/clients/python/tests/*.py || f= ;;
            clients:node:*)     # a test whose title matches PATTERN (node --test-name-pattern)
                f=scripts/test-clients.sh
                sed -nE "s/^ *test\('(.*)', async.*/\1/p" "$REPO"/clients/node/test/*.js | sed "s/\\\\'/'/g" |
                    grep -qE -- "${t#clients:node:}" || f= ;;
            clients:go:*)       # a test function whose name matches NAME (go test -run)
                f=scripts/test-clients.sh
                sed -nE 's/^func (Test[A-Za-z0-9_]*)\(t \*testing\.T\).*/\1/p' "$REPO"/clients/go/*_test.go |
                    grep -qE -- "${t#clients:go:}" || f= ;;
            clients:java:*)     # a JUnit @Test method whose name matches NAME
                f=scripts/test-clients.sh
                grep -h -A1 '@Test' "$REPO"/clients/java/src/test/java/dlock/*.java |
                    sed -nE 's/^ *void ([A-Za-z0-9_]+)\(\).*/\1/p' | grep -qE -- "${t#clients:java:}" || f= ;;
            *) f= ;;
        esac
        [ -n "$f" ] && [ -f "$REPO/$f" ] || missing+="$t "
    done
    echo "${missing% }"
}

# ---- --check: every mutant (or the ones named) in one place, its tests there ----
if [ "$CHECK" = 1 ]; then
    bad=0
    for want in "$@"; do
        grep -q "^$want@" <<<"$MUTANTS" || { echo "BROKEN: $want: no such mutant in $LIST"; bad=1; }
    done
    sel=$(while IFS= read -r line; do
        name=${line%%@*}
        [ -n "$name" ] || continue
        [ $# -eq 0 ] || [[ " $* " == *" $name "* ]] || continue
        printf '%s\n' "$line"
    done <<<"$MUTANTS")
    mapfile -t where < <(perl -e "$PLACE_PL" where "$REPO" <<<"$sel")
    k=0
    tests=()
    declare -A seen=()
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        w=${where[$k]:-broken$'\t'(no answer)}
        k=$((k + 1))
        [ "${w%%$'\t'*}" = ok ] || { echo "BROKEN: ${line%%@*}: ${w#*$'\t'}"; bad=1; }
        seen[${line%%@*}]=1
        IFS=@ read -r _ _ _ _ t <<<"$line"
        tests+=($t)
    done <<<"$sel"
    missing=$(missing_tests $(printf '%s\n' ${tests[@]+"${tests[@]}"} | sort -u))
    [ -z "$missing" ] || { echo "BROKEN: the mutants name tests that do not exist: $missing"; bad=1; }
    if [ $bad = 0 ]; then
        echo "==> ${#seen[@]} mutant(s), $k line(s) of $LIST: each text found once in its place; their tests exist"
    else
        echo "==> ${#seen[@]} mutant(s), $k line(s) of $LIST: not all in one place (above); update the list with the code"
    fi
    exit $bad
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/mutate.sh must run as root (it runs scripts/test.sh)." >&2
    exit 1
fi

WORK=$(mktemp -d /tmp/dlock-mutate.XXXXXX)
chmod 755 "$WORK"
RUN_PID=
RUN_LOG=

# session_pids SID: the processes of session SID
session_pids() {
    ps -e -o pid=,sid= | awk -v s="$1" '$2 == s { printf "%s ", $1 }'
}
# run_dirs LOG: the build and test directories a scripts/test.sh run named
run_dirs() {
    [ -f "$1" ] || return 0
    sed -nE 's/^==> building (dlock )?in ([^ ]+) .*/\2/p; s/^==> test cluster: PGHOST=(\/tmp\/dlock-test\.[^/ ]+).*/\1/p' "$1" |
        grep -E '^/tmp/dlock-(build|test)\.' || true
}
# stop_servers LOG: stops the PostgreSQL servers (and whatever else) still
# running in the directories of LOG's run (their postmasters' working
# directories are their data directories, there even once deleted);
# prints how many processes it found
stop_servers() {
    local dirs d p cwd found=() i
    dirs=$(run_dirs "$1")
    [ -n "$dirs" ] || { echo 0; return 0; }
    for p in /proc/[0-9]*; do
        cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
        for d in $dirs; do
            case "$cwd" in "$d"/*|"$d") found+=("${p#/proc/}") ;; esac
        done
    done
    echo ${#found[@]}
    [ ${#found[@]} -gt 0 ] || return 0
    kill -QUIT "${found[@]}" 2>/dev/null     # a postmaster's immediate shutdown
    for i in $(seq 1 20); do
        kill -0 "${found[@]}" 2>/dev/null || return 0
        sleep 0.5
    done
    kill -KILL "${found[@]}" 2>/dev/null
    return 0
}
# stop_run: stops the running scripts/test.sh run, all of it
stop_run() {
    local pids i n
    [ -n "$RUN_PID" ] || return 0
    pids=$(session_pids "$RUN_PID")
    if [ -n "$pids" ]; then
        echo "==> stopping the test run (session $RUN_PID)"
        kill -TERM $pids 2>/dev/null
        for i in $(seq 1 30); do     # its EXIT traps and TAP END blocks stop their servers
            pids=$(session_pids "$RUN_PID")
            [ -n "$pids" ] || break
            sleep 1
        done
        [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
    fi
    n=$(stop_servers "$RUN_LOG")
    [ "$n" -eq 0 ] || echo "==> stopped $n process(es) left running in its directories"
    rm -rf $(run_dirs "$RUN_LOG")
    RUN_PID=
}
interrupted() {
    trap - INT TERM HUP
    echo
    echo "==> interrupted"
    stop_run
    rm -rf "$WORK"
    if [ "${reinstall:-0}" = 1 ]; then
        echo "==> $DLOCK_PG_BIN may hold a mutant's build now: run scripts/test.sh (or make install) to put dlock back"
    fi
    exit 130
}
trap interrupted INT TERM HUP
killed=0
declare -A killers=()   # --all-tests: the tests that killed each mutant
survived=()
broken=()
total=0
declare -A took=()      # seconds each mutant's run took

finish() {      # finish PASSED FAILED: summary, clean up, last line, exit status
    echo
    echo "==================== dlock mutation testing ===================="
    echo "  $total mutant(s): $killed killed, ${#survived[@]} survived, ${#broken[@]} broken"
    if [ "$ALL_TESTS" = 1 ] && [ ${#killers[@]} -gt 0 ]; then
        local m n single=0
        echo "  tests that killed each mutant (whole regress and isolation suite, and its TAP files):"
        for m in ${names[@]+"${names[@]}"}; do
            [ -n "${killers[$m]:-}" ] || continue
            n=$(wc -w <<<"${killers[$m]}")
            if [ "$n" -eq 1 ]; then
                single=$((single + 1))
                printf '    %-32s %2d  %s   <- SINGLE\n' "$m" "$n" "${killers[$m]}"
            else
                printf '    %-32s %2d  %s\n' "$m" "$n" "${killers[$m]}"
            fi
        done
        echo "  $single mutant(s) killed by a single test"
    fi
    if [ ${#took[@]} -gt 0 ]; then
        echo "  slowest mutants (seconds of their test runs; $(( $(printf '%s+' "${took[@]}")0 )) s in all):"
        for m in "${!took[@]}"; do echo "${took[$m]} $m"; done | sort -rn | head -n 8 |
            while read -r s m; do printf '    %5d s  %s\n' "$s" "$m"; done
    fi
    if [ ${#notrun[@]} -gt 0 ]; then
        echo "  NOT RUN (MUTANTS_BUDGET spent): ${#notrun[@]} mutant(s): ${notrun[*]}"
    fi
    for m in ${survived[@]+"${survived[@]}"}; do echo "  SURVIVED: $m"; done
    for m in ${broken[@]+"${broken[@]}"}; do echo "  BROKEN: $m"; done
    [ -n "${control_failed:-}" ] && echo "  FAIL: control run failed (log kept: $control_log); no mutant was run"
    rm -rf "$WORK/pg"
    if [ "${MUTANTS_KEEP:-0}" = 1 ]; then
        echo "  copies and logs kept in $WORK"
    elif [ -z "${control_failed:-}" ]; then
        rm -rf "$WORK"
    fi
    echo "$1 passed, $2 failed"
    [ "$2" -eq 0 ] && { [ "$1" -gt 0 ] || [ ${#notrun[@]} -gt 0 ]; }
    exit $?
}

# ---- the selected mutants: names in list order, each with its lines ----
names=()
declare -A lines_of=()
for want in "$@"; do
    if ! grep -q "^$want@" <<<"$MUTANTS"; then
        echo "==> $want: no such mutant in $LIST"
        broken+=("$want (no such mutant)")
    fi
done
n=0
while IFS= read -r line; do
    n=$((n + 1))
    case "$line" in '#'*) continue ;; esac     # a comment line (a topic's heading)
    name=${line%%@*}
    [ -n "$name" ] || continue
    if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
        continue
    fi
    if [ -z "${lines_of[$name]:-}" ]; then
        names+=("$name")
    fi
    lines_of[$name]+="$n "
done <<<"$MUTANTS"

line_no() { sed -n "${1}p" <<<"$MUTANTS"; }

# ---- MUTANTS_BUDGET=SECONDS: as many as fit, the changed code's first ----
# CI gives the mutants what is left of its time (.ci/run).  With a budget,
# the mutants whose texts are in files changed since MUTANTS_SINCE
# (default: the newest release tag, or without tags the commit before
# dlock.control last changed; a mutant's file is the one its function is
# in now, found as for its run) run first, then the others from a place that moves with HEAD's
# hash, so that successive runs reach all of them; no mutant is started
# once the budget is spent, and those left are named at the end (not a
# failure: run them by name).  In a lane (below) the order given is kept.
if [ -n "${MUTANTS_LANE:-}" ]; then
    [ ${#broken[@]} -eq 0 ] && [ $# -gt 0 ] && names=("$@")
elif [ -n "${MUTANTS_BUDGET:-}" ] && [ ${#names[@]} -gt 1 ]; then
    since=${MUTANTS_SINCE:-$(git -C "$REPO" describe --tags --abbrev=0 --match 'v*' 2>/dev/null)}
    if [ -z "$since" ]; then
        since=$(git -C "$REPO" log -1 --format=%H -- dlock.control 2>/dev/null)
        [ -z "$since" ] || since=$since^
    fi
    changed=" $(git -C "$REPO" diff --name-only "$since" 2>/dev/null | tr '\n' ' ') "
    # the file of each selected line (none for a broken one: its run says why)
    sel=()
    for name in "${names[@]}"; do sel+=(${lines_of[$name]}); done
    mapfile -t where < <(for i in "${sel[@]}"; do line_no "$i"; done | perl -e "$PLACE_PL" where "$REPO")
    declare -A file_of=()
    for k in "${!sel[@]}"; do
        w=${where[$k]:-}
        [ "${w%%$'\t'*}" != ok ] || file_of[${sel[$k]}]=${w#*$'\t'}
    done
    first=()
    rest=()
    for name in "${names[@]}"; do
        hit=0
        for i in ${lines_of[$name]}; do
            [ -n "${file_of[$i]:-}" ] && [[ "$changed" == *" ${file_of[$i]} "* ]] && hit=1
        done
        if [ $hit = 1 ]; then first+=("$name"); else rest+=("$name"); fi
    done
    if [ ${#rest[@]} -gt 0 ]; then
        r=$(( $(printf '%d' "0x$(git -C "$REPO" rev-parse --short=7 HEAD 2>/dev/null || echo 0)") % ${#rest[@]} ))
        rest=("${rest[@]:r}" "${rest[@]:0:r}")
    fi
    names=(${first[@]+"${first[@]}"} ${rest[@]+"${rest[@]}"})
    echo "==> budget ${MUTANTS_BUDGET} s: ${#first[@]} mutant(s) in files changed since ${since:-?} first, then ${#rest[@]} more"
    MUTANTS_DEADLINE=$(( $(date +%s) + MUTANTS_BUDGET ))
    export MUTANTS_DEADLINE
fi
notrun=()

# ---- MUTANTS_JOBS=N: N lanes side by side (CI: 2, on 2 cores) ----
# Each lane is this script on every Nth mutant, with its own copy of
# PostgreSQL, build cache and work directory; most of a mutant's run waits
# on sleeps, locks and fsyncs, so two lanes take about half the time.  Not
# with DLOCK_PG_BIN (one installation cannot hold two builds at once).
JOBS=${MUTANTS_JOBS:-1}
if [ "$JOBS" -gt 1 ] && [ -z "${DLOCK_PG_BIN:-}" ] && [ -z "${MUTANTS_LANE:-}" ] &&
        [ ${#names[@]} -gt 1 ] && [ ${#broken[@]} -eq 0 ]; then
    echo "==> ${#names[@]} mutants in $JOBS lanes (MUTANTS_JOBS)"
    lane_pids=()
    for ((k = 0; k < JOBS; k++)); do
        lane=()
        for ((j = k; j < ${#names[@]}; j += JOBS)); do lane+=("${names[$j]}"); done
        flags=()
        [ "$ALL_TESTS" = 1 ] && flags+=(--all-tests)
        MUTANTS_LANE=$((k + 1)) MUTANTS_JOBS=1 \
            bash "$REPO/scripts/mutate.sh" ${flags[@]+"${flags[@]}"} "${lane[@]}" >"$WORK/lane$((k + 1)).log" 2>&1 &
        lane_pids+=($!)
    done
    stop_lanes() {
        trap - INT TERM HUP
        kill -TERM "${lane_pids[@]}" 2>/dev/null
        wait
        rm -rf "$WORK"
        exit 130
    }
    trap stop_lanes INT TERM HUP
    lp=0
    lf=0
    for ((k = 0; k < JOBS; k++)); do
        wait "${lane_pids[$k]}"
        echo "==================== lane $((k + 1)) of $JOBS ===================="
        cat "$WORK/lane$((k + 1)).log"
        last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$WORK/lane$((k + 1)).log" | tail -n 1)
        p=$(sed -nE 's/^([0-9]+) passed.*/\1/p' <<<"$last")
        f=$(sed -nE 's/^[0-9]+ passed, ([0-9]+) failed$/\1/p' <<<"$last")
        lp=$((lp + ${p:-0}))
        lf=$((lf + ${f:-1}))
    done
    rm -rf "$WORK"
    echo
    echo "==================== dlock mutation testing: $JOBS lanes ===================="
    echo "$lp passed, $lf failed"
    [ "$lf" -eq 0 ] && [ "$lp" -gt 0 ]
    exit $?
fi
# tests_of NAME: the union of the tests of NAME's lines; with --all-tests,
# the whole regress and isolation suite and the other tests of NAME's lines
# (TAP files, clients)
tests_of() {
    local i out=" " t
    if [ "$ALL_TESTS" = 1 ]; then
        out=" $SUITE "
    fi
    for i in ${lines_of[$1]}; do
        for t in $(line_no "$i" | cut -d@ -f5); do
            # (the suite holds every regress and isolation test already;
            # tap: and clients entries are run as named)
            [ "$ALL_TESTS" = 1 ] && case "$t" in regress:*|isolation:*) true ;; *) false ;; esac && continue
            [[ "$out" == *" $t "* ]] || out+="$t "
        done
    done
    out=${out# }
    echo "${out% }"
}
# killers_of LOG: the tests a scripts/test.sh run reported failed, as
# kind:name (tap:NNN_name, clients); a suite that failed as a whole (time
# limit, no result) as kind:(how).  The lines read are scripts/test.sh's
# summary ("  FAIL: [regress] 2 test(s) failed: a b", "  FAIL: [tap]
# t/015_wake.pl: 1 failure(s)", "  FAIL: [tap] t/015_wake.pl timed out ...",
# "  FAIL: [clients] 1 failure(s) ...", "  FAIL: [isolation] timed out ...").
killers_of() {
    local kind rest t out=" "
    while read -r kind rest; do
        for t in $rest; do
            [[ "$out" == *" $kind:$t "* ]] || out+="$kind:$t "
        done
    done < <(sed -nE 's/^  FAIL: \[(regress|isolation)\] [0-9]+ test\(s\) failed: (.*)$/\1 \2/p' "$1")
    for t in $(sed -nE 's/^  FAIL: \[tap\] t\/([^ :]+)\.pl[ :].*/\1/p' "$1"); do
        [[ "$out" == *" tap:$t "* ]] || out+="tap:$t "
    done
    grep -qE '^  FAIL: \[clients\]' "$1" && out+="clients "
    while read -r kind rest; do
        [ -n "$kind" ] && out+="$kind:($rest) "
    done < <(sed -nE 's/^  FAIL: \[(regress|isolation)\] (timed out|aborted|ran no test).*/\1 \2/p' "$1" |
             sed 's/ /_/2g')
    out=${out# }
    echo "${out% }"
}

# ---- PostgreSQL to install into ----
if [ -z "${DLOCK_PG_BIN:-}" ]; then
    # shellcheck source=scripts/lib.sh
    major=$(. "$REPO/scripts/lib.sh" >/dev/null 2>&1 && dlock_ensure_packages >&2 && echo "$DLOCK_PG_MAJOR")
    orig=/usr/lib/postgresql/$major
    if [ -z "$major" ] || [ ! -x "$orig/bin/pg_config" ]; then
        echo "==> no PostgreSQL installation found to copy (major version '${major}')" >&2
        broken+=("(no PostgreSQL to copy)")
        finish 0 1
    fi
    libdir=$("$orig/bin/pg_config" --libdir)          # e.g. /usr/lib/x86_64-linux-gnu
    includedir=$("$orig/bin/pg_config" --includedir)  # e.g. /usr/include/postgresql
    P=$WORK/pg
    echo "==> copying PostgreSQL $major to $P (builds are installed there, not into $orig)"
    if ! { mkdir -p "$P/lib/postgresql" "$P/share/postgresql" "$P/include" &&
            cp -a "$orig" "$P/lib/postgresql/" &&
            cp -a "/usr/share/postgresql/$major" "$P/share/postgresql/" &&
            ln -sfn "$includedir" "$P/include/$(basename "$includedir")" &&
            ln -sfn "$libdir" "$P/lib/$(basename "$libdir")"; }; then
        broken+=("(could not copy PostgreSQL $major to $P)")
        finish 0 1
    fi
    export DLOCK_PG_BIN=$P/lib/postgresql/$major/bin
    reinstall=0
else
    export DLOCK_PG_BIN
    reinstall=${MUTANTS_REINSTALL:-1}
fi
echo "==> PostgreSQL: $DLOCK_PG_BIN; work directory $WORK"

# A mutant's run stops at its first failing test (DLOCK_FAIL_FAST): one is
# enough to kill it.  Not the control run (every test must pass) nor
# --all-tests (which reports every test that kills).
fail_fast=0
# run_tests SRC TESTS LOG: scripts/test.sh on SRC with DLOCK_ONLY=TESTS, in a
# session of its own (setsid: its process id is the session's id), waited
# for in the background so that a signal reaches the trap at once
run_tests() {
    local rc n
    RUN_LOG=$3
    DLOCK_SRC=$1 DLOCK_ONLY=$2 DLOCK_IGNORE_WARNINGS=1 DLOCK_MAKE_FLAGS=with_llvm=no \
        DLOCK_FAIL_FAST=$fail_fast \
        DLOCK_BUILD_CACHE="$WORK/build-cache" \
        setsid bash "$REPO/scripts/test.sh" >"$3" 2>&1 </dev/null &
    RUN_PID=$!
    wait "$RUN_PID"
    rc=$?
    # scripts/test.sh's own processes are gone; servers its tests started
    # and did not stop are not
    n=$(stop_servers "$3")
    if [ "$n" -gt 0 ]; then
        echo "    NOTE: $n process(es) were left running in the run's directories; stopped"
        echo "LEFT RUNNING: $n process(es) (mutate.sh)" >>"$3"
    fi
    RUN_PID=
    return $rc
}
# forget_kept LOG: scripts/test.sh keeps its build and test directories in
# /tmp when a test fails, as it does for every killed mutant (gigabytes
# over a run), and a failed build its build directory: remove those of
# LOG's run, whatever its outcome (killed, survived, broken, the control
# run), unless MUTANTS_KEEP=1; the log itself stays in the work directory
forget_kept() {
    local d
    [ "${MUTANTS_KEEP:-0}" = 1 ] && return 0
    for d in $(sed -nE 's/^  work directories kept for inspection: //p' "$1") $(run_dirs "$1"); do
        case "$d" in
            /tmp/dlock-build.*|/tmp/dlock-test.*) rm -rf "$d" ;;
        esac
    done
}
# vanished LOG: a failed run's build or test directory is gone (scripts/test.sh
# keeps them when a test fails): something else removed it during the run
vanished() {
    local d
    grep -q 'getcwd() failed' "$1" && return 0
    for d in $(run_dirs "$1"); do
        [ -d "$d" ] || return 0
    done
    return 1
}
copy_source() { # copy_source DIR: the tracked files, as they are in the work tree
    mkdir -p "$1"
    (cd "$REPO" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$1"
}

# ---- --all-tests: every regress and isolation test, in the Makefile's order ----
SUITE=
if [ "$ALL_TESTS" = 1 ]; then
    cat >"$WORK/print.mk" <<'MK'
dlock-print-%:
	@echo '$($*)'
MK
    copy_source "$WORK/suite"
    for v in REGRESS ISOLATION; do
        kind=$( [ $v = REGRESS ] && echo regress || echo isolation )
        for t in $(cd "$WORK/suite" && make --no-print-directory -s -f Makefile -f "$WORK/print.mk" \
                PG_CONFIG="$DLOCK_PG_BIN/pg_config" "dlock-print-$v" 2>/dev/null | tail -n 1); do
            SUITE+="$kind:$t "
        done
    done
    rm -rf "$WORK/suite"
    SUITE=${SUITE% }
    if [ -z "$SUITE" ]; then
        broken+=("(could not list the regress and isolation tests)")
        finish 0 1
    fi
    # a mutant that makes steps block or hang would run the suites into
    # their time limits, which names no test: generous ones by default
    export DLOCK_TIMEOUT_REGRESS=${DLOCK_TIMEOUT_REGRESS:-600}
    export DLOCK_TIMEOUT_ISOLATION=${DLOCK_TIMEOUT_ISOLATION:-900}
    echo "==> --all-tests: $(wc -w <<<"$SUITE") regress and isolation tests for every mutant"
fi

# ---- control run: the unmutated source with every selected test ----
all_tests=" "
for name in ${names[@]+"${names[@]}"}; do
    for t in $(tests_of "$name"); do
        [[ "$all_tests" == *" $t "* ]] || all_tests+="$t "
    done
done
all_tests=${all_tests# }
all_tests=${all_tests% }
# every test a mutant names must exist (missing_tests)
missing=$(missing_tests $all_tests)
if [ -n "$missing" ]; then
    echo "==> the mutants name tests that do not exist: $missing"
    broken+=("(tests named by mutants do not exist: $missing)")
    finish 0 1
fi
if [ ${#names[@]} -gt 0 ] && [ "${MUTANTS_CONTROL:-1}" = 0 ]; then
    # .ci/run: scripts/test.sh has just passed every test on this source
    echo "==> control run skipped (MUTANTS_CONTROL=0: the whole suite passed on this source just before)"
elif [ ${#names[@]} -gt 0 ]; then
    echo "==> control run (unmutated): $all_tests"
    copy_source "$WORK/control"
    control_log=$WORK/control.log
    if ! run_tests "$WORK/control" "$all_tests" "$control_log"; then
        control_failed=1
        forget_kept "$control_log"
        echo "    control run failed: $(grep -E '^  FAIL' "$control_log" | head -n 3 | sed 's/^ *//' | tr '\n' ' ')"
        echo "    (log $control_log)"
        rm -rf "$WORK/control"
        finish 0 1
    fi
    echo "    passed: $(tail -n 1 "$control_log")"
    rm -rf "$WORK/control"
fi

# ---- the mutants ----
[ "$ALL_TESTS" = 1 ] || fail_fast=1
for name in ${names[@]+"${names[@]}"}; do
    if [ -n "${MUTANTS_DEADLINE:-}" ] && [ "$(date +%s)" -ge "$MUTANTS_DEADLINE" ]; then
        notrun+=("$name")
        continue
    fi
    total=$((total + 1))
    copy=$WORK/$name
    copy_source "$copy"
    tests=$(tests_of "$name")
    # each line's change in the copy, in the place its function is now
    out=$(for i in ${lines_of[$name]}; do line_no "$i"; done | perl -e "$PLACE_PL" apply "$copy")
    why=$(sed -n 's/^broken\t//p' <<<"$out")
    if [ -n "$why" ] || ! grep -q '^ok' <<<"$out"; then
        why=${why:-its changes could not be made}
        echo "==> $name: $why: update $(basename "$LIST")"
        broken+=("$name ($why)")
        [ "${MUTANTS_KEEP:-0}" = 1 ] || rm -rf "$copy"
        continue
    fi
    files=$(sed -n 's/^ok\t//p' <<<"$out" | awk '!seen[$0]++' | tr '\n' ' ')
    if [ "$ALL_TESTS" = 1 ]; then
        echo "==> $name: ${files% } changed; running every regress and isolation test${tests#"$SUITE"}"
    else
        echo "==> $name: ${files% } changed; running $tests"
    fi
    t0=$SECONDS
    run_tests "$copy" "$tests" "$WORK/$name.log"
    rc=$?
    took[$name]=$((SECONDS - t0))
    if [ $rc -ne 0 ] && vanished "$WORK/$name.log"; then
        echo "    a work directory of the run was removed under it (by something else); run it again (log $WORK/$name.log)"
        broken+=("$name (a work directory was removed during its run)")
    elif grep -q 'FAIL: build or make install' "$WORK/$name.log"; then
        echo "    did not build (log $WORK/$name.log)"
        broken+=("$name (does not build)")
    elif [ $rc -ne 0 ] && [ "$ALL_TESTS" = 1 ] && [ -z "$(killers_of "$WORK/$name.log")" ]; then
        echo "    the run failed, but no test did (log $WORK/$name.log)"
        broken+=("$name (the run failed, but no test did: see its log)")
    elif [ $rc -ne 0 ]; then
        echo "    killed in ${took[$name]} s: $(grep -E '^  FAIL' "$WORK/$name.log" | head -n 2 | sed 's/^ *//' | tr '\n' ' ')"
        killed=$((killed + 1))
        if [ "$ALL_TESTS" = 1 ]; then
            killers[$name]=$(killers_of "$WORK/$name.log")
            echo "    killed by $(wc -w <<<"${killers[$name]}"): ${killers[$name]}"
        fi
    else
        echo "    SURVIVED: $tests passed with it"
        survived+=("$name")
    fi
    forget_kept "$WORK/$name.log"
    [ "${MUTANTS_KEEP:-0}" = 1 ] || rm -rf "$copy"
done

# put the real build back into the installation given by DLOCK_PG_BIN (a
# private copy made above is simply removed)
if [ "$reinstall" = 1 ]; then
    (. "$REPO/scripts/lib.sh" && dlock_build_install "$REPO" >/dev/null 2>&1 &&
        rm -rf "$DLOCK_BUILD_DIR") || echo "==> could not reinstall the unmutated dlock" >&2
fi

[ "$total" -gt 0 ] || [ ${#notrun[@]} -gt 0 ] || broken+=("(no mutant selected)")
finish "$killed" $(( ${#survived[@]} + ${#broken[@]} ))
