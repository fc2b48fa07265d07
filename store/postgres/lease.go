package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/core/lease"
)

var _ lease.Store = (*DB)(nil)

// AcquireLease implements lease.Store with one upsert: it inserts the lease,
// or takes it over when it is expired or already holder's. Racing acquirers
// serialize on the row (the insert's conflict check waits for an in-flight
// insert, and DO UPDATE re-checks its WHERE against the row as committed),
// so exactly one of them holds a free lease. Times come from Options.Clock.
func (db *DB) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	now := db.opts.Clock.Now()
	var ok bool
	err := db.pool.QueryRow(ctx, `INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
		WHERE leases.holder = EXCLUDED.holder OR leases.expires_at <= $4
		RETURNING true`, name, holder, now.Add(ttl), now).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // another holder's live lease
	}
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return ok, nil
}

// ReleaseLease implements lease.Store; releasing a lease holder does not
// hold does nothing.
func (db *DB) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := db.pool.Exec(ctx, `DELETE FROM leases WHERE name = $1 AND holder = $2`, name, holder); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}
