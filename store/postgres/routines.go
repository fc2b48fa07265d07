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
	"github.com/agentgate/agentgate/store/internal/lines"
)

// This file implements core.RoutineStore with the semantics of store/sqlite's.
// Concurrent schedulers (replicas) serialize on the routine's row: a fire
// moves next_fire_at with a compare-and-set UPDATE, which holds the row until
// commit, so one due time fires once; a settle locks the row before it
// records the outcome once (compare-and-set on the entry's outcome), so the
// failure count moves once per run. Lock order: routine → session → run →
// approval → job key; the routine row always comes first, and history rows
// are touched only after it.

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

// getRoutine loads routine id, locking its row until the end of the
// transaction when forUpdate; core.ErrNotFound when there is none.
func getRoutine(ctx context.Context, q querier, id string, forUpdate bool) (core.Routine, error) {
	query := `SELECT ` + routineCols + ` FROM routines WHERE id = $1`
	if forUpdate {
		query += ` FOR NO KEY UPDATE`
	}
	r, err := scanRoutine(q.QueryRow(ctx, query, id))
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

// SyncRoutines implements core.RoutineStore. Syncs of one schema (replicas
// starting together) and CreateRoutine serialize on an advisory lock, so they
// never both insert a routine nor lock routines in different orders.
func (db *DB) SyncRoutines(ctx context.Context, defs []core.RoutineDef, at time.Time) error {
	if at.IsZero() {
		at = db.opts.Clock.Now()
	}
	err := db.tx(ctx, func(tx *txn) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, lockClassRoutineSync, keyHash(db.opts.Schema)); err != nil {
			return fmt.Errorf("take routine sync lock: %w", err)
		}
		keep := make([]string, 0, len(defs))
		for _, d := range defs {
			if err := syncRoutineTx(ctx, tx, d, at); err != nil {
				return fmt.Errorf("routine %s: %w", d.ID, err)
			}
			keep = append(keep, d.ID)
		}
		_, err := tx.Exec(ctx, `DELETE FROM routines WHERE source = 'config' AND id <> ALL($1)`, keep)
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
	cur, err := getRoutine(ctx, tx, d.ID, true)
	if errors.Is(err, core.ErrNotFound) {
		var next *time.Time
		if d.Enabled {
			next = timeOrNull(d.NextFireAt)
		}
		_, err := tx.Exec(ctx, `INSERT INTO routines (`+routineCols+`, config_hash)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9, $10, NULL, 0, '', $11, $11, 'config', $13, $12)`,
			d.ID, d.AgentID, d.Schedule, d.Timezone, d.Input, d.DeliverTo, d.Enabled, string(d.Missed),
			d.MaxFailures, next, at, hash, lines.Join(d.Callers))
		return err
	}
	if err != nil {
		return err
	}
	var curHash string
	if err := tx.QueryRow(ctx, `SELECT config_hash FROM routines WHERE id = $1`, d.ID).Scan(&curHash); err != nil {
		return err
	}
	u := resync(cur, curHash, d)
	_, err = tx.Exec(ctx, `UPDATE routines SET agent_id = $1, schedule = $2, timezone = $3, input = $4,
		deliver_to = $5, enabled = $6, config_enabled = $7, missed = $8, max_failures = $9, next_fire_at = $10,
		consecutive_failures = $11, disabled_reason = $12, updated_at = $13, source = 'config', config_hash = $14,
		callers = $16 WHERE id = $15`,
		u.def.AgentID, u.def.Schedule, u.def.Timezone, u.def.Input, u.def.DeliverTo, u.enabled, d.Enabled,
		string(u.def.Missed), u.def.MaxFailures, u.next, u.failures, u.reason, at, hash, d.ID, lines.Join(u.def.Callers))
	return err
}

// resynced is a stored routine after a sync with its file definition, or
// after a patch.
type resynced struct {
	def      core.RoutineDef // the definition fields to store
	enabled  bool
	failures int
	reason   string
	next     *time.Time
}

// resync applies file definition d to stored routine cur, whose file
// definition had hash curHash at the last sync (see
// core.RoutineStore.SyncRoutines); as in store/sqlite.
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
		u.next = timeOrNull(d.NextFireAt)
	}
	return u
}

