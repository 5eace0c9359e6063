// Package dlock is the Go client of dlock, the PostgreSQL extension that
// makes the database a lock service: lease locks with fencing tokens,
// counting semaphores, shared leases and several keys at once, taken,
// renewed, fenced and released through database/sql (lib/pq or pgx's
// stdlib driver, or any driver whose errors have SQLState()).
//
//	lease, err := dlock.Acquire(ctx, db, "nightly-report",
//		dlock.TTL(30*time.Second), dlock.Wait(10*time.Second))
//	if err != nil {
//		return err // errors.Is(err, dlock.ErrNotAcquired): someone else kept it
//	}
//	defer lease.Release(context.Background())
//	tx, _ := db.BeginTx(ctx, nil)
//	if _, err := lease.Exec(ctx, tx, "UPDATE report SET done = true WHERE id = $1", 7); err != nil {
//		tx.Rollback()
//		return err // errors.Is(err, dlock.ErrLost): nothing was written
//	}
//	return tx.Commit()
//
// A lease keeps one connection of db's pool for its life: the acquire, the
// renewals (every ttl/3) and the release run there, never behind the
// application's queries.  It is lost when a renewal is refused (it expired,
// was force-released or taken over) or when the ttl has passed on the
// monotonic clock since the sending of the last renewal the server
// confirmed: then Done() is closed, Context() is cancelled and Check()
// returns an error that matches ErrLost.  The contract, the same in every
// language, is in clients/README.md's companion, clients/python/README.md.
package dlock
