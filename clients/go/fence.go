package dlock

import (
	"context"
	"database/sql"
)

// Fence fences tx with the lease: dlock_validate(key, holder, token) of
// each key, in tx.  On nil, nobody can take the lease over, renew or
// release it until tx ends, so every write of tx that follows is the
// holder's (and passes a dlock_guard on the table).  When the lease is
// lost (or the fence says no) it returns an error matching ErrLost and the
// lease is lost: roll tx back.  tx must be of the lease's role.
func (l *Lease) Fence(ctx context.Context, tx *sql.Tx) error {
	if err := l.Check(); err != nil {
		return err
	}
	var ok sql.NullBool
	err := tx.QueryRowContext(ctx, validateSQL, l.holder, l.t.tokensJSON(l.tokens)).Scan(&ok)
	if err != nil {
		return dbError(err)
	}
	if !ok.Valid || !ok.Bool {
		l.lose("the fence (dlock_validate) said no")
		return l.Check()
	}
	return nil
}

// Exec runs query in tx fenced by the lease: Fence, then query in the same
// transaction.  When the fence says no, query is not run and the error
// matches ErrLost; errors of query itself are the driver's, unchanged.
func (l *Lease) Exec(ctx context.Context, tx *sql.Tx, query string, args ...interface{}) (sql.Result, error) {
	if err := l.Fence(ctx, tx); err != nil {
		return nil, err
	}
	return tx.ExecContext(ctx, query, args...)
}
