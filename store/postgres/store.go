package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

// This file implements core.Store. Lists page by the pk identity column
// (creation order); a cursor is the pk of the last item of the previous page.

const (
	runCols        = sqlstore.RunCols
	sessionCols    = sqlstore.SessionCols
	approvalCols   = sqlstore.ApprovalCols
	activeStatuses = sqlstore.ActiveStatuses
)

type runRow = sqlstore.RunRow

// scanRunInto returns a Row reader that scans a run into *out.
func scanRunInto(out *core.Run) func(pgx.Row) error {
	return func(row pgx.Row) error {
		r, err := sqlstore.ScanRun(row)
		*out = r.Run
		return err
	}
}

// laterRun queues the read of run id that locks its row (FOR UPDATE) until
// the end of the transaction, as LockRun does: *r holds it after the next
// flush, which fails with core.ErrNotFound when there is none.
func laterRun(tx *txn, id string, r *runRow) {
	tx.Later(`SELECT `+runCols+` FROM runs WHERE id = $1 FOR UPDATE`, id).Row(func(row pgx.Row) (err error) {
		*r, err = sqlstore.ScanRun(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return core.ErrNotFound
		}
		return err
	})
}

// lockSessionAndRun queues the locking of the session of run id (FOR NO KEY
// UPDATE, which conflicts with the upsert in CreateRun) and then of the run
// (FOR UPDATE), in that order: *r holds the run after the next flush (see
// laterRun).
func lockSessionAndRun(tx *txn, id string, r *runRow) {
	tx.Later(`SELECT 1 FROM sessions WHERE id = (SELECT session_id FROM runs WHERE id = $1) FOR NO KEY UPDATE`, id).
		Wrap("lock session of run " + id)
	laterRun(tx, id, r)
}

// journal is a checked list of events to append, as the arrays the
// statements that append them unnest (JSON goes as text: it also works with
// the simple protocol, PgBouncer).
type journal struct {
	events []core.Event
	types  []string
	data   []string
	at     []time.Time
}

// newJournal is the journal of checked events (sqlstore.CheckEvents).
func newJournal(evs []core.Event) journal {
	j := journal{events: make([]core.Event, len(evs)), types: make([]string, len(evs)), data: make([]string, len(evs)),
		at: make([]time.Time, len(evs))}
	for i, e := range evs {
		e.CreatedAt = stored(e.CreatedAt)
		j.events[i], j.types[i], j.data[i], j.at[i] = e, string(e.Type), string(e.Data), e.CreatedAt
	}
	return j
}

// stored returns the events as stored in the journal of runID after lastSeq.
func (j journal) stored(runID string, lastSeq int64) []core.Event {
	if len(j.events) == 0 {
		return nil
	}
	out := slices.Clone(j.events)
	for i := range out {
		out[i].RunID = runID
		out[i].Seq = lastSeq + int64(i) + 1
	}
	return out
}

// args are the journal's arrays, the first parameters of a statement that
// appends it with journalInsert.
func (j journal) args(more ...any) []any { return append([]any{j.types, j.data, j.at}, more...) }

// journalInsert is the INSERT, for the last CTE of a statement whose first
// three parameters are a journal's args, of its events into the journal of
// the run of the CTE named run (its columns id and last_seq, moved past the
// events).
const journalInsert = `INSERT INTO run_events (run_id, seq, type, data, created_at)
	SELECT run.id, run.last_seq - cardinality($1::text[]) + e.n, e.type, e.data::json, e.created_at
	FROM run, unnest($1::text[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS e (type, data, created_at, n)`

// appendTx queues the append of checked events (sqlstore.CheckEvents) to
// the journal of runID after lastSeq and the move of the run's last_seq (one
// statement, which goes out with the transaction's next round trip). The
// caller holds the run's row lock. It returns the events as they are stored.
func appendTx(tx *txn, runID string, lastSeq int64, evs []core.Event) []core.Event {
	if len(evs) == 0 {
		return nil
	}
	j := newJournal(evs)
	out := j.stored(runID, lastSeq)
	tx.Later(`WITH run AS (UPDATE runs SET last_seq = $5 + cardinality($1::text[]) WHERE id = $4 RETURNING id, last_seq),
		journal AS (`+journalInsert+`)
		SELECT 1`, j.args(runID, lastSeq)...).Wrap(fmt.Sprintf("append events %d..%d", out[0].Seq, out[len(out)-1].Seq))
	return out
}

