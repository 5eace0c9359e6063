# Copyright: dlock contributors
#
# 090_readme.pl: every SQL example in README.md runs as written, in order, in
# one psql session on a fresh database with dlock installed and preloaded,
# and then, in the same session, every SQL example of docs/examples.md (the
# longer versions of the README's examples, which use its tables).
# (Examples in other languages are not run.)  A block that fails, or a
# README or docs/examples.md without SQL examples, fails this test.  Then the reference: every
# function, view and dlock.* setting of the installed extension is named in
# the README's Reference section, and every function and view has a comment.
# Then the version strings of dlock.control, META.json, debian/changelog and
# CHANGELOG.md agree, and META.json names the default version's full install
# script.  Then docs/design.md ("Where things are") names every file of
# src/, and every mutant of scripts/mutants.txt finds its text exactly once
# in the function it names (scripts/mutate.sh --check).  Last, the README's size, the number and names of the functions
# without a pinned search_path in README.md and docs/guarantees.md against
# src/no_search_path.h, and the files CONTRIBUTING.md names.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use DlockProcesses;    # every process started here is stopped on every exit path
use Test::More;
use JSON::PP;

# the ```sql blocks of a Markdown text
sub sql_blocks
{
	my ($text) = @_;
	my @found;
	while ($text =~ /^```sql\n(.*?)^```/msg)
	{
		push @found, $1;
	}
	return @found;
}

my $readme = slurp('README.md');
my @blocks = sql_blocks($readme);
cmp_ok(scalar(@blocks), '>=', 4, 'README.md has SQL examples');    # top, a lease, the fence, claims
my @doc_blocks = sql_blocks(slurp('docs/examples.md'));
cmp_ok(scalar(@doc_blocks), '>=', 3, 'docs/examples.md has SQL examples');

my $node = PostgreSQL::Test::Cluster->new('readme');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'dlock'");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE readme');

# the first block creates the extension itself; all blocks run in order in
# one session, so psql variables set by one (\gset) are seen by the next;
# docs/examples.md's follow the README's
my $script = join("\n", @blocks, @doc_blocks);
my ($ret, $stdout, $stderr) = $node->psql('readme', $script,
	extra_params => [ '-v', 'ON_ERROR_STOP=1' ]);
is($ret, 0, 'every SQL example of README.md and docs/examples.md runs without an error')
  or diag("stderr:\n$stderr\nstdout:\n$stdout");

# the examples leave what they say they leave
is( $node->safe_psql('readme',
		"SELECT written_by FROM report_state WHERE id = 1"),
	'host-7', 'the fenced write of the fencing example was made');
is( $node->safe_psql('readme',
		"SELECT string_agg(id::text, ',' ORDER BY id) FROM sms WHERE status = 1"),
	'1,2,3,4,5,6', 'the claiming examples (README and docs) completed rows 1 to 6');
is($node->safe_psql('readme', "SELECT count(*) FROM dlock_claims"),
	'0', 'no claim is left behind');

# the reference names everything the extension installs
my ($reference) = $readme =~ /^## Reference\n(.*?)^## /ms;
ok(defined $reference, 'README.md has a Reference section');
$reference //= '';
my @objects = split /\n/, $node->safe_psql(
	'readme', q{
	SELECT CASE WHEN d.classid = 'pg_proc'::regclass
	            THEN (SELECT proname FROM pg_proc WHERE oid = d.objid)
	            ELSE (SELECT relname FROM pg_class WHERE oid = d.objid) END
	       || ' ' || coalesce(obj_description(d.objid, d.classid::regclass::name), '')
	  FROM pg_depend d
	 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dlock')
	   AND (d.classid = 'pg_proc'::regclass
	        OR (d.classid = 'pg_class'::regclass
	            AND (SELECT relkind FROM pg_class WHERE oid = d.objid) = 'v'))
	 ORDER BY 1});
cmp_ok(scalar(@objects), '>=', 20, 'the extension has its functions and views');
for my $o (@objects)
{
	my ($name, $comment) = split / /, $o, 2;
	like($reference, qr/`\Q$name\E[(`]/, "the reference documents $name");
	isnt($comment // '', '', "$name has a COMMENT");
}
my @settings = split /\n/, $node->safe_psql('readme',
	"SELECT name FROM pg_settings WHERE name LIKE 'dlock.%' ORDER BY 1");
cmp_ok(scalar(@settings), '>=', 3, 'dlock has settings');
like($reference, qr/`\Q$_\E`/, "the reference documents the setting $_") for @settings;

