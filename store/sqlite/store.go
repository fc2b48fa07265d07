package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

// This file implements core.Store. Lists page by rowid (creation order); a
// cursor is the rowid of the last item of the previous page.

const (
	runCols        = sqlstore.RunCols
	sessionCols    = sqlstore.SessionCols
	approvalCols   = sqlstore.ApprovalCols
	activeStatuses = sqlstore.ActiveStatuses
)

type runRow = sqlstore.RunRow

// appendTx appends checked events (sqlstore.CheckEvents) to the journal of
// runID after lastSeq and moves the run's last_seq. It returns the stored
// events.
func appendTx(ctx context.Context, tx *txn, runID string, lastSeq int64, evs []core.Event) ([]core.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	out := make([]core.Event, len(evs))
	for i, e := range evs {
		e.RunID = runID
		e.Seq = lastSeq + int64(i) + 1
		e.CreatedAt = nanos(e.CreatedAt.UnixNano())
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_events(run_id, seq, type, data, created_at) VALUES (?, ?, ?, ?, ?)`,
			runID, e.Seq, string(e.Type), []byte(e.Data), e.CreatedAt.UnixNano()); err != nil {
			return nil, fmt.Errorf("insert event %d: %w", e.Seq, err)
		}
		out[i] = e
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET last_seq = ? WHERE id = ?`, out[len(out)-1].Seq, runID); err != nil {
		return nil, fmt.Errorf("update last seq: %w", err)
	}
	return out, nil
}

// createRunTx inserts a checked NewRun (see sqlstore.RunTx.CreateRuns)
// inside tx: the inbox entry of nr.DedupeKey (a *core.DuplicateError when
// it is taken), the session if new, the run and its first events.
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
		parent_run_id, routine_id, started_by, input, output, error, input_tokens, output_tokens, created_at, conversation)
		VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.SessionID, r.AgentID, r.UserID, string(r.Type), r.ParentRunID, r.RoutineID, r.StartedBy, r.Input, r.Output,
		r.Error, r.Usage.InputTokens, r.Usage.OutputTokens, r.CreatedAt.UnixNano(), sqlstore.EncodeConversation(s.Binding)); err != nil {
		return core.Run{}, fmt.Errorf("insert run: %w", err)
	}
	if _, err := appendTx(ctx, tx, r.ID, 0, nr.Events); err != nil {
		return core.Run{}, err
	}
	row, err := sqlstore.GetRun(ctx, conn{tx}, r.ID, "")
	return row.Run, err
}

