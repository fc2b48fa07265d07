package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

// This file implements core.Store. Lists page by rowid (creation order); a
// cursor is the rowid of the last item of the previous page.

const (
	runCols = `id, session_id, agent_id, user_id, run_type, status, parent_run_id, routine_id, started_by,
		input, output, error, input_tokens, output_tokens, last_seq, created_at, started_at, finished_at,
		claimed_by, claim_until`
	sessionCols  = `id, agent_id, user_id, platform, workspace, channel, thread, title, created_at, updated_at`
	approvalCols = `id, run_id, session_id, tool_call_id, tool, arguments, args_sha256, policy, requested_by,
		status, decided_by, decided_by_name, decided_via, reason, created_at, expires_at, decided_at`

	// activeStatuses are the SQL list of statuses of a run that is not terminal.
	activeStatuses = `('queued', 'running', 'paused')`
)

// querier is what *sql.DB and *txn have in common for reads.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type scanner interface{ Scan(dest ...any) error }

// runRow is a run with its claim, which core.Run does not carry.
type runRow struct {
	core.Run
	claimedBy  string
	claimUntil int64
}

// scanRun scans runCols, after any extra leading columns (the rowid of lists).
func scanRun(s scanner, extra ...any) (runRow, error) {
	var r runRow
	var typ, status string
	var created int64
	var started, finished sql.NullInt64
	dest := append(extra, &r.ID, &r.SessionID, &r.AgentID, &r.UserID, &typ, &status, &r.ParentRunID, &r.RoutineID,
		&r.StartedBy, &r.Input, &r.Output, &r.Error, &r.Usage.InputTokens, &r.Usage.OutputTokens, &r.LastSeq, &created, &started, &finished,
		&r.claimedBy, &r.claimUntil)
	if err := s.Scan(dest...); err != nil {
		return runRow{}, err
	}
	r.Type = core.RunType(typ)
	r.Status = core.RunStatus(status)
	r.CreatedAt = nanos(created)
	r.StartedAt = nullNanos(started)
	r.FinishedAt = nullNanos(finished)
	return r, nil
}

func scanSession(s scanner, extra ...any) (core.Session, error) {
	var x core.Session
	var created, updated int64
	dest := append(extra, &x.ID, &x.AgentID, &x.UserID, &x.Binding.Platform, &x.Binding.Workspace, &x.Binding.Channel,
		&x.Binding.Thread, &x.Title, &created, &updated)
	if err := s.Scan(dest...); err != nil {
		return core.Session{}, err
	}
	x.CreatedAt = nanos(created)
	x.UpdatedAt = nanos(updated)
	return x, nil
}

func scanApproval(s scanner, extra ...any) (core.Approval, error) {
	var a core.Approval
	var args, policy []byte
	var status string
	var created, expires int64
	var decided sql.NullInt64
	dest := append(extra, &a.ID, &a.RunID, &a.SessionID, &a.ToolCallID, &a.Tool, &args, &a.ArgsSHA256, &policy,
		&a.RequestedBy, &status, &a.DecidedBy, &a.DecidedByName, &a.DecidedVia, &a.Reason, &created, &expires, &decided)
	if err := s.Scan(dest...); err != nil {
		return core.Approval{}, err
	}
	if err := json.Unmarshal(policy, &a.Policy); err != nil {
		return core.Approval{}, fmt.Errorf("approval %s: decode policy: %w", a.ID, err)
	}
	a.Arguments = json.RawMessage(args)
	a.Status = core.ApprovalStatus(status)
	a.CreatedAt = nanos(created)
	a.ExpiresAt = nanos(expires)
	a.DecidedAt = nullNanos(decided)
	return a, nil
}

