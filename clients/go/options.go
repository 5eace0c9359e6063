package dlock

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"
)

// Option sets a lease's ttl, wait, holder, shape or loss callback, or a
// claim loop's (claim_options.go).
type Option func(*options)

type options struct {
	ttl    time.Duration
	wait   time.Duration
	holder string
	slots  int
	shared bool
	onLost func(*Lease)

	// claim loops (claim_options.go)
	claim       bool
	n           int
	filter      string
	orderBy     string
	maxAttempts int
	poll        time.Duration
	backoff     time.Duration
	backoffMax  time.Duration
	groupBy     string
	perGroup    int
	fair        bool
}

// TTL is how long the lease lasts unless renewed (default 30 s; the
// server's precision is a microsecond).
func TTL(d time.Duration) Option { return func(o *options) { o.ttl = d } }

// Wait is how long the acquire waits in the key's FIFO queue (default 0:
// not at all).
func Wait(d time.Duration) Option { return func(o *options) { o.wait = d } }

// Holder names the holder (default HOST:PID:RANDOM, unique to the lease).
func Holder(h string) Option { return func(o *options) { o.holder = h } }

// Slots makes the lease one of n places of the counting semaphore key
// (dlock_acquire(key, holder, ttl, wait, slots)); every holder names the
// same n.
func Slots(n int) Option { return func(o *options) { o.slots = n } }

// Shared makes the lease a shared one (dlock_acquire_shared): any number
// of shared holders at once, or the one holder of a lease.
func Shared() Option { return func(o *options) { o.shared = true } }

// OnLost is called once, from the lease's goroutine, when the lease is
// lost (keep it short; do not call Release from it).
func OnLost(f func(*Lease)) Option { return func(o *options) { o.onLost = f } }

func buildOptions(opts []Option) (options, error) {
	o, err := applyOptions(options{ttl: 30 * time.Second}, opts)
	switch {
	case err != nil:
		return o, err
	case o.slots < 0:
		return o, fmt.Errorf("dlock: slots must be at least 1, not %d", o.slots)
	case o.slots > 0 && o.shared:
		return o, fmt.Errorf("dlock: a lease is either one of slots places or shared, not both")
	case o.claim:
		return o, fmt.Errorf("dlock: N, Filter, OrderBy, MaxAttempts, Poll, Backoff, GroupBy, PerGroup and Fair are options of a claim loop, not of a lease")
	}
	if o.holder == "" {
		o.holder = defaultHolder()
	}
	return o, nil
}

// applyOptions applies opts over the defaults o and checks what leases and
// claim loops share: the ttl and the wait.
func applyOptions(o options, opts []Option) (options, error) {
	for _, f := range opts {
		f(&o)
	}
	if o.ttl < time.Millisecond {
		return o, fmt.Errorf("dlock: ttl must be at least 1 ms, not %v", o.ttl)
	}
	if o.wait < 0 {
		return o, fmt.Errorf("dlock: wait must not be negative, not %v", o.wait)
	}
	return o, nil
}

// defaultHolder is HOST:PID:RANDOM, unique to one lease.
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b))
}
