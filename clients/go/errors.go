package dlock

import (
	"errors"
	"fmt"
)

// The kinds of error, for errors.Is.
var (
	// ErrNotAcquired: someone else kept the key (or a key) for the wait.
	ErrNotAcquired = errors.New("dlock: not acquired")
	// ErrLost: the lease is lost (or released); LostError says why.
	ErrLost = errors.New("dlock: lease lost")
	// ErrHolderInUse: another lease of this process has the key with this
	// holder, from its acquire until its release has been answered.
	ErrHolderInUse = errors.New("dlock: holder in use")
	// ErrTimeout: no server answered a dlock call in time (an acquire's
	// deadline: its wait plus max(ttl, 5 s)); the call's outcome is unknown
	// (an acquire's is given back).  It comes as a *DatabaseError with
	// SQLState "".  The caller's own context ending is ctx.Err() instead.
	ErrTimeout = errors.New("dlock: no answer in time")
)

// LostError is the error of a lost lease: errors.Is(err, ErrLost).
type LostError struct {
	Key    string
	Reason string
}

func (e *LostError) Error() string {
	return fmt.Sprintf("dlock: lease on %q lost: %s", e.Key, e.Reason)
}

// Is makes errors.Is(err, ErrLost) true.
func (e *LostError) Is(target error) bool { return target == ErrLost }

// DatabaseError is a dlock call that failed: SQLState is the server's
// SQLSTATE ("22023" invalid argument, "42501" privilege, "25006" read-only
// server, "42883" the extension is not installed), "" when no server
// answered.  Err is the driver's error (errors.Unwrap).
type DatabaseError struct {
	SQLState string
	Err      error
	timedOut bool
}

// Is makes errors.Is(err, ErrTimeout) true for a call that got no answer
// in time.
func (e *DatabaseError) Is(target error) bool { return target == ErrTimeout && e.timedOut }

func (e *DatabaseError) Error() string {
	if e.timedOut {
		return "dlock: no answer in time: " + e.Err.Error()
	}
	if e.SQLState == "" {
		return "dlock: " + e.Err.Error()
	}
	return fmt.Sprintf("dlock: %v (SQLSTATE %s)", e.Err, e.SQLState)
}

func (e *DatabaseError) Unwrap() error { return e.Err }

// sqlState is the SQLSTATE of a driver's error (lib/pq's *pq.Error and
// pgx's *pgconn.PgError both have the method), "" for one that no server
// sent (a broken connection, a cancelled context).
func sqlState(err error) string {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		return s.SQLState()
	}
	return ""
}

// dbError wraps a driver's error as a DatabaseError.
func dbError(err error) error {
	if err == nil {
		return nil
	}
	return &DatabaseError{SQLState: sqlState(err), Err: err}
}

// timeoutError is the error of a call that got no answer by its deadline.
func timeoutError(err error) error {
	return &DatabaseError{Err: err, timedOut: true}
}
