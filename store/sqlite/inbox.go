package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/core"
)

var _ core.Inbox = (*DB)(nil)

// appendInboxStmt stores one delivery; it is prepared once on the write
// connection (txn.ExecContext), not at each delivery.
const appendInboxStmt = `INSERT INTO inbox(platform, dedupe_key, payload, received_at)
	VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`

// AppendInbox implements core.Inbox.
func (db *DB) AppendInbox(ctx context.Context, msgs []core.InboxMessage) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	added := 0
	// Urgent: deliveries wait for this commit before they are acknowledged.
	err := db.writeTx(ctx, true, func(tx *txn) error {
		added = 0
		for _, m := range msgs {
			res, err := tx.ExecContext(ctx, appendInboxStmt, m.Platform, m.Key, m.Payload, m.ReceivedAt.UnixNano())
			if err != nil {
				return fmt.Errorf("message %s: %w", m.Key, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else {
				added += int(n)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("append inbox: %w", err)
	}
	return added, nil
}

// markInboxTx records, inside CreateRun's transaction, that the message
// (platform, key) started run runID: a message the ingest path appended and
// nobody processed yet is marked processed, an unknown one is inserted
// processed. It returns a *core.DuplicateError when the message was
// processed already.
func markInboxTx(ctx context.Context, tx *txn, platform, key, runID string, at time.Time) error {
	res, err := tx.ExecContext(ctx, `INSERT INTO inbox(platform, dedupe_key, received_at, run_id, processed_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (platform, dedupe_key) DO UPDATE SET run_id = excluded.run_id,
			processed_at = excluded.processed_at, payload = NULL, error = '', claimed_by = '', claim_until = 0
		WHERE inbox.processed_at IS NULL`, platform, key, at.UnixNano(), runID, at.UnixNano())
	if err != nil {
		return fmt.Errorf("mark inbox: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	dup := &core.DuplicateError{Platform: platform, Key: key}
	if err := tx.QueryRowContext(ctx, `SELECT run_id FROM inbox WHERE platform = ? AND dedupe_key = ?`,
		platform, key).Scan(&dup.RunID); err != nil {
		return fmt.Errorf("mark inbox: %w", err)
	}
	return dup
}