// getRun loads run id; core.ErrNotFound when there is none.
func getRun(ctx context.Context, q querier, id string) (runRow, error) {
	r, err := scanRun(q.QueryRowContext(ctx, `SELECT `+runCols+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return runRow{}, core.ErrNotFound
	}
	return r, err
}

func getApproval(ctx context.Context, q querier, id string) (core.Approval, error) {
	a, err := scanApproval(q.QueryRowContext(ctx, `SELECT `+approvalCols+` FROM approvals WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return core.Approval{}, core.ErrNotFound
	}
	return a, err
}

// checkClaim reports whether owner may write to run r: ErrRunFinished when it
// is terminal, ErrClaimLost when owner does not hold a running claim.
func checkClaim(r runRow, owner string) error {
	if r.Status.Terminal() {
		return core.ErrRunFinished
	}
	if owner == "" || r.claimedBy != owner || r.Status != core.RunRunning {
		return core.ErrClaimLost
	}
	return nil
}

// jsonOrNull returns b, or JSON null when b is empty; invalid JSON is an error.
func jsonOrNull(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return []byte("null"), nil
	}
	if !json.Valid(b) {
		return nil, errors.New("invalid JSON")
	}
	return b, nil
}

// appendTx appends evs to the journal of runID after lastSeq and moves the
// run's last_seq. Events without a time get at. It returns the stored events.
func appendTx(ctx context.Context, tx *txn, runID string, lastSeq int64, evs []core.Event, at time.Time) ([]core.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	out := make([]core.Event, len(evs))
	for i, e := range evs {
		if e.Type == "" {
			return nil, fmt.Errorf("event %d: type is required", i)
		}
		data, err := jsonOrNull(e.Data)
		if err != nil {
			return nil, fmt.Errorf("event %d (%s): data: %w", i, e.Type, err)
		}
		if e.CreatedAt.IsZero() {
			e.CreatedAt = at
		}
		e.RunID = runID
		e.Seq = lastSeq + int64(i) + 1
		e.Data = data
		e.CreatedAt = nanos(e.CreatedAt.UnixNano())
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_events(run_id, seq, type, data, created_at) VALUES (?, ?, ?, ?, ?)`,
			runID, e.Seq, string(e.Type), data, e.CreatedAt.UnixNano()); err != nil {
			return nil, fmt.Errorf("insert event %d: %w", e.Seq, err)
		}
		out[i] = e
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET last_seq = ? WHERE id = ?`, out[len(out)-1].Seq, runID); err != nil {
		return nil, fmt.Errorf("update last seq: %w", err)
	}
	return out, nil
}

// enqueueNextTx is called after run id of the session became terminal: when
// it was the session's head, the new head (the oldest run that is not
// terminal) gets its turn and, if queued, its job.
func (db *DB) enqueueNextTx(ctx context.Context, tx *txn, sessionID, id string) error {
	var next, status string
	var after bool
	err := tx.QueryRowContext(ctx, `SELECT id, status, rowid > (SELECT rowid FROM runs WHERE id = ?) FROM runs
		WHERE session_id = ? AND status IN `+activeStatuses+` ORDER BY rowid LIMIT 1`, id, sessionID).Scan(&next, &status, &after)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find next run of session %s: %w", sessionID, err)
	}
	if !after || core.RunStatus(status) != core.RunQueued {
		return nil // an older run still holds the session, or the head is not waiting for a worker
	}
	return db.enqueueTx(ctx, tx, core.RunJobFor(next))
}

// cancelPendingTx cancels the pending approvals of run r, journaling each as
// approval_decided, and returns the run's new last seq.
func (db *DB) cancelPendingTx(ctx context.Context, tx *txn, r runRow, by, reason string, at time.Time) (int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, tool_call_id FROM approvals WHERE run_id = ? AND status = 'pending' ORDER BY rowid`, r.ID)
	if err != nil {
		return 0, fmt.Errorf("list pending approvals: %w", err)
	}
	var evs []core.Event
	var ids []string
	for rows.Next() {
		var id, call string
		if err := rows.Scan(&id, &call); err != nil {
			rows.Close()
			return 0, fmt.Errorf("list pending approvals: %w", err)
		}
		ids = append(ids, id)
		evs = append(evs, core.NewEvent(core.EventApprovalDecided, core.ApprovalDecided{
			ApprovalID: id, ToolCallID: call, Status: core.ApprovalCancelled, DecidedBy: by, Reason: reason,
		}))
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, fmt.Errorf("list pending approvals: %w", err)
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `UPDATE approvals SET status = 'cancelled', decided_by = ?, decided_via = '',
			reason = ?, decided_at = ? WHERE id = ? AND status = 'pending'`, by, reason, at.UnixNano(), id); err != nil {
			return 0, fmt.Errorf("cancel approval %s: %w", id, err)
		}
		if err := db.enqueueTx(ctx, tx, core.ApprovalJobFor(id, core.ApprovalCancelled)); err != nil {
			return 0, err
		}
	}
	out, err := appendTx(ctx, tx, r.ID, r.LastSeq, evs, at)
	if err != nil {
		return 0, err
	}
	return r.LastSeq + int64(len(out)), nil
}

// pageLimit applies ListOptions' default and cap.
func pageLimit(n int) int {
	switch {
	case n <= 0:
		return 50
	case n > 500:
		return 500
	}
	return n
}

func parseCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(c, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("cursor %q: %w", c, core.ErrInvalidCursor)
	}
	return n, nil
}

