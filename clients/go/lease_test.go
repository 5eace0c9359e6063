package dlock

// Tests against a real server (scripts/test-clients.sh starts one):
//
//	DLOCK_TEST_DSN     libpq keyword DSN of a database with the extension
//	DLOCK_TEST_PGCTL   a command: `$DLOCK_TEST_PGCTL stop|start`
//
// Every test runs once per driver: lib/pq ("postgres") and pgx's stdlib
// ("pgx"), both from Debian's golang-*-dev packages (GOPATH mode).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v4/stdlib"
	_ "github.com/lib/pq"
)

var drivers = []string{"postgres", "pgx"}

func dsn(t *testing.T) string {
	d := os.Getenv("DLOCK_TEST_DSN")
	if d == "" {
		t.Fatal("DLOCK_TEST_DSN is not set (scripts/test-clients.sh sets it)")
	}
	// lib/pq's default is sslmode=require; the test server has no TLS
	if !strings.Contains(d, "sslmode=") {
		d += " sslmode=disable"
	}
	return d
}

// eachDriver runs f as a subtest per driver, with a pool of that driver.
func eachDriver(t *testing.T, f func(t *testing.T, db *sql.DB)) {
	for _, drv := range drivers {
		t.Run(drv, func(t *testing.T) {
			db, err := sql.Open(drv, dsn(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			f(t, db)
		})
	}
}

// key is a key of this test alone.
func key(t *testing.T, name string) string {
	return fmt.Sprintf("go/%s/%s/%d", t.Name(), name, time.Now().UnixNano())
}

// holderOf reads the key's holders and tokens from dlock.lease, as a
// superuser sees them (live leases only).
func holderOf(t *testing.T, db *sql.DB, k string) map[string]int64 {
	rows, err := db.Query("SELECT holder, token FROM dlock_locks WHERE key = $1", k)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]int64{}
	for rows.Next() {
		var h string
		var tok int64
		if err := rows.Scan(&h, &tok); err != nil {
			t.Fatal(err)
		}
		m[h] = tok
	}
	return m
}

func mustAcquire(t *testing.T, db *sql.DB, k string, opts ...Option) *Lease {
	t.Helper()
	l, err := Acquire(context.Background(), db, k, opts...)
	if err != nil {
		t.Fatalf("acquire %s: %v", k, err)
	}
	t.Cleanup(func() { l.Release(context.Background()) })
	return l
}

func TestAcquireRelease(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		k := key(t, "a")
		l := mustAcquire(t, db, k, TTL(10*time.Second))
		if got := holderOf(t, db, k); got[l.Holder()] != l.Token() || len(got) != 1 {
			t.Fatalf("dlock_locks %v, want %s with %d", got, l.Holder(), l.Token())
		}
		if err := l.Check(); err != nil {
			t.Fatal(err)
		}
		_, err := Acquire(context.Background(), db, k)
		if !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("second holder: %v, want ErrNotAcquired", err)
		}
		ok, err := l.Release(context.Background())
		if !ok || err != nil {
			t.Fatalf("release: %v %v", ok, err)
		}
		if got := holderOf(t, db, k); len(got) != 0 {
			t.Fatalf("still held after release: %v", got)
		}
		if err := l.Check(); !errors.Is(err, ErrLost) {
			t.Fatalf("check after release: %v", err)
		}
		select {
		case <-l.Done():
		default:
			t.Fatal("Done() not closed after release")
		}
		if ok2, _ := l.Release(context.Background()); ok2 != ok {
			t.Fatal("a second Release gave another answer")
		}
		l2 := mustAcquire(t, db, k)
		if l2.Token() <= l.Token() {
			t.Fatalf("token %d after %d: tokens only grow", l2.Token(), l.Token())
		}
	})
}

// A wait ends with the key once its holder releases it, with a greater
// token.
func TestWaitGetsTheKey(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		k := key(t, "wait")
		first := mustAcquire(t, db, k, TTL(time.Minute))
		go func() {
			time.Sleep(300 * time.Millisecond)
			first.Release(context.Background())
		}()
		second := mustAcquire(t, db, k, TTL(time.Minute), Wait(30*time.Second))
		if second.Token() <= first.Token() {
			t.Fatalf("token %d after %d", second.Token(), first.Token())
		}
		if got := holderOf(t, db, k); got[second.Holder()] != second.Token() || len(got) != 1 {
			t.Fatalf("dlock_locks %v, want %s", got, second.Holder())
		}
	})
}

func TestRenewalKeepsLease(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		k := key(t, "r")
		l := mustAcquire(t, db, k, TTL(900*time.Millisecond))
		time.Sleep(2500 * time.Millisecond)
		if err := l.Check(); err != nil {
			t.Fatalf("lost although renewed: %v", err)
		}
		if got := holderOf(t, db, k); got[l.Holder()] != l.Token() {
			t.Fatalf("dlock_locks %v after 2.5 ttls", got)
		}
	})
}

