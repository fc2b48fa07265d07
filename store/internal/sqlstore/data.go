package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Data implements the reads of core.Store, core.AuditLog, core.Outbox and
// the claims of core.Inbox, the same statements on every database.
type Data struct {
	R       Conn   // reads
	W       Conn   // single statements that write, each its own transaction
	Tx      Writer // write transactions
	Dialect *Dialect
	Now     func() time.Time // the store's clock
}

// ScanRun scans RunCols after any extra leading columns (a list's row
// number).
func ScanRun(s Row, extra ...any) (RunRow, error) {
	var r RunRow
	var typ, status, conversation string
	dest := append(extra, &r.ID, &r.SessionID, &r.AgentID, &r.UserID, &typ, &status, &r.ParentRunID, &r.RoutineID,
		&r.StartedBy, &r.Input, &r.Output, &r.Error, &r.Usage.InputTokens, &r.Usage.OutputTokens, &r.LastSeq,
		At(&r.CreatedAt), AtOpt(&r.StartedAt), AtOpt(&r.FinishedAt), &r.ClaimedBy, AtOpt(&r.ClaimUntil), &conversation)
	if err := s.Scan(dest...); err != nil {
		return RunRow{}, err
	}
	r.Type = core.RunType(typ)
	r.Status = core.RunStatus(status)
	r.Conversation = DecodeConversation(conversation)
	return r, nil
}

// ScanRunItem is ScanRun's core.Run.
func ScanRunItem(s Row, extra ...any) (core.Run, error) {
	r, err := ScanRun(s, extra...)
	return r.Run, err
}

// ScanSession scans SessionCols after any extra leading columns.
func ScanSession(s Row, extra ...any) (core.Session, error) {
	var x core.Session
	dest := append(extra, &x.ID, &x.AgentID, &x.UserID, &x.Binding.Platform, &x.Binding.Workspace, &x.Binding.Channel,
		&x.Binding.Thread, &x.Title, At(&x.CreatedAt), At(&x.UpdatedAt))
	if err := s.Scan(dest...); err != nil {
		return core.Session{}, err
	}
	return x, nil
}

// ScanApproval scans ApprovalCols after any extra leading columns.
func ScanApproval(s Row, extra ...any) (core.Approval, error) {
	var a core.Approval
	var args, policy []byte
	var status string
	dest := append(extra, &a.ID, &a.RunID, &a.SessionID, &a.ToolCallID, &a.Tool, &args, &a.ArgsSHA256, &policy,
		&a.RequestedBy, &status, &a.DecidedBy, &a.DecidedByName, &a.DecidedVia, &a.Reason, At(&a.CreatedAt),
		At(&a.ExpiresAt), AtOpt(&a.DecidedAt), &a.Origin)
	if err := s.Scan(dest...); err != nil {
		return core.Approval{}, err
	}
	if err := json.Unmarshal(policy, &a.Policy); err != nil {
		return core.Approval{}, fmt.Errorf("approval %s: decode policy: %w", a.ID, err)
	}
	a.Arguments = json.RawMessage(args)
	a.Status = core.ApprovalStatus(status)
	return a, nil
}

func scanApprovalRow(r Row) (core.Approval, error) { return ScanApproval(r) }

// GetRun reads run id, with lock (a Dialect's ForUpdate, or "") after the
// query; core.ErrNotFound when there is none.
func GetRun(ctx context.Context, c Conn, id, lock string) (r RunRow, err error) {
	err = One(ctx, c, `SELECT `+RunCols+` FROM runs WHERE id = ?`+lock, []any{id},
		func(row Row) (err error) { r, err = ScanRun(row); return err })
	return r, err
}

// GetApproval reads approval id; core.ErrNotFound when there is none.
func GetApproval(ctx context.Context, c Conn, id string) (a core.Approval, err error) {
	err = One(ctx, c, `SELECT `+ApprovalCols+` FROM approvals WHERE id = ?`, []any{id},
		func(row Row) (err error) { a, err = ScanApproval(row); return err })
	return a, err
}

