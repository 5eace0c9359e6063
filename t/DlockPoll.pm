# Copyright: dlock contributors
#
# t/DlockPoll.pm: waiting for a state with a time limit of the test's own
# (096_bulk_release.pl, 097_abandoned.pl, 100_waiter_exit.pl).  The limit
# only ends a wait for a state that never comes (a broken promise): it must
# be far above any delay of a loaded machine (the callers use 120 s), since
# a state that is late is not a failure.
#
#   use DlockPoll;
#   ok(within($node, 120, "SELECT count(*) = 0 FROM dlock_waiters"), '...');

package DlockPoll;

use strict;
use warnings;

use Exporter 'import';

our @EXPORT = qw(within);

# within(NODE, SECS, SQL): true once SQL returns 't' on NODE's postgres
# database, asked every 50 ms for at most SECS seconds; false after.
sub within
{
	my ($node, $secs, $sql) = @_;
	my $until = time() + $secs;
	while (time() < $until)
	{
		return 1 if $node->safe_psql('postgres', $sql) eq 't';
		select(undef, undef, undef, 0.05);
	}
	return 0;
}

1;
