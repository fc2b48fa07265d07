package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Store errors. Check with errors.Is / errors.As.
var (
	// ErrNotFound: no such session, run or approval.
	ErrNotFound = errors.New("not found")
	// ErrClaimed: another node holds a live claim on the run.
	ErrClaimed = errors.New("run is claimed by another node")
	// ErrClaimLost: the caller's claim expired and the run was taken over, or
	// was released (pause, cancel). The caller must stop working on the run.
	ErrClaimLost = errors.New("run claim lost")
	// ErrRunFinished: the run is completed, failed or cancelled.
	ErrRunFinished = errors.New("run already finished")
	// ErrRunPaused: the run waits for an approval decision.
	ErrRunPaused = errors.New("run is paused for approval")
	// ErrNotHead: an earlier run of the session is not finished; it goes
	// first (finishing it enqueues this one).
	ErrNotHead = errors.New("an earlier run of the session goes first")
	// ErrArgsMismatch: a decision was made for other arguments than the
	// approval carries.
	ErrArgsMismatch = errors.New("approval arguments do not match")
	// ErrInvalidCursor: a list cursor that no list handed out.
	ErrInvalidCursor = errors.New("invalid cursor: pass next_cursor from the previous page, or none to start")
	// ErrSessionAgent: the session belongs to another agent.
	ErrSessionAgent = errors.New("session belongs to another agent")
	// ErrDuplicate: CreateRun was given a dedupe key that is already in the
	// inbox; nothing was created (see DuplicateError for the existing run).
	ErrDuplicate = errors.New("duplicate message")
)

// DuplicateError is returned by CreateRun for a (platform, dedupe key) pair
// the inbox holds as processed. RunID is the run the first delivery created,
// empty when the message was processed without a run.
type DuplicateError struct {
	Platform string
	Key      string
	RunID    string
}

func (e *DuplicateError) Error() string {
	if e.RunID == "" {
		return fmt.Sprintf("%s message %s was processed already: %v", e.Platform, e.Key, ErrDuplicate)
	}
	return fmt.Sprintf("%s message %s already started run %s: %v", e.Platform, e.Key, e.RunID, ErrDuplicate)
}

// Is makes errors.Is(err, ErrDuplicate) match.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }

// Replayed reads the answer to a request that may have been delivered
// before (a routine trigger with a dedupe key): a redelivery is answered
// with the first delivery's run and a *DuplicateError. It reports whether
// run is such a replay, and err otherwise.
func Replayed(run Run, err error) (bool, error) {
	if errors.Is(err, ErrDuplicate) && run.ID != "" {
		return true, nil
	}
	return false, err
}

// KeyReusedError: a request's idempotency key names a run that was asked
// for differently (another agent, input or extra input): the key was used
// again for another request. Nothing was started; RunID is the first run.
type KeyReusedError struct{ RunID string }

func (e *KeyReusedError) Error() string { return e.Named("the idempotency key") }

// Named is the error's message with the key called key (as a route names
// it: "Idempotency-Key", "idempotency_key").
func (e *KeyReusedError) Named(key string) string {
	return key + " was used for another request (run " + e.RunID + "); use a new key for a new run"
}

// NotPendingError is returned by DecideApproval when the approval was already
// decided, expired or cancelled. Status is its current status.
type NotPendingError struct {
	ID     string
	Status ApprovalStatus
}

func (e *NotPendingError) Error() string {
	return fmt.Sprintf("approval %s is not pending: %s", e.ID, e.Status)
}

// Page is one page of a list; NextCursor is empty on the last page.
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}

// ListOptions pages through a list in creation order (oldest first).
type ListOptions struct {
	// Limit caps the page size; 0 means 50, values above 500 are capped at 500.
	Limit int
	// Cursor is a NextCursor from the previous page; empty starts at the beginning.
	Cursor string
}

// SessionFilter selects sessions. Empty fields match everything.
type SessionFilter struct {
	UserID  string
	AgentID string
	// AgentIDs, when not empty, keeps the sessions of these agents only
	// (a key limited to some agents pages through what it may see).
	AgentIDs []string
	ListOptions
}

