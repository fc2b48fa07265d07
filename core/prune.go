package core

import (
	"context"
	"time"
)

// Prunable is what retention removes (see Pruner).
type Prunable string

const (
	// PruneRuns: finished runs (completed, failed, cancelled) that finished
	// before the cutoff, with their journals, approvals and routine history
	// entries, and the sessions they leave without runs.
	PruneRuns Prunable = "runs"
	// PruneInbox: inbox messages processed before the cutoff (their
	// dedupe keys: a platform's redelivery after that would be new).
	PruneInbox Prunable = "inbox"
	// PruneOutbox: outbox sends last changed before the cutoff.
	PruneOutbox Prunable = "outbox"
	// PruneDeadJobs: jobs dead-lettered before the cutoff.
	PruneDeadJobs Prunable = "dead_jobs"
	// PruneAudit: audit entries recorded before the cutoff.
	PruneAudit Prunable = "audit"
	// PruneBlobs: attachments (files people sent, files tools returned)
	// that no journal entry names any more (their runs were pruned, or the
	// message that was to name them never started a run), last stored
	// before the cutoff.
	PruneBlobs Prunable = "blobs"
)

// Prunables lists every Prunable, in the order retention prunes them:
// blobs last, so that those of the runs a sweep removed go in the same
// sweep.
var Prunables = []Prunable{PruneRuns, PruneInbox, PruneOutbox, PruneDeadJobs, PruneAudit, PruneBlobs}

// Pruner removes what retention no longer keeps. Prune removes at most
// limit items of what that are due (older than before) in one short write
// transaction and returns how many it removed (for PruneRuns: runs); fewer
// than limit means nothing more is due. Live rows (queued, running or
// paused runs, waiting inbox messages, jobs not dead) are never removed.
// A store or queue that keeps nothing of what returns 0, nil.
type Pruner interface {
	Prune(ctx context.Context, what Prunable, before time.Time, limit int) (int, error)
}
