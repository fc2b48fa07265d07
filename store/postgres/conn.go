package postgres

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

var _ core.Pruner = (*DB)(nil)

// Prune implements core.Pruner (sqlstore.Prune).
func (db *DB) Prune(ctx context.Context, what core.Prunable, before time.Time, limit int) (int, error) {
	return sqlstore.Prune(ctx, db, what, before, limit)
}

// WriteTx implements sqlstore.Writer.
func (db *DB) WriteTx(ctx context.Context, fn func(sqlstore.Conn) error) error {
	return db.tx(ctx, func(tx *txn) error { return fn(txConn{tx}) })
}

// dialect is PostgreSQL's sqlstore.Dialect.
var dialect = &sqlstore.Dialect{Seq: "pk", All: nil, ForUpdate: " FOR UPDATE",
	ForNoKeyUpdate: " FOR NO KEY UPDATE", SkipLocked: " FOR UPDATE SKIP LOCKED", Unset: "'-infinity'"}

var numbered sync.Map // statement with ? placeholders → with $n

// dollars numbers q's placeholders: ? becomes $1, $2, … in order, ?N
// becomes $N (the shared statements have no ? inside strings).
func dollars(q string) string {
	if d, ok := numbered.Load(q); ok {
		return d.(string)
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c != '?' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('$')
		if i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9' {
			continue // ?N: its digits follow
		}
		n++
		b.WriteString(strconv.Itoa(n))
	}
	numbered.Store(q, b.String())
	return b.String()
}

// poolConn is sqlstore.Conn over the pool, a statement per transaction.
type poolConn struct{ p *pgxpool.Pool }

func (c poolConn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := c.p.Exec(ctx, dollars(q), args...)
	return tag.RowsAffected(), err
}

func (c poolConn) Query(ctx context.Context, q string, args []any, row func(sqlstore.Row) error) error {
	rows, _ := c.p.Query(ctx, dollars(q), args...)
	return eachRow(rows, row)
}

func eachRow(rows pgx.Rows, row func(sqlstore.Row) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// txConn is sqlstore.Conn over a transaction: each statement goes out with
// the ones queued before it.
type txConn struct{ tx *txn }

func (c txConn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := c.tx.Exec(ctx, dollars(q), args...)
	return tag.RowsAffected(), err
}

func (c txConn) Query(ctx context.Context, q string, args []any, row func(sqlstore.Row) error) error {
	return c.tx.send(ctx, &queued{sql: dollars(q), args: args, read: func(rows pgx.Rows) error {
		return eachRow(rows, row)
	}}, false)
}
