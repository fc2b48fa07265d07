package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/lines"
)

// This file implements core.RoutineStore.

var _ core.RoutineStore = (*DB)(nil)
var _ core.Outbox = (*DB)(nil)

const (
	routineCols = `id, agent_id, schedule, timezone, input, deliver_to, enabled, config_enabled, missed,
		max_failures, next_fire_at, last_fire_at, consecutive_failures, disabled_reason, created_at, updated_at, source, callers`
	// entryCols select a history entry with its run's status; the query
	// names routine_history h and LEFT JOINs runs r.
	entryCols = `h.routine_id, h.kind, h.due_at, h.fired_at, h.run_id, COALESCE(r.status, ''),
		h.disabled_routine, h.delivery, h.note`
	entryFrom = ` FROM routine_history h LEFT JOIN runs r ON r.id = h.run_id AND h.run_id <> ''`
)

func scanRoutine(s scanner, extra ...any) (core.Routine, error) {
	var x core.Routine
	var missed, source, callers string
	var next, last sql.NullInt64
	var created, updated int64
	dest := append(extra, &x.ID, &x.AgentID, &x.Schedule, &x.Timezone, &x.Input, &x.DeliverTo, &x.Enabled,
		&x.ConfigEnabled, &missed, &x.MaxFailures, &next, &last, &x.ConsecutiveFailures, &x.DisabledReason,
		&created, &updated, &source, &callers)
	if err := s.Scan(dest...); err != nil {
		return core.Routine{}, err
	}
	x.Missed = core.MissedPolicy(missed)
	x.Source = core.RoutineSource(source)
	x.Callers = lines.Split(callers)
	x.NextFireAt = nullNanos(next)
	x.LastFireAt = nullNanos(last)
	x.CreatedAt = nanos(created)
	x.UpdatedAt = nanos(updated)
	return x, nil
}

func scanEntry(s scanner, extra ...any) (core.RoutineEntry, error) {
	var e core.RoutineEntry
	var kind, status string
	var due sql.NullInt64
	var fired int64
	dest := append(extra, &e.RoutineID, &kind, &due, &fired, &e.RunID, &status, &e.DisabledRoutine, &e.Delivery, &e.Note)
	if err := s.Scan(dest...); err != nil {
		return core.RoutineEntry{}, err
	}
	e.Kind = core.FireKind(kind)
	e.DueAt = nullNanos(due)
	e.FiredAt = nanos(fired)
	e.RunStatus = core.RunStatus(status)
	return e, nil
}

func getRoutine(ctx context.Context, q querier, id string) (core.Routine, error) {
	r, err := scanRoutine(q.QueryRowContext(ctx, `SELECT `+routineCols+` FROM routines WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return core.Routine{}, core.ErrNotFound
	}
	return r, err
}

// timeOrNull stores a zero time as NULL.
func timeOrNull(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

// SyncRoutines implements core.RoutineStore.
func (db *DB) SyncRoutines(ctx context.Context, defs []core.RoutineDef, at time.Time) error {
	if at.IsZero() {
		at = db.opts.Clock.Now()
	}
	err := db.tx(ctx, func(tx *txn) error {
		keep := make([]any, 0, len(defs))
		for _, d := range defs {
			if err := syncRoutineTx(ctx, tx, d, at); err != nil {
				return fmt.Errorf("routine %s: %w", d.ID, err)
			}
			keep = append(keep, d.ID)
		}
		q := `DELETE FROM routines WHERE source = 'config'`
		if len(keep) > 0 {
			q += ` AND id NOT IN (?` + strings.Repeat(", ?", len(keep)-1) + `)`
		}
		_, err := tx.ExecContext(ctx, q, keep...)
		return err
	})
	if err != nil {
		return fmt.Errorf("sync routines: %w", err)
	}
	return nil
}

func syncRoutineTx(ctx context.Context, tx *txn, d core.RoutineDef, at time.Time) error {
	if d.ID == "" || d.AgentID == "" {
		return errors.New("id and agent id are required")
	}
	hash := d.ConfigHash()
	cur, err := getRoutine(ctx, tx, d.ID)
	if errors.Is(err, core.ErrNotFound) {
		next := sql.NullInt64{}
		if d.Enabled {
			next = timeOrNull(d.NextFireAt)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO routines(`+routineCols+`, config_hash)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, 0, '', ?, ?, 'config', ?, ?)`,
			d.ID, d.AgentID, d.Schedule, d.Timezone, d.Input, d.DeliverTo, d.Enabled, d.Enabled, string(d.Missed),
			d.MaxFailures, next, at.UnixNano(), at.UnixNano(), lines.Join(d.Callers), hash)
		return err
	}
	if err != nil {
		return err
	}
	var curHash string
	if err := tx.QueryRowContext(ctx, `SELECT config_hash FROM routines WHERE id = ?`, d.ID).Scan(&curHash); err != nil {
		return err
	}
	u := resync(cur, curHash, d)
	next := toNull(u.next)
	_, err = tx.ExecContext(ctx, `UPDATE routines SET agent_id = ?, schedule = ?, timezone = ?, input = ?,
		deliver_to = ?, enabled = ?, config_enabled = ?, missed = ?, max_failures = ?, next_fire_at = ?,
		consecutive_failures = ?, disabled_reason = ?, updated_at = ?, source = 'config', config_hash = ?, callers = ?
		WHERE id = ?`,
		u.def.AgentID, u.def.Schedule, u.def.Timezone, u.def.Input, u.def.DeliverTo, u.enabled, d.Enabled,
		string(u.def.Missed), u.def.MaxFailures, next, u.failures, u.reason, at.UnixNano(), hash, lines.Join(u.def.Callers), d.ID)
	return err
}

