package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/core"
)

// This file implements core.Store. Lists page by the pk identity column
// (creation order); a cursor is the pk of the last item of the previous page.

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

// querier is what the pool and a transaction have in common for reads.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type scanner interface{ Scan(dest ...any) error }

// runRow is a run with its claim, which core.Run does not carry.
type runRow struct {
	core.Run
	claimedBy  string
	claimUntil *time.Time
}

// scanRun scans runCols, after any extra leading columns (the pk of lists).
func scanRun(s scanner, extra ...any) (runRow, error) {
	var r runRow
	var typ, status string
	dest := append(extra, &r.ID, &r.SessionID, &r.AgentID, &r.UserID, &typ, &status, &r.ParentRunID, &r.RoutineID,
		&r.StartedBy, &r.Input, &r.Output, &r.Error, &r.Usage.InputTokens, &r.Usage.OutputTokens, &r.LastSeq, &r.CreatedAt,
		&r.StartedAt, &r.FinishedAt, &r.claimedBy, &r.claimUntil)
	if err := s.Scan(dest...); err != nil {
		return runRow{}, err
	}
	r.Type = core.RunType(typ)
	r.Status = core.RunStatus(status)
	r.CreatedAt = utc(r.CreatedAt)
	r.StartedAt = utcPtr(r.StartedAt)
	r.FinishedAt = utcPtr(r.FinishedAt)
	r.claimUntil = utcPtr(r.claimUntil)
	return r, nil
}

func scanSession(s scanner, extra ...any) (core.Session, error) {
	var x core.Session
	dest := append(extra, &x.ID, &x.AgentID, &x.UserID, &x.Binding.Platform, &x.Binding.Workspace, &x.Binding.Channel,
		&x.Binding.Thread, &x.Title, &x.CreatedAt, &x.UpdatedAt)
	if err := s.Scan(dest...); err != nil {
		return core.Session{}, err
	}
	x.CreatedAt = utc(x.CreatedAt)
	x.UpdatedAt = utc(x.UpdatedAt)
	return x, nil
}

func scanApproval(s scanner, extra ...any) (core.Approval, error) {
	var a core.Approval
	var args, policy []byte
	var status string
	dest := append(extra, &a.ID, &a.RunID, &a.SessionID, &a.ToolCallID, &a.Tool, &args, &a.ArgsSHA256, &policy,
		&a.RequestedBy, &status, &a.DecidedBy, &a.DecidedByName, &a.DecidedVia, &a.Reason, &a.CreatedAt, &a.ExpiresAt, &a.DecidedAt)
	if err := s.Scan(dest...); err != nil {
		return core.Approval{}, err
	}
	if err := json.Unmarshal(policy, &a.Policy); err != nil {
		return core.Approval{}, fmt.Errorf("approval %s: decode policy: %w", a.ID, err)
	}
	a.Arguments = json.RawMessage(args)
	a.Status = core.ApprovalStatus(status)
	a.CreatedAt = utc(a.CreatedAt)
	a.ExpiresAt = utc(a.ExpiresAt)
	a.DecidedAt = utcPtr(a.DecidedAt)
	return a, nil
}