func TestForceReleaseIsLoss(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		k := key(t, "f")
		var called sync.WaitGroup
		called.Add(1)
		l := mustAcquire(t, db, k, TTL(1500*time.Millisecond), OnLost(func(*Lease) { called.Done() }))
		if _, err := db.Exec("SELECT dlock_force_release($1)", k); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("Done() not closed after a force-release")
		}
		called.Wait()
		if l.Context().Err() == nil {
			t.Fatal("Context() not cancelled")
		}
		var lost *LostError
		if err := l.Check(); !errors.As(err, &lost) || !strings.Contains(lost.Reason, "refused") {
			t.Fatalf("check: %v", err)
		}
		if ok, err := l.Release(context.Background()); ok || err != nil {
			t.Fatalf("release of a lost lease: %v %v", ok, err)
		}
	})
}

func TestFencedExec(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		k := key(t, "x")
		tbl := "go_fenced_" + strings.ReplaceAll(t.Name(), "/", "_")
		mustExec(t, db, "DROP TABLE IF EXISTS "+tbl)
		mustExec(t, db, "CREATE TABLE "+tbl+" (id int PRIMARY KEY, tok bigint)")
		mustExec(t, db, "INSERT INTO "+tbl+" VALUES (1, 0)")
		l := mustAcquire(t, db, k, TTL(10*time.Second))
		ctx := context.Background()
		tx, _ := db.BeginTx(ctx, nil)
		if _, err := l.Exec(ctx, tx, "UPDATE "+tbl+" SET tok = $1 WHERE id = 1", l.Token()); err != nil {
			t.Fatal(err)
		}
		// the fence holds: a force-release waits for the transaction
		forced := make(chan error, 1)
		go func() { _, err := db.Exec("SELECT dlock_force_release($1)", k); forced <- err }()
		select {
		case err := <-forced:
			t.Fatalf("force-release went through the fence: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-forced; err != nil {
			t.Fatal(err)
		}
		// now the fence says no and nothing is written
		tx, _ = db.BeginTx(ctx, nil)
		_, err := l.Exec(ctx, tx, "UPDATE "+tbl+" SET tok = -1 WHERE id = 1")
		tx.Rollback()
		if !errors.Is(err, ErrLost) {
			t.Fatalf("exec after the force-release: %v", err)
		}
		var tok int64
		db.QueryRow("SELECT tok FROM " + tbl).Scan(&tok)
		if tok != l.Token() {
			t.Fatalf("tok %d, want %d", tok, l.Token())
		}
		mustExec(t, db, "DROP TABLE "+tbl)
	})
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...interface{}) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func TestShapes(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		ctx := context.Background()
		s := key(t, "sem")
		a := mustAcquire(t, db, s, Slots(2))
		b := mustAcquire(t, db, s, Slots(2))
		if _, err := Acquire(ctx, db, s, Slots(2)); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("third of 2 slots: %v", err)
		}
		if a.Token() == b.Token() {
			t.Fatal("two slots, one token")
		}
		var de *DatabaseError
		if _, err := Acquire(ctx, db, s, Slots(3)); !errors.As(err, &de) || de.SQLState != "22023" {
			t.Fatalf("another slot count: %v", err)
		}
		sh := key(t, "shared")
		r1 := mustAcquire(t, db, sh, Shared())
		r2 := mustAcquire(t, db, sh, Shared())
		if len(holderOf(t, db, sh)) != 2 || r1.Token() == r2.Token() {
			t.Fatal("two shared holders expected")
		}
		if _, err := Acquire(ctx, db, sh); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("a lease beside shared ones: %v", err)
		}
		k1, k2, k3 := key(t, "m1"), key(t, "m2"), key(t, "m3")
		held := mustAcquire(t, db, k2)
		if _, err := AcquireAll(ctx, db, []string{k1, k2, k3}); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("all with one held: %v", err)
		}
		if len(holderOf(t, db, k1))+len(holderOf(t, db, k3)) != 0 {
			t.Fatal("AcquireAll left keys held")
		}
		held.Release(ctx)
		all, err := AcquireAll(ctx, db, []string{k1, k2, k3, k1}, TTL(900*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		toks := all.Tokens()
		if len(toks) != 3 || len(all.Keys()) != 3 {
			t.Fatalf("tokens %v", toks)
		}
		time.Sleep(2 * time.Second)
		for _, k := range []string{k1, k2, k3} {
			if got := holderOf(t, db, k); got[all.Holder()] != toks[k] {
				t.Fatalf("%s: %v, want %d (renewed together)", k, got, toks[k])
			}
		}
		if ok, err := all.Release(ctx); !ok || err != nil {
			t.Fatalf("release all: %v %v", ok, err)
		}
	})
}

func TestHolderInUse(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		k := key(t, "h")
		l := mustAcquire(t, db, k, Holder("me"))
		if _, err := Acquire(context.Background(), db, k, Holder("me")); !errors.Is(err, ErrHolderInUse) {
			t.Fatalf("same key and holder twice: %v", err)
		}
		l.Release(context.Background())
		l2 := mustAcquire(t, db, k, Holder("me"))
		l2.Release(context.Background())
	})
}