// nextJobTx queues, for a transaction that makes run id terminal with its
// session locked, the look for the session's next head (the oldest other run
// that is not terminal): after the next flush *next holds its id when run id
// was the head and the next one waits for a worker. r is the run as
// lockSessionAndRun reads it, in the same flush. The session lock guarantees
// that every run created before this transaction is seen, and every run
// created after it gets its own job.
func nextJobTx(tx *txn, id string, r *runRow, nextID *string) {
	tx.Later(`SELECT id, status, pk > (SELECT pk FROM runs WHERE id = $1) FROM runs
		WHERE session_id = (SELECT session_id FROM runs WHERE id = $1) AND id <> $1 AND status IN `+activeStatuses+`
		ORDER BY pk LIMIT 1`, id).Row(func(row pgx.Row) error {
		var next, status string
		var after bool
		err := row.Scan(&next, &status, &after)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return err
		case after && core.RunStatus(status) == core.RunQueued:
			*nextID = next
		}
		return nil // else an older run still holds the session, or the head is not waiting for a worker
	}).WrapFunc(func(err error) error {
		return fmt.Errorf("find next run of session %s: %w", r.SessionID, err)
	})
}

// cancelPendingStmt cancels the pending approvals of a run through
// approvals_pending (migration 12), oldest first.
const cancelPendingStmt = `WITH cancelled AS (
		UPDATE approvals SET status = 'cancelled', decided_by = $1, decided_via = '', reason = $2, decided_at = $3
		WHERE run_id = $4 AND status = 'pending'
		RETURNING pk, id, tool_call_id)
	SELECT id, tool_call_id FROM cancelled ORDER BY pk`

// cancelPendingTx queues the cancelling of the pending approvals of run id,
// whose row the transaction locks first: after the next flush *out holds
// them, oldest first.
func cancelPendingTx(tx *txn, id, by, reason string, at time.Time, out *[]sqlstore.Cancelled) {
	tx.Later(cancelPendingStmt, by, reason, at, id).Rows(func(rows pgx.Rows) error {
		var c sqlstore.Cancelled
		_, err := pgx.ForEachRow(rows, []any{&c.ID, &c.ToolCallID}, func() error {
			*out = append(*out, c)
			return nil
		})
		return err
	}).Wrap("cancel pending approvals")
}