// getRun loads run id, locking its row until the end of the transaction
// when forUpdate; core.ErrNotFound when there is none.
func getRun(ctx context.Context, q querier, id string, forUpdate bool) (runRow, error) {
	query := `SELECT ` + runCols + ` FROM runs WHERE id = $1`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	r, err := scanRun(q.QueryRow(ctx, query, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return runRow{}, core.ErrNotFound
	}
	return r, err
}

func getApproval(ctx context.Context, q querier, id string) (core.Approval, error) {
	a, err := scanApproval(q.QueryRow(ctx, `SELECT `+approvalCols+` FROM approvals WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Approval{}, core.ErrNotFound
	}
	return a, err
}

// lockSessionAndRun locks the session of run id (FOR NO KEY UPDATE, which
// conflicts with the upsert in CreateRun) and then the run (FOR UPDATE), in
// that order, and returns the run.
func lockSessionAndRun(ctx context.Context, tx *txn, id string) (runRow, error) {
	var sessionID string
	err := tx.QueryRow(ctx, `SELECT session_id FROM runs WHERE id = $1`, id).Scan(&sessionID)
	if errors.Is(err, pgx.ErrNoRows) {
		return runRow{}, core.ErrNotFound
	}
	if err != nil {
		return runRow{}, err
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM sessions WHERE id = $1 FOR NO KEY UPDATE`, sessionID); err != nil {
		return runRow{}, fmt.Errorf("lock session %s: %w", sessionID, err)
	}
	return getRun(ctx, tx, id, true)
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
// run's last_seq, in one round trip. The caller holds the run's row lock.
// Events without a time get at. It returns the stored events.
func appendTx(ctx context.Context, tx *txn, runID string, lastSeq int64, evs []core.Event, at time.Time) ([]core.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	out := make([]core.Event, len(evs))
	b := &pgx.Batch{}
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
		e.CreatedAt = stored(e.CreatedAt)
		// JSON goes as text: it also works with the simple protocol (PgBouncer).
		b.Queue(`INSERT INTO run_events (run_id, seq, type, data, created_at) VALUES ($1, $2, $3, $4, $5)`,
			runID, e.Seq, string(e.Type), string(data), e.CreatedAt)
		out[i] = e
	}
	b.Queue(`UPDATE runs SET last_seq = $1 WHERE id = $2`, out[len(out)-1].Seq, runID)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("append events %d..%d: %w", out[0].Seq, out[len(out)-1].Seq, err)
	}
	return out, nil
}

// nextJobTx is called after run id of the session became terminal, with the
// session locked: when it was the session's head, the new head (the oldest
// run that is not terminal) gets its turn and, if queued, the returned job.
// The session lock guarantees that every run created before this
// transaction is seen, and every run created after it gets its own job.
func nextJobTx(ctx context.Context, tx *txn, sessionID, id string) ([]core.Job, error) {
	var next, status string
	var after bool
	err := tx.QueryRow(ctx, `SELECT id, status, pk > (SELECT pk FROM runs WHERE id = $1) FROM runs
		WHERE session_id = $2 AND status IN `+activeStatuses+` ORDER BY pk LIMIT 1`, id, sessionID).Scan(&next, &status, &after)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find next run of session %s: %w", sessionID, err)
	}
	if !after || core.RunStatus(status) != core.RunQueued {
		return nil, nil // an older run still holds the session, or the head is not waiting for a worker
	}
	return []core.Job{core.RunJobFor(next)}, nil
}