# the version strings agree everywhere: dlock.control's default_version X.Y
# (what CREATE EXTENSION installed), META.json's version and its
# provides.dlock version X.Y.0, debian/changelog's latest entry X.Y.0, and
# CHANGELOG.md's first "## X.Y"
sub slurp
{
	my ($file) = @_;
	open(my $f, '<', $file) or die "$file: $!";
	local $/;
	return <$f>;
}
my ($control) = slurp('dlock.control') =~ /^default_version\s*=\s*'([^']+)'/m;
ok(defined $control, "dlock.control has a default_version");
$control //= '?';
is($node->safe_psql('readme',
		"SELECT extversion FROM pg_extension WHERE extname = 'dlock'"),
	$control, "CREATE EXTENSION installs dlock.control's default_version $control");
my $meta = JSON::PP->new->decode(slurp('META.json'));
is($meta->{version}, "$control.0", "META.json's version is $control.0");
is($meta->{provides}{dlock}{version}, "$control.0",
	"META.json's provides.dlock version is $control.0");
my ($deb) = slurp('debian/changelog') =~ /\Adlock \(([^)]+)\)/;
is($deb, "$control.0", "debian/changelog's latest entry is $control.0");
my ($changelog) = slurp('CHANGELOG.md') =~ /^## +([0-9][0-9.]*)/m;
is($changelog, $control, "CHANGELOG.md's latest section is ## $control");

# PGXN's provides.dlock.file: the script CREATE EXTENSION dlock runs, the
# default version's full install script, which must exist
is($meta->{provides}{dlock}{file}, "dlock--$control.sql",
	"META.json's provides.dlock file is dlock--$control.sql");
ok(-f "dlock--$control.sql", "the full install script dlock--$control.sql exists");

# docs/design.md names every source file (a new file of src/ gets its place
# in "Where things are"), as a whole name: claim_take.c is not named by
# dlock_claim.c
my $design = slurp('docs/design.md');
my @src = sort glob('src/*.c src/*.h src/*/*.c src/*/*.h');
cmp_ok(scalar(@src), '>=', 40, 'src/ has its files');
for my $f (@src)
{
	(my $base = $f) =~ s{.*/}{};
	like($design, qr/(?<![\w.])\Q$base\E(?![\w])/, "docs/design.md names $f");
}

# every mutant finds its text exactly once, in the function it names (or
# its file), and names tests that exist: code moved or changed with a
# mutant's text needs the mutant changed with it (scripts/mutants.txt)
my $mutants = `MUTANTS_LIST= bash scripts/mutate.sh --check 2>&1`;
is($?, 0, 'every mutant of scripts/mutants.txt finds its text in one place (scripts/mutate.sh --check)')
  or diag($mutants);

# README.md's size: it stays under 20 KB (a longer text goes to docs/)
cmp_ok(-s 'README.md', '<', 20480, 'README.md is under 20,480 bytes');

