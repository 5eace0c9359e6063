# Copyright: dlock contributors
#
# t/DlockPoll.pm: waiting for a state with a time limit of the test's own,
# shared by the TAP tests whose waits must end sooner than
# poll_query_until's (096_bulk_release.pl, 097_abandoned.pl,
# 100_waiter_exit.pl: under scripts/mutate.sh a failing wait should cost
# seconds, not minutes).
#
#   use DlockPoll;
#   ok(within($node, 30, "SELECT count(*) = 0 FROM dlock_waiters"), '...');

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
