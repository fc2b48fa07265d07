package postgres

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

var _ core.Pruner = (*DB)(nil)

// Prune implements core.Pruner (sqlstore.Prune).
func (db *DB) Prune(ctx context.Context, what core.Prunable, before time.Time, limit int) (int, error) {
	return sqlstore.Prune(ctx, db, what, before, limit)
}

// PruneTx implements sqlstore.PruneDriver.
func (db *DB) PruneTx(ctx context.Context, fn func(sqlstore.PruneTx) error) error {
	return db.tx(ctx, func(tx *txn) error { return fn(pruneTx{tx}) })
}

type pruneTx struct{ tx *txn }

// dollars numbers q's ? placeholders $1, $2, … (the shared statements have
// no ? inside strings).
func dollars(q string) string {
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (t pruneTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, dollars(q), args...)
	return tag.RowsAffected(), err
}

func (t pruneTx) Strings(ctx context.Context, q string, args ...any) (out []string, err error) {
	t.tx.Later(dollars(q), args...).Rows(func(rows pgx.Rows) error {
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if ferr := t.tx.Flush(ctx); ferr != nil {
		return nil, ferr
	}
	return out, err
}
