package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/lines"
)

// RoutineSQL is RoutineTx's data operations on a transaction's Conn, the
// same statements on every database; a driver's RoutineTx embeds it and
// adds LockRoutineSync, CreateRuns and InsertAudit.
type RoutineSQL struct {
	C Conn
	D *Dialect
}

// ScanRoutine scans RoutineCols after any extra leading columns.
func ScanRoutine(s Row, extra ...any) (core.Routine, error) {
	var x core.Routine
	var missed, source, callers string
	dest := append(extra, &x.ID, &x.AgentID, &x.Schedule, &x.Timezone, &x.Input, &x.DeliverTo, &x.Enabled,
		&x.ConfigEnabled, &missed, &x.MaxFailures, AtOpt(&x.NextFireAt), AtOpt(&x.LastFireAt), &x.ConsecutiveFailures,
		&x.DisabledReason, At(&x.CreatedAt), At(&x.UpdatedAt), &source, &callers, &x.ChangedBy)
	if err := s.Scan(dest...); err != nil {
		return core.Routine{}, err
	}
	x.Missed = core.MissedPolicy(missed)
	x.Source = core.RoutineSource(source)
	x.Callers = lines.Split(callers)
	return x, nil
}

// ScanEntry scans EntryCols after any extra leading columns.
func ScanEntry(s Row, extra ...any) (core.RoutineEntry, error) {
	var e core.RoutineEntry
	var kind, status string
	dest := append(extra, &e.RoutineID, &kind, AtOpt(&e.DueAt), At(&e.FiredAt), &e.RunID, &status,
		&e.DisabledRoutine, &e.Delivery, &e.Note)
	if err := s.Scan(dest...); err != nil {
		return core.RoutineEntry{}, err
	}
	e.Kind = core.FireKind(kind)
	e.RunStatus = core.RunStatus(status)
	return e, nil
}

func scanRoutineRow(r Row) (core.Routine, error) { return ScanRoutine(r) }

// routineArgs are r's columns in RoutineCols order, then config_hash.
func routineArgs(r RoutineRow) []any {
	return []any{r.ID, r.AgentID, r.Schedule, r.Timezone, r.Input, r.DeliverTo, r.Enabled, r.ConfigEnabled,
		string(r.Missed), r.MaxFailures, r.NextFireAt, r.LastFireAt, r.ConsecutiveFailures, r.DisabledReason,
		r.CreatedAt, r.UpdatedAt, string(r.Source), lines.Join(r.Callers), r.ChangedBy, r.ConfigHash}
}

// LockRoutine implements RoutineTx.
func (t RoutineSQL) LockRoutine(ctx context.Context, id string) (RoutineRow, error) {
	var r RoutineRow
	err := One(ctx, t.C, `SELECT config_hash, `+RoutineCols+` FROM routines WHERE id = ?`+t.D.ForNoKeyUpdate,
		[]any{id}, func(row Row) (err error) {
			r.Routine, err = ScanRoutine(row, &r.ConfigHash)
			return err
		})
	return r, err
}

// InsertRoutine implements RoutineTx.
func (t RoutineSQL) InsertRoutine(ctx context.Context, r RoutineRow) (core.Routine, bool, error) {
	var out core.Routine
	err := One(ctx, t.C, `INSERT INTO routines (`+RoutineCols+`, config_hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING RETURNING `+RoutineCols, routineArgs(r), func(row Row) (err error) {
		out, err = ScanRoutine(row)
		return err
	})
	if errors.Is(err, core.ErrNotFound) {
		return core.Routine{}, false, nil // the id is taken
	}
	return out, err == nil, err
}