// historyStmt reads a session's completed runs before a rowid, oldest
// first, through runs_session (session_id, status, rowid).
const historyStmt = `SELECT ` + runCols + ` FROM (
	SELECT rowid AS rid, * FROM runs WHERE session_id = ? AND status = 'completed' AND rowid < ?
	ORDER BY rowid DESC LIMIT ?) ORDER BY rid`

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
	rows, err := db.r.QueryContext(ctx, historyStmt, sessionID, before, dialect.Limit(limit))
	if err != nil {
		return nil, fmt.Errorf("session %s history: %w", sessionID, err)
	}
	defer rows.Close()
	var out []core.Run
	for rows.Next() {
		r, err := sqlstore.ScanRun(rows)
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

// runDriver runs the run rules of sqlstore.Runs on db.
type runDriver struct{ db *DB }

func (d runDriver) RunTx(ctx context.Context, fn func(sqlstore.RunTx) error) error {
	return d.db.tx(ctx, func(tx *txn) error { return fn(runTx{db: d.db, tx: tx}) })
}

func (d runDriver) Now() time.Time { return d.db.opts.Clock.Now() }
func (d runDriver) Enqueued()      { d.db.wake() }

func (d runDriver) GetRun(ctx context.Context, id string) (runRow, error) {
	return sqlstore.GetRun(ctx, conn{d.db.r}, id, "")
}

func (d runDriver) ClaimRun(ctx context.Context, c sqlstore.Claim) (core.Run, bool, error) {
	var out core.Run
	claimed := false
	err := d.db.tx(ctx, func(tx *txn) error {
		r, err := sqlstore.ScanRun(tx.QueryRowContext(ctx, `UPDATE runs SET claimed_by = ?, claim_until = ?, status = 'running',
			started_at = COALESCE(started_at, ?)
			WHERE id = ? AND status IN ('queued', 'running') AND (claimed_by = '' OR claimed_by = ? OR claim_until <= ?)
			RETURNING `+runCols, c.Owner, c.Until.UnixNano(), c.Now.UnixNano(), c.ID, c.Owner, c.Now.UnixNano()))
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		evs, err := appendTx(ctx, tx, c.ID, r.LastSeq, c.Events)
		r.LastSeq += int64(len(evs))
		out, claimed = r.Run, true
		return err
	})
	return out, claimed, err
}

var _ sqlstore.Starter = runDriver{}

// StartCreated implements sqlstore.Starter.
func (d runDriver) StartCreated(ctx context.Context, rt sqlstore.RunTx, run core.Run, st core.StartAtCreate, job core.Job) (sqlstore.StartedAtCreate, bool, error) {
	tx := rt.(runTx).tx
	var earlier int
	err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM runs
		WHERE session_id = ? AND status IN `+activeStatuses+` AND id <> ? LIMIT 1)`, run.SessionID, run.ID).Scan(&earlier)
	if err != nil || earlier > 0 {
		return sqlstore.StartedAtCreate{}, false, err // the session's head goes first; finishing it enqueues this run
	}
	now := d.db.opts.Clock.Now()
	r, err := sqlstore.ScanRun(tx.QueryRowContext(ctx, `UPDATE runs SET claimed_by = ?, claim_until = ?, status = 'running',
		started_at = ? WHERE id = ? RETURNING `+runCols, st.Owner, st.Until.UnixNano(), now.UnixNano(), run.ID))
	if err != nil {
		return sqlstore.StartedAtCreate{}, false, fmt.Errorf("start run %s: %w", run.ID, err)
	}
	evs, err := appendTx(ctx, tx, run.ID, r.LastSeq, st.Events)
	if err != nil {
		return sqlstore.StartedAtCreate{}, false, err
	}
	r.LastSeq += int64(len(evs))
	job = sqlstore.NewJob(job, now)
	job.Attempt, job.Lease = 1, core.NewID("lease")
	if err := insertJobTx(ctx, tx, job, st.Owner, st.Until, now); err != nil {
		return sqlstore.StartedAtCreate{}, false, err
	}
	job.MaxAttempts = d.db.maxAttempts(job.MaxAttempts) // as a dequeue reports it
	return sqlstore.StartedAtCreate{Run: r.Run, Job: job}, true, nil
}

// StartRun claims in one write transaction (the head check, the
// compare-and-set and the start events), then reads the journal and the
// history from a reader. A run this owner claimed as it created it
// (core.NewRun.Start), whose claim still holds, is only read: no write.
func (d runDriver) StartRun(ctx context.Context, s core.Start) (core.Started, bool, error) {
	var out core.Started
	claimed := false
	if r, err := sqlstore.GetRun(ctx, conn{d.db.r}, s.ID, ""); err == nil && r.Status == core.RunRunning && r.ClaimedBy == s.Owner &&
		r.ClaimUntil != nil && s.Now.Before(*r.ClaimUntil) {
		out.Run = r.Run
		return d.readStarted(ctx, s, out)
	}
	err := d.db.tx(ctx, func(tx *txn) error {
		was, err := sqlstore.GetRun(ctx, conn{tx}, s.ID, "") // one writer: the status stays as read
		if errors.Is(err, core.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		r, err := sqlstore.ScanRun(tx.QueryRowContext(ctx, `UPDATE runs SET claimed_by = ?1, claim_until = ?2, status = 'running',
			started_at = COALESCE(started_at, ?3)
			WHERE id = ?4 AND status IN ('queued', 'running') AND (claimed_by = '' OR claimed_by = ?1 OR claim_until <= ?3)
				AND NOT EXISTS (SELECT 1 FROM runs o WHERE o.session_id = runs.session_id AND o.rowid < runs.rowid
					AND o.status IN `+activeStatuses+`)
			RETURNING `+runCols, s.Owner, s.Until.UnixNano(), s.Now.UnixNano(), s.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		claimed, out.Began = true, was.Status == core.RunQueued
		if out.Began {
			evs, err := appendTx(ctx, tx, s.ID, r.LastSeq, s.Events)
			r.LastSeq += int64(len(evs))
			if err != nil {
				return err
			}
		}
		out.Run = r.Run
		return nil
	})
	if err != nil || !claimed {
		return core.Started{}, false, err
	}
	return d.readStarted(ctx, s, out)
}

// readStarted reads the journal and history of a run started as out.
func (d runDriver) readStarted(ctx context.Context, s core.Start, out core.Started) (core.Started, bool, error) {
	var err error
	if out.Journal, err = d.db.Events(ctx, s.ID, 0, 0); err != nil {
		return core.Started{}, false, err
	}
	if s.History > 0 {
		if out.History, err = d.db.SessionHistory(ctx, out.Run.SessionID, s.ID, s.History); err != nil {
			return core.Started{}, false, err
		}
	}
	return out, true, nil
}

func (d runDriver) SessionHead(ctx context.Context, sessionID string) (runRow, error) {
	r, err := sqlstore.ScanRun(d.db.r.QueryRowContext(ctx, `SELECT `+runCols+` FROM runs
		WHERE session_id = ? AND status IN `+activeStatuses+` ORDER BY rowid LIMIT 1`, sessionID))
	if errors.Is(err, sql.ErrNoRows) {
		err = core.ErrNotFound
	}
	return r, err
}

func (d runDriver) ExtendClaim(ctx context.Context, id, owner string, until time.Time) (bool, error) {
	var ok bool
	err := d.db.tx(ctx, func(tx *txn) (err error) {
		ok, err = changed(tx.ExecContext(ctx, `UPDATE runs SET claim_until = ?
			WHERE id = ? AND claimed_by = ? AND claimed_by <> '' AND status = 'running'`, until.UnixNano(), id, owner))
		return err
	})
	return ok, err
}

func (d runDriver) AppendClaimed(ctx context.Context, id, owner string, evs []core.Event) ([]core.Event, bool, error) {
	var out []core.Event
	ok := false
	err := d.db.tx(ctx, func(tx *txn) error {
		r, err := sqlstore.GetRun(ctx, conn{tx}, id, "")
		if errors.Is(err, core.ErrNotFound) || err == nil && sqlstore.CheckClaim(r, owner) != nil {
			return nil
		}
		if err != nil {
			return err
		}
		out, err = appendTx(ctx, tx, id, r.LastSeq, evs)
		ok = err == nil
		return err
	})
	return out, ok, err
}

// runTx is sqlstore.RunTx on a SQLite transaction (one writer: what it
// reads stays as read until commit).
type runTx struct {
	db *DB
	tx *txn
}

func (t runTx) CreateRuns(ctx context.Context, runs []core.NewRun) ([]core.Run, error) {
	out := make([]core.Run, len(runs))
	for i, nr := range runs {
		var err error
		if out[i], err = t.db.createRunTx(ctx, t.tx, nr); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (t runTx) LockRun(ctx context.Context, id string) (runRow, error) {
	return sqlstore.GetRun(ctx, conn{t.tx}, id, "")
}

func (t runTx) InsertApproval(ctx context.Context, a core.Approval, args, policy []byte) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO approvals(id, run_id, session_id, tool_call_id, tool, arguments,
		args_sha256, policy, requested_by, status, created_at, expires_at, origin)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)`,
		a.ID, a.RunID, a.SessionID, a.ToolCallID, a.Tool, args, a.ArgsSHA256, policy, a.RequestedBy,
		a.CreatedAt.UnixNano(), a.ExpiresAt.UnixNano(), a.Origin)
	return err
}

