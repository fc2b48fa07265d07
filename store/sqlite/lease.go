package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/core/lease"
)

var _ lease.Store = (*DB)(nil)

// AcquireLease implements lease.Store.
func (db *DB) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	now := db.opts.Clock.Now()
	var got string
	err := db.tx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO leases(name, holder, until) VALUES (?, ?, ?)
			ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, until = excluded.until
			WHERE leases.holder = excluded.holder OR leases.until <= ?`,
			name, holder, now.Add(ttl).UnixNano(), now.UnixNano()); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT holder FROM leases WHERE name = ?`, name).Scan(&got)
	})
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return got == holder, nil
}

// ReleaseLease implements lease.Store.
func (db *DB) ReleaseLease(ctx context.Context, name, holder string) error {
	err := db.tx(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE name = ? AND holder = ?`, name, holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}