// CreateRoutine implements core.RoutineStore. It takes the sync lock, so a
// create racing a sync (or another create) of the same id inserts once and
// the other sees the row.
func (db *DB) CreateRoutine(ctx context.Context, d core.RoutineDef, at time.Time) (core.Routine, error) {
	if d.ID == "" || d.AgentID == "" {
		return core.Routine{}, errors.New("create routine: id and agent id are required")
	}
	if at.IsZero() {
		at = db.opts.Clock.Now()
	}
	var out core.Routine
	err := db.tx(ctx, func(tx *txn) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, lockClassRoutineSync, keyHash(db.opts.Schema)); err != nil {
			return fmt.Errorf("take routine sync lock: %w", err)
		}
		var next *time.Time
		if d.Enabled {
			next = timeOrNull(d.NextFireAt)
		}
		var err error
		out, err = scanRoutine(tx.QueryRow(ctx, `INSERT INTO routines (`+routineCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9, $10, NULL, 0, '', $11, $11, 'api', $12)
			ON CONFLICT (id) DO NOTHING RETURNING `+routineCols,
			d.ID, d.AgentID, d.Schedule, d.Timezone, d.Input, d.DeliverTo, d.Enabled, string(d.Missed),
			d.MaxFailures, next, at, lines.Join(d.Callers)))
		if errors.Is(err, pgx.ErrNoRows) {
			return core.ErrRoutineExists
		}
		return err
	})
	if err != nil {
		return core.Routine{}, fmt.Errorf("create routine %s: %w", d.ID, err)
	}
	return out, nil
}

// UpdateRoutine implements core.RoutineStore. It locks the routine's row
// first, as a fire does.
func (db *DB) UpdateRoutine(ctx context.Context, id string, p core.RoutinePatch) (core.Routine, error) {
	if p.At.IsZero() {
		p.At = db.opts.Clock.Now()
	}
	var out core.Routine
	err := db.tx(ctx, func(tx *txn) error {
		cur, err := getRoutine(ctx, tx, id, true)
		if err != nil {
			return err
		}
		u := patched(cur, p)
		var missed *string
		if p.Missed != nil {
			m := string(*p.Missed)
			missed = &m
		}
		out, err = scanRoutine(tx.QueryRow(ctx, `UPDATE routines SET agent_id = COALESCE($1, agent_id),
			schedule = COALESCE($2, schedule), timezone = COALESCE($3, timezone), input = COALESCE($4, input),
			deliver_to = COALESCE($5, deliver_to), missed = COALESCE($6, missed),
			max_failures = COALESCE($7, max_failures), enabled = $8, next_fire_at = $9, consecutive_failures = $10,
			disabled_reason = $11, updated_at = $12, callers = COALESCE($14, callers) WHERE id = $13 RETURNING `+routineCols,
			p.AgentID, p.Schedule, p.Timezone, p.Input, p.DeliverTo, missed, p.MaxFailures,
			u.enabled, u.next, u.failures, u.reason, p.At, id, lines.Patch(p.Callers)))
		return err
	})
	if err != nil {
		return core.Routine{}, fmt.Errorf("update routine %s: %w", id, err)
	}
	return out, nil
}

// patched returns the scheduling state of stored routine cur after patch p
// (see core.RoutineStore.UpdateRoutine); as in store/sqlite.
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
		u.next = timeOrNull(p.NextFireAt)
	}
	return u
}

// DeleteRoutine implements core.RoutineStore.
func (db *DB) DeleteRoutine(ctx context.Context, id string) error {
	tag, err := db.pool.Exec(ctx, `DELETE FROM routines WHERE id = $1`, id)
	if err == nil && tag.RowsAffected() == 0 {
		err = core.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete routine %s: %w", id, err)
	}
	return nil
}

// GetRoutine implements core.RoutineStore.
func (db *DB) GetRoutine(ctx context.Context, id string) (core.Routine, error) {
	r, err := getRoutine(ctx, db.pool, id, false)
	if err != nil {
		return core.Routine{}, fmt.Errorf("get routine %s: %w", id, err)
	}
	return r, nil
}

// ListRoutines implements core.RoutineStore; the cursor is the last id.
func (db *DB) ListRoutines(ctx context.Context, f core.RoutineFilter) (core.Page[core.Routine], error) {
	limit := pageLimit(f.Limit)
	var a params
	q := `SELECT ` + routineCols + ` FROM routines WHERE id > ` + a.add(f.Cursor)
	if len(f.AgentIDs) > 0 {
		q += ` AND agent_id = ANY(` + a.add(f.AgentIDs) + `)`
	}
	q += ` ORDER BY id LIMIT ` + a.add(limit+1)
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

// SetRoutineEnabled implements core.RoutineStore.
func (db *DB) SetRoutineEnabled(ctx context.Context, id string, t core.RoutineToggle) (core.Routine, error) {
	if t.At.IsZero() {
		t.At = db.opts.Clock.Now()
	}
	var out core.Routine
	err := db.tx(ctx, func(tx *txn) error {
		r, err := getRoutine(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if r.Enabled == t.Enabled {
			out = r
			return nil
		}
		if t.Enabled {
			out, err = scanRoutine(tx.QueryRow(ctx, `UPDATE routines SET enabled = true, next_fire_at = $1,
				consecutive_failures = 0, disabled_reason = '', updated_at = $2 WHERE id = $3 RETURNING `+routineCols,
				timeOrNull(t.NextFireAt), t.At, id))
		} else {
			out, err = scanRoutine(tx.QueryRow(ctx, `UPDATE routines SET enabled = false, next_fire_at = NULL,
				disabled_reason = $1, updated_at = $2 WHERE id = $3 RETURNING `+routineCols, t.Reason, t.At, id))
		}
		return err
	})
	if err != nil {
		return core.Routine{}, fmt.Errorf("set routine %s enabled=%t: %w", id, t.Enabled, err)
	}
	return out, nil
}

// FireRoutine implements core.RoutineStore. The routine's row is locked
// first: by the compare-and-set on next_fire_at (a racing fire of the same
// due time waits for it, then finds next_fire_at moved and fails with
// ErrFireConflict), or for a manual fire by touching last_fire_at. Each run
// is then created as CreateRun creates it (locking its session), and their
// jobs are enqueued together at the end.
func (db *DB) FireRoutine(ctx context.Context, f core.RoutineFire) ([]core.Run, error) {
	if f.At.IsZero() {
		f.At = db.opts.Clock.Now()
	}
	runs := slices.Clone(f.Runs)
	for i, fr := range runs {
		nr, err := fr.Run.Normalize(db.opts.Clock.Now())
		if err != nil {
			return nil, fmt.Errorf("fire routine %s: %w", f.RoutineID, err)
		}
		if nr.Run.RoutineID != f.RoutineID {
			return nil, fmt.Errorf("fire routine %s: run %s is for routine %q", f.RoutineID, nr.Run.ID, nr.Run.RoutineID)
		}
		runs[i].Run = nr
	}
	var last *time.Time
	if len(runs) > 0 {
		last = &f.At
	}
	var out []core.Run
	err := db.tx(ctx, func(tx *txn) error {
		var (
			tag pgconn.CommandTag
			err error
		)
		switch {
		case !f.Manual:
			tag, err = tx.Exec(ctx, `UPDATE routines SET next_fire_at = $1,
				last_fire_at = COALESCE($2, last_fire_at), updated_at = $3
				WHERE id = $4 AND enabled AND next_fire_at = $5`,
				timeOrNull(f.Next), last, f.At, f.RoutineID, f.Expected)
		case last != nil:
			tag, err = tx.Exec(ctx, `UPDATE routines SET last_fire_at = $1, updated_at = $1 WHERE id = $2`,
				f.At, f.RoutineID)
		default:
			tag, err = tx.Exec(ctx, `SELECT 1 FROM routines WHERE id = $1 FOR NO KEY UPDATE`, f.RoutineID)
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM routines WHERE id = $1)`, f.RoutineID).
				Scan(&exists); err != nil {
				return err
			}
			if !exists {
				return core.ErrNotFound
			}
			return core.ErrFireConflict
		}
		for i, due := range f.Missed {
			note := ""
			if i == 0 && f.MissedOmitted > 0 {
				note = fmt.Sprintf("%d earlier due times were missed too", f.MissedOmitted)
			}
			insertEntryTx(tx, f.RoutineID, core.FireMissed, due, f.At, "", note)
		}
		out = make([]core.Run, len(runs)) // filled as the runs' inserts come back
		jobs := make([]core.Job, 0, len(runs))
		for i, fr := range runs {
			id := fr.Run.Run.ID
			if err := tx.within("create run "+id, func() error { return createRunTx(ctx, tx, fr.Run, &out[i]) }); err != nil {
				return err
			}
			insertEntryTx(tx, f.RoutineID, fr.Kind, fr.DueAt, f.At, id, "")
			jobs = append(jobs, core.RunJobFor(id))
		}
		// One call, so that all job keys are locked in one order.
		db.enqueueTx(tx, jobs...)
		if f.Audit != nil {
			insertAuditTx(tx, *f.Audit, f.At)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fire routine %s: %w", f.RoutineID, err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// insertEntryTx queues the record of a routine history entry.
func insertEntryTx(tx *txn, routineID string, kind core.FireKind, due, fired time.Time, runID, note string) {
	tx.Later(`INSERT INTO routine_history (routine_id, kind, due_at, fired_at, run_id, note)
		VALUES ($1, $2, $3, $4, $5, $6)`, routineID, string(kind), timeOrNull(due), fired, runID, note).
		Wrap(fmt.Sprintf("record %s entry", kind))
}

// RoutineHistory implements core.RoutineStore; the cursor is the pk of the
// last entry.
func (db *DB) RoutineHistory(ctx context.Context, id string, o core.ListOptions) (core.Page[core.RoutineEntry], error) {
	after, err := parseCursor(o.Cursor)
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

// SettleRoutineRun implements core.RoutineStore. It locks the routine's row
// (when the routine still exists), then records the outcome with a
// compare-and-set on the entry's empty outcome: of concurrent settles of
// one run, the first applies the outcome to the failure budget and the others
// find it recorded and return the entry as it committed.
func (db *DB) SettleRoutineRun(ctx context.Context, s core.RoutineSettle) (core.RoutineEntry, error) {
	if s.RunID == "" {
		return core.RoutineEntry{}, errors.New("settle routine run: run id is required")
	}
	if s.At.IsZero() {
		s.At = db.opts.Clock.Now()
	}
	var out core.RoutineEntry
	err := db.tx(ctx, func(tx *txn) error {
		var routineID string
		err := tx.QueryRow(ctx, `SELECT routine_id FROM routine_history WHERE run_id = $1`, s.RunID).Scan(&routineID)
		if errors.Is(err, pgx.ErrNoRows) {
			return core.ErrNotFound
		}
		if err != nil {
			return err
		}
		r, err := getRoutine(ctx, tx, routineID, true)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return err
		}
		exists := err == nil
		tag, err := tx.Exec(ctx, `UPDATE routine_history SET outcome = $1 WHERE run_id = $2 AND outcome = ''`,
			string(s.Status), s.RunID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() > 0 && exists && r.Enabled {
			if err := settleTx(ctx, tx, r, s); err != nil {
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

// settleTx applies run s.RunID's outcome to the failure budget of its
// routine r, which is enabled and whose row the caller holds locked.
func settleTx(ctx context.Context, tx *txn, r core.Routine, s core.RoutineSettle) error {
	var err error
	switch s.Status {
	case core.RunCompleted:
		_, err = tx.Exec(ctx, `UPDATE routines SET consecutive_failures = 0, updated_at = $1 WHERE id = $2`, s.At, r.ID)
	case core.RunFailed:
		n := r.ConsecutiveFailures + 1
		if r.MaxFailures > 0 && n >= r.MaxFailures {
			if _, err := tx.Exec(ctx, `UPDATE routines SET consecutive_failures = $1, enabled = false,
				next_fire_at = NULL, disabled_reason = $2, updated_at = $3 WHERE id = $4`,
				n, s.DisableReason, s.At, r.ID); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE routine_history SET disabled_routine = true WHERE run_id = $1`, s.RunID)
		} else {
			_, err = tx.Exec(ctx, `UPDATE routines SET consecutive_failures = $1, updated_at = $2 WHERE id = $3`,
				n, s.At, r.ID)
		}
	}
	return err
}

// SetRoutineDelivery implements core.RoutineStore.
func (db *DB) SetRoutineDelivery(ctx context.Context, runID, delivery string) error {
	tag, err := db.pool.Exec(ctx, `UPDATE routine_history SET delivery = $1 WHERE run_id = $2 AND run_id <> ''`,
		delivery, runID)
	if err == nil && tag.RowsAffected() == 0 {
		err = core.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("routine delivery of run %s: %w", runID, err)
	}
	return nil
}