// GetRun implements core.Store.
func (s Data) GetRun(ctx context.Context, id string) (core.Run, error) {
	r, err := GetRun(ctx, s.R, id, "")
	if err != nil {
		return core.Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return r.Run, nil
}

// GetApproval implements core.Store.
func (s Data) GetApproval(ctx context.Context, id string) (core.Approval, error) {
	a, err := GetApproval(ctx, s.R, id)
	if err != nil {
		return core.Approval{}, fmt.Errorf("get approval %s: %w", id, err)
	}
	return a, nil
}

// GetSession implements core.Store.
func (s Data) GetSession(ctx context.Context, id string) (x core.Session, err error) {
	err = One(ctx, s.R, `SELECT `+SessionCols+` FROM sessions WHERE id = ?`, []any{id},
		func(row Row) (err error) { x, err = ScanSession(row); return err })
	if err != nil {
		return core.Session{}, fmt.Errorf("get session %s: %w", id, err)
	}
	return x, nil
}

// SessionHead implements core.Store.
func (s Data) SessionHead(ctx context.Context, sessionID string) (core.Run, error) {
	var r RunRow
	err := One(ctx, s.R, `SELECT `+RunCols+` FROM runs WHERE session_id = ? AND status IN `+ActiveStatuses+
		` ORDER BY `+s.Dialect.Seq+` LIMIT 1`, []any{sessionID}, func(row Row) (err error) { r, err = ScanRun(row); return err })
	if err != nil {
		return core.Run{}, fmt.Errorf("session %s head: %w", sessionID, err)
	}
	return r.Run, nil
}

// Events implements core.Store. ErrNotFound when the run does not exist.
func (s Data) Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]core.Event, error) {
	out, err := Collect(ctx, s.R, `SELECT seq, type, data, created_at FROM run_events
		WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`, []any{runID, afterSeq, s.Dialect.Limit(limit)},
		func(r Row) (core.Event, error) { return ScanEvent(r, runID) })
	if err == nil && len(out) == 0 {
		err = One(ctx, s.R, `SELECT 1 FROM runs WHERE id = ?`, []any{runID}, func(Row) error { return nil })
	}
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	return out, nil
}

// ScanEvent scans seq, type, data and created_at of an event of run runID.
func ScanEvent(r Row, runID string) (core.Event, error) {
	e := core.Event{RunID: runID}
	var typ string
	var data []byte
	err := r.Scan(&e.Seq, &typ, &data, At(&e.CreatedAt))
	e.Type, e.Data = core.EventType(typ), data
	return e, err
}

// ListRuns implements core.Store.
func (s Data) ListRuns(ctx context.Context, f core.RunFilter) (core.Page[core.Run], error) {
	return listWhere(ctx, s, "list runs", RunCols+` FROM runs`, f.ListOptions,
		func(a Args) string { return RunsWhere(f, a) }, ScanRunItem)
}

// ListSessions implements core.Store.
func (s Data) ListSessions(ctx context.Context, f core.SessionFilter) (core.Page[core.Session], error) {
	return listWhere(ctx, s, "list sessions", SessionCols+` FROM sessions`, f.ListOptions,
		func(a Args) string { return SessionsWhere(f, a) }, ScanSession)
}

// ListApprovals implements core.Store.
func (s Data) ListApprovals(ctx context.Context, f core.ApprovalFilter) (core.Page[core.Approval], error) {
	return listWhere(ctx, s, "list approvals", ApprovalCols+` FROM approvals`, f.ListOptions,
		func(a Args) string { return ApprovalsWhere(f, a) }, ScanApproval)
}

// listWhere pages through the rows of colsFrom ("columns FROM table") in
// creation order, after o's cursor, that match where's conditions.
func listWhere[T any](ctx context.Context, s Data, what, colsFrom string, o core.ListOptions, where func(Args) string,
	scan func(r Row, extra ...any) (T, error)) (core.Page[T], error) {
	seq := s.Dialect.Seq
	p, err := PageAfter(ctx, s.R, seq, o, `SELECT `+seq+`, `+colsFrom, where, scan)
	if err != nil {
		return core.Page[T]{}, fmt.Errorf("%s: %w", what, err)
	}
	return p, nil
}

// DueApprovals implements core.Store; limit 0 means no limit.
func (s Data) DueApprovals(ctx context.Context, now time.Time, limit int) ([]core.Approval, error) {
	out, err := Collect(ctx, s.R, `SELECT `+ApprovalCols+` FROM approvals
		WHERE status = 'pending' AND expires_at <= ? ORDER BY expires_at, `+s.Dialect.Seq+` LIMIT ?`,
		[]any{now, s.Dialect.Limit(limit)}, scanApprovalRow)
	if err != nil {
		return nil, fmt.Errorf("due approvals: %w", err)
	}
	return out, nil
}

// CountRuns implements core.Store; every known status has an entry.
func (s Data) CountRuns(ctx context.Context) (map[core.RunStatus]int64, error) {
	m, err := s.countBy(ctx, "runs")
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	return RunCounts(m), nil
}

// CountApprovals implements core.Store; every known status has an entry.
func (s Data) CountApprovals(ctx context.Context) (map[core.ApprovalStatus]int64, error) {
	m, err := s.countBy(ctx, "approvals")
	if err != nil {
		return nil, fmt.Errorf("count approvals: %w", err)
	}
	return ApprovalCounts(m), nil
}

