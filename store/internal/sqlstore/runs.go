package sqlstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/core"
)

// The columns of runs, sessions and approvals, the same on every database.
const (
	RunCols = `id, session_id, agent_id, user_id, run_type, status, parent_run_id, routine_id, started_by,
		input, output, error, input_tokens, output_tokens, last_seq, created_at, started_at, finished_at,
		claimed_by, claim_until, conversation`
	SessionCols  = `id, agent_id, user_id, platform, workspace, channel, thread, title, created_at, updated_at`
	ApprovalCols = `id, run_id, session_id, tool_call_id, tool, arguments, args_sha256, policy, requested_by,
		status, decided_by, decided_by_name, decided_via, reason, created_at, expires_at, decided_at, origin`
	// ActiveStatuses are the SQL list of statuses of a run that is not
	// terminal.
	ActiveStatuses = `('queued', 'running', 'paused')`
)

// RunRow is a run with its claim, which core.Run does not carry.
type RunRow struct {
	core.Run
	ClaimedBy  string
	ClaimUntil *time.Time // nil: not claimed
}

// Claim is the input of RunDriver.ClaimRun.
type Claim struct {
	ID, Owner  string
	Now, Until time.Time
	Events     []core.Event // checked (CheckEvents)
}

// Start is the input of RunDriver.StartRun: core.Start with checked events.
type Start = core.Start

// Cancelled is a pending approval that closing its run cancelled.
type Cancelled struct{ ID, ToolCallID string }

// Closing is what RunTx.Close read while locking a run to close it.
type Closing struct {
	Run RunRow
	// Cancelled are the run's approvals that were pending, oldest first;
	// they are cancelled now (by, reason and at of the Close call).
	Cancelled []Cancelled
	// Next is the session's next run to start, when the closing run is the
	// session's head and the next one waits for a worker; "" otherwise.
	Next string
}

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
// A driver may defer writes whose result nobody reads until the next read
// or the commit; a *core.Run it returns is complete once the transaction
// has committed.
type RunTx interface {
	// CreateRuns inserts each checked run (core.NewRun.Normalize): its
	// inbox entry (a *core.DuplicateError when the key is taken), its
	// session when new (else it locks and touches it; ErrSessionAgent when
	// the session is another agent's), the run and its first events.
	CreateRuns(ctx context.Context, runs []core.NewRun) ([]core.Run, error)
	// LockRun reads run id and holds its row until the transaction ends.
	LockRun(ctx context.Context, id string) (RunRow, error)
	// InsertApproval stores pending approval a of run id (args and policy
	// are its checked JSON).
	InsertApproval(ctx context.Context, a core.Approval, args, policy []byte) error
	// SetPaused pauses run id and drops its claim.
	SetPaused(ctx context.Context, id string) (*core.Run, error)
	// Close locks the session of run id, then the run, cancels the run's
	// pending approvals and finds the session's next run (see Closing).
	Close(ctx context.Context, id, by, reason string, at time.Time) (Closing, error)
	// SetFinished closes run id with f's status, output, error, usage and
	// time, and drops its claim.
	SetFinished(ctx context.Context, id string, f core.Finish) (*core.Run, error)
	// SetCancelled closes run id as cancelled with reason at at.
	SetCancelled(ctx context.Context, id, reason string, at time.Time) (*core.Run, error)
	// DecideApproval, holding the row of approval id's run: moves the
	// approval from pending to d (its status, decider, reason and time) if
	// its arguments hash is d.ArgsSHA256 (when set); a paused run none of
	// whose approvals is still pending becomes queued. core.ErrNotFound when
	// there is no such approval; Decided false when it is not pending or
	// its arguments differ.
	DecideApproval(ctx context.Context, id string, d core.Decision) (Decided, error)
	// GetApproval reads approval id as it is.
	GetApproval(ctx context.Context, id string) (core.Approval, error)
	// ActiveRuns lists the runs that are queued or running, oldest first.
	ActiveRuns(ctx context.Context) ([]string, error)
	// AppendEvents appends checked events to run runID's journal after seq
	// after; the caller holds the run's row.
	AppendEvents(ctx context.Context, runID string, after int64, evs []core.Event) error
	// Enqueue enqueues jobs, all in one call (so that their keys are locked
	// in one order).
	Enqueue(ctx context.Context, jobs ...core.Job) error
	// Ack deletes job j under its lease (a job whose lease was lost stays).
	Ack(ctx context.Context, j core.Job) error
	// InsertAudit appends an audit entry (its At is set).
	InsertAudit(ctx context.Context, e core.AuditEntry) error
}

