package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/lines"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

// This file is the PostgreSQL driver of sqlstore.Routines, which holds the
// rules. Concurrent schedulers (replicas) serialize on the routine's row: a
// fire moves next_fire_at with a compare-and-set UPDATE, which holds the row
// until commit, so one due time fires once; a settle locks the row
// (LockRoutine is FOR NO KEY UPDATE) before it records the outcome once, so
// the failure count moves once per run. Lock order: routine → session → run
// → approval → job key; the routine row always comes first, and history
// rows are touched only after it.

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
	dest := append(extra, &x.ID, &x.AgentID, &x.Schedule, &x.Timezone, &x.Input, &x.DeliverTo, &x.Enabled,
		&x.ConfigEnabled, &missed, &x.MaxFailures, &x.NextFireAt, &x.LastFireAt, &x.ConsecutiveFailures,
		&x.DisabledReason, &x.CreatedAt, &x.UpdatedAt, &source, &callers)
	if err := s.Scan(dest...); err != nil {
		return core.Routine{}, err
	}
	x.Missed = core.MissedPolicy(missed)
	x.Source = core.RoutineSource(source)
	x.Callers = lines.Split(callers)
	x.NextFireAt = utcPtr(x.NextFireAt)
	x.LastFireAt = utcPtr(x.LastFireAt)
	x.CreatedAt = utc(x.CreatedAt)
	x.UpdatedAt = utc(x.UpdatedAt)
	return x, nil
}

func scanEntry(s scanner, extra ...any) (core.RoutineEntry, error) {
	var e core.RoutineEntry
	var kind, status string
	dest := append(extra, &e.RoutineID, &kind, &e.DueAt, &e.FiredAt, &e.RunID, &status, &e.DisabledRoutine,
		&e.Delivery, &e.Note)
	if err := s.Scan(dest...); err != nil {
		return core.RoutineEntry{}, err
	}
	e.Kind = core.FireKind(kind)
	e.DueAt = utcPtr(e.DueAt)
	e.FiredAt = utc(e.FiredAt)
	e.RunStatus = core.RunStatus(status)
	return e, nil
}