// createRunTx inserts a checked NewRun (see core.NewRun.Normalize) inside tx: the
// inbox entry of nr.DedupeKey (a *core.DuplicateError when it is taken), the
// session if new (else it locks and touches it), the run and its first
// events. The run's insert and events are queued: *out holds the run after
// the transaction's next round trip. The caller enqueues the run's job
// (core.RunJobFor) in tx, after all its runs, so that the job keys of one
// transaction are locked in one order (see enqueueTx).
func createRunTx(ctx context.Context, tx *txn, nr core.NewRun, out *core.Run) error {
	r, s := nr.Run, nr.Session
	var inbox *inboxMark
	if nr.DedupeKey != "" {
		inbox = markInboxTx(tx, nr.Platform, nr.DedupeKey, r.ID, r.CreatedAt)
	}
	// Insert the session, or lock the existing one and touch it.
	var agent string
	if err := tx.QueryRow(ctx, `INSERT INTO sessions (`+sessionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (id) DO UPDATE SET updated_at = GREATEST(sessions.updated_at, $11)
		RETURNING agent_id`, s.ID, s.AgentID, s.UserID, s.Binding.Platform, s.Binding.Workspace,
		s.Binding.Channel, s.Binding.Thread, s.Title, s.CreatedAt, s.UpdatedAt, r.CreatedAt).Scan(&agent); err != nil {
		return fmt.Errorf("upsert session %s: %w", s.ID, err)
	}
	if inbox != nil {
		if err := inbox.check(ctx, tx); err != nil {
			return err
		}
	}
	if agent != r.AgentID {
		return fmt.Errorf("session %s of agent %s: %w", s.ID, agent, core.ErrSessionAgent)
	}
	// One statement: the run, its last_seq already past its first events,
	// and the events (journalInsert).
	j := newJournal(nr.Events)
	tx.Later(`WITH run AS (INSERT INTO runs (id, session_id, agent_id, user_id, run_type, status,
			parent_run_id, routine_id, started_by, input, output, error, input_tokens, output_tokens, created_at,
			conversation, last_seq)
			VALUES ($4, $5, $6, $7, $8, 'queued', $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, cardinality($1::text[]))
			RETURNING `+runCols+`),
		journal AS (`+journalInsert+`)
		SELECT `+runCols+` FROM run`, j.args(
		r.ID, r.SessionID, r.AgentID, r.UserID, string(r.Type), r.ParentRunID, r.RoutineID, r.StartedBy, r.Input, r.Output,
		r.Error, r.Usage.InputTokens, r.Usage.OutputTokens, r.CreatedAt, sqlstore.EncodeConversation(s.Binding))...).Row(func(row pgx.Row) error {
		run, err := sqlstore.ScanRun(row)
		*out = run.Run
		return err
	}).Wrap("insert run")
	return nil
}

// sessionHistoryStmt reads a session's completed runs before a run (all of
// them for ""), oldest first, through runs_history.
const sessionHistoryStmt = `SELECT ` + runCols + ` FROM (
	SELECT * FROM runs WHERE session_id = $1 AND status = 'completed'
		AND pk < COALESCE((SELECT pk FROM runs WHERE id = $2), 9223372036854775807)
	ORDER BY pk DESC LIMIT $3) h ORDER BY pk`

// SessionHistory implements core.Store. An empty beforeRunID means the whole
// session; limit 0 means no limit. One round trip: the check that
// beforeRunID exists goes in one batch with the history.
func (db *DB) SessionHistory(ctx context.Context, sessionID, beforeRunID string, limit int) ([]core.Run, error) {
	var (
		exists    = true
		existsErr error
		out       []core.Run
	)
	b := &pgx.Batch{}
	if beforeRunID != "" {
		b.Queue(`SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1)`, beforeRunID).QueryRow(func(row pgx.Row) error {
			existsErr = row.Scan(&exists)
			return existsErr
		})
	}
	// No run has the id "": then all of the session's runs come before.
	b.Queue(sessionHistoryStmt, sessionID, beforeRunID, dialect.Limit(limit)).Query(func(rows pgx.Rows) (err error) {
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (core.Run, error) { return sqlstore.ScanRunItem(row) })
		return err
	})
	err := db.pool.SendBatch(ctx, b).Close()
	switch {
	case existsErr != nil:
		return nil, fmt.Errorf("session %s history before run %s: %w", sessionID, beforeRunID, existsErr)
	case err != nil:
		return nil, fmt.Errorf("session %s history: %w", sessionID, err)
	case !exists:
		return nil, fmt.Errorf("session %s history before run %s: %w", sessionID, beforeRunID, core.ErrNotFound)
	}
	return out, nil
}

// runDriver runs the run rules of sqlstore.Runs on db.
type runDriver struct{ db *DB }

func (d runDriver) RunTx(ctx context.Context, fn func(sqlstore.RunTx) error) error {
	return d.db.tx(ctx, func(tx *txn) error { return fn(runTx{db: d.db, tx: tx}) })
}

func (d runDriver) Now() time.Time { return d.db.opts.Clock.Now() }
func (d runDriver) Enqueued()      {} // enqueueTx notifies the workers

func (d runDriver) GetRun(ctx context.Context, id string) (runRow, error) {
	return sqlstore.GetRun(ctx, poolConn{d.db.pool}, id, "")
}

// ClaimRun is one statement, so one round trip: the claiming UPDATE, a
// compare-and-set that locks the run row, and the journal append that
// moves its last_seq.
func (d runDriver) ClaimRun(ctx context.Context, c sqlstore.Claim) (core.Run, bool, error) {
	j := newJournal(c.Events)
	r, err := sqlstore.ScanRun(d.db.pool.QueryRow(ctx, `WITH run AS (
			UPDATE runs SET claimed_by = $4, claim_until = $5, status = 'running',
				started_at = COALESCE(started_at, $6), last_seq = last_seq + cardinality($1::text[])
			WHERE id = $7 AND status IN ('queued', 'running') AND (claimed_by = '' OR claimed_by = $4 OR claim_until <= $6)
			RETURNING `+runCols+`),
		journal AS (`+journalInsert+`)
		SELECT `+runCols+` FROM run`, j.args(c.Owner, c.Until, c.Now, c.ID)...))
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Run{}, false, nil
	}
	return r.Run, err == nil, err
}

// runHistoryStmt reads the completed runs of a run's session before it,
// oldest first, through runs_history (migration 12) — runs_status would
// read every completed run of the table.
const runHistoryStmt = `SELECT ` + runCols + ` FROM (
	SELECT * FROM runs WHERE session_id = (SELECT session_id FROM runs WHERE id = $1) AND status = 'completed'
		AND pk < (SELECT pk FROM runs WHERE id = $1)
	ORDER BY pk DESC LIMIT $2) h ORDER BY pk`

// StartRun is one round trip: a batch of the claim (one statement: the
// row lock, the compare-and-set with the head check, and the start events
// when the run was queued), the journal and the history, read after it.
func (d runDriver) StartRun(ctx context.Context, s core.Start) (core.Started, bool, error) {
	j := newJournal(s.Events)
	var (
		out     core.Started
		claimed bool
	)
	b := &pgx.Batch{}
	// The claim commits without waiting for its WAL to reach the disk
	// (synchronous_commit off for this batch's transaction only), one fsync
	// fewer per run. A claim is a lease, and PostgreSQL recovers commits in
	// order: any later commit that waits (the run's next append, its pause
	// or finish, each of which checks the claim) makes it durable first. A
	// crash that loses it loses nothing else: the run is as it was before
	// it, the worker that held it can write nothing more (ErrClaimLost), and
	// the janitor enqueues the run again.
	b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
	b.Queue(`WITH prev AS (SELECT id AS prev_id, status AS prev_status FROM runs WHERE id = $7 FOR UPDATE),
		run AS (
			UPDATE runs SET claimed_by = $4, claim_until = $5, status = 'running', started_at = COALESCE(started_at, $6),
				last_seq = last_seq + CASE WHEN prev_status = 'queued' THEN cardinality($1::text[]) ELSE 0 END
			FROM prev
			WHERE id = prev_id AND prev_status IN ('queued', 'running') AND (claimed_by = '' OR claimed_by = $4 OR claim_until <= $6)
				AND NOT EXISTS (SELECT 1 FROM runs o WHERE o.session_id = runs.session_id AND o.pk < runs.pk
					AND o.status IN `+activeStatuses+`)
			RETURNING `+runCols+`, prev_status = 'queued' AS began),
		journal AS (INSERT INTO run_events (run_id, seq, type, data, created_at)
			SELECT run.id, run.last_seq - cardinality($1::text[]) + e.n, e.type, e.data::json, e.created_at
			FROM run, unnest($1::text[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS e (type, data, created_at, n)
			WHERE run.began)
		SELECT began, `+runCols+` FROM run`, j.args(s.Owner, s.Until, s.Now, s.ID)...).QueryRow(func(row pgx.Row) error {
		r, err := sqlstore.ScanRun(row, &out.Began)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		out.Run, claimed = r.Run, err == nil
		return err
	})
	b.Queue(`SELECT seq, type, data, created_at FROM run_events WHERE run_id = $1 ORDER BY seq`, s.ID).
		Query(func(rows pgx.Rows) (err error) {
			out.Journal, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (core.Event, error) { return sqlstore.ScanEvent(row, s.ID) })
			return err
		})
	if s.History > 0 {
		b.Queue(runHistoryStmt, s.ID, s.History).Query(func(rows pgx.Rows) (err error) {
			out.History, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (core.Run, error) { return sqlstore.ScanRunItem(row) })
			return err
		})
	}
	if err := d.db.pool.SendBatch(ctx, b).Close(); err != nil || !claimed {
		return core.Started{}, false, err
	}
	return out, true, nil
}

func (d runDriver) SessionHead(ctx context.Context, sessionID string) (runRow, error) {
	r, err := sqlstore.ScanRun(d.db.pool.QueryRow(ctx, `SELECT `+runCols+` FROM runs
		WHERE session_id = $1 AND status IN `+activeStatuses+` ORDER BY pk LIMIT 1`, sessionID))
	if errors.Is(err, pgx.ErrNoRows) {
		err = core.ErrNotFound
	}
	return r, err
}

func (d runDriver) ExtendClaim(ctx context.Context, id, owner string, until time.Time) (bool, error) {
	tag, err := d.db.pool.Exec(ctx, `UPDATE runs SET claim_until = $1
		WHERE id = $2 AND claimed_by = $3 AND claimed_by <> '' AND status = 'running'`, until, id, owner)
	return tag.RowsAffected() > 0, err
}

// AppendClaimed is one statement, so one round trip: the UPDATE that moves
// the run's last_seq checks the claim (as sqlstore.CheckClaim) and locks
// the row, and the journal append goes with it.
func (d runDriver) AppendClaimed(ctx context.Context, id, owner string, evs []core.Event) ([]core.Event, bool, error) {
	j := newJournal(evs)
	var lastSeq int64
	err := d.db.pool.QueryRow(ctx, `WITH run AS (
			UPDATE runs SET last_seq = last_seq + cardinality($1::text[])
			WHERE id = $4 AND claimed_by = $5 AND $5 <> '' AND status = 'running'
			RETURNING id, last_seq),
		journal AS (`+journalInsert+`)
		SELECT last_seq FROM run`, j.args(id, owner)...).Scan(&lastSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return j.stored(id, lastSeq-int64(len(evs))), true, nil
}

// runTx is sqlstore.RunTx on a PostgreSQL transaction. Writes nobody reads
// go out with the next statement waited for, or with COMMIT.
type runTx struct {
	db *DB
	tx *txn
}

// CreateRuns creates each run, locking its session; the runs are filled in
// as their inserts come back.
func (t runTx) CreateRuns(ctx context.Context, runs []core.NewRun) ([]core.Run, error) {
	out := make([]core.Run, len(runs))
	for i, nr := range runs {
		if err := createRunTx(ctx, t.tx, nr, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (t runTx) LockRun(ctx context.Context, id string) (runRow, error) {
	return sqlstore.GetRun(ctx, txConn{t.tx}, id, dialect.ForUpdate)
}

func (t runTx) InsertApproval(_ context.Context, a core.Approval, args, policy []byte) error {
	t.tx.Later(`INSERT INTO approvals (id, run_id, session_id, tool_call_id, tool, arguments,
		args_sha256, policy, requested_by, status, created_at, expires_at, origin)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, $11, $12)`,
		a.ID, a.RunID, a.SessionID, a.ToolCallID, a.Tool, string(args), a.ArgsSHA256, string(policy), a.RequestedBy,
		a.CreatedAt, a.ExpiresAt, a.Origin).Wrap("insert approval " + a.ID)
	return nil
}

func (t runTx) SetPaused(_ context.Context, id string) (*core.Run, error) {
	return t.setRun(`UPDATE runs SET status = 'paused', claimed_by = '', claim_until = NULL
		WHERE id = $1 RETURNING `+runCols, id), nil
}

func (t runTx) SetFinished(_ context.Context, id string, f core.Finish) (*core.Run, error) {
	return t.setRun(`UPDATE runs SET status = $1, output = $2, error = $3, input_tokens = $4,
		output_tokens = $5, finished_at = $6, claimed_by = '', claim_until = NULL WHERE id = $7 RETURNING `+runCols,
		string(f.Status), f.Output, f.Error, f.Usage.InputTokens, f.Usage.OutputTokens, f.At, id), nil
}

func (t runTx) SetCancelled(_ context.Context, id, reason string, at time.Time) (*core.Run, error) {
	return t.setRun(`UPDATE runs SET status = 'cancelled', error = $1, finished_at = $2,
		claimed_by = '', claim_until = NULL WHERE id = $3 RETURNING `+runCols, reason, at, id), nil
}

// setRun queues a run UPDATE … RETURNING; the run is read when it comes back.
func (t runTx) setRun(query string, args ...any) *core.Run {
	out := new(core.Run)
	t.tx.Later(query, args...).Row(scanRunInto(out))
	return out
}

// Close is one round trip: the session and the run are locked, the
// pending approvals cancelled (the rollback undoes it when a check of the
// caller fails) and the session's next run found.
func (t runTx) Close(ctx context.Context, id, by, reason string, at time.Time) (sqlstore.Closing, error) {
	var c sqlstore.Closing
	lockSessionAndRun(t.tx, id, &c.Run)
	cancelPendingTx(t.tx, id, by, reason, at, &c.Cancelled)
	nextJobTx(t.tx, id, &c.Run, &c.Next)
	err := t.tx.Flush(ctx)
	return c, err
}

// resumeStmt queues the paused run of approval $1 again when none of its
// approvals is pending any more, looked up through approvals_pending.
const resumeStmt = `UPDATE runs SET status = 'queued'
	WHERE id = (SELECT run_id FROM approvals WHERE id = $1) AND status = 'paused' AND NOT EXISTS (
		SELECT 1 FROM approvals WHERE run_id = runs.id AND status = 'pending')`

// DecideApproval is one round trip: the run's row is locked (lock order:
// run before approval, as in CancelRun and FinishRun), the approval moves
// with a compare-and-set UPDATE … WHERE status = 'pending', and a paused
// run with nothing pending any more is queued. The journal, the audit entry
// and the jobs go out with COMMIT.
func (t runTx) DecideApproval(ctx context.Context, id string, d core.Decision) (sqlstore.Decided, error) {
	var (
		out     sqlstore.Decided
		r       runRow
		resumed pgconn.CommandTag
	)
	// An approval's run exists (foreign key): no row, no approval.
	t.tx.Later(`SELECT `+runCols+` FROM runs WHERE id = (SELECT run_id FROM approvals WHERE id = $1) FOR UPDATE`,
		id).Row(func(row pgx.Row) (err error) {
		r, err = sqlstore.ScanRun(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return core.ErrNotFound
		}
		return err
	})
	t.tx.Later(`UPDATE approvals SET status = $1, decided_by = $2, decided_via = $3,
		reason = $4, decided_at = $5, decided_by_name = $8
		WHERE id = $6 AND status = 'pending' AND ($7 = '' OR args_sha256 = $7)
		RETURNING `+approvalCols, string(d.Status), d.By, d.Via, d.Reason, d.At, id, d.ArgsSHA256, d.ByName).
		Row(func(row pgx.Row) (err error) {
			out.Approval, err = sqlstore.ScanApproval(row)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			out.Decided = err == nil
			return err
		})
	t.tx.Later(resumeStmt, id).Tag(&resumed)
	if err := t.tx.Flush(ctx); err != nil {
		return sqlstore.Decided{}, err
	}
	if resumed.RowsAffected() > 0 {
		r.Status = core.RunQueued
	}
	out.Run = r.Run
	return out, nil
}

func (t runTx) GetApproval(ctx context.Context, id string) (core.Approval, error) {
	return sqlstore.GetApproval(ctx, txConn{t.tx}, id)
}

func (t runTx) ActiveRuns(ctx context.Context) ([]string, error) {
	var ids []string
	t.tx.Later(`SELECT id FROM runs WHERE status IN ('queued', 'running') ORDER BY pk`).Rows(func(rows pgx.Rows) (err error) {
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return ids, t.tx.Flush(ctx)
}

func (t runTx) AppendEvents(_ context.Context, runID string, after int64, evs []core.Event) error {
	appendTx(t.tx, runID, after, evs)
	return nil
}

func (t runTx) Enqueue(_ context.Context, jobs ...core.Job) error {
	t.db.enqueueTx(t.tx, jobs...)
	return nil
}

func (t runTx) Ack(_ context.Context, j core.Job) error {
	ackTx(t.tx, &j)
	return nil
}

func (t runTx) InsertAudit(ctx context.Context, e core.AuditEntry) error {
	return sqlstore.InsertAudit(ctx, txConn{t.tx}, e, e.At)
}