// sqlLimit maps "0 = all" to SQLite's LIMIT -1.
func sqlLimit(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// list runs a query that selects rowid followed by the item's columns, with
// a trailing "LIMIT ?" that list fills with limit+1, and builds the page.
func list[T any](ctx context.Context, db *DB, o core.ListOptions, query string, args []any,
	scan func(s scanner, extra ...any) (T, error)) (core.Page[T], error) {
	limit := pageLimit(o.Limit)
	rows, err := db.r.QueryContext(ctx, query, append(args, limit+1)...)
	if err != nil {
		return core.Page[T]{}, err
	}
	defer rows.Close()
	page := core.Page[T]{Items: []T{}}
	var last int64
	for rows.Next() {
		if len(page.Items) == limit {
			page.NextCursor = strconv.FormatInt(last, 10)
			break
		}
		var rowid int64
		item, err := scan(rows, &rowid)
		if err != nil {
			return core.Page[T]{}, err
		}
		page.Items = append(page.Items, item)
		last = rowid
	}
	if err := rows.Err(); err != nil {
		return core.Page[T]{}, err
	}
	return page, nil
}

// CreateRun implements core.Store.
func (db *DB) CreateRun(ctx context.Context, nr core.NewRun) (core.Run, error) {
	nr, err := nr.Normalize(db.opts.Clock.Now())
	if err != nil {
		return core.Run{}, err
	}
	var out core.Run
	err = db.tx(ctx, func(tx *txn) error {
		out, err = db.createRunTx(ctx, tx, nr)
		return err
	})
	if err != nil {
		return core.Run{}, fmt.Errorf("create run %s: %w", nr.Run.ID, err)
	}
	db.wake()
	return out, nil
}

// createRunTx inserts a checked NewRun (see core.NewRun.Normalize) inside tx: the
// inbox entry of nr.DedupeKey (a *core.DuplicateError when it is taken), the
// session if new, the run, its first events and its JobRun job. The caller
// must call db.wake() after the commit.
func (db *DB) createRunTx(ctx context.Context, tx *txn, nr core.NewRun) (core.Run, error) {
	r, s := nr.Run, nr.Session
	if nr.DedupeKey != "" {
		if err := markInboxTx(ctx, tx, nr.Platform, nr.DedupeKey, r.ID, r.CreatedAt); err != nil {
			return core.Run{}, err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sessions(`+sessionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(id) DO NOTHING`, s.ID, s.AgentID, s.UserID, s.Binding.Platform, s.Binding.Workspace,
		s.Binding.Channel, s.Binding.Thread, s.Title, s.CreatedAt.UnixNano(), s.UpdatedAt.UnixNano()); err != nil {
		return core.Run{}, fmt.Errorf("insert session %s: %w", s.ID, err)
	}
	var agent string
	if err := tx.QueryRowContext(ctx, `SELECT agent_id FROM sessions WHERE id = ?`, s.ID).Scan(&agent); err != nil {
		return core.Run{}, fmt.Errorf("load session %s: %w", s.ID, err)
	}
	if agent != r.AgentID {
		return core.Run{}, fmt.Errorf("session %s of agent %s: %w", s.ID, agent, core.ErrSessionAgent)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sessions SET updated_at = MAX(updated_at, ?) WHERE id = ?`,
		r.CreatedAt.UnixNano(), s.ID); err != nil {
		return core.Run{}, fmt.Errorf("touch session %s: %w", s.ID, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO runs(id, session_id, agent_id, user_id, run_type, status,
		parent_run_id, routine_id, started_by, input, output, error, input_tokens, output_tokens, created_at)
		VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.SessionID, r.AgentID, r.UserID, string(r.Type), r.ParentRunID, r.RoutineID, r.StartedBy, r.Input, r.Output,
		r.Error, r.Usage.InputTokens, r.Usage.OutputTokens, r.CreatedAt.UnixNano()); err != nil {
		return core.Run{}, fmt.Errorf("insert run: %w", err)
	}
	if _, err := appendTx(ctx, tx, r.ID, 0, nr.Events, r.CreatedAt); err != nil {
		return core.Run{}, err
	}
	if err := db.enqueueTx(ctx, tx, core.RunJobFor(r.ID)); err != nil {
		return core.Run{}, err
	}
	row, err := getRun(ctx, tx, r.ID)
	return row.Run, err
}

// GetRun implements core.Store.
func (db *DB) GetRun(ctx context.Context, id string) (core.Run, error) {
	r, err := getRun(ctx, db.r, id)
	if err != nil {
		return core.Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return r.Run, nil
}

func scanRunItem(s scanner, extra ...any) (core.Run, error) {
	r, err := scanRun(s, extra...)
	return r.Run, err
}

// ListRuns implements core.Store.
func (db *DB) ListRuns(ctx context.Context, f core.RunFilter) (core.Page[core.Run], error) {
	after, err := parseCursor(f.Cursor)
	if err != nil {
		return core.Page[core.Run]{}, fmt.Errorf("list runs: %w", err)
	}
	q := `SELECT rowid, ` + runCols + ` FROM runs WHERE rowid > ?`
	args := []any{after}
	if f.SessionID != "" {
		q += ` AND session_id = ?`
		args = append(args, f.SessionID)
	}
	if len(f.Statuses) > 0 {
		q += ` AND status IN ` + inList(len(f.Statuses))
		for _, s := range f.Statuses {
			args = append(args, string(s))
		}
	}
	q += ` ORDER BY rowid LIMIT ?`
	p, err := list(ctx, db, f.ListOptions, q, args, scanRunItem)
	if err != nil {
		return core.Page[core.Run]{}, fmt.Errorf("list runs: %w", err)
	}
	return p, nil
}

// inList is "(?, ?, …)" with n placeholders.
func inList(n int) string { return `(?` + strings.Repeat(", ?", n-1) + `)` }

func appendStrings(args []any, ss []string) []any {
	for _, s := range ss {
		args = append(args, s)
	}
	return args
}

// SessionHead implements core.Store.
func (db *DB) SessionHead(ctx context.Context, sessionID string) (core.Run, error) {
	r, err := scanRun(db.r.QueryRowContext(ctx, `SELECT `+runCols+` FROM runs
		WHERE session_id = ? AND status IN `+activeStatuses+` ORDER BY rowid LIMIT 1`, sessionID))
	if errors.Is(err, sql.ErrNoRows) {
		err = core.ErrNotFound
	}
	if err != nil {
		return core.Run{}, fmt.Errorf("session %s head: %w", sessionID, err)
	}
	return r.Run, nil
}

// SessionHistory implements core.Store. An empty beforeRunID means the whole
// session; limit 0 means no limit.
func (db *DB) SessionHistory(ctx context.Context, sessionID, beforeRunID string, limit int) ([]core.Run, error) {
	before := int64(1<<63 - 1)
	if beforeRunID != "" {
		err := db.r.QueryRowContext(ctx, `SELECT rowid FROM runs WHERE id = ?`, beforeRunID).Scan(&before)
		if errors.Is(err, sql.ErrNoRows) {
			err = core.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("session %s history before run %s: %w", sessionID, beforeRunID, err)
		}
	}
	rows, err := db.r.QueryContext(ctx, `SELECT `+runCols+` FROM (
		SELECT rowid AS rid, * FROM runs WHERE session_id = ? AND status = 'completed' AND rowid < ?
		ORDER BY rowid DESC LIMIT ?) ORDER BY rid`, sessionID, before, sqlLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("session %s history: %w", sessionID, err)
	}
	defer rows.Close()
	var out []core.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("session %s history: %w", sessionID, err)
		}
		out = append(out, r.Run)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("session %s history: %w", sessionID, err)
	}
	return out, nil
}

// ClaimRun implements core.Store.
func (db *DB) ClaimRun(ctx context.Context, id, owner string, now, until time.Time, events []core.Event) (core.Run, error) {
	if owner == "" {
		return core.Run{}, fmt.Errorf("claim run %s: owner is required", id)
	}
	var out core.Run
	err := db.tx(ctx, func(tx *txn) error {
		r, err := scanRun(tx.QueryRowContext(ctx, `UPDATE runs SET claimed_by = ?, claim_until = ?, status = 'running',
			started_at = COALESCE(started_at, ?)
			WHERE id = ? AND status IN ('queued', 'running') AND (claimed_by = '' OR claimed_by = ? OR claim_until <= ?)
			RETURNING `+runCols, owner, until.UnixNano(), now.UnixNano(), id, owner, now.UnixNano()))
		if errors.Is(err, sql.ErrNoRows) { // not claimed: say why
			if r, err = getRun(ctx, tx, id); err != nil {
				return err
			}
			switch {
			case r.Status.Terminal():
				return core.ErrRunFinished
			case r.Status == core.RunPaused:
				return core.ErrRunPaused
			default:
				return fmt.Errorf("%w until %s", core.ErrClaimed, nanos(r.claimUntil).Format(time.RFC3339))
			}
		}
		if err != nil {
			return err
		}
		evs, err := appendTx(ctx, tx, id, r.LastSeq, events, now)
		if err != nil {
			return err
		}
		r.LastSeq += int64(len(evs))
		out = r.Run
		return nil
	})
	if err != nil {
		return core.Run{}, fmt.Errorf("claim run %s: %w", id, err)
	}
	return out, nil
}

// ExtendClaim implements core.Store.
func (db *DB) ExtendClaim(ctx context.Context, id, owner string, until time.Time) error {
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET claim_until = ?
			WHERE id = ? AND claimed_by = ? AND claimed_by <> '' AND status = 'running'`, until.UnixNano(), id, owner)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		if _, err := getRun(ctx, tx, id); err != nil {
			return err
		}
		return core.ErrClaimLost
	})
	if err != nil {
		return fmt.Errorf("extend claim on run %s: %w", id, err)
	}
	return nil
}

// AppendEvents implements core.Store.
func (db *DB) AppendEvents(ctx context.Context, id, owner string, events []core.Event) ([]core.Event, error) {
	var out []core.Event
	err := db.tx(ctx, func(tx *txn) error {
		r, err := getRun(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := checkClaim(r, owner); err != nil {
			return err
		}
		out, err = appendTx(ctx, tx, id, r.LastSeq, events, db.opts.Clock.Now())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("append to run %s: %w", id, err)
	}
	return out, nil
}

// PauseRun implements core.Store. The approval must carry its ID (the events
// refer to it); an empty ArgsSHA256 is computed from Arguments.
func (db *DB) PauseRun(ctx context.Context, id, owner string, a core.Approval, events []core.Event) (core.Run, error) {
	if a.ID == "" {
		return core.Run{}, fmt.Errorf("pause run %s: approval id is required", id)
	}
	if a.RunID != "" && a.RunID != id {
		return core.Run{}, fmt.Errorf("pause run %s: approval %s is for run %s", id, a.ID, a.RunID)
	}
	args, err := jsonOrNull(a.Arguments)
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
		a.CreatedAt = db.opts.Clock.Now()
	}
	var out core.Run
	err = db.tx(ctx, func(tx *txn) error {
		r, err := getRun(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := checkClaim(r, owner); err != nil {
			return err
		}
		if a.SessionID == "" {
			a.SessionID = r.SessionID
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO approvals(id, run_id, session_id, tool_call_id, tool, arguments,
			args_sha256, policy, requested_by, status, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
			a.ID, id, a.SessionID, a.ToolCallID, a.Tool, args, a.ArgsSHA256, policy, a.RequestedBy,
			a.CreatedAt.UnixNano(), a.ExpiresAt.UnixNano()); err != nil {
			return fmt.Errorf("insert approval %s: %w", a.ID, err)
		}
		if err := db.enqueueTx(ctx, tx, core.ApprovalJobFor(a.ID, core.ApprovalPending)); err != nil {
			return err
		}
		if _, err := appendTx(ctx, tx, id, r.LastSeq, events, a.CreatedAt); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = 'paused', claimed_by = '', claim_until = 0 WHERE id = ?`, id); err != nil {
			return err
		}
		r, err = getRun(ctx, tx, id)
		out = r.Run
		return err
	})
	if err != nil {
		return core.Run{}, fmt.Errorf("pause run %s: %w", id, err)
	}
	db.wake()
	return out, nil
}

// FinishRun implements core.Store. Pending approvals of the run (possible
// only when owner is "") are cancelled so that no decision reopens it.
func (db *DB) FinishRun(ctx context.Context, id, owner string, f core.Finish) (core.Run, error) {
	if !f.Status.Terminal() {
		return core.Run{}, fmt.Errorf("finish run %s: status %q is not terminal", id, f.Status)
	}
	if f.At.IsZero() {
		f.At = db.opts.Clock.Now()
	}
	var out core.Run
	err := db.tx(ctx, func(tx *txn) error {
		r, err := getRun(ctx, tx, id)
		if err != nil {
			return err
		}
		if r.Status.Terminal() {
			return core.ErrRunFinished
		}
		if owner != "" {
			if err := checkClaim(r, owner); err != nil {
				return err
			}
		}
		if r.LastSeq, err = db.cancelPendingTx(ctx, tx, r, "", f.Error, f.At); err != nil {
			return err
		}
		if _, err := appendTx(ctx, tx, id, r.LastSeq, f.Events, f.At); err != nil {
			return err
		}
		r, err = scanRun(tx.QueryRowContext(ctx, `UPDATE runs SET status = ?, output = ?, error = ?, input_tokens = ?,
			output_tokens = ?, finished_at = ?, claimed_by = '', claim_until = 0 WHERE id = ? RETURNING `+runCols,
			string(f.Status), f.Output, f.Error, f.Usage.InputTokens, f.Usage.OutputTokens, f.At.UnixNano(), id))
		if err != nil {
			return err
		}
		for _, j := range f.Jobs {
			if err := db.enqueueTx(ctx, tx, j); err != nil {
				return err
			}
		}
		if err := db.enqueueNextTx(ctx, tx, r.SessionID, id); err != nil {
			return err
		}
		out = r.Run
		return ackTx(ctx, tx, f.Ack)
	})
	if err != nil {
		return core.Run{}, fmt.Errorf("finish run %s: %w", id, err)
	}
	db.wake()
	return out, nil
}

// CancelRun implements core.Store. With ErrRunFinished it also returns the
// run as it is.
func (db *DB) CancelRun(ctx context.Context, id string, c core.Cancel) (core.Run, error) {
	if c.At.IsZero() {
		c.At = db.opts.Clock.Now()
	}
	var out core.Run
	err := db.tx(ctx, func(tx *txn) error {
		r, err := getRun(ctx, tx, id)
		if err != nil {
			return err
		}
		if r.Status.Terminal() {
			out = r.Run
			return core.ErrRunFinished
		}
		if r.LastSeq, err = db.cancelPendingTx(ctx, tx, r, c.By, c.Reason, c.At); err != nil {
			return err
		}
		ev := core.NewEvent(core.EventStatus, core.StatusChange{Status: core.RunCancelled, Error: c.Reason})
		if _, err := appendTx(ctx, tx, id, r.LastSeq, []core.Event{ev}, c.At); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = 'cancelled', error = ?, finished_at = ?,
			claimed_by = '', claim_until = 0 WHERE id = ?`, c.Reason, c.At.UnixNano(), id); err != nil {
			return err
		}
		if err := db.enqueueNextTx(ctx, tx, r.SessionID, id); err != nil {
			return err
		}
		if c.Audit != nil {
			if err := insertAuditTx(ctx, tx, *c.Audit, c.At); err != nil {
				return err
			}
		}
		r, err = getRun(ctx, tx, id)
		out = r.Run
		return err
	})
	if err != nil {
		return out, fmt.Errorf("cancel run %s: %w", id, err)
	}
	db.wake()
	return out, nil
}

// Events implements core.Store. ErrNotFound when the run does not exist.
func (db *DB) Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]core.Event, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT seq, type, data, created_at FROM run_events
		WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`, runID, afterSeq, sqlLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []core.Event
	for rows.Next() {
		e := core.Event{RunID: runID}
		var typ string
		var data []byte
		var created int64
		if err := rows.Scan(&e.Seq, &typ, &data, &created); err != nil {
			return nil, fmt.Errorf("events of run %s: %w", runID, err)
		}
		e.Type = core.EventType(typ)
		e.Data = data
		e.CreatedAt = nanos(created)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	if len(out) == 0 {
		var one int
		err := db.r.QueryRowContext(ctx, `SELECT 1 FROM runs WHERE id = ?`, runID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			err = core.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("events of run %s: %w", runID, err)
		}
	}
	return out, nil
}

// GetSession implements core.Store.
func (db *DB) GetSession(ctx context.Context, id string) (core.Session, error) {
	s, err := scanSession(db.r.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		err = core.ErrNotFound
	}
	if err != nil {
		return core.Session{}, fmt.Errorf("get session %s: %w", id, err)
	}
	return s, nil
}

// ListSessions implements core.Store.
func (db *DB) ListSessions(ctx context.Context, f core.SessionFilter) (core.Page[core.Session], error) {
	after, err := parseCursor(f.Cursor)
	if err != nil {
		return core.Page[core.Session]{}, fmt.Errorf("list sessions: %w", err)
	}
	q := `SELECT rowid, ` + sessionCols + ` FROM sessions WHERE rowid > ?`
	args := []any{after}
	if f.UserID != "" {
		q += ` AND user_id = ?`
		args = append(args, f.UserID)
	}
	if f.AgentID != "" {
		q += ` AND agent_id = ?`
		args = append(args, f.AgentID)
	}
	if len(f.AgentIDs) > 0 {
		q += ` AND agent_id IN ` + inList(len(f.AgentIDs))
		args = appendStrings(args, f.AgentIDs)
	}
	q += ` ORDER BY rowid LIMIT ?`
	p, err := list(ctx, db, f.ListOptions, q, args, scanSession)
	if err != nil {
		return core.Page[core.Session]{}, fmt.Errorf("list sessions: %w", err)
	}
	return p, nil
}

// GetApproval implements core.Store.
func (db *DB) GetApproval(ctx context.Context, id string) (core.Approval, error) {
	a, err := getApproval(ctx, db.r, id)
	if err != nil {
		return core.Approval{}, fmt.Errorf("get approval %s: %w", id, err)
	}
	return a, nil
}

// ListApprovals implements core.Store.
func (db *DB) ListApprovals(ctx context.Context, f core.ApprovalFilter) (core.Page[core.Approval], error) {
	after, err := parseCursor(f.Cursor)
	if err != nil {
		return core.Page[core.Approval]{}, fmt.Errorf("list approvals: %w", err)
	}
	q := `SELECT rowid, ` + approvalCols + ` FROM approvals WHERE rowid > ?`
	args := []any{after}
	if f.Status != "" {
		q += ` AND status = ?`
		args = append(args, string(f.Status))
	}
	if f.RunID != "" {
		q += ` AND run_id = ?`
		args = append(args, f.RunID)
	}
	if len(f.AgentIDs) > 0 {
		q += ` AND run_id IN (SELECT id FROM runs WHERE agent_id IN ` + inList(len(f.AgentIDs)) + `)`
		args = appendStrings(args, f.AgentIDs)
	}
	if b := f.Conversation; b != nil {
		q += ` AND session_id IN (SELECT id FROM sessions WHERE platform = ? AND channel = ?
			AND (? = '' OR workspace = '' OR workspace = ?))`
		args = append(args, b.Platform, b.Channel, b.Workspace, b.Workspace)
	}
	q += ` ORDER BY rowid LIMIT ?`
	p, err := list(ctx, db, f.ListOptions, q, args, scanApproval)
	if err != nil {
		return core.Page[core.Approval]{}, fmt.Errorf("list approvals: %w", err)
	}
	return p, nil
}

// runDriver runs the run rules of sqlstore.Runs on db.
type runDriver struct{ db *DB }

func (d runDriver) RunTx(ctx context.Context, fn func(sqlstore.RunTx) error) error {
	return d.db.tx(ctx, func(tx *txn) error { return fn(runTx{db: d.db, tx: tx}) })
}

func (d runDriver) Now() time.Time { return d.db.opts.Clock.Now() }
func (d runDriver) Enqueued()      { d.db.wake() }

// runTx is sqlstore.RunTx on a SQLite transaction (one writer: what it
// reads stays as read until commit).
type runTx struct {
	db *DB
	tx *txn
}

func (t runTx) DecideApproval(ctx context.Context, id string, d core.Decision) (sqlstore.Decided, error) {
	a, err := getApproval(ctx, t.tx, id)
	if err != nil || a.Status != core.ApprovalPending || d.ArgsSHA256 != "" && d.ArgsSHA256 != a.ArgsSHA256 {
		return sqlstore.Decided{}, err
	}
	a, err = scanApproval(t.tx.QueryRowContext(ctx, `UPDATE approvals SET status = ?, decided_by = ?, decided_by_name = ?,
		decided_via = ?, reason = ?, decided_at = ? WHERE id = ? AND status = 'pending' RETURNING `+approvalCols,
		string(d.Status), d.By, d.ByName, d.Via, d.Reason, d.At.UnixNano(), id))
	if err != nil {
		return sqlstore.Decided{}, err
	}
	// A paused run resumes once no approval of it is pending.
	r, err := scanRun(t.tx.QueryRowContext(ctx, `UPDATE runs SET status = CASE WHEN status = 'paused' AND NOT EXISTS (
		SELECT 1 FROM approvals WHERE run_id = runs.id AND status = 'pending') THEN 'queued' ELSE status END
		WHERE id = ? RETURNING `+runCols, a.RunID))
	if err != nil {
		return sqlstore.Decided{}, fmt.Errorf("load run %s: %w", a.RunID, err)
	}
	return sqlstore.Decided{Decided: true, Approval: a, Run: r.Run}, nil
}

func (t runTx) GetApproval(ctx context.Context, id string) (core.Approval, error) {
	return getApproval(ctx, t.tx, id)
}

func (t runTx) AppendEvents(ctx context.Context, runID string, after int64, evs []core.Event, at time.Time) error {
	_, err := appendTx(ctx, t.tx, runID, after, evs, at)
	return err
}

func (t runTx) Enqueue(ctx context.Context, jobs ...core.Job) error {
	for _, j := range jobs {
		if err := t.db.enqueueTx(ctx, t.tx, j); err != nil {
			return err
		}
	}
	return nil
}

func (t runTx) InsertAudit(ctx context.Context, e core.AuditEntry) error {
	return insertAuditTx(ctx, t.tx, e, e.At)
}

// DueApprovals implements core.Store; limit 0 means no limit.
func (db *DB) DueApprovals(ctx context.Context, now time.Time, limit int) ([]core.Approval, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+approvalCols+` FROM approvals
		WHERE status = 'pending' AND expires_at <= ? ORDER BY expires_at, rowid LIMIT ?`, now.UnixNano(), sqlLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("due approvals: %w", err)
	}
	defer rows.Close()
	var out []core.Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, fmt.Errorf("due approvals: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("due approvals: %w", err)
	}
	return out, nil
}

// RequeueActive implements core.Store.
func (db *DB) RequeueActive(ctx context.Context) (int, error) {
	var n int
	err := db.tx(ctx, func(tx *txn) error {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM runs WHERE status IN ('queued', 'running') ORDER BY rowid`)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		for _, id := range ids {
			if err := db.enqueueTx(ctx, tx, core.RunJobFor(id)); err != nil {
				return err
			}
		}
		n = len(ids)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("requeue active runs: %w", err)
	}
	if n > 0 {
		db.wake()
	}
	return n, nil
}

