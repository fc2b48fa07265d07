package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentgate/agentgate/core"
)

var _ core.Inbox = (*DB)(nil)

// AppendInbox implements core.Inbox. The batch is one INSERT; its rows are
// inserted in key order, so that two replicas appending overlapping batches
// wait for each other's keys in one order and cannot deadlock (the claim
// order is received_at, not the insert order).
func (db *DB) AppendInbox(ctx context.Context, msgs []core.InboxMessage) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	platforms, keys := make([]string, len(msgs)), make([]string, len(msgs))
	payloads, received := make([][]byte, len(msgs)), make([]time.Time, len(msgs))
	for i, m := range msgs {
		platforms[i], keys[i], payloads[i], received[i] = m.Platform, m.Key, m.Payload, m.ReceivedAt
	}
	// WITH ORDINALITY keeps the first of two messages with one key in the
	// batch: the later one then conflicts with it and is skipped.
	tag, err := db.pool.Exec(ctx, `INSERT INTO inbox (platform, dedupe_key, payload, received_at)
		SELECT platform, dedupe_key, payload, received_at
		FROM unnest($1::text[], $2::text[], $3::bytea[], $4::timestamptz[]) WITH ORDINALITY
			AS m (platform, dedupe_key, payload, received_at, n)
		ORDER BY platform, dedupe_key, n
		ON CONFLICT DO NOTHING`, platforms, keys, payloads, received)
	if err != nil {
		return 0, fmt.Errorf("append inbox: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// inboxMark is the mark markInboxTx queued.
type inboxMark struct {
	platform, key string
	tag           pgconn.CommandTag
}

// markInboxTx queues, inside CreateRun's transaction, the record that the
// message (platform, key) started run runID: a message the ingest path
// appended and nobody processed yet is marked processed, an unknown one is
// inserted processed. After the next round trip, check tells whether the
// message was processed already. The upsert locks the row: a concurrent
// CreateRun of the same message waits for this transaction and then finds it
// processed.
func markInboxTx(tx *txn, platform, key, runID string, at time.Time) *inboxMark {
	m := &inboxMark{platform: platform, key: key}
	tx.Later(`INSERT INTO inbox (platform, dedupe_key, received_at, run_id, processed_at)
		VALUES ($1, $2, $3, $4, $3)
		ON CONFLICT (platform, dedupe_key) DO UPDATE SET run_id = EXCLUDED.run_id,
			processed_at = EXCLUDED.processed_at, payload = NULL, error = '', claimed_by = '', claim_until = '-infinity'
		WHERE inbox.processed_at IS NULL`, platform, key, at, runID).Tag(&m.tag).Wrap("mark inbox")
	return m
}

// check returns a *core.DuplicateError when the message was processed
// already, once the mark went out.
func (m *inboxMark) check(ctx context.Context, tx *txn) error {
	if m.tag.RowsAffected() == 1 {
		return nil
	}
	dup := &core.DuplicateError{Platform: m.platform, Key: m.key}
	if err := tx.QueryRow(ctx, `SELECT run_id FROM inbox WHERE platform = $1 AND dedupe_key = $2`,
		m.platform, m.key).Scan(&dup.RunID); err != nil {
		return fmt.Errorf("mark inbox: %w", err)
	}
	return dup
}