// resynced is a stored routine after a sync with its file definition.
type resynced struct {
	def      core.RoutineDef // the definition fields to store
	enabled  bool
	failures int
	reason   string
	next     *time.Time
}

// resync applies file definition d to stored routine cur, whose file
// definition had hash curHash at the last sync (see
// core.RoutineStore.SyncRoutines). store/postgres has the same rules.
func resync(cur core.Routine, curHash string, d core.RoutineDef) resynced {
	takeover := cur.Source != core.SourceConfig // an API routine the file now defines
	u := resynced{enabled: cur.Enabled, failures: cur.ConsecutiveFailures, reason: cur.DisabledReason,
		next: cur.NextFireAt, def: core.RoutineDef{AgentID: cur.AgentID, Schedule: cur.Schedule,
			Timezone: cur.Timezone, Input: cur.Input, DeliverTo: cur.DeliverTo, Missed: cur.Missed,
			MaxFailures: cur.MaxFailures, Callers: cur.Callers}}
	if takeover || d.ConfigHash() != curHash { // the file's definition changed: it wins
		u.def = d
	}
	becameEnabled := false
	if takeover || d.Enabled != cur.ConfigEnabled { // the file's value changed: it wins
		becameEnabled = d.Enabled && !cur.Enabled
		u.enabled, u.reason = d.Enabled, ""
		if becameEnabled {
			u.failures = 0
		}
	}
	switch {
	case !u.enabled:
		u.next = nil
	case becameEnabled, u.def.Schedule != cur.Schedule, u.def.Timezone != cur.Timezone, u.next == nil:
		u.next = nil
		if !d.NextFireAt.IsZero() {
			t := d.NextFireAt
			u.next = &t
		}
	}
	return u
}