// WriteRoutine implements RoutineTx.
func (t RoutineSQL) WriteRoutine(ctx context.Context, r RoutineRow) (out core.Routine, err error) {
	a := routineArgs(r)
	a = append(a[:14:14], a[15:]...) // all but created_at
	err = One(ctx, t.C, `UPDATE routines SET agent_id = ?2, schedule = ?3, timezone = ?4, input = ?5,
		deliver_to = ?6, enabled = ?7, config_enabled = ?8, missed = ?9, max_failures = ?10, next_fire_at = ?11,
		last_fire_at = ?12, consecutive_failures = ?13, disabled_reason = ?14, updated_at = ?15, source = ?16,
		callers = ?17, changed_by = ?18, config_hash = ?19 WHERE id = ?1 RETURNING `+RoutineCols, a, func(row Row) (err error) {
		out, err = ScanRoutine(row)
		return err
	})
	return out, err
}

// DeleteRoutine implements RoutineTx.
func (t RoutineSQL) DeleteRoutine(ctx context.Context, id string) (bool, error) {
	return changed(t.C.Exec(ctx, `DELETE FROM routines WHERE id = ?`, id))
}

// DeleteConfigRoutines implements RoutineTx.
func (t RoutineSQL) DeleteConfigRoutines(ctx context.Context, keep []string) error {
	q, args := `DELETE FROM routines WHERE source = 'config'`, []any(nil)
	if len(keep) > 0 {
		var in string
		in, args = In(nil, keep)
		q += ` AND id NOT IN ` + in
	}
	_, err := t.C.Exec(ctx, q, args...)
	return err
}

// AdvanceRoutine implements RoutineTx.
func (t RoutineSQL) AdvanceRoutine(ctx context.Context, id string, expected time.Time, next, lastFire *time.Time, at time.Time) (bool, error) {
	return changed(t.C.Exec(ctx, `UPDATE routines SET next_fire_at = ?, last_fire_at = COALESCE(?, last_fire_at),
		updated_at = ? WHERE id = ? AND enabled = TRUE AND next_fire_at = ?`, next, lastFire, at, id, expected))
}

// RoutineFired implements RoutineTx.
func (t RoutineSQL) RoutineFired(ctx context.Context, id string, at time.Time) (bool, error) {
	return changed(t.C.Exec(ctx, `UPDATE routines SET last_fire_at = ?1, updated_at = ?1 WHERE id = ?2`, at, id))
}

// InsertEntry implements RoutineTx.
func (t RoutineSQL) InsertEntry(ctx context.Context, e Entry) error {
	if _, err := t.C.Exec(ctx, `INSERT INTO routine_history (routine_id, kind, due_at, fired_at, run_id, note)
		VALUES (?, ?, ?, ?, ?, ?)`, e.RoutineID, string(e.Kind), Optional(e.DueAt), e.FiredAt, e.RunID, e.Note); err != nil {
		return fmt.Errorf("record %s entry: %w", e.Kind, err)
	}
	return nil
}

// EntryRoutine implements RoutineTx.
func (t RoutineSQL) EntryRoutine(ctx context.Context, runID string) (id string, err error) {
	err = One(ctx, t.C, `SELECT routine_id FROM routine_history WHERE run_id = ? AND run_id <> ''`,
		[]any{runID}, func(r Row) error { return r.Scan(&id) })
	return id, err
}

// SetOutcome implements RoutineTx.
func (t RoutineSQL) SetOutcome(ctx context.Context, runID string, status core.RunStatus, disabled bool) (bool, error) {
	return changed(t.C.Exec(ctx, `UPDATE routine_history SET outcome = ?, disabled_routine = ?
		WHERE run_id = ? AND outcome = ''`, string(status), disabled, runID))
}

// EntryOfRun implements RoutineTx.
func (t RoutineSQL) EntryOfRun(ctx context.Context, runID string) (core.RoutineEntry, error) {
	return entryOfRun(ctx, t.C, runID)
}

func entryOfRun(ctx context.Context, c Conn, runID string) (e core.RoutineEntry, err error) {
	err = One(ctx, c, `SELECT `+EntryCols+EntryFrom+` WHERE h.run_id = ?`, []any{runID},
		func(r Row) (err error) { e, err = ScanEntry(r); return err })
	return e, err
}