// CountRuns implements core.Store; every known status has an entry.
func (db *DB) CountRuns(ctx context.Context) (map[core.RunStatus]int64, error) {
	m := map[core.RunStatus]int64{}
	for _, s := range []core.RunStatus{core.RunQueued, core.RunRunning, core.RunPaused, core.RunCompleted, core.RunFailed, core.RunCancelled} {
		m[s] = 0
	}
	if err := countBy(ctx, db.r, `SELECT status, COUNT(*) FROM runs GROUP BY status`, func(s string, n int64) {
		m[core.RunStatus(s)] = n
	}); err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	return m, nil
}

// CountApprovals implements core.Store; every known status has an entry.
func (db *DB) CountApprovals(ctx context.Context) (map[core.ApprovalStatus]int64, error) {
	m := map[core.ApprovalStatus]int64{}
	for _, s := range []core.ApprovalStatus{core.ApprovalPending, core.ApprovalApproved, core.ApprovalDenied, core.ApprovalExpired, core.ApprovalCancelled} {
		m[s] = 0
	}
	if err := countBy(ctx, db.r, `SELECT status, COUNT(*) FROM approvals GROUP BY status`, func(s string, n int64) {
		m[core.ApprovalStatus(s)] = n
	}); err != nil {
		return nil, fmt.Errorf("count approvals: %w", err)
	}
	return m, nil
}