// RunDriver runs run transactions, and the single statements that need
// none.
type RunDriver interface {
	// RunTx runs fn in one transaction, committed when fn returns nil.
	RunTx(ctx context.Context, fn func(RunTx) error) error
	// Now is the store's clock.
	Now() time.Time
	// Enqueued is told that jobs were enqueued (an embedded queue wakes its
	// workers).
	Enqueued()
	// GetRun reads run id; core.ErrNotFound when there is none.
	GetRun(ctx context.Context, id string) (RunRow, error)
	// ClaimRun, in one step: claims run c.ID for c.Owner until c.Until if it
	// is queued or running and unclaimed, claimed by c.Owner or its claim
	// expired at c.Now (compare-and-set; status running, started_at set
	// once), and appends c.Events. False when the run is not claimable.
	ClaimRun(ctx context.Context, c Claim) (core.Run, bool, error)
	// ExtendClaim moves run id's claim to until if owner holds it on a
	// running run; false otherwise.
	ExtendClaim(ctx context.Context, id, owner string, until time.Time) (bool, error)
	// AppendClaimed appends checked events to run id's journal if owner
	// holds its claim and it is running, and returns them as stored; false
	// otherwise.
	AppendClaimed(ctx context.Context, id, owner string, evs []core.Event) ([]core.Event, bool, error)
	// StartRun claims run s.ID as ClaimRun does if, besides, no earlier run
	// of its session is active; s.Events (checked) are appended only when
	// the run was queued. With the claim it reads the run's journal and,
	// when s.History > 0, the session's last s.History completed runs
	// before it (oldest first). False when the run was not claimed.
	StartRun(ctx context.Context, s Start) (core.Started, bool, error)
	// SessionHead reads the oldest active run of a session;
	// core.ErrNotFound when there is none.
	SessionHead(ctx context.Context, sessionID string) (RunRow, error)
}

// Starter is a RunDriver that can start a run in the transaction that
// creates it (core.NewRun.Start).
type Starter interface {
	// StartCreated, in tx, claims run (just created) for st.Owner until
	// st.Until if no earlier run of its session is active (status running,
	// started now), appends st.Events (checked) after its journal, and
	// stores job leased to st.Owner until st.Until (its first delivery).
	// False, with nothing changed, when an earlier run is active.
	StartCreated(ctx context.Context, tx RunTx, run core.Run, st core.StartAtCreate, job core.Job) (StartedAtCreate, bool, error)
}

// StartedAtCreate is the run a Starter started and its leased job.
type StartedAtCreate struct {
	Run core.Run
	Job core.Job
}

// Runs implements the run and approval transitions of core.Store over a
// driver; the driver serves the reads itself.
type Runs struct {
	D RunDriver
}

// CheckEvents checks events to append: each has a type and JSON data
// (empty data is stored as null); events without a time get at.
func CheckEvents(evs []core.Event, at time.Time) ([]core.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	out := make([]core.Event, len(evs))
	for i, e := range evs {
		if e.Type == "" {
			return nil, fmt.Errorf("event %d: type is required", i)
		}
		data, err := JSONOrNull(e.Data)
		if err != nil {
			return nil, fmt.Errorf("event %d (%s): data: %w", i, e.Type, err)
		}
		if e.CreatedAt.IsZero() {
			e.CreatedAt = at
		}
		e.Data = data
		out[i] = e
	}
	return out, nil
}

