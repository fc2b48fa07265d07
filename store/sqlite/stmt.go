package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// maxStmts bounds the statements kept prepared per pool; past it a query
// is prepared anew each time, as before it was seen.
const maxStmts = 512

// stmtCache keeps each query prepared once per connection of a pool
// (database/sql prepares a *sql.Stmt again on each connection it meets),
// so SQLite parses and plans it once instead of at every call.
type stmtCache struct {
	pool *sql.DB
	mu   sync.Mutex
	m    map[string]*sql.Stmt
	want []string // queries seen inside transactions, prepared after the commit
}

func newStmtCache(pool *sql.DB) *stmtCache {
	return &stmtCache{pool: pool, m: map[string]*sql.Stmt{}}
}

func (c *stmtCache) cached(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[q]
}

// get returns q prepared on the pool, preparing it if needed (nil when it
// cannot be kept). Not for the write pool inside a transaction: that
// holds the pool's one connection (see note and prepareNoted).
func (c *stmtCache) get(ctx context.Context, q string) *sql.Stmt {
	if s := c.cached(q); s != nil {
		return s
	}
	c.mu.Lock()
	full := len(c.m) >= maxStmts
	c.mu.Unlock()
	if full {
		return nil
	}
	s, err := c.pool.PrepareContext(ctx, q)
	if err != nil {
		return nil // the query runs unprepared and reports its own error
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[q]; ok {
		s.Close()
		return old
	}
	c.m[q] = s
	return s
}

// note records q, run unprepared inside a transaction, for prepareNoted.
func (c *stmtCache) note(q string) {
	c.mu.Lock()
	if len(c.want) < maxStmts {
		c.want = append(c.want, q)
	}
	c.mu.Unlock()
}

// prepareNoted prepares the noted queries; the committer calls it between
// transactions, when the write connection is free.
func (c *stmtCache) prepareNoted(ctx context.Context) {
	c.mu.Lock()
	want := c.want
	c.want = nil
	c.mu.Unlock()
	for _, q := range want {
		c.get(ctx, q)
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, s := range c.m {
		s.Close()
		delete(c.m, q)
	}
}

// txn is a write transaction whose statements use the write connection's
// prepared statements. They run to their end whatever their caller's
// context: the transaction is shared (see committer), and SQLite rolls
// back all of it, the other callers' writes too, when an INSERT, UPDATE or
// DELETE in it is interrupted. A caller's context that can end would also
// cost the driver a goroutine per statement.
type txn struct {
	*sql.Tx
	st *stmtCache
}

func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	ctx = context.WithoutCancel(ctx)
	if s := t.st.cached(q); s != nil {
		return t.Tx.StmtContext(ctx, s).ExecContext(ctx, args...)
	}
	t.st.note(q)
	return t.Tx.ExecContext(ctx, q, args...)
}

func (t *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	ctx = context.WithoutCancel(ctx)
	if s := t.st.cached(q); s != nil {
		return t.Tx.StmtContext(ctx, s).QueryContext(ctx, args...)
	}
	t.st.note(q)
	return t.Tx.QueryContext(ctx, q, args...)
}

func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	ctx = context.WithoutCancel(ctx)
	if s := t.st.cached(q); s != nil {
		return t.Tx.StmtContext(ctx, s).QueryRowContext(ctx, args...)
	}
	t.st.note(q)
	return t.Tx.QueryRowContext(ctx, q, args...)
}

// readPool is the reader connections, with prepared statements. A read
// that has started runs to its end even if its caller's context ends
// meanwhile (reads are indexed and paged, a few milliseconds at most): a
// context that can end costs two goroutines per statement, the driver's
// interrupter and database/sql's closer. A caller whose context has ended
// starts no statement.
type readPool struct {
	*sql.DB
	st *stmtCache
}

func (p *readPool) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	if s := p.st.get(ctx, q); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return p.DB.QueryContext(ctx, q, args...)
}

func (p *readPool) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if ctx.Err() != nil {
		return p.DB.QueryRowContext(ctx, q, args...) // answers ctx's error
	}
	ctx = context.WithoutCancel(ctx)
	if s := p.st.get(ctx, q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return p.DB.QueryRowContext(ctx, q, args...)
}