func countBy(ctx context.Context, q querier, query string, add func(string, int64)) error {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return err
		}
		add(s, n)
	}
	return rows.Err()
}

// ClaimSend implements core.Outbox.
func (db *DB) ClaimSend(ctx context.Context, key string, at time.Time) (bool, string, error) {
	var claimed bool
	var state string
	err := db.tx(ctx, func(tx *txn) error {
		err := tx.QueryRowContext(ctx, `SELECT state FROM outbox WHERE key = ?`, key).Scan(&state)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, `INSERT INTO outbox(key, state, created_at, updated_at) VALUES (?, ?, ?, ?)`,
				key, core.SendSending, at.UnixNano(), at.UnixNano())
		case err == nil && state == core.SendFailed:
			_, err = tx.ExecContext(ctx, `UPDATE outbox SET state = ?, updated_at = ? WHERE key = ?`,
				core.SendSending, at.UnixNano(), key)
		case err == nil:
			return nil
		}
		claimed, state = err == nil, core.SendSending
		return err
	})
	if err != nil {
		return false, "", fmt.Errorf("claim send %s: %w", key, err)
	}
	return claimed, state, nil
}

// SendRef implements core.Outbox.
func (db *DB) SendRef(ctx context.Context, key string) (state, ref string, err error) {
	err = db.r.QueryRowContext(ctx, `SELECT state, ref FROM outbox WHERE key = ?`, key).Scan(&state, &ref)
	if errors.Is(err, sql.ErrNoRows) {
		err = core.ErrNotFound
	}
	if err != nil {
		return "", "", fmt.Errorf("send ref %s: %w", key, err)
	}
	return state, ref, nil
}

// SetSendState implements core.Outbox.
func (db *DB) SetSendState(ctx context.Context, key, state, ref string, at time.Time) error {
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE outbox SET state = ?, ref = ?, updated_at = ? WHERE key = ?`,
			state, ref, at.UnixNano(), key)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return core.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set send state %s: %w", key, err)
	}
	return nil
}