// JSONOrNull returns b, or JSON null when b is empty; invalid JSON is an
// error.
func JSONOrNull(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return []byte("null"), nil
	}
	if !json.Valid(b) {
		return nil, errors.New("invalid JSON")
	}
	return b, nil
}

// CheckClaim reports whether owner may write to run r: ErrRunFinished when
// it is terminal, ErrClaimLost when owner does not hold a running claim.
func CheckClaim(r RunRow, owner string) error {
	if r.Status.Terminal() {
		return core.ErrRunFinished
	}
	if owner == "" || r.ClaimedBy != owner || r.Status != core.RunRunning {
		return core.ErrClaimLost
	}
	return nil
}

// CreateRun implements core.Store: the run, its first events and its job
// in one transaction.
func (s Runs) CreateRun(ctx context.Context, nr core.NewRun) (core.Run, error) {
	nr, err := nr.Normalize(s.D.Now())
	if err != nil {
		return core.Run{}, err
	}
	if nr.Events, err = CheckEvents(nr.Events, nr.Run.CreatedAt); err != nil {
		return core.Run{}, fmt.Errorf("create run %s: %w", nr.Run.ID, err)
	}
	st := nr.Start
	if st != nil {
		if st.Events, err = CheckEvents(st.Events, nr.Run.CreatedAt); err != nil {
			return core.Run{}, fmt.Errorf("create run %s: start: %w", nr.Run.ID, err)
		}
		st.Job = nil
	}
	starter, _ := s.D.(Starter)
	var (
		out []core.Run
		job core.Job
	)
	err = s.D.RunTx(ctx, func(tx RunTx) error {
		if out, err = tx.CreateRuns(ctx, []core.NewRun{nr}); err != nil || nr.NoJob {
			return err
		}
		if st != nil && starter != nil {
			started, ok, err := starter.StartCreated(ctx, tx, out[0], *st, core.RunJobFor(nr.Run.ID))
			if err != nil || ok {
				out[0], job = started.Run, started.Job
				return err
			}
		}
		return tx.Enqueue(ctx, core.RunJobFor(nr.Run.ID))
	})
	if err != nil {
		return core.Run{}, fmt.Errorf("create run %s: %w", nr.Run.ID, err)
	}
	if job.ID != "" {
		st.Job = &job // handed to a local worker, not announced to the others
	} else {
		s.D.Enqueued()
	}
	return out[0], nil
}

// ClaimRun implements core.Store.
func (s Runs) ClaimRun(ctx context.Context, id, owner string, now, until time.Time, events []core.Event) (core.Run, error) {
	if owner == "" {
		return core.Run{}, fmt.Errorf("claim run %s: owner is required", id)
	}
	evs, err := CheckEvents(events, now)
	if err != nil {
		return core.Run{}, fmt.Errorf("claim run %s: %w", id, err)
	}
	r, ok, err := s.D.ClaimRun(ctx, Claim{ID: id, Owner: owner, Now: now, Until: until, Events: evs})
	if err == nil && !ok {
		err = s.notClaimed(ctx, id)
	}
	if err != nil {
		return core.Run{}, fmt.Errorf("claim run %s: %w", id, err)
	}
	return r, nil
}

// notClaimed tells why run id could not be claimed.
func (s Runs) notClaimed(ctx context.Context, id string) error {
	r, err := s.D.GetRun(ctx, id)
	if err != nil {
		return err
	}
	return whyNotClaimed(r)
}

