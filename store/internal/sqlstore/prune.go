package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentgate/agentgate/core"
)

// PruneTx is a driver's write transaction for Prune. Statements are
// written once, with ? placeholders (a driver numbers them as its
// database wants); a time.Time argument is stored as the driver stores
// times.
type PruneTx interface {
	// Exec runs a statement and returns the rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Strings runs a query and returns its first column (text).
	Strings(ctx context.Context, query string, args ...any) ([]string, error)
}

// PruneDriver runs fn in one write transaction.
type PruneDriver interface {
	PruneTx(ctx context.Context, fn func(PruneTx) error) error
}

// pruneOne is the statement that removes up to limit due rows of a table
// that has nothing hanging off its rows.
var pruneOne = map[core.Prunable]string{
	core.PruneInbox: `DELETE FROM inbox WHERE seq IN (SELECT seq FROM inbox
		WHERE processed_at IS NOT NULL AND processed_at < ? ORDER BY processed_at LIMIT ?)`,
	core.PruneOutbox: `DELETE FROM outbox WHERE key IN (SELECT key FROM outbox
		WHERE updated_at < ? ORDER BY updated_at LIMIT ?)`,
	core.PruneDeadJobs: `DELETE FROM jobs WHERE id IN (SELECT id FROM jobs
		WHERE dead_at IS NOT NULL AND dead_at < ? ORDER BY dead_at LIMIT ?)`,
	core.PruneAudit: `DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < ? ORDER BY at LIMIT ?)`,
}

// Prune implements core.Pruner over d: the rules of what is due and what
// goes with it, the same on every database.
func Prune(ctx context.Context, d PruneDriver, what core.Prunable, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("prune %s: limit must be positive, got %d", what, limit)
	}
	var n int64
	err := d.PruneTx(ctx, func(tx PruneTx) (err error) {
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
func pruneRuns(ctx context.Context, tx PruneTx, before time.Time, limit int) (int64, error) {
	// NOT IN keeps the planners on runs_finished: with IN they read the
	// status index and sorted every finished run for each batch.
	ids, err := tx.Strings(ctx, `SELECT id FROM runs WHERE finished_at IS NOT NULL AND finished_at < ?
		AND status NOT IN `+ActiveStatuses+` ORDER BY finished_at LIMIT ?`, before, limit)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	in := `(?` + strings.Repeat(", ?", len(ids)-1) + `)`
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	sessions, err := tx.Strings(ctx, `SELECT DISTINCT session_id FROM runs WHERE id IN `+in, args...)
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
		sargs := make([]any, len(sessions))
		for i, s := range sessions {
			sargs[i] = s
		}
		_, err = tx.Exec(ctx, `DELETE FROM sessions WHERE id IN (?`+strings.Repeat(", ?", len(sessions)-1)+`)
			AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.session_id = sessions.id)`, sargs...)
	}
	return n, err
}