func (t runTx) SetPaused(ctx context.Context, id string) (*core.Run, error) {
	return t.setRun(ctx, `UPDATE runs SET status = 'paused', claimed_by = '', claim_until = 0 WHERE id = ? RETURNING `+runCols, id)
}

func (t runTx) SetFinished(ctx context.Context, id string, f core.Finish) (*core.Run, error) {
	return t.setRun(ctx, `UPDATE runs SET status = ?, output = ?, error = ?, input_tokens = ?,
		output_tokens = ?, finished_at = ?, claimed_by = '', claim_until = 0 WHERE id = ? RETURNING `+runCols,
		string(f.Status), f.Output, f.Error, f.Usage.InputTokens, f.Usage.OutputTokens, f.At.UnixNano(), id)
}

func (t runTx) SetCancelled(ctx context.Context, id, reason string, at time.Time) (*core.Run, error) {
	return t.setRun(ctx, `UPDATE runs SET status = 'cancelled', error = ?, finished_at = ?,
		claimed_by = '', claim_until = 0 WHERE id = ? RETURNING `+runCols, reason, at.UnixNano(), id)
}

func (t runTx) setRun(ctx context.Context, query string, args ...any) (*core.Run, error) {
	r, err := sqlstore.ScanRun(t.tx.QueryRowContext(ctx, query, args...))
	if err != nil {
		return nil, err
	}
	return &r.Run, nil
}

// cancelPendingStmt cancels the pending approvals of a run (?4), decided by
// ?1 for reason ?2 at ?3. It reads the run's pending approvals only, through
// approvals_pending (migration 14), which it names as the index does.
const cancelPendingStmt = `UPDATE approvals SET status = 'cancelled', decided_by = ?,
	decided_via = '', reason = ?, decided_at = ? WHERE run_id = ? AND status = 'pending' RETURNING rowid, id, tool_call_id`

