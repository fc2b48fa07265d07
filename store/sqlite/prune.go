package sqlite

import (
	"context"
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

// PruneTx implements sqlstore.PruneDriver.
func (db *DB) PruneTx(ctx context.Context, fn func(sqlstore.PruneTx) error) error {
	return db.tx(ctx, func(tx *txn) error { return fn(pruneTx{tx}) })
}

// pruneTx stores time arguments as unix nanoseconds, as every time here.
type pruneTx struct{ tx *txn }

func nanoArgs(args []any) []any {
	for i, a := range args {
		if t, ok := a.(time.Time); ok {
			args[i] = t.UnixNano()
		}
	}
	return args
}

func (t pruneTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := t.tx.ExecContext(ctx, q, nanoArgs(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t pruneTx) Strings(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := t.tx.QueryContext(ctx, q, nanoArgs(args)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
