package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/core"
)

// This file implements core.Blobs: attachments' bytes in the blobs table,
// named by their content, so every replica reads what another stored.

var (
	_ core.Blobs        = (*DB)(nil)
	_ core.BlobRemover  = (*DB)(nil)
	_ core.BlobReferrer = (*DB)(nil)
)

// PutBlob implements core.Blobs; the same bytes are stored once, and
// putting them again marks them stored now (created_at: when last stored).
func (db *DB) PutBlob(ctx context.Context, data []byte) (string, error) {
	id := core.BlobID(data)
	if _, err := db.pool.Exec(ctx, `INSERT INTO blobs (id, data) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET created_at = now()`, id, data); err != nil {
		return "", fmt.Errorf("put blob: %w", err)
	}
	return id, nil
}

// GetBlob implements core.Blobs.
func (db *DB) GetBlob(ctx context.Context, id string) ([]byte, error) {
	var data []byte
	err := db.pool.QueryRow(ctx, `SELECT data FROM blobs WHERE id = $1`, id).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("blob %s: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", id, err)
	}
	return data, nil
}

// BlobsStoredBefore implements core.BlobRemover.
func (db *DB) BlobsStoredBefore(ctx context.Context, t time.Time) ([]string, error) {
	rows, err := db.pool.Query(ctx, `SELECT id FROM blobs WHERE created_at < $1`, t)
	if err != nil {
		return nil, fmt.Errorf("list blobs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list blobs: %w", err)
	}
	return ids, nil
}

// RemoveBlob implements core.BlobRemover: one statement, so a put of the
// same bytes either comes first (the row is newer: kept) or after (it
// stores the row again).
func (db *DB) RemoveBlob(ctx context.Context, id string, t time.Time) (bool, error) {
	tag, err := db.pool.Exec(ctx, `DELETE FROM blobs WHERE id = $1 AND created_at < $2`, id, t)
	if err != nil {
		return false, fmt.Errorf("remove blob %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}
