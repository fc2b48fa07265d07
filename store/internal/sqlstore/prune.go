package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Writer runs fn in one write transaction, committed when fn returns nil.
type Writer interface {
	WriteTx(ctx context.Context, fn func(Conn) error) error
}

// pruneOne is the statement that removes up to limit due rows of a table
// that has nothing hanging off its rows.
var pruneOne = map[core.Prunable]string{
	core.PruneInbox: `DELETE FROM inbox WHERE seq IN (SELECT seq FROM inbox
		WHERE processed_at IS NOT NULL AND processed_at < ? ORDER BY processed_at LIMIT ?)`,
	// Never the card of an approval still pending (clicks are checked
	// against it, its decision edits it), nor a send whose outcome is not
	// known (without its row a retried job would post it again).
	core.PruneOutbox: `DELETE FROM outbox WHERE key IN (SELECT key FROM outbox
		WHERE updated_at < ? AND state NOT IN ('sending', 'uncertain')
		AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.status = 'pending' AND outbox.key LIKE ('%:approval:' || a.id))
		ORDER BY updated_at LIMIT ?)`,
	core.PruneDeadJobs: `DELETE FROM jobs WHERE id IN (SELECT id FROM jobs
		WHERE dead_at IS NOT NULL AND dead_at < ? ORDER BY dead_at LIMIT ?)`,
	core.PruneAudit: `DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < ? ORDER BY at LIMIT ?)`,
}

// Prune implements core.Pruner over d: the rules of what is due and what
// goes with it, the same on every database. Blobs are not its own: their
// pruner (retention.Blobs) asks the store which ones the journal names.
func Prune(ctx context.Context, d Writer, what core.Prunable, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("prune %s: limit must be positive, got %d", what, limit)
	}
	if what == core.PruneBlobs {
		return 0, nil
	}
	var n int64
	err := d.WriteTx(ctx, func(tx Conn) (err error) {
		if what == core.PruneRuns {
			n, err = pruneRuns(ctx, tx, before, limit)
			return err
		}
		q, ok := pruneOne[what]
		if !ok {
			return fmt.Errorf("unknown kind (want one of %v)", core.Prunables)
		}
		n, err = tx.Exec(ctx, q, before, limit)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune %s: %w", what, err)
	}
	return int(n), nil
}

// pruneRuns removes up to limit runs finished before the cutoff, their
// journals, approvals and routine history entries, then the sessions left
// without runs. A queued, running or paused run is never due: only
// finished runs have finished_at.
func pruneRuns(ctx context.Context, tx Conn, before time.Time, limit int) (int64, error) {
	// NOT IN keeps the planners on runs_finished: with IN they read the
	// status index and sorted every finished run for each batch.
	ids, err := Collect(ctx, tx, `SELECT id FROM runs WHERE finished_at IS NOT NULL AND finished_at < ?
		AND status NOT IN `+ActiveStatuses+` ORDER BY finished_at LIMIT ?`, []any{before, limit}, scanString)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	in, args := In(nil, ids)
	sessions, err := Collect(ctx, tx, `SELECT DISTINCT session_id FROM runs WHERE id IN `+in, args, scanString)
	if err != nil {
		return 0, err
	}
	for _, q := range []string{
		`DELETE FROM run_events WHERE run_id IN ` + in,
		`DELETE FROM approvals WHERE run_id IN ` + in,
		`DELETE FROM routine_history WHERE run_id IN ` + in,
	} {
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return 0, err
		}
	}
	n, err := tx.Exec(ctx, `DELETE FROM runs WHERE id IN `+in, args...)
	if err != nil {
		return 0, err
	}
	if len(sessions) > 0 {
		in, args := In(nil, sessions)
		_, err = tx.Exec(ctx, `DELETE FROM sessions WHERE id IN `+in+`
			AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.session_id = sessions.id)`, args...)
	}
	return n, err
}

func scanString(r Row) (s string, err error) { return s, r.Scan(&s) }

// BlobRefs implements core.BlobReferrer: the blob ids in the journal's user
// messages (attachments) and tool results (files). It reads every such
// event, so retention asks it once per batch of blobs, and only when some
// blob is old enough to go.
func (d Data) BlobRefs(ctx context.Context) (map[string]bool, error) {
	refs := map[string]bool{}
	err := d.R.Query(ctx, `SELECT data FROM run_events WHERE type IN (?, ?) AND CAST(data AS TEXT) LIKE ?`,
		[]any{string(core.EventUserMessage), string(core.EventToolResult), "%sha256-%"}, func(r Row) error {
			var data []byte
			if err := r.Scan(&data); err != nil {
				return err
			}
			for _, id := range core.BlobIDs(data) {
				refs[id] = true
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("blob references: %w", err)
	}
	return refs, nil
}
