package dlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"time"
)

// renewClaims renews the batch's claims every ttl/3 (dlock_renew_claims) on a
// connection of its own until the batch is closed or lost: lost when the
// server renews fewer claims than the batch still holds (one expired, was
// reset or taken), or when the ttl has passed since the sending of the last
// renewal the server confirmed.  A failed renewal is tried again every
// ttl/15 (at least 0.2 s) on a new connection, each call bounded by that
// deadline.
func (b *Batch) renewClaims() {
	defer close(b.ended)
	ttl := b.c.o.ttl
	next := ttl / 3
	for {
		b.mu.Lock()
		if left := time.Until(b.deadline); next > left {
			next = left
		}
		b.mu.Unlock()
		select {
		case <-b.stop:
			return
		case <-b.done:
			return
		case <-time.After(next):
		}
		sent := time.Now()
		b.mu.Lock()
		deadline, held := b.deadline, len(b.outstanding)
		b.mu.Unlock()
		if !sent.Before(deadline) {
			b.lose("no renewal confirmed within the ttl")
			return
		}
		n, err := b.renewOnce(deadline)
		switch {
		case err == nil && n >= int64(held):
			b.mu.Lock()
			if d := sent.Add(ttl); d.After(b.deadline) {
				b.deadline = d
			}
			b.mu.Unlock()
			next = ttl / 3
		case err == nil:
			b.lose("the server renewed fewer claims than the batch holds (expired, reset or taken)")
			return
		default:
			b.dropConn()
			next = retryPause(ttl)
		}
	}
}

func (b *Batch) renewOnce(deadline time.Time) (int64, error) {
	ctx, cancel := context.WithDeadline(b.ctx, deadline)
	defer cancel()
	b.mu.Lock()
	c := b.conn
	b.mu.Unlock()
	if c == nil {
		var err error
		if c, err = b.c.db.Conn(ctx); err != nil {
			return 0, err
		}
		b.mu.Lock()
		b.conn = c
		b.mu.Unlock()
	}
	var n sql.NullInt64
	err := c.QueryRowContext(ctx, "SELECT dlock_renew_claims($1::regclass, $2, $3::bigint * interval '1 microsecond')",
		b.c.table.name, b.c.holder, b.c.o.ttl.Microseconds()).Scan(&n)
	return n.Int64, err
}

// dropConn closes the renewals' connection for good (after a failure, or
// when the batch ends).
func (b *Batch) dropConn() {
	b.mu.Lock()
	c := b.conn
	b.conn = nil
	b.mu.Unlock()
	if c != nil {
		_ = c.Raw(func(interface{}) error { return driver.ErrBadConn })
		_ = c.Close()
	}
}