// RunFilter selects runs. Empty fields match everything.
type RunFilter struct {
	SessionID string
	Statuses  []RunStatus
	ListOptions
}

// ApprovalFilter selects approvals. Empty fields match everything.
type ApprovalFilter struct {
	Status ApprovalStatus
	RunID  string
	// AgentIDs, when not empty, keeps the approvals of these agents' runs.
	AgentIDs []string
	// Conversation, when set, keeps the approvals of runs asked in this
	// platform's channel (Platform and Channel must match; Workspace when
	// both sides name one). Thread is not compared.
	Conversation *Binding
	ListOptions
}

// NewRun is the input of CreateRun.
type NewRun struct {
	// Session is created when no session with Session.ID exists yet; an
	// existing session must belong to Run.AgentID (else ErrSessionAgent).
	Session Session
	// Run must carry ID, SessionID (= Session.ID), AgentID, UserID, Type,
	// Input and CreatedAt. Status is set to queued.
	Run Run
	// Events are the run's first journal entries (the user message), seq 1..n.
	Events []Event
	// Platform and DedupeKey, when DedupeKey is set, name the inbox message
	// the run is created for, and mark it processed in the same transaction
	// as the run: a message appended by the ingest path (Inbox.AppendInbox)
	// and still waiting, or one the inbox has never seen (inserted
	// processed). A second CreateRun with the same pair, or one for a
	// message processed without a run, creates nothing and fails with a
	// *DuplicateError.
	Platform  string
	DedupeKey string
	// NoJob: the caller enqueues the run's job itself, after the commit
	// (straight to an external queue, without the store's outbox); the
	// store enqueues none. A run whose job is lost this way is found by
	// RequeueActive, which the engine calls at start and, with an external
	// queue, every JanitorInterval.
	NoJob bool
	// Start, when set, starts the run in the transaction that creates it
	// if it is its session's head (see StartAtCreate); a store that cannot
	// leaves it queued with its job, as without Start.
	Start *StartAtCreate
}

// StartAtCreate starts a run as it is created, so that a local worker takes
// it without a second write (the embedded store hands the job over in
// memory, see Handoff): the run is claimed for Owner until Until, status
// running, Events (its status change) journaled after its first events,
// and its job is stored leased to Owner until Until.
type StartAtCreate struct {
	Owner  string
	Until  time.Time
	Events []Event
	// Job is set by the store to the leased job when the run was started;
	// nil when it was left queued (an earlier run of its session is active).
	Job *Job
}

// Normalize checks nr and fills its defaults (ids copied between run and
// session, the session's agent and user, times from now); every store calls
// it before creating a run.
func (nr NewRun) Normalize(now time.Time) (NewRun, error) {
	r, s := nr.Run, nr.Session
	if r.SessionID == "" {
		r.SessionID = s.ID
	}
	if s.ID == "" {
		s.ID = r.SessionID
	}
	switch {
	case r.ID == "":
		return nr, errors.New("create run: run id is required")
	case s.ID == "":
		return nr, fmt.Errorf("create run %s: session id is required", r.ID)
	case r.SessionID != s.ID:
		return nr, fmt.Errorf("create run %s: run session %s differs from session %s", r.ID, r.SessionID, s.ID)
	case r.AgentID == "":
		return nr, fmt.Errorf("create run %s: agent id is required", r.ID)
	}
	if s.AgentID == "" {
		s.AgentID = r.AgentID
	}
	if s.AgentID != r.AgentID {
		return nr, fmt.Errorf("create run %s: session of agent %s: %w", r.ID, s.AgentID, ErrSessionAgent)
	}
	if s.UserID == "" {
		s.UserID = r.UserID
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = r.CreatedAt
	}
	if s.UpdatedAt.Before(r.CreatedAt) {
		s.UpdatedAt = r.CreatedAt
	}
	nr.Run, nr.Session = r, s
	return nr, nil
}

