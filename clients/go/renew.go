package dlock

import (
	"context"
	"database/sql"
	"time"
)

// renewals renews the lease every ttl/3 on its own connection until it is
// released or lost.  A failed renewal (server down, restarting, failing
// over) is tried again every ttl/15 on a new connection; each call is
// bounded by the lease's deadline, so a hung server is like a stopped one.
// A refused renewal (expired, force-released, taken over) is a loss.
func (l *Lease) renewals() {
	defer close(l.ended)
	next := l.ttl / 3
	for {
		select {
		case <-l.stop:
			return
		case <-l.done:
			return
		case <-time.After(next):
		}
		sent := time.Now()
		ok, err := l.renewOnce(sent)
		switch {
		case err == nil && ok:
			l.mu.Lock()
			if d := sent.Add(l.ttl); d.After(l.deadline) {
				l.deadline = d
			}
			l.mu.Unlock()
			next = l.ttl / 3
		case err == nil:
			l.lose("the server refused the renewal (expired, force-released or taken over)")
			return
		default:
			l.closeConn()
			next = retryPause(l.ttl)
		}
	}
}

func (l *Lease) renewOnce(sent time.Time) (bool, error) {
	l.mu.Lock()
	deadline := l.deadline
	l.mu.Unlock()
	if !sent.Before(deadline) {
		return false, context.DeadlineExceeded
	}
	ctx, cancel := context.WithDeadline(l.rctx, deadline)
	defer cancel()
	c, err := l.connection(ctx)
	if err != nil {
		return false, err
	}
	var ok sql.NullBool
	err = c.QueryRowContext(ctx, renewSQL, l.holder, l.ttl.Microseconds(),
		l.t.tokensJSON(l.tokens)).Scan(&ok)
	if err != nil {
		return false, err
	}
	return ok.Valid && ok.Bool, nil
}

// Release stops the renewals for good and releases the lease with its
// token(s) (another holder's lease is never released): true when it was
// still held.  It is retried while the lease could still be held; once
// answered, the key and holder are free for another lease of this process.
// Idempotent: a second call returns the first's answer.
func (l *Lease) Release(ctx context.Context) (bool, error) {
	l.relOnce.Do(func() {
		close(l.stop)
		l.rstop() // a renewal under way is cancelled, not waited for
		<-l.ended
		l.relOK, l.relErr = l.releaseHeld(ctx)
		l.lose("released")
		l.closeConn()
		freeHolder(l.t.keys, l.holder)
	})
	return l.relOK, l.relErr
}

func (l *Lease) releaseHeld(ctx context.Context) (bool, error) {
	for {
		var ok sql.NullBool
		c, err := l.connection(ctx)
		if err == nil {
			err = c.QueryRowContext(ctx, releaseSQL, l.holder, l.t.tokensJSON(l.tokens)).Scan(&ok)
		}
		if err == nil {
			return ok.Valid && ok.Bool, nil
		}
		l.closeConn()
		if sqlState(err) != "" || ctx.Err() != nil || !time.Now().Before(l.Deadline()) {
			return false, dbError(err)
		}
		time.Sleep(retryPause(l.ttl))
	}
}
