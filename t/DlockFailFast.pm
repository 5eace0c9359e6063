# Copyright: dlock contributors
#
# DlockFailFast: a TAP file of t/ stops at its first failed assertion.
# scripts/test.sh loads it into every TAP file (PERL5OPT) when
# DLOCK_FAIL_FAST=1, as scripts/mutate.sh runs it: one failure kills a
# mutant, and the waits after it (each up to its own time limit, since
# what it waits for may never come) would only cost minutes.  The file
# exits with status 1 after the failed assertion; its END blocks stop
# its servers as usual.  Elsewhere (prove itself, other scripts) it does
# nothing.
package DlockFailFast;

use strict;
use warnings;

if ($0 =~ m{(?:^|/)t/[^/]+\.pl$})
{
	require Test2::API;
	Test2::API::test2_stack()->top->listen(
		sub {
			my ($hub, $event) = @_;
			return unless $event->causes_fail;
			print STDERR "# DLOCK_FAIL_FAST=1: stopping at the first failed assertion\n";
			exit 1;
		});
}

1;