// Finish is the input of FinishRun.
type Finish struct {
	Status RunStatus // completed or failed
	Output string
	Error  string
	Usage  Usage
	At     time.Time
	// Events are appended before the run is closed (typically a status event).
	Events []Event
	// Jobs are enqueued in the same transaction (e.g. a routine run's
	// result delivery), so the work a finished run calls for is never lost.
	Jobs []Job
	// Ack is the queue job whose step this finish ends, set when the store
	// is also the engine's queue: it is acked in the same transaction, as
	// Queue.Ack would (under its lease only: a job whose lease was lost
	// meanwhile stays with its new holder). Nil: none.
	Ack *Job
}

// Start is the input of StartRun.
type Start struct {
	ID, Owner  string
	Now, Until time.Time
	// Events are appended when the claim starts a queued run (its status
	// event).
	Events []Event
	// History is how many of the session's completed runs before this one
	// to return (as SessionHistory); 0: none.
	History int
}

// Started is what StartRun returns.
type Started struct {
	Run Run
	// Began: the run was queued and is now running (s.Events appended).
	Began bool
	// Journal is the run's whole journal, the appended events included.
	Journal []Event
	// History are the session's completed runs before this one, oldest
	// first.
	History []Run
}

// Decision is the input of DecideApproval.
type Decision struct {
	Status ApprovalStatus // approved, denied, expired or cancelled
	By     string
	// ByName is how the decider is shown (DecidedByName).
	ByName string
	Via    string // slack|discord|telegram|api|mcp|cli|console|timer
	Reason string
	// ArgsSHA256, when set, must equal the approval's hash (the decision is
	// bound to the arguments that were shown), else ErrArgsMismatch.
	ArgsSHA256 string
	At         time.Time
	// Audit, when set, is appended to the audit log in the decision's
	// transaction (with At and Outcome "ok" filled in when empty).
	Audit *AuditEntry
}

// Cancel is the input of CancelRun.
type Cancel struct {
	By     string
	Reason string
	At     time.Time
	// Audit, when set, is appended to the audit log in the cancel's
	// transaction.
	Audit *AuditEntry
}

// JobRun is the job kind that asks a worker to advance a run. Its payload is
// RunJob. Stores enqueue it in the same transaction as the state change that
// makes the run runnable.
const JobRun = "run"

// RunJob is the payload of a JobRun job.
type RunJob struct {
	RunID string `json:"run_id"`
}

// RunJobFor builds the job that advances run id. Its key coalesces duplicates.
func RunJobFor(id string) Job {
	p, _ := json.Marshal(RunJob{RunID: id})
	return Job{Kind: JobRun, Key: "run:" + id, Payload: p}
}

// JobApproval announces that an approval was created or changed state
// (decided, expired, cancelled), so that the chat adapter of the run's
// conversation posts or edits its card. Its payload is ApprovalJob. Stores
// enqueue it in the transaction of PauseRun, DecideApproval, CancelRun and of
// a FinishRun that cancels approvals, so no card is left showing buttons for
// a decided approval. Without a handler the engine drops these jobs.
const JobApproval = "approval"

// ApprovalJob is the payload of a JobApproval job.
type ApprovalJob struct {
	ApprovalID string         `json:"approval_id"`
	Status     ApprovalStatus `json:"status"`
}

// ApprovalJobFor builds the job announcing that approval id reached status.
func ApprovalJobFor(id string, status ApprovalStatus) Job {
	p, _ := json.Marshal(ApprovalJob{ApprovalID: id, Status: status})
	return Job{Kind: JobApproval, Key: "approval:" + id + ":" + string(status), Payload: p}
}