// getRoutine loads routine id; core.ErrNotFound when there is none.
func getRoutine(ctx context.Context, q querier, id string) (core.Routine, error) {
	r, err := scanRoutine(q.QueryRow(ctx, `SELECT `+routineCols+` FROM routines WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Routine{}, core.ErrNotFound
	}
	return r, err
}

// timeOrNull stores a zero time as NULL.
func timeOrNull(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// routineDriver runs the routine rules of sqlstore.Routines on db.
type routineDriver struct{ db *DB }

func (d routineDriver) RoutineTx(ctx context.Context, fn func(sqlstore.RoutineTx) error) error {
	return d.db.tx(ctx, func(tx *txn) error { return fn(routineTx{runTx{db: d.db, tx: tx}}) })
}

func (d routineDriver) Now() time.Time { return d.db.opts.Clock.Now() }
func (d routineDriver) Created()       {} // enqueueTx notifies the workers

// routineTx is sqlstore.RoutineTx on a PostgreSQL transaction.
type routineTx struct {
	runTx // LockRoutine and the rest here; InsertAudit from runTx
}

// LockRoutineSync takes an advisory lock per schema: syncs (replicas
// starting together) and creates serialize on it, so they never both insert
// a routine nor lock routines in different orders.
func (t routineTx) LockRoutineSync(ctx context.Context) error {
	_, err := t.tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, lockClassRoutineSync, keyHash(t.db.opts.Schema))
	return err
}

func (t routineTx) LockRoutine(ctx context.Context, id string) (sqlstore.RoutineRow, error) {
	var r sqlstore.RoutineRow
	var err error
	r.Routine, err = scanRoutine(t.tx.QueryRow(ctx, `SELECT config_hash, `+routineCols+` FROM routines WHERE id = $1
		FOR NO KEY UPDATE`, id), &r.ConfigHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, core.ErrNotFound
	}
	return r, err
}

func (t routineTx) InsertRoutine(ctx context.Context, r sqlstore.RoutineRow) (core.Routine, bool, error) {
	out, err := scanRoutine(t.tx.QueryRow(ctx, `INSERT INTO routines (`+routineCols+`, config_hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
		ON CONFLICT (id) DO NOTHING RETURNING `+routineCols, routineArgs(r)...))
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Routine{}, false, nil
	}
	return out, err == nil, err
}

func (t routineTx) WriteRoutine(ctx context.Context, r sqlstore.RoutineRow) (core.Routine, error) {
	a := routineArgs(r)
	a = append(a[:14:14], a[15:]...) // all but created_at
	return scanRoutine(t.tx.QueryRow(ctx, `UPDATE routines SET agent_id = $2, schedule = $3, timezone = $4, input = $5,
		deliver_to = $6, enabled = $7, config_enabled = $8, missed = $9, max_failures = $10, next_fire_at = $11,
		last_fire_at = $12, consecutive_failures = $13, disabled_reason = $14, updated_at = $15, source = $16,
		callers = $17, config_hash = $18 WHERE id = $1 RETURNING `+routineCols, a...))
}

// routineArgs are r's columns in routineCols order, then config_hash.
func routineArgs(r sqlstore.RoutineRow) []any {
	return []any{r.ID, r.AgentID, r.Schedule, r.Timezone, r.Input, r.DeliverTo, r.Enabled, r.ConfigEnabled,
		string(r.Missed), r.MaxFailures, r.NextFireAt, r.LastFireAt, r.ConsecutiveFailures, r.DisabledReason,
		r.CreatedAt, r.UpdatedAt, string(r.Source), lines.Join(r.Callers), r.ConfigHash}
}

func (t routineTx) DeleteRoutine(ctx context.Context, id string) (bool, error) {
	tag, err := t.tx.Exec(ctx, `DELETE FROM routines WHERE id = $1`, id)
	return tag.RowsAffected() > 0, err
}

func (t routineTx) DeleteConfigRoutines(ctx context.Context, keep []string) error {
	_, err := t.tx.Exec(ctx, `DELETE FROM routines WHERE source = 'config' AND id <> ALL($1)`, keep)
	return err
}

func (t routineTx) AdvanceRoutine(ctx context.Context, id string, expected time.Time, next, lastFire *time.Time, at time.Time) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE routines SET next_fire_at = $1, last_fire_at = COALESCE($2, last_fire_at),
		updated_at = $3 WHERE id = $4 AND enabled AND next_fire_at = $5`, next, lastFire, at, id, expected)
	return tag.RowsAffected() > 0, err
}

func (t routineTx) RoutineFired(ctx context.Context, id string, at time.Time) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE routines SET last_fire_at = $1, updated_at = $1 WHERE id = $2`, at, id)
	return tag.RowsAffected() > 0, err
}

// InsertEntry queues the record of a history entry.
func (t routineTx) InsertEntry(_ context.Context, e sqlstore.Entry) error {
	t.tx.Later(`INSERT INTO routine_history (routine_id, kind, due_at, fired_at, run_id, note)
		VALUES ($1, $2, $3, $4, $5, $6)`, e.RoutineID, string(e.Kind), timeOrNull(e.DueAt), e.FiredAt, e.RunID, e.Note).
		Wrap(fmt.Sprintf("record %s entry", e.Kind))
	return nil
}

func (t routineTx) EntryRoutine(ctx context.Context, runID string) (string, error) {
	var id string
	err := t.tx.QueryRow(ctx, `SELECT routine_id FROM routine_history WHERE run_id = $1 AND run_id <> ''`, runID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", core.ErrNotFound
	}
	return id, err
}

func (t routineTx) SetOutcome(ctx context.Context, runID string, status core.RunStatus, disabled bool) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE routine_history SET outcome = $1, disabled_routine = $2
		WHERE run_id = $3 AND outcome = ''`, string(status), disabled, runID)
	return tag.RowsAffected() > 0, err
}

func (t routineTx) EntryOfRun(ctx context.Context, runID string) (core.RoutineEntry, error) {
	return entryOfRun(ctx, t.tx, runID)
}