func (s Data) countBy(ctx context.Context, table string) (map[string]int64, error) {
	m := map[string]int64{}
	err := s.R.Query(ctx, `SELECT status, COUNT(*) FROM `+table+` GROUP BY status`, nil, func(r Row) error {
		var status string
		var n int64
		err := r.Scan(&status, &n)
		m[status] = n
		return err
	})
	return m, err
}

// The audit table is append-only; its lists run newest first and a cursor
// is the id of the last entry of the previous page.
const auditCols = `id, at, principal, route, action, target, outcome, detail`

func scanAudit(s Row, extra ...any) (core.AuditEntry, error) {
	var e core.AuditEntry
	err := s.Scan(append(extra, &e.ID, At(&e.At), &e.Principal, &e.Route, &e.Action, &e.Target, &e.Outcome, &e.Detail)...)
	return e, err
}

// InsertAudit appends e on c; an entry without a time gets at, one without
// an outcome core.AuditOK. e.ID is ignored (the table assigns it).
func InsertAudit(ctx context.Context, c Conn, e core.AuditEntry, at time.Time) error {
	if e.At.IsZero() {
		e.At = at
	}
	if e.Outcome == "" {
		e.Outcome = core.AuditOK
	}
	if _, err := c.Exec(ctx, `INSERT INTO audit (at, principal, route, action, target, outcome, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, e.At, e.Principal, e.Route, e.Action, e.Target, e.Outcome, e.Detail); err != nil {
		return fmt.Errorf("append audit %s of %s: %w", e.Action, e.Target, err)
	}
	return nil
}

// AppendAudit implements core.AuditLog; At defaults to the store's clock.
func (s Data) AppendAudit(ctx context.Context, e core.AuditEntry) error {
	if err := InsertAudit(ctx, s.W, e, s.Now()); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

// ListAudit implements core.AuditLog: newest (highest id) first.
func (s Data) ListAudit(ctx context.Context, f core.AuditFilter) (core.Page[core.AuditEntry], error) {
	before := int64(math.MaxInt64)
	if f.Cursor != "" {
		n, err := ParseCursor(f.Cursor)
		if err != nil {
			return core.Page[core.AuditEntry]{}, fmt.Errorf("list audit: %w", err)
		}
		before = n
	}
	// id first twice: Page reads a leading cursor column, scanAudit the entry.
	a := Params{before}
	q := `SELECT id, ` + auditCols + ` FROM audit WHERE id < ?`
	for _, c := range []struct{ col, v string }{
		{"principal", f.Principal}, {"action", f.Action}, {"target", f.Target}, {"route", f.Route},
	} {
		if c.v != "" {
			q += ` AND ` + c.col + ` = ` + a.Add(c.v)
		}
	}
	if !f.Since.IsZero() {
		q += ` AND at >= ` + a.Add(f.Since)
	}
	p, err := Page(ctx, s.R, f.ListOptions, q+` ORDER BY id DESC`, a, scanAudit)
	if err != nil {
		return core.Page[core.AuditEntry]{}, fmt.Errorf("list audit: %w", err)
	}
	return p, nil
}

// ClaimSend implements core.Outbox.
func (s Data) ClaimSend(ctx context.Context, key string, at time.Time) (bool, string, error) {
	claimed, state := false, ""
	err := s.Tx.WriteTx(ctx, func(tx Conn) error {
		n, err := tx.Exec(ctx, `INSERT INTO outbox (key, state, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)
			ON CONFLICT (key) DO NOTHING`, key, core.SendSending, at)
		if err == nil && n == 0 {
			// Take a failed send back; the row lock serializes claims.
			n, err = tx.Exec(ctx, `UPDATE outbox SET state = ?, updated_at = ? WHERE key = ? AND state = ?`,
				core.SendSending, at, key, core.SendFailed)
		}
		if err != nil || n == 1 {
			claimed, state = err == nil, core.SendSending
			return err
		}
		return One(ctx, tx, `SELECT state FROM outbox WHERE key = ?`, []any{key}, func(r Row) error { return r.Scan(&state) })
	})
	if err != nil {
		return false, "", fmt.Errorf("claim send %s: %w", key, err)
	}
	return claimed, state, nil
}

// ReleaseSend implements core.Outbox: the claim is told apart by its time.
func (s Data) ReleaseSend(ctx context.Context, key string, claimedAt time.Time) error {
	if _, err := s.W.Exec(ctx, `UPDATE outbox SET state = ? WHERE key = ? AND state = ? AND updated_at = ?`,
		core.SendFailed, key, core.SendSending, claimedAt); err != nil {
		return fmt.Errorf("release send %s: %w", key, err)
	}
	return nil
}

// SendRef implements core.Outbox.
func (s Data) SendRef(ctx context.Context, key string) (state, ref string, err error) {
	err = One(ctx, s.R, `SELECT state, ref FROM outbox WHERE key = ?`, []any{key},
		func(r Row) error { return r.Scan(&state, &ref) })
	if err != nil {
		return "", "", fmt.Errorf("send ref %s: %w", key, err)
	}
	return state, ref, nil
}

// SetSendState implements core.Outbox. SendUncertain replaces only
// SendSending: a job that found the entry sending while another job posted
// the message must not overwrite that job's outcome (a sent card's ref,
// which clicks are checked against).
func (s Data) SetSendState(ctx context.Context, key, state, ref string, at time.Time) error {
	query := `UPDATE outbox SET state = ?, ref = ?, updated_at = ? WHERE key = ?`
	if state == core.SendUncertain {
		query += ` AND state = '` + core.SendSending + `'`
	}
	n, err := s.W.Exec(ctx, query, state, ref, at, key)
	if err == nil && n == 0 {
		err = core.ErrNotFound
		if state == core.SendUncertain { // found, and settled meanwhile?
			var st string
			if One(ctx, s.R, `SELECT state FROM outbox WHERE key = ?`, []any{key}, func(r Row) error { return r.Scan(&st) }) == nil {
				err = nil
			}
		}
	}
	if err != nil {
		return fmt.Errorf("set send state %s: %w", key, err)
	}
	return nil
}

// ClaimInbox implements core.Inbox. Concurrent claims skip the rows another
// one is taking (a Dialect's SkipLocked).
func (s Data) ClaimInbox(ctx context.Context, platform, owner string, now, until time.Time, limit int) ([]core.InboxMessage, error) {
	msgs, err := Collect(ctx, s.W, `UPDATE inbox SET claimed_by = ?, claim_until = ?, attempts = attempts + 1
		WHERE seq IN (SELECT seq FROM inbox WHERE platform = ? AND processed_at IS NULL AND claim_until <= ?
			ORDER BY received_at, seq LIMIT ?`+s.Dialect.SkipLocked+`)
		RETURNING dedupe_key, payload, received_at, attempts`, []any{owner, until, platform, now, limit},
		func(r Row) (core.InboxMessage, error) {
			m := core.InboxMessage{Platform: platform}
			return m, r.Scan(&m.Key, &m.Payload, At(&m.ReceivedAt), &m.Attempts)
		})
	if err != nil {
		return nil, fmt.Errorf("claim inbox %s: %w", platform, err)
	}
	core.SortInbox(msgs) // RETURNING has no order
	return msgs, nil
}

// InboxBacklog implements core.InboxBacklogger (from the index of waiting
// messages).
func (s Data) InboxBacklog(ctx context.Context) (map[string]core.InboxBacklog, error) {
	out := map[string]core.InboxBacklog{}
	err := s.R.Query(ctx, `SELECT platform, COUNT(*), MIN(received_at) FROM inbox WHERE processed_at IS NULL GROUP BY platform`,
		nil, func(r Row) error {
			var platform string
			var b core.InboxBacklog
			if err := r.Scan(&platform, &b.Waiting, At(&b.Oldest)); err != nil {
				return err
			}
			out[platform] = b
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("inbox backlog: %w", err)
	}
	return out, nil
}

// ReleaseInbox implements core.Inbox.
func (s Data) ReleaseInbox(ctx context.Context, platform, owner string, unhanded bool) (int, error) {
	n, err := s.W.Exec(ctx, `UPDATE inbox SET claimed_by = '', claim_until = `+s.Dialect.Unset+`,
		attempts = CASE WHEN ? AND attempts > 0 THEN attempts - 1 ELSE attempts END
		WHERE platform = ? AND claimed_by = ? AND processed_at IS NULL`, unhanded, platform, owner)
	if err != nil {
		return 0, fmt.Errorf("release inbox claims of %s: %w", owner, err)
	}
	return int(n), nil
}

// RetryInbox implements core.Inbox.
func (s Data) RetryInbox(ctx context.Context, platform, key, reason string, retryAt time.Time) error {
	if _, err := s.W.Exec(ctx, `UPDATE inbox SET claimed_by = '', claim_until = ?, error = ?
		WHERE platform = ? AND dedupe_key = ? AND processed_at IS NULL`, retryAt, reason, platform, key); err != nil {
		return fmt.Errorf("retry inbox message %s: %w", key, err)
	}
	return nil
}

// SettleInbox implements core.Inbox.
func (s Data) SettleInbox(ctx context.Context, platform, key, reason string, at time.Time) error {
	if _, err := s.W.Exec(ctx, `UPDATE inbox SET processed_at = ?, error = ?, claimed_by = '', claim_until = `+
		s.Dialect.Unset+` WHERE platform = ? AND dedupe_key = ? AND processed_at IS NULL`, at, reason, platform, key); err != nil {
		return fmt.Errorf("settle inbox message %s: %w", key, err)
	}
	return nil
}