// Store is the durable state of the gateway: sessions, runs and their journal,
// approvals. Every method that changes state does so in one transaction
// together with the job it makes necessary (transactional enqueue), so a
// crash between the two is impossible.
//
// Claims: a worker node claims a run before advancing it. A claim has an owner
// (node id) and an expiry; a claim held by the same owner, or expired, can be
// taken. Journal appends check the claim so two nodes never interleave writes
// to one run.
type Store interface {
	// CreateRun creates the session if needed, the run (status queued), its
	// first events and a JobRun job, atomically. With nr.DedupeKey set it
	// also marks the inbox message (nr.Platform, nr.DedupeKey) processed by
	// this run, inserting it when the inbox does not hold it yet; a message
	// processed already creates nothing and returns a *DuplicateError
	// (ErrDuplicate).
	CreateRun(ctx context.Context, nr NewRun) (Run, error)
	GetRun(ctx context.Context, id string) (Run, error)
	ListRuns(ctx context.Context, f RunFilter) (Page[Run], error)
	// SessionHead returns the oldest run of the session that is not terminal
	// (the one allowed to advance), or ErrNotFound.
	SessionHead(ctx context.Context, sessionID string) (Run, error)
	// SessionHistory returns up to limit completed runs of the session created
	// before run beforeRunID, oldest first.
	SessionHistory(ctx context.Context, sessionID, beforeRunID string, limit int) ([]Run, error)

	// ClaimRun claims a queued or running run for owner until `until`. A
	// queued run becomes running (started_at set on first start) and the
	// given events (a status event) are appended. Errors: ErrNotFound,
	// ErrRunFinished, ErrRunPaused, ErrClaimed.
	ClaimRun(ctx context.Context, id, owner string, now, until time.Time, events []Event) (Run, error)
	// StartRun claims run s.ID for s.Owner as ClaimRun does, only when it
	// is its session's head (else ErrNotHead), and returns it with what a
	// step needs: its journal and the session's history. s.Events are
	// appended only when the claim starts a queued run. One call where the
	// engine made four (one round trip on PostgreSQL).
	StartRun(ctx context.Context, s Start) (Started, error)
	// ExtendClaim moves the claim's expiry; ErrClaimLost when owner lost it.
	ExtendClaim(ctx context.Context, id, owner string, until time.Time) error
	// AppendEvents appends events to the journal of a run claimed by owner
	// and returns them with Seq set. Errors: ErrRunFinished, ErrClaimLost.
	AppendEvents(ctx context.Context, id, owner string, events []Event) ([]Event, error)
	// PauseRun, for a run claimed by owner: inserts the approval, appends the
	// events, sets the run paused and releases the claim.
	PauseRun(ctx context.Context, id, owner string, a Approval, events []Event) (Run, error)
	// FinishRun closes a run claimed by owner (owner "" skips the claim check,
	// for runs failed by the dead-letter path), appends f.Events, releases
	// the claim, enqueues f.Jobs and the next run of the session.
	FinishRun(ctx context.Context, id, owner string, f Finish) (Run, error)
	// CancelRun cancels a run that is not terminal, whoever holds it: pending
	// approvals become cancelled (journaled as approval_decided), a status
	// event is appended, the claim released, the next run of the session
	// enqueued. ErrRunFinished when it was already terminal.
	CancelRun(ctx context.Context, id string, c Cancel) (Run, error)
	// Events returns up to limit (0 = all) journal entries of a run with
	// seq > afterSeq, in order.
	Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]Event, error)

	GetSession(ctx context.Context, id string) (Session, error)
	ListSessions(ctx context.Context, f SessionFilter) (Page[Session], error)

	GetApproval(ctx context.Context, id string) (Approval, error)
	ListApprovals(ctx context.Context, f ApprovalFilter) (Page[Approval], error)
	// DecideApproval moves a pending approval to d.Status (compare-and-set:
	// the first decision wins), appends an approval_decided event to its
	// run, sets the paused run queued and enqueues its JobRun, atomically.
	// Errors: ErrNotFound, *NotPendingError, ErrArgsMismatch.
	DecideApproval(ctx context.Context, id string, d Decision) (Approval, error)
	// DueApprovals lists up to limit pending approvals with expires_at <= now.
	DueApprovals(ctx context.Context, now time.Time, limit int) ([]Approval, error)

	// RequeueActive enqueues a JobRun for every queued or running run (used at
	// start and by the janitor) and returns how many it enqueued.
	RequeueActive(ctx context.Context) (int, error)
	// CountRuns counts runs by status.
	CountRuns(ctx context.Context) (map[RunStatus]int64, error)
	// CountApprovals counts approvals by status.
	CountApprovals(ctx context.Context) (map[ApprovalStatus]int64, error)

	AuditLog
}