func (t routineTx) SetDelivery(ctx context.Context, runID, delivery string) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE routine_history SET delivery = $1 WHERE run_id = $2 AND run_id <> ''`, delivery, runID)
	return tag.RowsAffected() > 0, err
}

// CreateRuns creates each run as CreateRun does (locking its session), then
// enqueues their jobs in one call, so that all job keys are locked in one
// order. The runs are filled in as their inserts come back.
func (t routineTx) CreateRuns(ctx context.Context, runs []core.NewRun) ([]core.Run, error) {
	out := make([]core.Run, len(runs))
	jobs := make([]core.Job, 0, len(runs))
	for i, nr := range runs {
		id := nr.Run.ID
		if err := t.tx.within("create run "+id, func() error { return createRunTx(ctx, t.tx, nr, &out[i]) }); err != nil {
			return nil, err
		}
		jobs = append(jobs, core.RunJobFor(id))
	}
	t.db.enqueueTx(t.tx, jobs...)
	return out, nil
}

// GetRoutine implements core.RoutineStore.
func (db *DB) GetRoutine(ctx context.Context, id string) (core.Routine, error) {
	r, err := getRoutine(ctx, db.pool, id)
	if err != nil {
		return core.Routine{}, fmt.Errorf("get routine %s: %w", id, err)
	}
	return r, nil
}

// ListRoutines implements core.RoutineStore; the cursor is the last id.
func (db *DB) ListRoutines(ctx context.Context, f core.RoutineFilter) (core.Page[core.Routine], error) {
	limit := sqlstore.PageLimit(f.Limit)
	var a params
	q := `SELECT ` + routineCols + ` FROM routines WHERE id > ` + a.add(f.Cursor)
	q += sqlstore.RoutinesWhere(f, &a) + ` ORDER BY id LIMIT ` + a.add(limit+1)
	rows, _ := db.pool.Query(ctx, q, a...)
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (core.Routine, error) { return scanRoutine(row) })
	if err != nil {
		return core.Page[core.Routine]{}, fmt.Errorf("list routines: %w", err)
	}
	page := core.Page[core.Routine]{Items: items}
	if len(items) > limit {
		page.Items = items[:limit]
		page.NextCursor = items[limit-1].ID
	}
	return page, nil
}

// DueRoutines implements core.RoutineStore.
func (db *DB) DueRoutines(ctx context.Context, now time.Time, limit int) ([]core.Routine, error) {
	rows, _ := db.pool.Query(ctx, `SELECT `+routineCols+` FROM routines
		WHERE enabled AND next_fire_at <= $1 ORDER BY next_fire_at, id LIMIT $2`, now, limitArg(limit))
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (core.Routine, error) { return scanRoutine(row) })
	if err != nil {
		return nil, fmt.Errorf("due routines: %w", err)
	}
	return out, nil
}

// RoutineHistory implements core.RoutineStore; the cursor is the pk of the
// last entry.
func (db *DB) RoutineHistory(ctx context.Context, id string, o core.ListOptions) (core.Page[core.RoutineEntry], error) {
	after, err := sqlstore.ParseCursor(o.Cursor)
	if err != nil {
		return core.Page[core.RoutineEntry]{}, fmt.Errorf("routine %s history: %w", id, err)
	}
	var a params
	q := `SELECT h.pk, ` + entryCols + entryFrom + ` WHERE h.routine_id = ` + a.add(id) +
		` AND h.pk > ` + a.add(after) + ` ORDER BY h.pk`
	p, err := list(ctx, db, o, q, a, scanEntry)
	if err != nil {
		return core.Page[core.RoutineEntry]{}, fmt.Errorf("routine %s history: %w", id, err)
	}
	return p, nil
}

func entryOfRun(ctx context.Context, q querier, runID string) (core.RoutineEntry, error) {
	e, err := scanEntry(q.QueryRow(ctx, `SELECT `+entryCols+entryFrom+` WHERE h.run_id = $1`, runID))
	if errors.Is(err, pgx.ErrNoRows) {
		return core.RoutineEntry{}, core.ErrNotFound
	}
	return e, err
}
