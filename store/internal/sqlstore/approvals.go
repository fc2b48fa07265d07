package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Decided is what a driver's DecideApproval did.
type Decided struct {
	// Decided: the approval was pending (and its arguments matched) and now
	// holds the decision.
	Decided bool
	// Approval is the approval as decided (when Decided).
	Approval core.Approval
	// Run is the approval's run as the decision left it (status queued when
	// it resumed), with its last journal seq.
	Run core.Run
}

// RunTx is what a transaction does to runs, their approvals and journals.
// As with RoutineTx, a driver may defer writes whose result nobody reads
// (AppendEvents, Enqueue, InsertAudit) until the next read or the commit.
type RunTx interface {
	// DecideApproval, holding the row of approval id's run: moves the
	// approval from pending to d (its status, decider, reason and time) if
	// its arguments hash is d.ArgsSHA256 (when set); a paused run none of
	// whose approvals is still pending becomes queued. core.ErrNotFound when
	// there is no such approval; Decided false when it is not pending or
	// its arguments differ.
	DecideApproval(ctx context.Context, id string, d core.Decision) (Decided, error)
	// GetApproval reads approval id as it is.
	GetApproval(ctx context.Context, id string) (core.Approval, error)
	// AppendEvents appends evs to run runID's journal after seq after
	// (events without a time get at).
	AppendEvents(ctx context.Context, runID string, after int64, evs []core.Event, at time.Time) error
	// Enqueue enqueues jobs, all in one call (so that their keys are locked
	// in one order).
	Enqueue(ctx context.Context, jobs ...core.Job) error
	// InsertAudit appends an audit entry (its At is set).
	InsertAudit(ctx context.Context, e core.AuditEntry) error
}

// RunDriver runs run transactions.
type RunDriver interface {
	// RunTx runs fn in one transaction, committed when fn returns nil.
	RunTx(ctx context.Context, fn func(RunTx) error) error
	// Now is the store's clock.
	Now() time.Time
	// Enqueued is told that jobs were enqueued (an embedded queue wakes its
	// workers).
	Enqueued()
}

// Runs implements the transitions of core.Store that are written here
// over a driver.
type Runs struct {
	D RunDriver
}

// DecideApproval implements core.Store. With *core.NotPendingError it also
// returns the approval as it is. A decision journals approval_decided on
// the run, enqueues the approval's job (its card is updated) and, when the
// run resumed (or was waiting for a worker), the run's job.
func (s Runs) DecideApproval(ctx context.Context, id string, d core.Decision) (core.Approval, error) {
	switch d.Status {
	case core.ApprovalApproved, core.ApprovalDenied, core.ApprovalExpired, core.ApprovalCancelled:
	default:
		return core.Approval{}, fmt.Errorf("decide approval %s: status %q is not a decision", id, d.Status)
	}
	if d.At.IsZero() {
		d.At = s.D.Now()
	}
	var out core.Approval
	err := s.D.RunTx(ctx, func(tx RunTx) error {
		res, err := tx.DecideApproval(ctx, id, d)
		if err != nil {
			return err
		}
		if !res.Decided {
			a, err := tx.GetApproval(ctx, id)
			if err != nil {
				return err
			}
			if a.Status != core.ApprovalPending {
				out = a
				return &core.NotPendingError{ID: id, Status: a.Status}
			}
			return core.ErrArgsMismatch
		}
		a, r := res.Approval, res.Run
		ev := core.NewEvent(core.EventApprovalDecided, core.ApprovalDecided{
			ApprovalID: id, ToolCallID: a.ToolCallID, Status: d.Status, DecidedBy: d.By, DecidedByName: d.ByName,
			Via: d.Via, Reason: d.Reason,
		})
		if err := tx.AppendEvents(ctx, r.ID, r.LastSeq, []core.Event{ev}, d.At); err != nil {
			return err
		}
		if d.Audit != nil {
			e := *d.Audit
			if e.At.IsZero() {
				e.At = d.At
			}
			if err := tx.InsertAudit(ctx, e); err != nil {
				return err
			}
		}
		jobs := []core.Job{core.ApprovalJobFor(id, d.Status)}
		if r.Status == core.RunQueued {
			jobs = append(jobs, core.RunJobFor(r.ID))
		}
		out = a
		return tx.Enqueue(ctx, jobs...)
	})
	if err != nil {
		return out, fmt.Errorf("decide approval %s: %w", id, err)
	}
	s.D.Enqueued()
	return out, nil
}