// resumeStmt queues run ?1 if it is paused and none of its approvals is
// pending any more, and returns it; like cancelPendingStmt it reads the
// run's pending approvals only.
const resumeStmt = `UPDATE runs SET status = CASE WHEN status = 'paused' AND NOT EXISTS (
	SELECT 1 FROM approvals WHERE run_id = runs.id AND status = 'pending') THEN 'queued' ELSE status END
	WHERE id = ? RETURNING ` + runCols

// Close reads what closing run id needs; SQLite's one writer holds it all
// until commit.
func (t runTx) Close(ctx context.Context, id, by, reason string, at time.Time) (sqlstore.Closing, error) {
	var c sqlstore.Closing
	var err error
	if c.Run, err = sqlstore.GetRun(ctx, conn{t.tx}, id, ""); err != nil || c.Run.Status.Terminal() {
		return c, err
	}
	rows, err := t.tx.QueryContext(ctx, cancelPendingStmt, by, reason, at.UnixNano(), id)
	if err != nil {
		return c, fmt.Errorf("cancel pending approvals: %w", err)
	}
	type row struct {
		rowid int64
		a     sqlstore.Cancelled
	}
	var got []row
	for rows.Next() {
		var x row
		if err := rows.Scan(&x.rowid, &x.a.ID, &x.a.ToolCallID); err != nil {
			rows.Close()
			return c, fmt.Errorf("cancel pending approvals: %w", err)
		}
		got = append(got, x)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return c, fmt.Errorf("cancel pending approvals: %w", err)
	}
	slices.SortFunc(got, func(x, y row) int { return cmp.Compare(x.rowid, y.rowid) }) // RETURNING has no order
	for _, x := range got {
		c.Cancelled = append(c.Cancelled, x.a)
	}
	var next, status string
	var after bool
	err = t.tx.QueryRowContext(ctx, `SELECT id, status, rowid > (SELECT rowid FROM runs WHERE id = ?1) FROM runs
		WHERE session_id = ?2 AND id <> ?1 AND status IN `+activeStatuses+` ORDER BY rowid LIMIT 1`, id, c.Run.SessionID).
		Scan(&next, &status, &after)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return c, fmt.Errorf("find next run of session %s: %w", c.Run.SessionID, err)
	case after && core.RunStatus(status) == core.RunQueued:
		c.Next = next // else an older run still holds the session, or the head is not waiting for a worker
	}
	return c, nil
}

func (t runTx) DecideApproval(ctx context.Context, id string, d core.Decision) (sqlstore.Decided, error) {
	a, err := sqlstore.GetApproval(ctx, conn{t.tx}, id)
	if err != nil || a.Status != core.ApprovalPending || d.ArgsSHA256 != "" && d.ArgsSHA256 != a.ArgsSHA256 {
		return sqlstore.Decided{}, err
	}
	a, err = sqlstore.ScanApproval(t.tx.QueryRowContext(ctx, `UPDATE approvals SET status = ?, decided_by = ?, decided_by_name = ?,
		decided_via = ?, reason = ?, decided_at = ? WHERE id = ? AND status = 'pending' RETURNING `+approvalCols,
		string(d.Status), d.By, d.ByName, d.Via, d.Reason, d.At.UnixNano(), id))
	if err != nil {
		return sqlstore.Decided{}, err
	}
	// A paused run resumes once no approval of it is pending.
	r, err := sqlstore.ScanRun(t.tx.QueryRowContext(ctx, resumeStmt, a.RunID))
	if err != nil {
		return sqlstore.Decided{}, fmt.Errorf("load run %s: %w", a.RunID, err)
	}
	return sqlstore.Decided{Decided: true, Approval: a, Run: r.Run}, nil
}

func (t runTx) GetApproval(ctx context.Context, id string) (core.Approval, error) {
	return sqlstore.GetApproval(ctx, conn{t.tx}, id)
}

func (t runTx) ActiveRuns(ctx context.Context) ([]string, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT id FROM runs WHERE status IN ('queued', 'running') ORDER BY rowid`)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, errors.Join(rows.Err(), rows.Close())
}

func (t runTx) AppendEvents(ctx context.Context, runID string, after int64, evs []core.Event) error {
	_, err := appendTx(ctx, t.tx, runID, after, evs)
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

func (t runTx) Ack(ctx context.Context, j core.Job) error { return ackTx(ctx, t.tx, &j) }

func (t runTx) InsertAudit(ctx context.Context, e core.AuditEntry) error {
	return sqlstore.InsertAudit(ctx, conn{t.tx}, e, e.At)
}

// changed reports whether an exec changed a row.
func changed(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
