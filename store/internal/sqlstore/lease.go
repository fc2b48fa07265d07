package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/core"
)

// AcquireLease implements lease.Store with one upsert: it inserts the lease,
// or takes it over when it is expired or already holder's. Racing acquirers
// serialize on the row (the insert's conflict check waits for an in-flight
// insert, and DO UPDATE checks its WHERE against the row as committed), so
// exactly one of them holds a free lease.
func (s Data) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	now := s.Now()
	err := One(ctx, s.W, `INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leases.holder = excluded.holder OR leases.expires_at <= ?
		RETURNING name`, []any{name, holder, now.Add(ttl), now}, func(Row) error { return nil })
	if errors.Is(err, core.ErrNotFound) {
		return false, nil // another holder's live lease
	}
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return true, nil
}

// ReleaseLease implements lease.Store; releasing a lease holder does not
// hold does nothing.
func (s Data) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := s.W.Exec(ctx, `DELETE FROM leases WHERE name = ? AND holder = ?`, name, holder); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}
