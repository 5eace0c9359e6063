package dlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// claimTableOf makes a table of rows rows (id integer primary key) for
// this test alone, dropped at its end.
func claimTableOf(t *testing.T, db *sql.DB, rows int) string {
	t.Helper()
	name := fmt.Sprintf("go_claims_%d", time.Now().UnixNano())
	if _, err := db.Exec(fmt.Sprintf("CREATE TABLE %s (id integer PRIMARY KEY, body text);"+
		" INSERT INTO %s SELECT g, 'row ' || g FROM generate_series(1, %d) g", name, name, rows)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + name) })
	return name
}

// Two Work loops do every row once (the handler marks it done, outside the
// filter): each batch is completed when its handler returns nil, and
// nothing stays claimed.
func TestClaimsWorkCompletesEachRowOnce(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		tbl := claimTableOf(t, db, 25)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				errs <- Work(ctx, db, tbl, fmt.Sprintf("worker-%d", w), func(_ context.Context, b *Batch) error {
					mu.Lock()
					defer mu.Unlock()
					for i, k := range b.Keys() {
						if fmt.Sprint(b.Rows()[i]["body"]) != "row "+k {
							t.Errorf("row %s came as %v", k, b.Rows()[i])
						}
						seen[k]++
						if _, err := db.Exec(fmt.Sprintf("UPDATE %s SET body = 'done' WHERE id = $1", tbl), k); err != nil {
							return err
						}
					}
					if len(seen) == 25 {
						cancel()
					}
					return nil
				}, N(4), TTL(30*time.Second), Filter("body <> 'done'"), OrderBy("id"), Poll(100*time.Millisecond))
			}(w)
		}
		wg.Wait()
		for w := 0; w < 2; w++ {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if len(seen) != 25 {
			t.Fatalf("%d rows done, want 25", len(seen))
		}
		for k, n := range seen {
			if n != 1 {
				t.Fatalf("row %s done %d times", k, n)
			}
		}
		var live int
		db.QueryRow("SELECT count(*) FROM dlock_claims WHERE table_name = $1::regclass AND holder IS NOT NULL", tbl).Scan(&live)
		if live != 0 {
			t.Fatalf("%d claims left after the loops", live)
		}
	})
}

// A batch whose claim is reset by an operator is lost within the ttl
// (Done closed, Context cancelled, Check ErrLost); its Complete is fenced:
// it answers only the keys still held.
func TestClaimsLossAndFencedComplete(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		tbl := claimTableOf(t, db, 2)
		c, err := NewClaims(context.Background(), db, tbl, "loser", N(2), TTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		b, err := c.Next(context.Background())
		if err != nil || len(b.Keys()) != 2 {
			t.Fatalf("next: %v %v", b, err)
		}
		if err := b.Check(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond) // past the ttl: renewed
		if err := b.Check(); err != nil {
			t.Fatalf("renewed batch: %v", err)
		}
		if _, err := db.Exec("SELECT dlock_reset_claims($1::regclass, ARRAY[1])", tbl); err != nil {
			t.Fatal(err)
		}
		select {
		case <-b.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done() not closed after the reset")
		}
		if b.Context().Err() == nil || !errors.Is(b.Check(), ErrLost) {
			t.Fatalf("lost batch: ctx %v, check %v", b.Context().Err(), b.Check())
		}
		done, err := b.Complete(context.Background())
		if err != nil || len(done) != 1 || done[0] != "2" {
			t.Fatalf("complete after the loss: %v %v, want [2]", done, err)
		}
	})
}