// whyNotClaimed tells why run r, as read after a refused claim, was not
// claimed.
func whyNotClaimed(r RunRow) error {
	switch {
	case r.Status.Terminal():
		return core.ErrRunFinished
	case r.Status == core.RunPaused:
		return core.ErrRunPaused
	case r.ClaimUntil != nil:
		return fmt.Errorf("%w until %s", core.ErrClaimed, r.ClaimUntil.Format(time.RFC3339))
	default:
		return core.ErrClaimed
	}
}

// StartRun implements core.Store.
func (s Runs) StartRun(ctx context.Context, st core.Start) (core.Started, error) {
	if st.Owner == "" {
		return core.Started{}, fmt.Errorf("start run %s: owner is required", st.ID)
	}
	evs, err := CheckEvents(st.Events, st.Now)
	if err != nil {
		return core.Started{}, fmt.Errorf("start run %s: %w", st.ID, err)
	}
	st.Events = evs
	out, ok, err := s.D.StartRun(ctx, st)
	if err == nil && !ok {
		err = s.notStarted(ctx, st.ID)
	}
	if err != nil {
		return core.Started{}, fmt.Errorf("start run %s: %w", st.ID, err)
	}
	return out, nil
}

// notStarted tells why run id could not be started: as notClaimed, or
// ErrNotHead when an earlier run of its session is active.
func (s Runs) notStarted(ctx context.Context, id string) error {
	r, err := s.D.GetRun(ctx, id)
	if err != nil {
		return err
	}
	if !r.Status.Terminal() && r.Status != core.RunPaused {
		head, err := s.D.SessionHead(ctx, r.SessionID)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return err
		}
		if err == nil && head.ID != id {
			return core.ErrNotHead
		}
	}
	return whyNotClaimed(r)
}

// ExtendClaim implements core.Store.
func (s Runs) ExtendClaim(ctx context.Context, id, owner string, until time.Time) error {
	ok, err := s.D.ExtendClaim(ctx, id, owner, until)
	if err == nil && !ok {
		if _, err = s.D.GetRun(ctx, id); err == nil {
			err = core.ErrClaimLost
		}
	}
	if err != nil {
		return fmt.Errorf("extend claim on run %s: %w", id, err)
	}
	return nil
}

// AppendEvents implements core.Store.
func (s Runs) AppendEvents(ctx context.Context, id, owner string, events []core.Event) ([]core.Event, error) {
	out, err := s.appendEvents(ctx, id, owner, events)
	if err != nil {
		return nil, fmt.Errorf("append to run %s: %w", id, err)
	}
	return out, nil
}

func (s Runs) appendEvents(ctx context.Context, id, owner string, events []core.Event) ([]core.Event, error) {
	evs, err := CheckEvents(events, s.D.Now())
	if err != nil {
		return nil, err
	}
	if len(evs) > 0 {
		out, ok, err := s.D.AppendClaimed(ctx, id, owner, evs)
		if err != nil || ok {
			return out, err
		}
	}
	// Nothing to write, or the claim check failed: say why.
	r, err := s.D.GetRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := CheckClaim(r, owner); err != nil || len(evs) == 0 {
		return nil, err
	}
	return nil, core.ErrClaimLost // it changed hands and back since
}