// CreateRoutine implements core.RoutineStore.
func (db *DB) CreateRoutine(ctx context.Context, d core.RoutineDef, at time.Time) (core.Routine, error) {
	if d.ID == "" || d.AgentID == "" {
		return core.Routine{}, errors.New("create routine: id and agent id are required")
	}
	if at.IsZero() {
		at = db.opts.Clock.Now()
	}
	var out core.Routine
	err := db.tx(ctx, func(tx *txn) error {
		if _, err := getRoutine(ctx, tx, d.ID); err == nil {
			return core.ErrRoutineExists
		} else if !errors.Is(err, core.ErrNotFound) {
			return err
		}
		next := sql.NullInt64{}
		if d.Enabled {
			next = timeOrNull(d.NextFireAt)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO routines(`+routineCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, 0, '', ?, ?, 'api', ?)`,
			d.ID, d.AgentID, d.Schedule, d.Timezone, d.Input, d.DeliverTo, d.Enabled, d.Enabled, string(d.Missed),
			d.MaxFailures, next, at.UnixNano(), at.UnixNano(), lines.Join(d.Callers)); err != nil {
			return err
		}
		var err error
		out, err = getRoutine(ctx, tx, d.ID)
		return err
	})
	if err != nil {
		return core.Routine{}, fmt.Errorf("create routine %s: %w", d.ID, err)
	}
	return out, nil
}

// UpdateRoutine implements core.RoutineStore.
func (db *DB) UpdateRoutine(ctx context.Context, id string, p core.RoutinePatch) (core.Routine, error) {
	if p.At.IsZero() {
		p.At = db.opts.Clock.Now()
	}
	var out core.Routine
	err := db.tx(ctx, func(tx *txn) error {
		cur, err := getRoutine(ctx, tx, id)
		if err != nil {
			return err
		}
		u := patched(cur, p)
		var missed *string
		if p.Missed != nil {
			m := string(*p.Missed)
			missed = &m
		}
		if _, err := tx.ExecContext(ctx, `UPDATE routines SET agent_id = COALESCE(?, agent_id),
			schedule = COALESCE(?, schedule), timezone = COALESCE(?, timezone), input = COALESCE(?, input),
			deliver_to = COALESCE(?, deliver_to), missed = COALESCE(?, missed), max_failures = COALESCE(?, max_failures),
			callers = COALESCE(?, callers), enabled = ?, next_fire_at = ?, consecutive_failures = ?, disabled_reason = ?,
			updated_at = ? WHERE id = ?`,
			p.AgentID, p.Schedule, p.Timezone, p.Input, p.DeliverTo, missed, p.MaxFailures, lines.Patch(p.Callers),
			u.enabled, toNull(u.next), u.failures, u.reason, p.At.UnixNano(), id); err != nil {
			return err
		}
		out, err = getRoutine(ctx, tx, id)
		return err
	})
	if err != nil {
		return core.Routine{}, fmt.Errorf("update routine %s: %w", id, err)
	}
	return out, nil
}

// patched returns the scheduling state of stored routine cur after patch p
// (see core.RoutineStore.UpdateRoutine). store/postgres has the same rules.
func patched(cur core.Routine, p core.RoutinePatch) resynced {
	u := resynced{enabled: cur.Enabled, failures: cur.ConsecutiveFailures, reason: cur.DisabledReason, next: cur.NextFireAt}
	becameEnabled := false
	if p.Enabled != nil && *p.Enabled != cur.Enabled {
		becameEnabled = *p.Enabled
		u.enabled, u.reason = *p.Enabled, ""
		if becameEnabled {
			u.failures = 0
		}
	}
	changed := func(v *string, was string) bool { return v != nil && *v != was }
	switch {
	case !u.enabled:
		u.next = nil
	case becameEnabled, changed(p.Schedule, cur.Schedule), changed(p.Timezone, cur.Timezone), u.next == nil:
		u.next = nil
		if !p.NextFireAt.IsZero() {
			t := p.NextFireAt
			u.next = &t
		}
	}
	return u
}

// DeleteRoutine implements core.RoutineStore.
func (db *DB) DeleteRoutine(ctx context.Context, id string) error {
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM routines WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return core.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete routine %s: %w", id, err)
	}
	return nil
}

// GetRoutine implements core.RoutineStore.
func (db *DB) GetRoutine(ctx context.Context, id string) (core.Routine, error) {
	r, err := getRoutine(ctx, db.r, id)
	if err != nil {
		return core.Routine{}, fmt.Errorf("get routine %s: %w", id, err)
	}
	return r, nil
}

