package dlock

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Claims is a claim loop over the rows of one table (dlock_claim): each
// Next claims a batch of up to n rows for the loop's holder, renewed every
// ttl/3 until it is completed, given back or lost.  A loop holds one batch
// at a time; run several loops (each with its own holder) for more.
type Claims struct {
	db     *sql.DB
	table  claimTable
	holder string
	o      options

	mu    sync.Mutex
	batch *Batch // the batch not yet ended, if any
}

// claimTable is a claim table as the server names it, with its primary
// key's column (quoted) and type: the keys go to the server as text and are
// cast there.
type claimTable struct {
	name, pk, pktype string
}

const describeSQL = `SELECT c.oid::pg_catalog.regclass::text, pg_catalog.quote_ident(a.attname),
       pg_catalog.format_type(a.atttypid, a.atttypmod)
  FROM pg_catalog.pg_index i
  JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
  JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
 WHERE i.indrelid = $1::pg_catalog.regclass AND i.indisprimary AND i.indnatts = 1`

// NewClaims describes table (a name as in SQL: "jobs", "app.jobs") and
// returns its claim loop for holder (every loop needs a holder of its own:
// its renewals and give-backs are by holder).
func NewClaims(ctx context.Context, db *sql.DB, table, holder string, opts ...Option) (*Claims, error) {
	o, err := buildClaimOptions(opts)
	if err != nil {
		return nil, err
	}
	if holder == "" {
		return nil, fmt.Errorf("dlock: holder must not be empty")
	}
	var t claimTable
	err = db.QueryRowContext(ctx, describeSQL, table).Scan(&t.name, &t.pk, &t.pktype)
	if err == sql.ErrNoRows {
		return nil, fmt.Errorf("dlock: %q has no single-column primary key: dlock_claim needs one", table)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, dbError(err)
	}
	return &Claims{db: db, table: t, holder: holder, o: o}, nil
}

// Next ends the loop's previous batch if it is still open (giving back
// what it holds) and claims the next: up to n rows, or waits for some
// (in the server for Wait at a time, else polling every Poll) until ctx
// ends (then ctx.Err()).  A database error ends Next.
func (c *Claims) Next(ctx context.Context) (*Batch, error) {
	c.mu.Lock()
	prev := c.batch
	c.mu.Unlock()
	if prev != nil {
		prev.Close(ctx)
	}
	for {
		b, err := c.claimBatch(ctx)
		if err != nil || b != nil {
			return b, err
		}
		if c.o.wait == 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(c.o.poll):
			}
		}
	}
}

// claimBatch is one dlock_claim call: a batch, or nil when no row was
// claimable (within the wait).
func (c *Claims) claimBatch(ctx context.Context) (*Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sent := time.Now()
	query, args := c.claimStatement()
	rows, err := c.db.QueryContext(ctx, query, args...)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, dbError(err)
	}
	defer rows.Close()
	var keys []string
	var data []map[string]interface{}
	for rows.Next() {
		var k, js string
		if err := rows.Scan(&k, &js); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, dbError(err)
		}
		m := map[string]interface{}{}
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			return nil, err
		}
		keys = append(keys, k)
		data = append(data, m)
	}
	if err := rows.Err(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, dbError(err)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	b := newBatch(c, keys, data, sent)
	c.mu.Lock()
	c.batch = b
	c.mu.Unlock()
	return b, nil
}

// claimStatement is the dlock_claim call with the loop's named arguments, and
// its parameters; each row comes as its key (text) and the row as JSON.
func (c *Claims) claimStatement() (string, []interface{}) {
	o := c.o
	args := []interface{}{c.holder, o.n, o.ttl.Microseconds(),
		nullString(o.filter), nullString(o.orderBy), nullInt(o.maxAttempts)}
	var named strings.Builder
	add := func(name, cast string, v interface{}) {
		args = append(args, v)
		fmt.Fprintf(&named, ", %s => $%d%s", name, len(args), cast)
	}
	if o.wait > 0 {
		add("wait", micros, o.wait.Microseconds())
	}
	if o.backoff > 0 {
		add("backoff", micros, o.backoff.Microseconds())
	}
	if o.backoffMax > 0 {
		add("backoff_max", micros, o.backoffMax.Microseconds())
	}
	if o.groupBy != "" {
		add("group_by", "::text", o.groupBy)
	}
	if o.perGroup > 0 {
		add("per_group", "::integer", o.perGroup)
	}
	if o.fair {
		add("fair", "::boolean", true)
	}
	return fmt.Sprintf("SELECT c.%s::text, pg_catalog.to_json(c)::text"+
		" FROM dlock_claim(NULL::%s, $1, $2::integer, $3%s, $4::text, $5::text, $6::integer%s) AS c",
		c.table.pk, c.table.name, micros, named.String()), args
}

// Close gives back the claims of the loop's open batch, if any.
func (c *Claims) Close(ctx context.Context) error {
	c.mu.Lock()
	b := c.batch
	c.mu.Unlock()
	if b == nil {
		return nil
	}
	_, err := b.Close(ctx)
	return err
}

// Work runs handler on each batch of table's claim loop until ctx ends
// (then it returns nil) or a database error: a batch whose handler returns
// nil is completed (the keys it did not complete itself), one whose handler
// returns an error is given back as failed (Fail, with the claim's
// backoff); the handler's ctx is the batch's Context, cancelled on loss.
func Work(ctx context.Context, db *sql.DB, table, holder string,
	handler func(ctx context.Context, b *Batch) error, opts ...Option) error {
	c, err := NewClaims(ctx, db, table, holder, opts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer c.Close(context.Background())
	for {
		b, err := c.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if herr := handler(b.Context(), b); herr != nil {
			_, err = b.Fail(context.Background(), 0)
		} else {
			_, err = b.Complete(context.Background())
		}
		b.Close(context.Background())
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
}

func nullString(s string) interface{} {
	if s == "" {
		return nil
	}
	return s
}

func nullInt(n int) interface{} {
	if n == 0 {
		return nil
	}
	return n
}