// PauseRun implements core.Store. The approval must carry its ID (the events
// refer to it); an empty ArgsSHA256 is computed from Arguments. The
// approval's job (its card) is enqueued with it.
func (s Runs) PauseRun(ctx context.Context, id, owner string, a core.Approval, events []core.Event) (core.Run, error) {
	if a.ID == "" {
		return core.Run{}, fmt.Errorf("pause run %s: approval id is required", id)
	}
	if a.RunID != "" && a.RunID != id {
		return core.Run{}, fmt.Errorf("pause run %s: approval %s is for run %s", id, a.ID, a.RunID)
	}
	args, err := JSONOrNull(a.Arguments)
	if err != nil {
		return core.Run{}, fmt.Errorf("pause run %s: approval %s arguments: %w", id, a.ID, err)
	}
	if a.ArgsSHA256 == "" {
		sum := sha256.Sum256(args)
		a.ArgsSHA256 = hex.EncodeToString(sum[:])
	}
	policy, err := json.Marshal(a.Policy)
	if err != nil {
		return core.Run{}, fmt.Errorf("pause run %s: approval %s policy: %w", id, a.ID, err)
	}
	if a.CreatedAt.IsZero() {
		a.CreatedAt = s.D.Now()
	}
	evs, err := CheckEvents(events, a.CreatedAt)
	if err != nil {
		return core.Run{}, fmt.Errorf("pause run %s: %w", id, err)
	}
	var out *core.Run
	err = s.D.RunTx(ctx, func(tx RunTx) error {
		r, err := tx.LockRun(ctx, id)
		if err != nil {
			return err
		}
		if err := CheckClaim(r, owner); err != nil {
			return err
		}
		if a.SessionID == "" {
			a.SessionID = r.SessionID
		}
		a.RunID = id
		if err := tx.InsertApproval(ctx, a, args, policy); err != nil {
			return fmt.Errorf("insert approval %s: %w", a.ID, err)
		}
		if err := tx.AppendEvents(ctx, id, r.LastSeq, evs); err != nil {
			return err
		}
		if out, err = tx.SetPaused(ctx, id); err != nil {
			return err
		}
		return tx.Enqueue(ctx, core.ApprovalJobFor(a.ID, core.ApprovalPending))
	})
	if err != nil {
		return core.Run{}, fmt.Errorf("pause run %s: %w", id, err)
	}
	s.D.Enqueued()
	return *out, nil
}

// FinishRun implements core.Store. Pending approvals of the run (possible
// only when owner is "") are cancelled so that no decision reopens it;
// f.Jobs and the session's next run's job are enqueued in the same
// transaction, and f.Ack acked.
func (s Runs) FinishRun(ctx context.Context, id, owner string, f core.Finish) (core.Run, error) {
	if !f.Status.Terminal() {
		return core.Run{}, fmt.Errorf("finish run %s: status %q is not terminal", id, f.Status)
	}
	if f.At.IsZero() {
		f.At = s.D.Now()
	}
	var out *core.Run
	enqueued := false // idle workers are woken only for a job to take
	err := s.D.RunTx(ctx, func(tx RunTx) error {
		enqueued = false
		c, err := tx.Close(ctx, id, "", f.Error, f.At)
		if err != nil {
			return err
		}
		if c.Run.Status.Terminal() {
			return core.ErrRunFinished
		}
		if owner != "" {
			if err := CheckClaim(c.Run, owner); err != nil {
				return err
			}
		}
		jobs, err := closeRun(ctx, tx, c, "", f.Error, f.At, f.Events)
		if err != nil {
			return err
		}
		if out, err = tx.SetFinished(ctx, id, f); err != nil {
			return err
		}
		if f.Ack != nil && f.Ack.Lease != "" {
			if err := tx.Ack(ctx, *f.Ack); err != nil {
				return err
			}
		}
		jobs = append(jobs, f.Jobs...)
		enqueued = len(jobs) > 0
		return tx.Enqueue(ctx, jobs...)
	})
	if err != nil {
		return core.Run{}, fmt.Errorf("finish run %s: %w", id, err)
	}
	if enqueued {
		s.D.Enqueued()
	}
	return *out, nil
}