// ListRoutines implements core.RoutineStore; the cursor is the last id.
func (db *DB) ListRoutines(ctx context.Context, f core.RoutineFilter) (core.Page[core.Routine], error) {
	limit := pageLimit(f.Limit)
	q := `SELECT ` + routineCols + ` FROM routines WHERE id > ?`
	args := []any{f.Cursor}
	if len(f.AgentIDs) > 0 {
		q += ` AND agent_id IN ` + inList(len(f.AgentIDs))
		args = appendStrings(args, f.AgentIDs)
	}
	rows, err := db.r.QueryContext(ctx, q+` ORDER BY id LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return core.Page[core.Routine]{}, fmt.Errorf("list routines: %w", err)
	}
	defer rows.Close()
	page := core.Page[core.Routine]{Items: []core.Routine{}}
	for rows.Next() {
		if len(page.Items) == limit {
			page.NextCursor = page.Items[limit-1].ID
			break
		}
		r, err := scanRoutine(rows)
		if err != nil {
			return core.Page[core.Routine]{}, fmt.Errorf("list routines: %w", err)
		}
		page.Items = append(page.Items, r)
	}
	if err := rows.Err(); err != nil {
		return core.Page[core.Routine]{}, fmt.Errorf("list routines: %w", err)
	}
	return page, nil
}

// DueRoutines implements core.RoutineStore.
func (db *DB) DueRoutines(ctx context.Context, now time.Time, limit int) ([]core.Routine, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+routineCols+` FROM routines
		WHERE enabled = 1 AND next_fire_at IS NOT NULL AND next_fire_at <= ? ORDER BY next_fire_at, id LIMIT ?`,
		now.UnixNano(), sqlLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("due routines: %w", err)
	}
	defer rows.Close()
	var out []core.Routine
	for rows.Next() {
		r, err := scanRoutine(rows)
		if err != nil {
			return nil, fmt.Errorf("due routines: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("due routines: %w", err)
	}
	return out, nil
}

// SetRoutineEnabled implements core.RoutineStore.
func (db *DB) SetRoutineEnabled(ctx context.Context, id string, t core.RoutineToggle) (core.Routine, error) {
	if t.At.IsZero() {
		t.At = db.opts.Clock.Now()
	}
	var out core.Routine
	err := db.tx(ctx, func(tx *txn) error {
		r, err := getRoutine(ctx, tx, id)
		if err != nil {
			return err
		}
		if r.Enabled == t.Enabled {
			out = r
			return nil
		}
		if t.Enabled {
			_, err = tx.ExecContext(ctx, `UPDATE routines SET enabled = 1, next_fire_at = ?, consecutive_failures = 0,
				disabled_reason = '', updated_at = ? WHERE id = ?`, timeOrNull(t.NextFireAt), t.At.UnixNano(), id)
		} else {
			_, err = tx.ExecContext(ctx, `UPDATE routines SET enabled = 0, next_fire_at = NULL, disabled_reason = ?,
				updated_at = ? WHERE id = ?`, t.Reason, t.At.UnixNano(), id)
		}
		if err != nil {
			return err
		}
		out, err = getRoutine(ctx, tx, id)
		return err
	})
	if err != nil {
		return core.Routine{}, fmt.Errorf("set routine %s enabled=%t: %w", id, t.Enabled, err)
	}
	return out, nil
}

// FireRoutine implements core.RoutineStore.
func (db *DB) FireRoutine(ctx context.Context, f core.RoutineFire) ([]core.Run, error) {
	if f.At.IsZero() {
		f.At = db.opts.Clock.Now()
	}
	for i, fr := range f.Runs {
		nr, err := fr.Run.Normalize(db.opts.Clock.Now())
		if err != nil {
			return nil, fmt.Errorf("fire routine %s: %w", f.RoutineID, err)
		}
		if nr.Run.RoutineID != f.RoutineID {
			return nil, fmt.Errorf("fire routine %s: run %s is for routine %q", f.RoutineID, nr.Run.ID, nr.Run.RoutineID)
		}
		f.Runs[i].Run = nr
	}
	var out []core.Run
	err := db.tx(ctx, func(tx *txn) error {
		if _, err := getRoutine(ctx, tx, f.RoutineID); err != nil {
			return err
		}
		last := sql.NullInt64{}
		if len(f.Runs) > 0 {
			last = sql.NullInt64{Int64: f.At.UnixNano(), Valid: true}
		}
		if !f.Manual {
			res, err := tx.ExecContext(ctx, `UPDATE routines SET next_fire_at = ?, last_fire_at = COALESCE(?, last_fire_at),
				updated_at = ? WHERE id = ? AND enabled = 1 AND next_fire_at = ?`,
				timeOrNull(f.Next), last, f.At.UnixNano(), f.RoutineID, f.Expected.UnixNano())
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				return core.ErrFireConflict
			}
		} else if last.Valid {
			if _, err := tx.ExecContext(ctx, `UPDATE routines SET last_fire_at = ?, updated_at = ? WHERE id = ?`,
				last, f.At.UnixNano(), f.RoutineID); err != nil {
				return err
			}
		}
		for i, due := range f.Missed {
			note := ""
			if i == 0 && f.MissedOmitted > 0 {
				note = fmt.Sprintf("%d earlier due times were missed too", f.MissedOmitted)
			}
			if err := insertEntryTx(ctx, tx, f.RoutineID, core.FireMissed, due, f.At, "", note); err != nil {
				return err
			}
		}
		for _, fr := range f.Runs {
			run, err := db.createRunTx(ctx, tx, fr.Run)
			if err != nil {
				return err
			}
			if err := insertEntryTx(ctx, tx, f.RoutineID, fr.Kind, fr.DueAt, f.At, run.ID, ""); err != nil {
				return err
			}
			out = append(out, run)
		}
		if f.Audit != nil {
			return insertAuditTx(ctx, tx, *f.Audit, f.At)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fire routine %s: %w", f.RoutineID, err)
	}
	if len(out) > 0 {
		db.wake()
	}
	return out, nil
}

func insertEntryTx(ctx context.Context, tx *txn, routineID string, kind core.FireKind, due, fired time.Time, runID, note string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO routine_history(routine_id, kind, due_at, fired_at, run_id, note)
		VALUES (?, ?, ?, ?, ?, ?)`, routineID, string(kind), timeOrNull(due), fired.UnixNano(), runID, note)
	if err != nil {
		return fmt.Errorf("record %s entry: %w", kind, err)
	}
	return nil
}

