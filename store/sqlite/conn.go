package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

var _ core.Pruner = (*DB)(nil)

// Prune implements core.Pruner (sqlstore.Prune); each call is one write
// transaction that waits its turn behind the urgent ones.
func (db *DB) Prune(ctx context.Context, what core.Prunable, before time.Time, limit int) (int, error) {
	return sqlstore.Prune(ctx, db, what, before, limit)
}

// WriteTx implements sqlstore.Writer.
func (db *DB) WriteTx(ctx context.Context, fn func(sqlstore.Conn) error) error {
	return db.tx(ctx, func(tx *txn) error { return fn(conn{tx}) })
}

// dialect is SQLite's sqlstore.Dialect.
var dialect = &sqlstore.Dialect{Seq: "rowid", All: -1, Unset: "0"}

// conn is sqlstore.Conn over the read pool or a write transaction, both
// with prepared statements. Times are stored as unix nanoseconds.
type conn struct {
	c interface {
		ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	}
}

func nanoArgs(args []any) []any {
	for i, a := range args {
		switch t := a.(type) {
		case time.Time:
			args[i] = t.UnixNano()
		case *time.Time:
			args[i] = toNull(t)
		}
	}
	return args
}

func (c conn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := c.c.ExecContext(ctx, q, nanoArgs(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c conn) Query(ctx context.Context, q string, args []any, row func(sqlstore.Row) error) error {
	rows, err := c.c.QueryContext(ctx, q, nanoArgs(args)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// writeConn is sqlstore.Conn whose statements each run in a write
// transaction of their own.
type writeConn struct{ db *DB }

func (c writeConn) Exec(ctx context.Context, q string, args ...any) (n int64, err error) {
	err = c.db.tx(ctx, func(tx *txn) (err error) {
		n, err = conn{tx}.Exec(ctx, q, args...)
		return err
	})
	return n, err
}

func (c writeConn) Query(ctx context.Context, q string, args []any, row func(sqlstore.Row) error) error {
	return c.db.tx(ctx, func(tx *txn) error { return conn{tx}.Query(ctx, q, args, row) })
}
