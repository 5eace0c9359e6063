package dlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lease is a held lease (one key, a semaphore place, a shared lease, or
// several keys).  Its methods are safe for concurrent use.
type Lease struct {
	db     *sql.DB
	t      target
	holder string
	ttl    time.Duration
	wait   time.Duration
	onLost func(*Lease)
	tokens []int64

	ctx    context.Context // cancelled at loss or release
	cancel context.CancelFunc
	done   chan struct{}   // closed at loss or release
	stop   chan struct{}   // closed by Release: the renewals end
	rctx   context.Context // the renewals' calls: cancelled by Release
	rstop  context.CancelFunc
	ended  chan struct{} // closed when the renewal goroutine has returned

	mu       sync.Mutex
	conn     *sql.Conn // the lease's own connection; nil after a failure
	deadline time.Time // sending of the last confirmed renewal + ttl (monotonic)
	timer    *time.Timer
	lost     *LostError // why Done() was closed

	relOnce sync.Once // Release's work, once
	relOK   bool      // its answer
	relErr  error
}

// Acquire takes a lease on key: dlock_acquire(key, holder, ttl, wait), or
// with Slots(n) one of n places, or with Shared() a shared lease.  It
// returns an error matching ErrNotAcquired when someone else kept the key
// for the wait, ErrHolderInUse, a *DatabaseError, or ctx's error (then the
// wait is cancelled on the server and nothing is left held or queued).
func Acquire(ctx context.Context, db *sql.DB, key string, opts ...Option) (*Lease, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return acquire(ctx, db, target{keys: []string{key}, slots: o.slots, shared: o.shared}, o)
}

// AcquireAll takes every key or none (dlock_acquire_all), each an ordinary
// lease with its own token (Tokens()); renewed, fenced, lost and released
// together.
func AcquireAll(ctx context.Context, db *sql.DB, keys []string, opts ...Option) (*Lease, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("dlock: AcquireAll needs at least one key")
	}
	if o.slots > 0 || o.shared {
		return nil, errors.New("dlock: AcquireAll takes leases, not semaphore places or shared leases")
	}
	seen := map[string]bool{}
	var uniq []string
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			uniq = append(uniq, k)
		}
	}
	return acquire(ctx, db, target{keys: uniq, multi: true}, o)
}

func acquire(ctx context.Context, db *sql.DB, t target, o options) (*Lease, error) {
	if err := takeHolder(t.keys, o.holder); err != nil {
		return nil, err
	}
	l := &Lease{db: db, t: t, holder: o.holder, ttl: o.ttl, wait: o.wait, onLost: o.onLost,
		done: make(chan struct{}), stop: make(chan struct{}), ended: make(chan struct{})}
	sent, err := l.acquireTokens(ctx)
	if err != nil {
		freeHolder(t.keys, o.holder)
		return nil, err
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.rctx, l.rstop = context.WithCancel(l.ctx)
	l.mu.Lock()
	l.deadline = sent.Add(l.ttl)
	l.timer = time.AfterFunc(l.ttl, l.deadlineCheck)
	l.mu.Unlock()
	go l.renewals()
	return l, nil
}

// acquireTokens runs the acquire on the lease's own connection.  An
// acquire whose answer got lost (the connection broke) is repeated with the
// same holder while the wait lasts (once at least): the server gives the
// same token.  A cancelled one is forgotten: released by holder.
func (l *Lease) acquireTokens(ctx context.Context) (time.Time, error) {
	until := time.Now().Add(l.wait)
	for attempt := 0; ; attempt++ {
		sent := time.Now()
		left := until.Sub(sent)
		if left < 0 {
			left = 0
		}
		// each try is given up max(ttl, 5 s) after what is left of the wait
		tctx, cancel := context.WithDeadline(ctx, sent.Add(left+maxDuration(l.ttl, 5*time.Second)))
		answer, err := l.queryString(tctx, l.t.acquireSQL(), l.t.keysJSON(), l.holder,
			l.ttl.Microseconds(), left.Microseconds())
		timedOut := err != nil && tctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			tokens, err := l.t.tokens(answer)
			if err != nil {
				l.closeConn()
				return sent, err
			}
			if tokens == nil {
				l.closeConn()
				return sent, fmt.Errorf("%w: %q within %v", ErrNotAcquired, l.t.keys, l.wait)
			}
			l.tokens = tokens
			return sent, nil
		}
		if timedOut || sqlState(err) == "" {
			l.dropConn() // its statement may still run: never back to the pool
		} else {
			l.closeConn()
		}
		if ctx.Err() != nil {
			l.forget()
			return sent, ctx.Err()
		}
		if timedOut && attempt > 0 && !time.Now().Before(until) {
			l.forget()
			return sent, timeoutError(err)
		}
		if !timedOut && (sqlState(err) != "" || (attempt > 0 && time.Now().After(until))) {
			if sqlState(err) == "" {
				l.forget()
			}
			return sent, dbError(err)
		}
		time.Sleep(retryPause(l.ttl))
	}
}