// RoutineHistory implements core.RoutineStore.
func (db *DB) RoutineHistory(ctx context.Context, id string, o core.ListOptions) (core.Page[core.RoutineEntry], error) {
	after, err := parseCursor(o.Cursor)
	if err != nil {
		return core.Page[core.RoutineEntry]{}, fmt.Errorf("routine %s history: %w", id, err)
	}
	p, err := list(ctx, db, o, `SELECT h.rowid, `+entryCols+entryFrom+`
		WHERE h.routine_id = ? AND h.rowid > ? ORDER BY h.rowid LIMIT ?`, []any{id, after}, scanEntry)
	if err != nil {
		return core.Page[core.RoutineEntry]{}, fmt.Errorf("routine %s history: %w", id, err)
	}
	return p, nil
}

func entryOfRun(ctx context.Context, q querier, runID string) (core.RoutineEntry, error) {
	e, err := scanEntry(q.QueryRowContext(ctx, `SELECT `+entryCols+entryFrom+` WHERE h.run_id = ?`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return core.RoutineEntry{}, core.ErrNotFound
	}
	return e, err
}

// SettleRoutineRun implements core.RoutineStore.
func (db *DB) SettleRoutineRun(ctx context.Context, s core.RoutineSettle) (core.RoutineEntry, error) {
	if s.RunID == "" {
		return core.RoutineEntry{}, errors.New("settle routine run: run id is required")
	}
	if s.At.IsZero() {
		s.At = db.opts.Clock.Now()
	}
	var out core.RoutineEntry
	err := db.tx(ctx, func(tx *txn) error {
		var routineID, outcome string
		err := tx.QueryRowContext(ctx, `SELECT routine_id, outcome FROM routine_history WHERE run_id = ?`, s.RunID).
			Scan(&routineID, &outcome)
		if errors.Is(err, sql.ErrNoRows) {
			return core.ErrNotFound
		}
		if err != nil {
			return err
		}
		if outcome == "" {
			if err := settleTx(ctx, tx, routineID, s); err != nil {
				return err
			}
		}
		out, err = entryOfRun(ctx, tx, s.RunID)
		return err
	})
	if err != nil {
		return core.RoutineEntry{}, fmt.Errorf("settle routine run %s: %w", s.RunID, err)
	}
	return out, nil
}

// settleTx records run s.RunID's outcome and applies it to the failure
// budget of its routine (when the routine exists and is enabled).
func settleTx(ctx context.Context, tx *txn, routineID string, s core.RoutineSettle) error {
	if _, err := tx.ExecContext(ctx, `UPDATE routine_history SET outcome = ? WHERE run_id = ?`, string(s.Status), s.RunID); err != nil {
		return err
	}
	r, err := getRoutine(ctx, tx, routineID)
	if errors.Is(err, core.ErrNotFound) || (err == nil && !r.Enabled) {
		return nil
	}
	if err != nil {
		return err
	}
	switch s.Status {
	case core.RunCompleted:
		_, err = tx.ExecContext(ctx, `UPDATE routines SET consecutive_failures = 0, updated_at = ? WHERE id = ?`,
			s.At.UnixNano(), routineID)
	case core.RunFailed:
		n := r.ConsecutiveFailures + 1
		if r.MaxFailures > 0 && n >= r.MaxFailures {
			if _, err := tx.ExecContext(ctx, `UPDATE routines SET consecutive_failures = ?, enabled = 0, next_fire_at = NULL,
				disabled_reason = ?, updated_at = ? WHERE id = ?`, n, s.DisableReason, s.At.UnixNano(), routineID); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `UPDATE routine_history SET disabled_routine = 1 WHERE run_id = ?`, s.RunID)
		} else {
			_, err = tx.ExecContext(ctx, `UPDATE routines SET consecutive_failures = ?, updated_at = ? WHERE id = ?`,
				n, s.At.UnixNano(), routineID)
		}
	}
	return err
}

// SetRoutineDelivery implements core.RoutineStore.
func (db *DB) SetRoutineDelivery(ctx context.Context, runID, delivery string) error {
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE routine_history SET delivery = ? WHERE run_id = ?`, delivery, runID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return core.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("routine delivery of run %s: %w", runID, err)
	}
	return nil
}