// SetDelivery implements RoutineTx.
func (t RoutineSQL) SetDelivery(ctx context.Context, runID, delivery string) (bool, error) {
	return changed(t.C.Exec(ctx, `UPDATE routine_history SET delivery = ? WHERE run_id = ? AND run_id <> ''`, delivery, runID))
}

// changed reports whether an Exec changed a row.
func changed(n int64, err error) (bool, error) { return n > 0, err }

// GetRoutine implements core.RoutineStore.
func (s Routines) GetRoutine(ctx context.Context, id string) (r core.Routine, err error) {
	err = One(ctx, s.R, `SELECT `+RoutineCols+` FROM routines WHERE id = ?`, []any{id},
		func(row Row) (err error) { r, err = ScanRoutine(row); return err })
	if err != nil {
		return core.Routine{}, fmt.Errorf("get routine %s: %w", id, err)
	}
	return r, nil
}

// ListRoutines implements core.RoutineStore; the cursor is the last id.
func (s Routines) ListRoutines(ctx context.Context, f core.RoutineFilter) (core.Page[core.Routine], error) {
	limit := PageLimit(f.Limit)
	a := Params{f.Cursor}
	q := `SELECT ` + RoutineCols + ` FROM routines WHERE id > ?` + RoutinesWhere(f, &a)
	q += ` ORDER BY id LIMIT ` + a.Add(limit+1)
	items, err := Collect(ctx, s.R, q, a, scanRoutineRow)
	if err != nil {
		return core.Page[core.Routine]{}, fmt.Errorf("list routines: %w", err)
	}
	page := core.Page[core.Routine]{Items: items}
	if len(items) > limit {
		page.Items = items[:limit]
		page.NextCursor = items[limit-1].ID
	}
	if page.Items == nil {
		page.Items = []core.Routine{}
	}
	return page, nil
}

// DueRoutinesStmt lists the routines due at ?1, earliest first, up to ?2;
// NextRoutineDueStmt says when the next one is. Both name routines_due's
// condition as its definition does (enabled = TRUE), or SQLite does not use
// the partial index.
const (
	DueRoutinesStmt = `SELECT ` + RoutineCols + ` FROM routines
		WHERE enabled = TRUE AND next_fire_at IS NOT NULL AND next_fire_at <= ? ORDER BY next_fire_at, id LIMIT ?`
	NextRoutineDueStmt = `SELECT MIN(next_fire_at) FROM routines WHERE enabled = TRUE AND next_fire_at IS NOT NULL`
)

// DueRoutines implements core.RoutineStore.
func (s Routines) DueRoutines(ctx context.Context, now time.Time, limit int) ([]core.Routine, error) {
	out, err := Collect(ctx, s.R, DueRoutinesStmt, []any{now, s.Dialect.Limit(limit)}, scanRoutineRow)
	if err != nil {
		return nil, fmt.Errorf("due routines: %w", err)
	}
	return out, nil
}

// NextRoutineDue implements routine.NextDuer: when the next enabled
// routine is due, the zero time when none is.
func (s Routines) NextRoutineDue(ctx context.Context) (time.Time, error) {
	var at *time.Time
	err := One(ctx, s.R, NextRoutineDueStmt, nil,
		func(r Row) error { return r.Scan(AtOpt(&at)) })
	if err != nil {
		return time.Time{}, fmt.Errorf("next routine due: %w", err)
	}
	if at == nil {
		return time.Time{}, nil
	}
	return *at, nil
}

// RoutineHistory implements core.RoutineStore; the cursor is the row
// number of the last entry.
func (s Routines) RoutineHistory(ctx context.Context, id string, o core.ListOptions) (core.Page[core.RoutineEntry], error) {
	p, err := PageAfter(ctx, s.R, "h."+s.Dialect.Seq, o, `SELECT h.`+s.Dialect.Seq+`, `+EntryCols+EntryFrom,
		func(a Args) string { return ` AND h.routine_id = ` + a.Add(id) }, ScanEntry)
	if err != nil {
		return core.Page[core.RoutineEntry]{}, fmt.Errorf("routine %s history: %w", id, err)
	}
	return p, nil
}