// CancelRun implements core.Store. With ErrRunFinished it also returns the
// run as it is.
func (s Runs) CancelRun(ctx context.Context, id string, c core.Cancel) (core.Run, error) {
	if c.At.IsZero() {
		c.At = s.D.Now()
	}
	var out *core.Run
	err := s.D.RunTx(ctx, func(tx RunTx) error {
		cl, err := tx.Close(ctx, id, c.By, c.Reason, c.At)
		if err != nil {
			return err
		}
		if cl.Run.Status.Terminal() {
			out = &cl.Run.Run
			return core.ErrRunFinished
		}
		ev := core.NewEvent(core.EventStatus, core.StatusChange{Status: core.RunCancelled, Error: c.Reason})
		ev.CreatedAt = c.At
		jobs, err := closeRun(ctx, tx, cl, c.By, c.Reason, c.At, []core.Event{ev})
		if err != nil {
			return err
		}
		if out, err = tx.SetCancelled(ctx, id, c.Reason, c.At); err != nil {
			return err
		}
		if c.Audit != nil {
			e := *c.Audit
			if e.At.IsZero() {
				e.At = c.At
			}
			if err := tx.InsertAudit(ctx, e); err != nil {
				return err
			}
		}
		return tx.Enqueue(ctx, jobs...)
	})
	if err != nil {
		var run core.Run
		if out != nil {
			run = *out
		}
		return run, fmt.Errorf("cancel run %s: %w", id, err)
	}
	s.D.Enqueued()
	return *out, nil
}

// closeRun journals what closing run c.Run means: an approval_decided
// (cancelled) event for each approval Close cancelled, then evs. It
// returns the jobs that follow: each cancelled approval's (its card) and
// the session's next run's.
func closeRun(ctx context.Context, tx RunTx, c Closing, by, reason string, at time.Time, evs []core.Event) ([]core.Job, error) {
	var jobs []core.Job
	all := make([]core.Event, 0, len(c.Cancelled)+len(evs))
	for _, a := range c.Cancelled {
		all = append(all, core.NewEvent(core.EventApprovalDecided, core.ApprovalDecided{
			ApprovalID: a.ID, ToolCallID: a.ToolCallID, Status: core.ApprovalCancelled, DecidedBy: by, Reason: reason,
		}))
		jobs = append(jobs, core.ApprovalJobFor(a.ID, core.ApprovalCancelled))
	}
	all, err := CheckEvents(append(all, evs...), at)
	if err != nil {
		return nil, err
	}
	if err := tx.AppendEvents(ctx, c.Run.ID, c.Run.LastSeq, all); err != nil {
		return nil, err
	}
	if c.Next != "" {
		jobs = append(jobs, core.RunJobFor(c.Next))
	}
	return jobs, nil
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
		ev, _ := CheckEvents([]core.Event{core.NewEvent(core.EventApprovalDecided, core.ApprovalDecided{
			ApprovalID: id, ToolCallID: a.ToolCallID, Status: d.Status, DecidedBy: d.By, DecidedByName: d.ByName,
			Via: d.Via, Reason: d.Reason,
		})}, d.At)
		if err := tx.AppendEvents(ctx, r.ID, r.LastSeq, ev); err != nil {
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

// RequeueActive implements core.Store: a job for every queued or running
// run, in creation order.
func (s Runs) RequeueActive(ctx context.Context) (int, error) {
	var n int
	err := s.D.RunTx(ctx, func(tx RunTx) error {
		ids, err := tx.ActiveRuns(ctx)
		if err != nil {
			return err
		}
		jobs := make([]core.Job, len(ids))
		for i, id := range ids {
			jobs[i] = core.RunJobFor(id)
		}
		n = len(ids)
		return tx.Enqueue(ctx, jobs...)
	})
	if err != nil {
		return 0, fmt.Errorf("requeue active runs: %w", err)
	}
	if n > 0 {
		s.D.Enqueued()
	}
	return n, nil
}

// EncodeConversation is a run's conversation column: its binding as JSON,
// "" for none.
func EncodeConversation(b core.Binding) string {
	if b == (core.Binding{}) {
		return ""
	}
	j, _ := json.Marshal(b) // strings always marshal
	return string(j)
}

// DecodeConversation reads the conversation column; what does not decode
// is no conversation (the hooks then read the session).
func DecodeConversation(s string) core.Binding {
	var b core.Binding
	if s != "" {
		_ = json.Unmarshal([]byte(s), &b)
	}
	return b
}
