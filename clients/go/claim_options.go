package dlock

import (
	"fmt"
	"time"
)

// The options of a claim loop (NewClaims, Work), besides TTL (each claim's
// ttl, default 30 s) and Wait (how long one dlock_claim call waits in the
// server for rows, default 0: poll instead).

// N is the most rows of a batch (default 10).
func N(n int) Option { return func(o *options) { o.n = n; o.claim = true } }

// Filter is the rows' condition, an SQL expression over the table's
// columns (dlock_claim's filter).
func Filter(expr string) Option { return func(o *options) { o.filter = expr; o.claim = true } }

// OrderBy is the order rows are claimed in, an ORDER BY list.
func OrderBy(list string) Option { return func(o *options) { o.orderBy = list; o.claim = true } }

// MaxAttempts sets rows aside (dlock_dead_claims) after n deliveries.
func MaxAttempts(n int) Option { return func(o *options) { o.maxAttempts = n; o.claim = true } }

// Poll is the pause between two calls that found no row, without Wait
// (default 1 s).
func Poll(d time.Duration) Option { return func(o *options) { o.poll = d; o.claim = true } }

// Backoff and BackoffMax: a row given back as failed is not claimable
// again before backoff * 2^(attempts-1), at most backoffMax.
func Backoff(d time.Duration) Option { return func(o *options) { o.backoff = d; o.claim = true } }

// BackoffMax caps Backoff's delay.
func BackoffMax(d time.Duration) Option { return func(o *options) { o.backoffMax = d; o.claim = true } }

// GroupBy groups the rows by an SQL expression (with PerGroup or Fair).
func GroupBy(expr string) Option { return func(o *options) { o.groupBy = expr; o.claim = true } }

// PerGroup is the most live claims of one group.
func PerGroup(n int) Option { return func(o *options) { o.perGroup = n; o.claim = true } }

// Fair takes the groups in turn.
func Fair() Option { return func(o *options) { o.fair = true; o.claim = true } }

func buildClaimOptions(opts []Option) (options, error) {
	o, err := applyOptions(options{ttl: 30 * time.Second, n: 10, poll: time.Second}, opts)
	switch {
	case err != nil:
		return o, err
	case o.n < 1:
		return o, fmt.Errorf("dlock: n must be at least 1, not %d", o.n)
	case o.poll <= 0:
		return o, fmt.Errorf("dlock: poll must be more than 0, not %v", o.poll)
	case o.slots != 0 || o.shared || o.holder != "" || o.onLost != nil:
		return o, fmt.Errorf("dlock: Slots, Shared, Holder and OnLost are options of a lease (a claim loop's holder is NewClaims's argument)")
	case (o.perGroup > 0 || o.fair) && o.groupBy == "":
		return o, fmt.Errorf("dlock: PerGroup and Fair need GroupBy")
	}
	return o, nil
}