// cancelPendingTx cancels the pending approvals of run r (whose row the
// caller holds locked), journaling each as approval_decided, and returns the
// run's new last seq.
func (db *DB) cancelPendingTx(ctx context.Context, tx *txn, r runRow, by, reason string, at time.Time) (int64, error) {
	rows, _ := tx.Query(ctx, `WITH cancelled AS (
			UPDATE approvals SET status = 'cancelled', decided_by = $1, decided_via = '', reason = $2, decided_at = $3
			WHERE run_id = $4 AND status = 'pending'
			RETURNING pk, id, tool_call_id)
		SELECT id, tool_call_id FROM cancelled ORDER BY pk`, by, reason, at, r.ID)
	var evs []core.Event
	var jobs []core.Job
	var id, call string
	_, err := pgx.ForEachRow(rows, []any{&id, &call}, func() error {
		evs = append(evs, core.NewEvent(core.EventApprovalDecided, core.ApprovalDecided{
			ApprovalID: id, ToolCallID: call, Status: core.ApprovalCancelled, DecidedBy: by, Reason: reason,
		}))
		jobs = append(jobs, core.ApprovalJobFor(id, core.ApprovalCancelled))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cancel pending approvals: %w", err)
	}
	if err := db.enqueueTx(ctx, tx, jobs...); err != nil {
		return 0, err
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

// limitArg maps "0 = all" to LIMIT NULL, which PostgreSQL reads as no limit.
func limitArg(n int) any {
	if n <= 0 {
		return nil
	}
	return n
}

// params collects query arguments and hands out their placeholders.
type params []any

func (a *params) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// list runs query, which selects pk followed by the item's columns in pk
// order, with a LIMIT of one more than the page size, and builds the page.
func list[T any](ctx context.Context, db *DB, o core.ListOptions, query string, a params,
	scan func(s scanner, extra ...any) (T, error)) (core.Page[T], error) {
	limit := pageLimit(o.Limit)
	rows, err := db.pool.Query(ctx, query+` LIMIT `+a.add(limit+1), a...)
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
		var pk int64
		item, err := scan(rows, &pk)
		if err != nil {
			return core.Page[T]{}, err
		}
		page.Items = append(page.Items, item)
		last = pk
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return core.Page[T]{}, err
	}
	return page, nil
}

// CreateRun implements core.Store. It locks the session row (the upsert
// does), so it serializes with FinishRun and CancelRun of the session.
func (db *DB) CreateRun(ctx context.Context, nr core.NewRun) (core.Run, error) {
	nr, err := nr.Normalize(db.opts.Clock.Now())
	if err != nil {
		return core.Run{}, err
	}
	var out core.Run
	err = db.tx(ctx, func(tx *txn) error {
		run, err := createRunTx(ctx, tx, nr)
		if err != nil {
			return err
		}
		out = run
		return db.enqueueTx(ctx, tx, core.RunJobFor(run.ID))
	})
	if err != nil {
		return core.Run{}, fmt.Errorf("create run %s: %w", nr.Run.ID, err)
	}
	return out, nil
}

// createRunTx inserts a checked NewRun (see core.NewRun.Normalize) inside tx: the
// inbox entry of nr.DedupeKey (a *core.DuplicateError when it is taken), the
// session if new (else it locks and touches it), the run and its first
// events. The caller enqueues the run's job (core.RunJobFor) in tx, after
// all its runs, so that the job keys of one transaction are locked in one
// order (see enqueueTx).
func createRunTx(ctx context.Context, tx *txn, nr core.NewRun) (core.Run, error) {
	r, s := nr.Run, nr.Session
	if nr.DedupeKey != "" {
		if err := markInboxTx(ctx, tx, nr.Platform, nr.DedupeKey, r.ID, r.CreatedAt); err != nil {
			return core.Run{}, err
		}
	}
	// Insert the session, or lock the existing one and touch it.
	var agent string
	if err := tx.QueryRow(ctx, `INSERT INTO sessions (`+sessionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (id) DO UPDATE SET updated_at = GREATEST(sessions.updated_at, $11)
		RETURNING agent_id`, s.ID, s.AgentID, s.UserID, s.Binding.Platform, s.Binding.Workspace,
		s.Binding.Channel, s.Binding.Thread, s.Title, s.CreatedAt, s.UpdatedAt, r.CreatedAt).Scan(&agent); err != nil {
		return core.Run{}, fmt.Errorf("upsert session %s: %w", s.ID, err)
	}
	if agent != r.AgentID {
		return core.Run{}, fmt.Errorf("session %s of agent %s: %w", s.ID, agent, core.ErrSessionAgent)
	}
	row, err := scanRun(tx.QueryRow(ctx, `INSERT INTO runs (id, session_id, agent_id, user_id, run_type, status,
		parent_run_id, routine_id, started_by, input, output, error, input_tokens, output_tokens, created_at)
		VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, $8, $9, $10, $11, $12, $13, $14)
		RETURNING `+runCols,
		r.ID, r.SessionID, r.AgentID, r.UserID, string(r.Type), r.ParentRunID, r.RoutineID, r.StartedBy, r.Input, r.Output,
		r.Error, r.Usage.InputTokens, r.Usage.OutputTokens, r.CreatedAt))
	if err != nil {
		return core.Run{}, fmt.Errorf("insert run: %w", err)
	}
	evs, err := appendTx(ctx, tx, r.ID, 0, nr.Events, r.CreatedAt)
	if err != nil {
		return core.Run{}, err
	}
	row.LastSeq = int64(len(evs))
	return row.Run, nil
}

// GetRun implements core.Store.
func (db *DB) GetRun(ctx context.Context, id string) (core.Run, error) {
	r, err := getRun(ctx, db.pool, id, false)
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
	var a params
	q := `SELECT pk, ` + runCols + ` FROM runs WHERE pk > ` + a.add(after)
	if f.SessionID != "" {
		q += ` AND session_id = ` + a.add(f.SessionID)
	}
	if len(f.Statuses) > 0 {
		statuses := make([]string, len(f.Statuses))
		for i, s := range f.Statuses {
			statuses[i] = string(s)
		}
		q += ` AND status = ANY(` + a.add(statuses) + `)`
	}
	q += ` ORDER BY pk`
	p, err := list(ctx, db, f.ListOptions, q, a, scanRunItem)
	if err != nil {
		return core.Page[core.Run]{}, fmt.Errorf("list runs: %w", err)
	}
	return p, nil
}

// SessionHead implements core.Store.
func (db *DB) SessionHead(ctx context.Context, sessionID string) (core.Run, error) {
	r, err := scanRun(db.pool.QueryRow(ctx, `SELECT `+runCols+` FROM runs
		WHERE session_id = $1 AND status IN `+activeStatuses+` ORDER BY pk LIMIT 1`, sessionID))
	if errors.Is(err, pgx.ErrNoRows) {
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
		err := db.pool.QueryRow(ctx, `SELECT pk FROM runs WHERE id = $1`, beforeRunID).Scan(&before)
		if errors.Is(err, pgx.ErrNoRows) {
			err = core.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("session %s history before run %s: %w", sessionID, beforeRunID, err)
		}
	}
	rows, _ := db.pool.Query(ctx, `SELECT `+runCols+` FROM (
		SELECT * FROM runs WHERE session_id = $1 AND status = 'completed' AND pk < $2
		ORDER BY pk DESC LIMIT $3) h ORDER BY pk`, sessionID, before, limitArg(limit))
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (core.Run, error) { return scanRunItem(row) })
	if err != nil {
		return nil, fmt.Errorf("session %s history: %w", sessionID, err)
	}
	return out, nil
}

// ClaimRun implements core.Store. The claiming UPDATE is a compare-and-set
// that locks the run row for the rest of the transaction.
func (db *DB) ClaimRun(ctx context.Context, id, owner string, now, until time.Time, events []core.Event) (core.Run, error) {
	if owner == "" {
		return core.Run{}, fmt.Errorf("claim run %s: owner is required", id)
	}
	var out core.Run
	err := db.tx(ctx, func(tx *txn) error {
		r, err := scanRun(tx.QueryRow(ctx, `UPDATE runs SET claimed_by = $1, claim_until = $2, status = 'running',
			started_at = COALESCE(started_at, $3)
			WHERE id = $4 AND status IN ('queued', 'running') AND (claimed_by = '' OR claimed_by = $1 OR claim_until <= $3)
			RETURNING `+runCols, owner, until, now, id))
		if errors.Is(err, pgx.ErrNoRows) {
			r, err := getRun(ctx, tx, id, false)
			switch {
			case err != nil:
				return err
			case r.Status.Terminal():
				return core.ErrRunFinished
			case r.Status == core.RunPaused:
				return core.ErrRunPaused
			case r.claimUntil != nil:
				return fmt.Errorf("%w until %s", core.ErrClaimed, r.claimUntil.Format(time.RFC3339))
			default:
				return core.ErrClaimed
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
	tag, err := db.pool.Exec(ctx, `UPDATE runs SET claim_until = $1
		WHERE id = $2 AND claimed_by = $3 AND claimed_by <> '' AND status = 'running'`, until, id, owner)
	if err == nil && tag.RowsAffected() == 0 {
		if _, err = getRun(ctx, db.pool, id, false); err == nil {
			err = core.ErrClaimLost
		}
	}
	if err != nil {
		return fmt.Errorf("extend claim on run %s: %w", id, err)
	}
	return nil
}

// AppendEvents implements core.Store.
func (db *DB) AppendEvents(ctx context.Context, id, owner string, events []core.Event) ([]core.Event, error) {
	var out []core.Event
	err := db.tx(ctx, func(tx *txn) error {
		r, err := getRun(ctx, tx, id, true)
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
		r, err := getRun(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if err := checkClaim(r, owner); err != nil {
			return err
		}
		if a.SessionID == "" {
			a.SessionID = r.SessionID
		}
		if _, err := tx.Exec(ctx, `INSERT INTO approvals (id, run_id, session_id, tool_call_id, tool, arguments,
			args_sha256, policy, requested_by, status, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, $11)`,
			a.ID, id, a.SessionID, a.ToolCallID, a.Tool, string(args), a.ArgsSHA256, string(policy), a.RequestedBy,
			a.CreatedAt, a.ExpiresAt); err != nil {
			return fmt.Errorf("insert approval %s: %w", a.ID, err)
		}
		if err := db.enqueueTx(ctx, tx, core.ApprovalJobFor(a.ID, core.ApprovalPending)); err != nil {
			return err
		}
		if _, err := appendTx(ctx, tx, id, r.LastSeq, events, a.CreatedAt); err != nil {
			return err
		}
		r, err = scanRun(tx.QueryRow(ctx, `UPDATE runs SET status = 'paused', claimed_by = '', claim_until = NULL
			WHERE id = $1 RETURNING `+runCols, id))
		out = r.Run
		return err
	})
	if err != nil {
		return core.Run{}, fmt.Errorf("pause run %s: %w", id, err)
	}
	return out, nil
}

// FinishRun implements core.Store. Pending approvals of the run (possible
// only when owner is "") are cancelled so that no decision reopens it;
// f.Jobs and the next run's job are enqueued in the same transaction.
func (db *DB) FinishRun(ctx context.Context, id, owner string, f core.Finish) (core.Run, error) {
	if !f.Status.Terminal() {
		return core.Run{}, fmt.Errorf("finish run %s: status %q is not terminal", id, f.Status)
	}
	if f.At.IsZero() {
		f.At = db.opts.Clock.Now()
	}
	var out core.Run
	err := db.tx(ctx, func(tx *txn) error {
		r, err := lockSessionAndRun(ctx, tx, id)
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
		r, err = scanRun(tx.QueryRow(ctx, `UPDATE runs SET status = $1, output = $2, error = $3, input_tokens = $4,
			output_tokens = $5, finished_at = $6, claimed_by = '', claim_until = NULL WHERE id = $7 RETURNING `+runCols,
			string(f.Status), f.Output, f.Error, f.Usage.InputTokens, f.Usage.OutputTokens, f.At, id))
		if err != nil {
			return err
		}
		out = r.Run
		next, err := nextJobTx(ctx, tx, r.SessionID, id)
		if err != nil {
			return err
		}
		if err := ackTx(ctx, tx, f.Ack); err != nil {
			return err
		}
		// One call, so that all job keys are locked in one order.
		return db.enqueueTx(ctx, tx, append(slices.Clone(f.Jobs), next...)...)
	})
	if err != nil {
		return core.Run{}, fmt.Errorf("finish run %s: %w", id, err)
	}
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
		r, err := lockSessionAndRun(ctx, tx, id)
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
		r, err = scanRun(tx.QueryRow(ctx, `UPDATE runs SET status = 'cancelled', error = $1, finished_at = $2,
			claimed_by = '', claim_until = NULL WHERE id = $3 RETURNING `+runCols, c.Reason, c.At, id))
		if err != nil {
			return err
		}
		out = r.Run
		if c.Audit != nil {
			if err := insertAuditTx(ctx, tx, *c.Audit, c.At); err != nil {
				return err
			}
		}
		next, err := nextJobTx(ctx, tx, r.SessionID, id)
		if err != nil {
			return err
		}
		return db.enqueueTx(ctx, tx, next...)
	})
	if err != nil {
		return out, fmt.Errorf("cancel run %s: %w", id, err)
	}
	return out, nil
}

// Events implements core.Store. ErrNotFound when the run does not exist.
func (db *DB) Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]core.Event, error) {
	rows, _ := db.pool.Query(ctx, `SELECT seq, type, data, created_at FROM run_events
		WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, runID, afterSeq, limitArg(limit))
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (core.Event, error) {
		e := core.Event{RunID: runID}
		var typ string
		var data []byte
		if err := row.Scan(&e.Seq, &typ, &data, &e.CreatedAt); err != nil {
			return core.Event{}, err
		}
		e.Type = core.EventType(typ)
		e.Data = data
		e.CreatedAt = utc(e.CreatedAt)
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	if len(out) == 0 {
		if _, err := getRun(ctx, db.pool, runID, false); err != nil {
			return nil, fmt.Errorf("events of run %s: %w", runID, err)
		}
		return nil, nil
	}
	return out, nil
}

// GetSession implements core.Store.
func (db *DB) GetSession(ctx context.Context, id string) (core.Session, error) {
	s, err := scanSession(db.pool.QueryRow(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
	var a params
	q := `SELECT pk, ` + sessionCols + ` FROM sessions WHERE pk > ` + a.add(after)
	if f.UserID != "" {
		q += ` AND user_id = ` + a.add(f.UserID)
	}
	if f.AgentID != "" {
		q += ` AND agent_id = ` + a.add(f.AgentID)
	}
	q += ` ORDER BY pk`
	p, err := list(ctx, db, f.ListOptions, q, a, scanSession)
	if err != nil {
		return core.Page[core.Session]{}, fmt.Errorf("list sessions: %w", err)
	}
	return p, nil
}

// GetApproval implements core.Store.
func (db *DB) GetApproval(ctx context.Context, id string) (core.Approval, error) {
	a, err := getApproval(ctx, db.pool, id)
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
	var a params
	q := `SELECT pk, ` + approvalCols + ` FROM approvals WHERE pk > ` + a.add(after)
	if f.Status != "" {
		q += ` AND status = ` + a.add(string(f.Status))
	}
	if f.RunID != "" {
		q += ` AND run_id = ` + a.add(f.RunID)
	}
	q += ` ORDER BY pk`
	p, err := list(ctx, db, f.ListOptions, q, a, scanApproval)
	if err != nil {
		return core.Page[core.Approval]{}, fmt.Errorf("list approvals: %w", err)
	}
	return p, nil
}

// DecideApproval implements core.Store: the run row is locked (so the
// journal append is ordered), then the approval moves with a compare-and-set
// UPDATE … WHERE status = 'pending'. With *core.NotPendingError it also
// returns the approval as it is.
func (db *DB) DecideApproval(ctx context.Context, id string, d core.Decision) (core.Approval, error) {
	switch d.Status {
	case core.ApprovalApproved, core.ApprovalDenied, core.ApprovalExpired, core.ApprovalCancelled:
	default:
		return core.Approval{}, fmt.Errorf("decide approval %s: status %q is not a decision", id, d.Status)
	}
	if d.At.IsZero() {
		d.At = db.opts.Clock.Now()
	}
	var out core.Approval
	err := db.tx(ctx, func(tx *txn) error {
		var runID string
		err := tx.QueryRow(ctx, `SELECT run_id FROM approvals WHERE id = $1`, id).Scan(&runID)
		if errors.Is(err, pgx.ErrNoRows) {
			return core.ErrNotFound
		}
		if err != nil {
			return err
		}
		// Lock order: run before approval, as in CancelRun and FinishRun.
		r, err := getRun(ctx, tx, runID, true)
		if err != nil {
			return fmt.Errorf("load run %s: %w", runID, err)
		}
		a, err := scanApproval(tx.QueryRow(ctx, `UPDATE approvals SET status = $1, decided_by = $2, decided_via = $3,
			reason = $4, decided_at = $5, decided_by_name = $8
			WHERE id = $6 AND status = 'pending' AND ($7 = '' OR args_sha256 = $7)
			RETURNING `+approvalCols, string(d.Status), d.By, d.Via, d.Reason, d.At, id, d.ArgsSHA256, d.ByName))
		if errors.Is(err, pgx.ErrNoRows) {
			if out, err = getApproval(ctx, tx, id); err != nil {
				return err
			}
			if out.Status != core.ApprovalPending {
				return &core.NotPendingError{ID: id, Status: out.Status}
			}
			out = core.Approval{}
			return core.ErrArgsMismatch
		}
		if err != nil {
			return err
		}
		ev := core.NewEvent(core.EventApprovalDecided, core.ApprovalDecided{
			ApprovalID: id, ToolCallID: a.ToolCallID, Status: d.Status, DecidedBy: d.By, DecidedByName: d.ByName, Via: d.Via, Reason: d.Reason,
		})
		if _, err := appendTx(ctx, tx, r.ID, r.LastSeq, []core.Event{ev}, d.At); err != nil {
			return err
		}
		if r.Status == core.RunPaused {
			// The run resumes once no approval of it is pending.
			tag, err := tx.Exec(ctx, `UPDATE runs SET status = 'queued' WHERE id = $1 AND NOT EXISTS (
				SELECT 1 FROM approvals WHERE run_id = $1 AND status = 'pending')`, r.ID)
			if err != nil {
				return err
			}
			if tag.RowsAffected() > 0 {
				r.Status = core.RunQueued
			}
		}
		if d.Audit != nil {
			if err := insertAuditTx(ctx, tx, *d.Audit, d.At); err != nil {
				return err
			}
		}
		out = a
		jobs := []core.Job{core.ApprovalJobFor(id, d.Status)}
		if r.Status == core.RunQueued {
			jobs = append(jobs, core.RunJobFor(r.ID))
		}
		return db.enqueueTx(ctx, tx, jobs...)
	})
	if err != nil {
		return out, fmt.Errorf("decide approval %s: %w", id, err)
	}
	return out, nil
}

// DueApprovals implements core.Store; limit 0 means no limit.
func (db *DB) DueApprovals(ctx context.Context, now time.Time, limit int) ([]core.Approval, error) {
	rows, _ := db.pool.Query(ctx, `SELECT `+approvalCols+` FROM approvals
		WHERE status = 'pending' AND expires_at <= $1 ORDER BY expires_at, pk LIMIT $2`, now, limitArg(limit))
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (core.Approval, error) { return scanApproval(row) })
	if err != nil {
		return nil, fmt.Errorf("due approvals: %w", err)
	}
	return out, nil
}

// RequeueActive implements core.Store.
func (db *DB) RequeueActive(ctx context.Context) (int, error) {
	var n int
	err := db.tx(ctx, func(tx *txn) error {
		rows, _ := tx.Query(ctx, `SELECT id FROM runs WHERE status IN ('queued', 'running') ORDER BY pk`)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		jobs := make([]core.Job, len(ids))
		for i, id := range ids {
			jobs[i] = core.RunJobFor(id)
		}
		n = len(ids)
		return db.enqueueTx(ctx, tx, jobs...)
	})
	if err != nil {
		return 0, fmt.Errorf("requeue active runs: %w", err)
	}
	return n, nil
}

// CountRuns implements core.Store; every known status has an entry.
func (db *DB) CountRuns(ctx context.Context) (map[core.RunStatus]int64, error) {
	m := map[core.RunStatus]int64{}
	for _, s := range []core.RunStatus{core.RunQueued, core.RunRunning, core.RunPaused, core.RunCompleted, core.RunFailed, core.RunCancelled} {
		m[s] = 0
	}
	if err := countBy(ctx, db.pool, `SELECT status, COUNT(*) FROM runs GROUP BY status`, func(s string, n int64) {
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
	if err := countBy(ctx, db.pool, `SELECT status, COUNT(*) FROM approvals GROUP BY status`, func(s string, n int64) {
		m[core.ApprovalStatus(s)] = n
	}); err != nil {
		return nil, fmt.Errorf("count approvals: %w", err)
	}
	return m, nil
}

func countBy(ctx context.Context, q querier, query string, add func(string, int64)) error {
	rows, _ := q.Query(ctx, query)
	var s string
	var n int64
	_, err := pgx.ForEachRow(rows, []any{&s, &n}, func() error {
		add(s, n)
		return nil
	})
	return err
}

// ClaimSend implements core.Outbox.
func (db *DB) ClaimSend(ctx context.Context, key string, at time.Time) (bool, string, error) {
	claimed, state := false, ""
	err := db.tx(ctx, func(tx *txn) error {
		tag, err := tx.Exec(ctx, `INSERT INTO outbox (key, state, created_at, updated_at) VALUES ($1, $2, $3, $3)
			ON CONFLICT (key) DO NOTHING`, key, core.SendSending, at)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			// Take a failed send back; the row lock serializes claims.
			tag, err = tx.Exec(ctx, `UPDATE outbox SET state = $2, updated_at = $3 WHERE key = $1 AND state = $4`,
				key, core.SendSending, at, core.SendFailed)
			if err != nil {
				return err
			}
		}
		if tag.RowsAffected() == 1 {
			claimed, state = true, core.SendSending
			return nil
		}
		return tx.QueryRow(ctx, `SELECT state FROM outbox WHERE key = $1`, key).Scan(&state)
	})
	if err != nil {
		return false, "", fmt.Errorf("claim send %s: %w", key, err)
	}
	return claimed, state, nil
}

// SendRef implements core.Outbox.
func (db *DB) SendRef(ctx context.Context, key string) (state, ref string, err error) {
	err = db.pool.QueryRow(ctx, `SELECT state, ref FROM outbox WHERE key = $1`, key).Scan(&state, &ref)
	if errors.Is(err, pgx.ErrNoRows) {
		err = core.ErrNotFound
	}
	if err != nil {
		return "", "", fmt.Errorf("send ref %s: %w", key, err)
	}
	return state, ref, nil
}

// SetSendState implements core.Outbox.
func (db *DB) SetSendState(ctx context.Context, key, state, ref string, at time.Time) error {
	tag, err := db.pool.Exec(ctx, `UPDATE outbox SET state = $2, ref = $3, updated_at = $4 WHERE key = $1`, key, state, ref, at)
	if err != nil {
		return fmt.Errorf("set send state %s: %w", key, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set send state %s: %w", key, core.ErrNotFound)
	}
	return nil
}