func TestCancelledWaitLeavesNothing(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		k := key(t, "c")
		mustAcquire(t, db, k)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := Acquire(ctx, db, k, Wait(time.Minute), Holder("waiter"))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cancelled wait: %v", err)
		}
		for i := 0; ; i++ {
			var n int
			db.QueryRow("SELECT count(*) FROM dlock_waiters WHERE key = $1", k).Scan(&n)
			if n == 0 {
				break
			}
			if i > 300 {
				t.Fatal("still queued after the cancel")
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, ok := holderOf(t, db, k)["waiter"]; ok {
			t.Fatal("the cancelled waiter holds the key")
		}
	})
}

func TestErrorsCarrySQLState(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		var de *DatabaseError
		_, err := Acquire(context.Background(), db, "", TTL(time.Second))
		if !errors.As(err, &de) || de.SQLState == "" || errors.Is(err, ErrTimeout) {
			t.Fatalf("empty key: %v", err)
		}
		if _, err := Acquire(context.Background(), db, "k", TTL(0)); err == nil {
			t.Fatal("ttl 0 accepted")
		}
	})
}

// No answer in time (dlock's lease table locked by an open transaction):
// ErrTimeout, a *DatabaseError without SQLSTATE, once the acquire's
// deadline (max(ttl, 5 s) after its wait) has passed, with either driver
// (lib/pq reports its cancel as 57014, pgx the context's end).
func TestNoAnswerIsTimeout(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		ctx := context.Background()
		locker, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer locker.Close()
		tx, err := locker.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.Exec("LOCK TABLE dlock.lease IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		// the caller's own deadline, far after the client's (two tries of
		// 5 s): without the client's, the error would be the context's
		cctx, cancel := context.WithTimeout(ctx, 40*time.Second)
		defer cancel()
		_, err = Acquire(cctx, db, key(t, "timeout"), TTL(time.Second))
		var de *DatabaseError
		if !errors.Is(err, ErrTimeout) || !errors.As(err, &de) || de.SQLState != "" {
			t.Fatalf("no answer: %v", err)
		}
		if time.Since(start) < 5*time.Second {
			t.Fatalf("given up after %v, before the deadline", time.Since(start))
		}
	})
}

// The server: stopped past the ttl is a loss; a restart shorter than the
// ttl is not.  One driver (the rule is the client's, not the driver's).
func TestServerStopAndRestart(t *testing.T) {
	pgctl := os.Getenv("DLOCK_TEST_PGCTL")
	if pgctl == "" {
		t.Fatal("DLOCK_TEST_PGCTL is not set (scripts/test-clients.sh sets it)")
	}
	ctl := func(verb string) {
		if out, err := exec.Command(pgctl, verb).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v %s", pgctl, verb, err, out)
		}
	}
	db, err := sql.Open("postgres", dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	short := mustAcquire(t, db, key(t, "restart"), TTL(8*time.Second))
	ctl("stop")
	ctl("start")
	time.Sleep(3 * time.Second) // a renewal (every ttl/3) after the restart
	if err := short.Check(); err != nil {
		t.Fatalf("a restart shorter than the ttl lost the lease: %v", err)
	}
	long := mustAcquire(t, db, key(t, "stop"), TTL(2*time.Second))
	ctl("stop")
	select {
	case <-long.Done():
	case <-time.After(10 * time.Second):
		ctl("start")
		t.Fatal("a server stopped past the ttl: not lost")
	}
	ctl("start")
	var lost *LostError
	if err := long.Check(); !errors.As(err, &lost) || !strings.Contains(lost.Reason, "within the ttl") {
		t.Fatalf("reason: %v", err)
	}
}

// dlock_guard (issue 40): a write through Exec passes the table's guard
// (its fence is the transaction's); a plain write is refused with LK001 and
// writes nothing.
func TestExecPassesAGuard(t *testing.T) {
	eachDriver(t, func(t *testing.T, db *sql.DB) {
		k := key(t, "guard")
		tbl := fmt.Sprintf("guarded_go_%d", time.Now().UnixNano())
		if _, err := db.Exec(fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, v text);"+
			" INSERT INTO %s VALUES (1, 'before')", tbl, tbl)); err != nil {
			t.Fatal(err)
		}
		defer db.Exec("DROP TABLE " + tbl)
		if _, err := db.Exec("SELECT dlock_guard($1::regclass, $2)", tbl, "$k$"+k+"$k$"); err != nil {
			t.Fatal(err)
		}
		_, err := db.Exec(fmt.Sprintf("UPDATE %s SET v = 'unfenced' WHERE id = 1", tbl))
		if sqlState(err) != "LK001" {
			t.Fatalf("unfenced write: %v, want LK001", err)
		}
		l := mustAcquire(t, db, k, TTL(30*time.Second))
		ctx := context.Background()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Exec(ctx, tx, fmt.Sprintf("UPDATE %s SET v = 'fenced' WHERE id = 1", tbl)); err != nil {
			tx.Rollback()
			t.Fatalf("fenced write: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		var v string
		db.QueryRow(fmt.Sprintf("SELECT v FROM %s", tbl)).Scan(&v)
		if v != "fenced" {
			t.Fatalf("row holds %q", v)
		}
	})
}