// A loop with Wait waits in the server and gets a row inserted meanwhile;
// a row given back as failed is not claimable before its retry_after.
func TestClaimsWaitAndFail(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		tbl := claimTableOf(t, db, 0)
		c, err := NewClaims(context.Background(), db, tbl, "waiter", Wait(20*time.Second), TTL(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		go func() {
			time.Sleep(300 * time.Millisecond)
			db.Exec(fmt.Sprintf("INSERT INTO %s VALUES (7, 'late')", tbl))
		}()
		b, err := c.Next(context.Background())
		if err != nil || len(b.Keys()) != 1 || b.Keys()[0] != "7" {
			t.Fatalf("waited: %v %v", b, err)
		}
		if n, err := b.Fail(context.Background(), time.Hour); n != 1 || err != nil {
			t.Fatalf("fail: %d %v", n, err)
		}
		other, err := NewClaims(context.Background(), db, tbl, "other", Poll(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if b2, err := other.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a failed row claimed again before its retry_after: %v %v", b2, err)
		}
		var attempts int
		var retry sql.NullString
		db.QueryRow("SELECT attempts, retry_at::text FROM dlock_claims WHERE table_name = $1::regclass AND key = '7'",
			tbl).Scan(&attempts, &retry)
		if attempts != 1 || !retry.Valid {
			t.Fatalf("row 7: attempts %d, retry_at %v", attempts, retry)
		}
	})
}

// Options are checked before any call: a lease's options are not a claim
// loop's, nor the other way round; a table needs a single-column key.
func TestClaimOptions(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		tbl := claimTableOf(t, db, 1)
		for _, opts := range [][]Option{{N(0)}, {Slots(2)}, {PerGroup(2)}, {TTL(0)}} {
			if _, err := NewClaims(context.Background(), db, tbl, "h", opts...); err == nil {
				t.Fatalf("options %v accepted", opts)
			}
		}
		if _, err := Acquire(context.Background(), db, key(t, "opt"), Filter("true")); err == nil {
			t.Fatal("a claim option accepted by Acquire")
		}
		if _, err := NewClaims(context.Background(), db, "pg_catalog.pg_depend", "h"); err == nil {
			t.Fatal("a table without a single-column primary key accepted")
		}
		// Close gives back what the batch still holds
		c, _ := NewClaims(context.Background(), db, tbl, "h")
		b, err := c.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n, err := b.Close(context.Background()); n != 1 || err != nil {
			t.Fatalf("close: %d %v", n, err)
		}
		if _, err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// Work gives a batch whose handler failed back as failed: not claimable
// again before its backoff, its attempt counted.
func TestClaimsWorkFailsOnError(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		tbl := claimTableOf(t, db, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		calls := 0
		err := Work(ctx, db, tbl, "failing", func(context.Context, *Batch) error {
			calls++
			if calls > 1 {
				t.Error("the failed row came back before its backoff")
			}
			go func() { time.Sleep(time.Second); cancel() }()
			return errors.New("cannot send")
		}, Backoff(time.Hour), Poll(100*time.Millisecond))
		if err != nil || calls != 1 {
			t.Fatalf("work: %v, %d calls", err, calls)
		}
		var attempts int
		var retry, holder sql.NullString
		db.QueryRow("SELECT attempts, retry_at::text, holder FROM dlock_claims WHERE table_name = $1::regclass AND key = '1'",
			tbl).Scan(&attempts, &retry, &holder)
		if attempts != 1 || !retry.Valid || holder.Valid {
			t.Fatalf("row 1: attempts %d, retry_at %v, holder %v", attempts, retry, holder)
		}
	})
}

// A batch completed in part keeps the rest: renewed past the ttl (the
// server renews fewer claims, as many as the batch still holds), and Close
// gives back only those.
func TestClaimsPartialComplete(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		tbl := claimTableOf(t, db, 2)
		c, err := NewClaims(context.Background(), db, tbl, "partial", N(2), TTL(time.Second), OrderBy("id"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Next(context.Background())
		if err != nil || len(b.Keys()) != 2 {
			t.Fatalf("next: %v %v", b, err)
		}
		if done, err := b.Complete(context.Background(), "1"); err != nil || len(done) != 1 {
			t.Fatalf("complete 1: %v %v", done, err)
		}
		time.Sleep(1500 * time.Millisecond) // past the ttl: row 2 renewed
		if err := b.Check(); err != nil {
			t.Fatalf("the rest of a batch completed in part: %v", err)
		}
		if n, err := b.Close(context.Background()); n != 1 || err != nil {
			t.Fatalf("close: %d %v", n, err)
		}
	})
}
