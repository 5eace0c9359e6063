package dlock

import (
	"context"
	"database/sql"
	"encoding/json"
	"sync"
	"time"
)

// Batch is the rows one Next claimed: renewed every ttl/3
// (dlock_renew_claims) until it is closed or lost, by the leases' rule (a
// refused renewal, or the ttl passed since the sending of the last
// renewal, or of the claim, the server confirmed).  Its methods are safe
// for concurrent use.
type Batch struct {
	c    *Claims
	keys []string
	rows []map[string]interface{}

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	stop   chan struct{}
	ended  chan struct{}

	mu          sync.Mutex
	outstanding map[string]bool // keys still held
	deadline    time.Time
	lostReason  string
	conn        *sql.Conn // the renewals' own connection
	closeOnce   sync.Once
	closeN      int64
	closeErr    error
}

func newBatch(c *Claims, keys []string, rows []map[string]interface{}, sent time.Time) *Batch {
	b := &Batch{c: c, keys: keys, rows: rows, done: make(chan struct{}),
		stop: make(chan struct{}), ended: make(chan struct{}),
		outstanding: map[string]bool{}, deadline: sent.Add(c.o.ttl)}
	for _, k := range keys {
		b.outstanding[k] = true
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	go b.renewClaims()
	return b
}

// Rows are the claimed rows, each as its columns' JSON values by name.
func (b *Batch) Rows() []map[string]interface{} { return b.rows }

// Keys are the rows' primary keys as text, in the rows' order.
func (b *Batch) Keys() []string { return append([]string(nil), b.keys...) }

// Done is closed when the batch is lost or closed.
func (b *Batch) Done() <-chan struct{} { return b.done }

// Context is cancelled when the batch is lost or closed.
func (b *Batch) Context() context.Context { return b.ctx }

// Check is nil while the batch's claims are held; else an error matching
// ErrLost.
func (b *Batch) Check() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lostReason != "" {
		return &LostError{Key: "claims:" + b.c.table.name, Reason: b.lostReason}
	}
	if !time.Now().Before(b.deadline) {
		return &LostError{Key: "claims:" + b.c.table.name, Reason: "no renewal confirmed within the ttl"}
	}
	return nil
}

func (b *Batch) lose(reason string) {
	b.mu.Lock()
	first := b.lostReason == ""
	if first {
		b.lostReason = reason
	}
	b.mu.Unlock()
	if first {
		close(b.done)
		b.cancel()
	}
}

// Complete gives back the claims of keys (none: every key still held) as
// done (dlock_complete) and returns the keys whose claims it still held:
// the completion is fenced, a key missing from the answer was lost.
func (b *Batch) Complete(ctx context.Context, keys ...string) ([]string, error) {
	keys = b.pick(keys)
	if len(keys) == 0 {
		return nil, nil
	}
	t := b.c.table
	rows, err := b.c.db.QueryContext(ctx, "SELECT c.k::text FROM dlock_complete($1::regclass, $2, "+
		keysArray(t.pktype)+") AS c(k)", t.name, b.c.holder, jsonKeys(keys))
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	b.forget(keys)
	var done []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, dbError(err)
		}
		done = append(done, k)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(err)
	}
	return done, nil
}

// Unclaim gives back the claims of keys (none: every key still held),
// claimable again at once; how many it gave back.
func (b *Batch) Unclaim(ctx context.Context, keys ...string) (int64, error) {
	keys = b.pick(keys)
	t := b.c.table
	return b.count(ctx, keys, "SELECT dlock_unclaim($1::regclass, $2, "+keysArray(t.pktype)+")",
		t.name, b.c.holder, jsonKeys(keys))
}

// Fail gives back the claims of keys (none: every key still held) as
// failed: not claimable again before retryAfter (0: the claim's Backoff).
func (b *Batch) Fail(ctx context.Context, retryAfter time.Duration, keys ...string) (int64, error) {
	keys = b.pick(keys)
	t := b.c.table
	var after interface{}
	if retryAfter > 0 {
		after = retryAfter.Microseconds()
	}
	return b.count(ctx, keys, "SELECT dlock_unclaim($1::regclass, $2, "+keysArray(t.pktype)+
		", $4::bigint * interval '1 microsecond')", t.name, b.c.holder, jsonKeys(keys), after)
}

// Close stops the renewals and gives back (Unclaim) the claims still held;
// idempotent: a second call returns the first's answer.
func (b *Batch) Close(ctx context.Context) (int64, error) {
	b.closeOnce.Do(func() {
		close(b.stop)
		<-b.ended
		if keys := b.pick(nil); len(keys) > 0 {
			b.closeN, b.closeErr = b.Unclaim(ctx, keys...)
		}
		b.lose("closed")
		b.dropConn()
		b.c.mu.Lock()
		if b.c.batch == b {
			b.c.batch = nil
		}
		b.c.mu.Unlock()
	})
	return b.closeN, b.closeErr
}

// count runs a give-back and scans its count; the keys are held no more,
// whatever the answer.
func (b *Batch) count(ctx context.Context, keys []string, query string, args ...interface{}) (int64, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	var n sql.NullInt64
	err := b.c.db.QueryRowContext(ctx, query, args...).Scan(&n)
	b.forget(keys)
	if err != nil {
		return 0, dbError(err)
	}
	return n.Int64, nil
}

// pick is keys, or with none every key still held.
func (b *Batch) pick(keys []string) []string {
	if len(keys) > 0 {
		return keys
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range b.keys {
		if b.outstanding[k] {
			keys = append(keys, k)
		}
	}
	return keys
}

func (b *Batch) forget(keys []string) {
	b.mu.Lock()
	for _, k := range keys {
		delete(b.outstanding, k)
	}
	b.mu.Unlock()
}

// keysArray casts the JSON array parameter $3 of keys as text to the
// primary key's type.
func keysArray(pktype string) string {
	return "ARRAY(SELECT pg_catalog.json_array_elements_text($3::json))::" + pktype + "[]"
}

func jsonKeys(keys []string) string {
	if keys == nil {
		keys = []string{}
	}
	js, _ := json.Marshal(keys)
	return string(js)
}
