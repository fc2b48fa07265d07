package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/lines"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

// This file implements core.RoutineStore.

var _ core.RoutineStore = (*DB)(nil)
var _ core.Outbox = (*DB)(nil)
var _ sqlstore.RoutineDriver = routineDriver{}

const (
	routineCols = sqlstore.RoutineCols
	entryCols   = sqlstore.EntryCols
	entryFrom   = sqlstore.EntryFrom
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

// routineDriver runs the routine rules of sqlstore.Routines on db.
type routineDriver struct{ db *DB }

func (d routineDriver) RoutineTx(ctx context.Context, fn func(sqlstore.RoutineTx) error) error {
	return d.db.tx(ctx, func(tx *txn) error { return fn(routineTx{runTx{db: d.db, tx: tx}}) })
}

func (d routineDriver) Now() time.Time { return d.db.opts.Clock.Now() }
func (d routineDriver) Created()       { d.db.wake() }

// routineTx is sqlstore.RoutineTx on a SQLite transaction. SQLite has one
// writer, so a read in a write transaction holds what it read until commit.
type routineTx struct {
	runTx // CreateRuns (without jobs), Enqueue, InsertAudit
}

func (t routineTx) LockRoutineSync(context.Context) error { return nil }

func (t routineTx) LockRoutine(ctx context.Context, id string) (sqlstore.RoutineRow, error) {
	var r sqlstore.RoutineRow
	var err error
	r.Routine, err = scanRoutine(t.tx.QueryRowContext(ctx, `SELECT config_hash, `+routineCols+` FROM routines WHERE id = ?`, id), &r.ConfigHash)
	if errors.Is(err, sql.ErrNoRows) {
		return r, core.ErrNotFound
	}
	return r, err
}

func (t routineTx) InsertRoutine(ctx context.Context, r sqlstore.RoutineRow) (core.Routine, bool, error) {
	res, err := t.tx.ExecContext(ctx, `INSERT INTO routines(`+routineCols+`, config_hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`, routineArgs(r)...)
	if err != nil {
		return core.Routine{}, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return core.Routine{}, false, err
	}
	out, err := getRoutine(ctx, t.tx, r.ID)
	return out, err == nil, err
}

func (t routineTx) WriteRoutine(ctx context.Context, r sqlstore.RoutineRow) (core.Routine, error) {
	args := routineArgs(r)
	if _, err := t.tx.ExecContext(ctx, `UPDATE routines SET agent_id = ?2, schedule = ?3, timezone = ?4, input = ?5,
		deliver_to = ?6, enabled = ?7, config_enabled = ?8, missed = ?9, max_failures = ?10, next_fire_at = ?11,
		last_fire_at = ?12, consecutive_failures = ?13, disabled_reason = ?14, updated_at = ?16, source = ?17,
		callers = ?18, config_hash = ?19 WHERE id = ?1`, args...); err != nil {
		return core.Routine{}, err
	}
	return getRoutine(ctx, t.tx, r.ID)
}

// routineArgs are r's columns in routineCols order, then config_hash.
func routineArgs(r sqlstore.RoutineRow) []any {
	return []any{r.ID, r.AgentID, r.Schedule, r.Timezone, r.Input, r.DeliverTo, r.Enabled, r.ConfigEnabled,
		string(r.Missed), r.MaxFailures, toNull(r.NextFireAt), toNull(r.LastFireAt), r.ConsecutiveFailures,
		r.DisabledReason, r.CreatedAt.UnixNano(), r.UpdatedAt.UnixNano(), string(r.Source), lines.Join(r.Callers), r.ConfigHash}
}

func (t routineTx) DeleteRoutine(ctx context.Context, id string) (bool, error) {
	return affected(t.tx.ExecContext(ctx, `DELETE FROM routines WHERE id = ?`, id))
}

func (t routineTx) DeleteConfigRoutines(ctx context.Context, keep []string) error {
	q := `DELETE FROM routines WHERE source = 'config'`
	if len(keep) > 0 {
		q += ` AND id NOT IN ` + inList(len(keep))
	}
	_, err := t.tx.ExecContext(ctx, q, appendStrings(nil, keep)...)
	return err
}

func (t routineTx) AdvanceRoutine(ctx context.Context, id string, expected time.Time, next, lastFire *time.Time, at time.Time) (bool, error) {
	return affected(t.tx.ExecContext(ctx, `UPDATE routines SET next_fire_at = ?, last_fire_at = COALESCE(?, last_fire_at),
		updated_at = ? WHERE id = ? AND enabled = 1 AND next_fire_at = ?`,
		toNull(next), toNull(lastFire), at.UnixNano(), id, expected.UnixNano()))
}

func (t routineTx) RoutineFired(ctx context.Context, id string, at time.Time) (bool, error) {
	return affected(t.tx.ExecContext(ctx, `UPDATE routines SET last_fire_at = ?1, updated_at = ?1 WHERE id = ?2`,
		at.UnixNano(), id))
}

func (t routineTx) InsertEntry(ctx context.Context, e sqlstore.Entry) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO routine_history(routine_id, kind, due_at, fired_at, run_id, note)
		VALUES (?, ?, ?, ?, ?, ?)`, e.RoutineID, string(e.Kind), timeOrNull(e.DueAt), e.FiredAt.UnixNano(), e.RunID, e.Note)
	if err != nil {
		return fmt.Errorf("record %s entry: %w", e.Kind, err)
	}
	return nil
}

func (t routineTx) EntryRoutine(ctx context.Context, runID string) (string, error) {
	var id string
	err := t.tx.QueryRowContext(ctx, `SELECT routine_id FROM routine_history WHERE run_id = ? AND run_id <> ''`, runID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", core.ErrNotFound
	}
	return id, err
}

func (t routineTx) SetOutcome(ctx context.Context, runID string, status core.RunStatus, disabled bool) (bool, error) {
	return affected(t.tx.ExecContext(ctx, `UPDATE routine_history SET outcome = ?, disabled_routine = ?
		WHERE run_id = ? AND outcome = ''`, string(status), disabled, runID))
}

func (t routineTx) EntryOfRun(ctx context.Context, runID string) (core.RoutineEntry, error) {
	return entryOfRun(ctx, t.tx, runID)
}

func (t routineTx) SetDelivery(ctx context.Context, runID, delivery string) (bool, error) {
	return affected(t.tx.ExecContext(ctx, `UPDATE routine_history SET delivery = ? WHERE run_id = ? AND run_id <> ''`, delivery, runID))
}

// CreateRuns creates the runs with their jobs (sqlstore.RoutineTx).
func (t routineTx) CreateRuns(ctx context.Context, runs []core.NewRun) ([]core.Run, error) {
	out, err := t.runTx.CreateRuns(ctx, runs)
	if err != nil {
		return nil, err
	}
	jobs := make([]core.Job, len(runs))
	for i, nr := range runs {
		jobs[i] = core.RunJobFor(nr.Run.ID)
	}
	return out, t.Enqueue(ctx, jobs...)
}

// affected reports whether an exec changed a row.
func affected(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
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
	limit := sqlstore.PageLimit(f.Limit)
	a := &args{v: []any{f.Cursor}}
	q := `SELECT ` + routineCols + ` FROM routines WHERE id > ?` + sqlstore.RoutinesWhere(f, a)
	rows, err := db.r.QueryContext(ctx, q+` ORDER BY id LIMIT ?`, append(a.v, limit+1)...)
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

// RoutineHistory implements core.RoutineStore.
func (db *DB) RoutineHistory(ctx context.Context, id string, o core.ListOptions) (core.Page[core.RoutineEntry], error) {
	after, err := sqlstore.ParseCursor(o.Cursor)
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