# the functions that run without a pinned search_path: the Security
# bullets of README.md and docs/guarantees.md give their number and name
# them as src/no_search_path.h lists them (issue 35)
my @unpinned = slurp('src/no_search_path.h') =~ /^DLOCK_NO_SEARCH_PATH\("(\w+)\(/mg;
cmp_ok(scalar(@unpinned), '>=', 1, 'src/no_search_path.h lists functions');
my %numbers;
@numbers{qw(one two three four five six seven eight nine ten eleven twelve
	  thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty)} = (1 .. 20);
my $want_names = join(' ', sort keys %{ { map { $_ => 1 } @unpinned } });
for my $doc ('README.md', 'docs/guarantees.md')
{
	my ($bullet) = slurp($doc) =~ /^- \*\*Security\.\*\*(.*?)(?=^- \*\*|^#|\z)/ms;
	my ($word, $list) = ($bullet // '') =~
	  /\b(\w+) that run no SQL and look\s+no name up[^(]*\(([^()]*)\)/;
	ok(defined $list, "$doc says which functions run without a pinned search_path");
	is($numbers{ lc($word // '') } // $word, scalar(@unpinned),
		"${doc}'s number of functions without a pinned search_path is src/no_search_path.h's");
	my %named;
	for my $n (($list // '') =~ /`((?:dlock)?_\w+)`(?!'s)/g)
	{
		$named{ $n =~ /^_/ ? "dlock$n" : $n } = 1;
	}
	is(join(' ', sort keys %named), $want_names,
		"$doc names the functions src/no_search_path.h lists");
}

# CONTRIBUTING.md names files that exist (a path, or a file's name in one
# of the tree's directories), and every test module t/*.pm
my $contributing = slurp('CONTRIBUTING.md');
my %mentioned;
for my $t ($contributing =~ /`([^`\s]+)`/g, $contributing =~ /\]\(([^)\s#]+)/g)
{
	next if $t =~ m{NAME|NNN|Name|X\.Y|W\.V|[*<>]|\.\.\.|^https?:|^/};
	next unless $t =~ m{/} || $t =~ /\.(?:c|h|sh|pl|pm|sql|md|spec|out|json|control|1)$/;
	(my $path = $t) =~ s{/$}{};
	$mentioned{$path} = 1;
}
cmp_ok(scalar(keys %mentioned), '>=', 20, 'CONTRIBUTING.md names files of the tree');
for my $f (sort keys %mentioned)
{
	ok( (grep { -e $_ } $f, map { "$_/$f" } glob('src/*/'), qw(src scripts t cli bench docs sql specs expected)),
		"CONTRIBUTING.md names $f, which exists");
}
for my $m (sort glob('t/*.pm'))
{
	ok(index($contributing, "`$m`") >= 0, "CONTRIBUTING.md names the test module $m");
}

# ... and every file of the kinds it lists, so that its lists stay whole:
# each family folder of src/ (as `src/NAME/`), each header and design note
# of a family, each SQL entry point file (`src/F/F_sql.c`), each script of
# scripts/ (by its name or its path)
my %ticked = map { $_ => 1 } $contributing =~ /`([^`\s]+)`/g;
my @folders = sort glob('src/*/');
cmp_ok(scalar(@folders), '>=', 7, 'src/ has its family folders');
ok($ticked{$_}, "CONTRIBUTING.md names the family folder $_") for @folders;
for my $f (sort glob('src/*/*_sql.c'), glob('src/*/README.md'))
{
	ok($ticked{$f}, "CONTRIBUTING.md names $f by its path");
}
for my $f (sort glob('src/*/*.h'), glob('scripts/*.sh'))
{
	(my $base = $f) =~ s{.*/}{};
	ok($ticked{$f} || $ticked{$base}, "CONTRIBUTING.md names $f");
}

# the TAP tests by area: each file of t/ in one row of the table of areas
# ("| `AREA` | what | `NNN_name.pl`, ... |"), no number used twice, and a
# test added after the rule (numbered above 102) named t/NNN_AREA_topic.pl
# with its row's area
my %area_of;
my %rows;
while ($contributing =~ /^\s*\| `(\w+)` \|[^|\n]*\| ((?:`\d{3}_\w+\.pl`(?:, )?)+) \|$/mg)
{
	my ($area, $list) = ($1, $2);
	$rows{$area} = 1;
	push @{ $area_of{$_} }, $area for $list =~ /`(\d{3}_\w+\.pl)`/g;
}
cmp_ok(scalar(keys %rows), '>=', 5, 'CONTRIBUTING.md has the table of TAP areas');
my %number;
for my $t (sort glob('t/*.pl'))
{
	(my $name = $t) =~ s{^t/}{};
	my @areas = @{ $area_of{$name} // [] };
	is(scalar(@areas), 1, "CONTRIBUTING.md's table of TAP areas has $t in one row");
	my ($n) = $name =~ /^(\d{3})_[a-z0-9_]+\.pl$/;
	ok(defined $n, "$t is named NNN_name.pl");
	next unless defined $n;
	push @{ $number{$n} }, $t;
	if ($n > 102 && @areas == 1)
	{
		like($name, qr/^\d{3}_\Q$areas[0]\E_/,
			"$t (after the naming rule) starts with its area, $areas[0]");
	}
}
for my $n (sort keys %number)
{
	is(scalar(@{ $number{$n} }), 1, "TAP number $n is used once")
	  or diag(join(' ', @{ $number{$n} }));
}
for my $name (sort keys %area_of)
{
	ok(-f "t/$name", "the TAP test t/$name CONTRIBUTING.md's table names exists");
}

# the version in development: while CHANGELOG.md's first section is
# unreleased, CONTRIBUTING.md says that dlock.control's version is the one
# in development
if (slurp('CHANGELOG.md') =~ /^## +\Q$control\E \(unreleased\)/m)
{
	like($contributing, qr/\b\Q$control\E is in development\b/,
		"CONTRIBUTING.md says that $control is in development");
}

$node->stop;
done_testing();