// forget releases, by holder, what an acquire whose answer never came may
// have taken, in the background (the caller has its answer already).
func (l *Lease) forget() {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = l.db.ExecContext(ctx, forgetSQL, l.holder, l.t.keysJSON())
	}()
}

// queryString runs one statement on the lease's connection (opened if
// need be) and scans one text value ("" for NULL).
func (l *Lease) queryString(ctx context.Context, query string, args ...interface{}) (string, error) {
	c, err := l.connection(ctx)
	if err != nil {
		return "", err
	}
	var s sql.NullString
	if err := c.QueryRowContext(ctx, query, args...).Scan(&s); err != nil {
		return "", err
	}
	return s.String, nil
}

func (l *Lease) connection(ctx context.Context) (*sql.Conn, error) {
	l.mu.Lock()
	c := l.conn
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	c, err := l.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.conn = c
	l.mu.Unlock()
	return c, nil
}

// closeConn gives the lease's connection back to db's pool (a broken one
// is dropped by database/sql).
func (l *Lease) closeConn() {
	l.mu.Lock()
	c := l.conn
	l.conn = nil
	l.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// dropConn closes the lease's connection for good (database/sql drops a
// connection whose Raw call says it is bad) after a call that got no
// answer or failed without one.
func (l *Lease) dropConn() {
	l.mu.Lock()
	c := l.conn
	l.conn = nil
	l.mu.Unlock()
	if c != nil {
		_ = c.Raw(func(interface{}) error { return driver.ErrBadConn })
		_ = c.Close()
	}
}

// retryPause: a failed renewal or acquire is tried again every ttl/15, at
// least 0.2 s.
func retryPause(ttl time.Duration) time.Duration {
	if p := ttl / 15; p > 200*time.Millisecond {
		return p
	}
	return 200 * time.Millisecond
}

// Token is the fencing token (of the first key, for AcquireAll).
func (l *Lease) Token() int64 { return l.tokens[0] }

// Tokens maps each key to its token.
func (l *Lease) Tokens() map[string]int64 {
	m := make(map[string]int64, len(l.t.keys))
	for i, k := range l.t.keys {
		m[k] = l.tokens[i]
	}
	return m
}

// Key is the lease's key (the first, for AcquireAll); Keys all of them.
func (l *Lease) Key() string    { return l.t.keys[0] }
func (l *Lease) Keys() []string { return append([]string(nil), l.t.keys...) }

// Holder is the holder the lease was taken for.
func (l *Lease) Holder() string { return l.holder }

// Done is closed when the lease is lost or released.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Context is cancelled when the lease is lost or released: pass it to the
// work the lease protects.
func (l *Lease) Context() context.Context { return l.ctx }

// Deadline is when the lease lapses unless renewed (on the monotonic
// clock: compare with time.Now()).
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Check returns nil while the lease is held: an error matching ErrLost
// once it is lost or released, or its ttl ran out since the last confirmed
// renewal.
func (l *Lease) Check() error {
	l.mu.Lock()
	lost, deadline := l.lost, l.deadline
	l.mu.Unlock()
	if lost != nil {
		return lost
	}
	if !time.Now().Before(deadline) {
		l.lose("no renewal was confirmed within the ttl")
		return l.Check()
	}
	return nil
}

// lose ends the lease once: Done() closed, Context() cancelled, OnLost
// called.  No renewal is sent after it.
func (l *Lease) lose(reason string) {
	l.mu.Lock()
	if l.lost != nil {
		l.mu.Unlock()
		return
	}
	l.lost = &LostError{Key: l.t.keys[0], Reason: reason}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	close(l.done)
	l.cancel()
	if l.onLost != nil && reason != "released" {
		l.onLost(l)
	}
}

// deadlineCheck runs when the deadline may have passed: a renewal
// confirmed meanwhile has moved it.
func (l *Lease) deadlineCheck() {
	l.mu.Lock()
	left := time.Until(l.deadline)
	if left > 0 && l.lost == nil {
		l.timer.Reset(left)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.lose("no renewal was confirmed within the ttl")
}

func maxDuration(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}
