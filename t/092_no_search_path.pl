# Copyright: dlock contributors
#
# 092_no_search_path.pl: the dlock functions that run without a pinned
# search_path (src/no_search_path.h) run no SQL and resolve no name through
# search_path, checked in the installed dlock.so: from each listed C symbol,
# every function reachable by a direct call or tail call (objdump -d) is
# looked at, and none may be SPI, the parser, planner or executor, or a
# function that resolves names through search_path.  Calls through function
# pointers (fmgr calls of type I/O and support functions, hooks) are not
# followed; src/no_search_path.h says what they are.  sql/security_pins.sql
# checks the list against pg_proc.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;

# SPI, the parser and executor, and every look-up of a name through
# search_path (or output that depends on it) in PostgreSQL's C API
my $forbidden = qr/^(?:
	  _?SPI_\w+ | SPI_\w+
	| raw_parser | pg_parse_query | parse_analyze\w* | pg_analyze\w* | pg_plan_\w+
	| planner | standard_planner | ExecutorStart | standard_ExecutorStart
	| CreateQueryDesc | PortalStart | PortalRun\w* | ProcessUtility\w* | ExecuteQuery
	| regclassin | regtypein | regprocin | regprocedurein | regoperin | regoperatorin
	| regconfigin | regdictionaryin | regcollationin | text_regclass
	| to_reg\w+ | RangeVarGet\w+ | makeRangeVarFromNameList | stringToQualifiedNameList
	| LookupFuncName | LookupFuncWithArgs | LookupTypeName\w* | LookupOperName
	| LookupOperWithArgs | typenameType\w* | typeStringToTypeName | parseTypeString
	| OpernameGet\w+ | FuncnameGetCandidates | TypenameGetTypid\w* | RelnameGetRelid
	| CollationGetCollid | ConversionGetConid | get_collation_oid | get_conversion_oid
	| get_ts_(?:config|dict|parser|template)_oid | get_statistics_object_oid
	| fetch_search_path\w* | recomputeNamespacePath | QualifiedNameGetCreationNamespace
	| format_type\w* | format_procedure\w* | format_operator\w* | generate_\w+_name
	| \w+IsVisible
)$/x;

# the list
open(my $fh, '<', 'src/no_search_path.h') or die "src/no_search_path.h: $!";
my @listed;
while (<$fh>)
{
	push @listed, [ $1, $2 ]
	  if /^DLOCK_NO_SEARCH_PATH\("([^"]+)", *(\w+)\)$/;
}
close($fh);
cmp_ok(scalar(@listed), '>=', 1, 'src/no_search_path.h lists functions');

# the installed library, as the tests' server loads it
my $pkglibdir = `pg_config --pkglibdir`;
chomp $pkglibdir;
my $so = "$pkglibdir/dlock.so";
ok(-f $so, "installed $so");

# call graph: function => { callee => 1 }, from the disassembly
my (%calls, $cur);
open(my $dis, '-|', 'objdump', '-d', '--no-show-raw-insn', $so)
  or die "objdump: $!";
while (<$dis>)
{
	if (/^[0-9a-f]+ <([^>]+)>:$/)
	{
		$cur = $1;
		$calls{$cur} ||= {};
		next;
	}
	next unless defined $cur;
	# call, or jmp to another function (a tail call); x86-64 and aarch64
	if (/\s(?:call|callq|jmp|jmpq|bl|b)\s+(?:0x)?[0-9a-f]+ <([^>+]+)(?:\+0x[0-9a-f]+)?>/)
	{
		my $to = $1;
		$to =~ s/\@plt$//;
		$calls{$cur}{$to} = 1 if $to ne $cur;
	}
}
close($dis);
ok(exists $calls{dlock_acquire_sql} && keys %{ $calls{dlock_acquire_sql} } > 0,
	'objdump disassembled dlock.so (dlock_acquire_sql calls something)');

# the checker must be able to fail: an entry point known to run SQL
sub reached_forbidden
{
	my ($root) = @_;
	my (%via, @bad);
	my @queue = ($root);
	$via{$root} = '';
	while (@queue)
	{
		my $f = shift @queue;
		for my $c (sort keys %{ $calls{$f} || {} })
		{
			next if exists $via{$c};
			$via{$c} = $f;
			if ($c =~ $forbidden)
			{
				my @path = ($c);
				unshift @path, $via{ $path[0] } while $via{ $path[0] } ne '';
				push @bad, join(' -> ', @path);
				next;
			}
			push @queue, $c;
		}
	}
	return @bad;
}

ok(scalar(reached_forbidden('dlock_claim_sql')) > 0,
	'the check finds SPI below dlock_claim_sql (which runs the claim query)');

for my $entry (@listed)
{
	my ($signature, $symbol) = @$entry;
	ok(exists $calls{$symbol}, "$symbol ($signature) is in dlock.so");
	my @bad = reached_forbidden($symbol);
	is(scalar(@bad), 0,
		"$signature reaches no SPI and no search_path look-up")
	  or diag(join("\n", @bad));
}

done_testing();
