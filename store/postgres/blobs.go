package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/core"
)

// This file implements core.Blobs: attachments' bytes in the blobs table,
// named by their content, so every replica reads what another stored.

var _ core.Blobs = (*DB)(nil)

// PutBlob implements core.Blobs; the same bytes are stored once.
func (db *DB) PutBlob(ctx context.Context, data []byte) (string, error) {
	id := core.BlobID(data)
	if _, err := db.pool.Exec(ctx, `INSERT INTO blobs (id, data) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, data); err != nil {
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
