// Package sqlstore holds the rules of agentgate's store once, above thin
// database drivers (store/sqlite, store/postgres) that execute data
// operations only. A driver implements the Tx interfaces here with plain
// statements; what a transition means — which rows change, what wins when
// the file and the API disagree, when a routine is disabled — is decided
// here, in one place, for every database. The model is riverqueue/river's
// riverdriver.
package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentgate/agentgate/core"
)

// The columns of routines and their history, the same on every database.
const (
	// RoutineCols select a routine, in the order drivers scan it.
	RoutineCols = `id, agent_id, schedule, timezone, input, deliver_to, enabled, config_enabled, missed,
		max_failures, next_fire_at, last_fire_at, consecutive_failures, disabled_reason, created_at, updated_at, source, callers,
		changed_by`
	// EntryCols select a history entry with its run's status; the query
	// names routine_history h and LEFT JOINs runs r (EntryFrom).
	EntryCols = `h.routine_id, h.kind, h.due_at, h.fired_at, h.run_id, COALESCE(r.status, ''),
		h.disabled_routine, h.delivery, h.note`
	EntryFrom = ` FROM routine_history h LEFT JOIN runs r ON r.id = h.run_id AND h.run_id <> ''`
)

// RoutineRow is a routine as stored, with the hash of the file definition
// it was last synced from ("" for a routine made through the API).
type RoutineRow struct {
	core.Routine
	ConfigHash string
}

// Entry is a routine history entry to record.
type Entry struct {
	RoutineID string
	Kind      core.FireKind
	DueAt     time.Time // zero = none
	FiredAt   time.Time
	RunID     string
	Note      string
}

// RoutineTx is what a transaction does to routines and their history. A
// driver may defer writes whose result nobody reads (InsertEntry,
// InsertAudit) until the next read or the commit; an error then fails the
// transaction.
type RoutineTx interface {
	// LockRoutineSync serializes syncs and creates, so that two replicas
	// starting together never both insert a routine.
	LockRoutineSync(ctx context.Context) error
	// LockRoutine reads routine id and holds its row until the transaction
	// ends; core.ErrNotFound when there is none.
	LockRoutine(ctx context.Context, id string) (RoutineRow, error)
	// InsertRoutine stores a new routine and returns it as stored; false
	// when the id is taken.
	InsertRoutine(ctx context.Context, r RoutineRow) (core.Routine, bool, error)
	// WriteRoutine writes every stored field of r, an existing routine
	// (except ID and CreatedAt), and returns it as stored.
	WriteRoutine(ctx context.Context, r RoutineRow) (core.Routine, error)
	// DeleteRoutine deletes routine id; false when there was none.
	DeleteRoutine(ctx context.Context, id string) (bool, error)
	// DeleteConfigRoutines deletes the routines with source config whose id
	// is not in keep.
	DeleteConfigRoutines(ctx context.Context, keep []string) error
	// AdvanceRoutine moves routine id's next_fire_at from expected to next
	// (nil = none), and last_fire_at to lastFire when set, if the routine is
	// enabled and still has expected (compare-and-set); false otherwise.
	AdvanceRoutine(ctx context.Context, id string, expected time.Time, next, lastFire *time.Time, at time.Time) (bool, error)
	// RoutineFired sets routine id's last_fire_at (a manual fire); false
	// when there is no such routine.
	RoutineFired(ctx context.Context, id string, at time.Time) (bool, error)
	// InsertEntry records a history entry.
	InsertEntry(ctx context.Context, e Entry) error
	// EntryRoutine returns the routine of run runID's history entry;
	// core.ErrNotFound when no entry has the run.
	EntryRoutine(ctx context.Context, runID string) (string, error)
	// SetOutcome records run runID's outcome on its entry unless one is
	// recorded (compare-and-set); false when one was. disabled marks the
	// entry as the one that disabled its routine.
	SetOutcome(ctx context.Context, runID string, status core.RunStatus, disabled bool) (bool, error)
	// EntryOfRun reads run runID's entry with its run's status.
	EntryOfRun(ctx context.Context, runID string) (core.RoutineEntry, error)
	// SetDelivery records what happened to run runID's result delivery;
	// false when no entry has the run.
	SetDelivery(ctx context.Context, runID, delivery string) (bool, error)
	// CreateRuns creates each run as core.Store.CreateRun does (session,
	// run, first events) and enqueues their jobs together. The returned
	// runs are complete once the transaction has committed.
	CreateRuns(ctx context.Context, runs []core.NewRun) ([]core.Run, error)
	// InsertAudit appends an audit entry (its At is set).
	InsertAudit(ctx context.Context, e core.AuditEntry) error
}

// RoutineDriver runs routine transactions.
type RoutineDriver interface {
	// RoutineTx runs fn in one transaction, committed when fn returns nil.
	RoutineTx(ctx context.Context, fn func(RoutineTx) error) error
	// Now is the store's clock.
	Now() time.Time
	// Created is told that runs were created and their jobs enqueued (an
	// embedded queue wakes its workers).
	Created()
}

// Routines implements core.RoutineStore: its writes over a driver's
// transactions, its reads on R.
type Routines struct {
	D       RoutineDriver
	R       Conn // reads, outside transactions
	Dialect *Dialect
}

// SyncRoutines implements core.RoutineStore.
func (s Routines) SyncRoutines(ctx context.Context, defs []core.RoutineDef, at time.Time) error {
	if at.IsZero() {
		at = s.D.Now()
	}
	err := s.D.RoutineTx(ctx, func(tx RoutineTx) error {
		if err := tx.LockRoutineSync(ctx); err != nil {
			return fmt.Errorf("take routine sync lock: %w", err)
		}
		keep := make([]string, 0, len(defs))
		for _, d := range defs {
			if err := syncRoutine(ctx, tx, d, at); err != nil {
				return fmt.Errorf("routine %s: %w", d.ID, err)
			}
			keep = append(keep, d.ID)
		}
		return tx.DeleteConfigRoutines(ctx, keep)
	})
	if err != nil {
		return fmt.Errorf("sync routines: %w", err)
	}
	return nil
}

func syncRoutine(ctx context.Context, tx RoutineTx, d core.RoutineDef, at time.Time) error {
	if d.ID == "" || d.AgentID == "" {
		return errors.New("id and agent id are required")
	}
	cur, err := tx.LockRoutine(ctx, d.ID)
	if errors.Is(err, core.ErrNotFound) {
		_, _, err = tx.InsertRoutine(ctx, newRoutine(d, core.SourceConfig, at))
		return err
	}
	if err != nil {
		return err
	}
	_, err = tx.WriteRoutine(ctx, resync(cur, d, at))
	return err
}

// newRoutine is the row of a new routine defined by d.
func newRoutine(d core.RoutineDef, source core.RoutineSource, at time.Time) RoutineRow {
	r := RoutineRow{Routine: core.Routine{ID: d.ID, Enabled: d.Enabled, ConfigEnabled: d.Enabled, Source: source,
		ChangedBy: d.By, CreatedAt: at, UpdatedAt: at}}
	define(&r.Routine, d)
	if d.Enabled {
		r.NextFireAt = timePtr(d.NextFireAt)
	}
	if source == core.SourceConfig {
		r.ConfigHash = d.ConfigHash()
	}
	return r
}

// define copies the definition fields of d into r.
func define(r *core.Routine, d core.RoutineDef) {
	r.AgentID, r.Schedule, r.Timezone, r.Input, r.DeliverTo = d.AgentID, d.Schedule, d.Timezone, d.Input, d.DeliverTo
	r.Missed, r.MaxFailures, r.Callers = d.Missed, d.MaxFailures, d.Callers
}

// resync applies file definition d to stored routine cur (see
// core.RoutineStore.SyncRoutines): the file's definition wins when it
// changed since the last sync (or the file takes over an API routine), and
// so does its enabled value; otherwise what the API stored stays.
func resync(cur RoutineRow, d core.RoutineDef, at time.Time) RoutineRow {
	u := cur
	takeover := cur.Source != core.SourceConfig // an API routine the file now defines
	hash := d.ConfigHash()
	if takeover || hash != cur.ConfigHash { // the file's definition changed: it wins
		define(&u.Routine, d)
		u.ChangedBy = ""
	}
	becameEnabled := false
	if takeover || d.Enabled != cur.ConfigEnabled { // the file's value changed: it wins
		becameEnabled = d.Enabled && !cur.Enabled
		u.Enabled, u.DisabledReason = d.Enabled, ""
		if becameEnabled {
			u.ConsecutiveFailures = 0
		}
	}
	u.NextFireAt = nextFire(u.Routine, cur.Routine, becameEnabled, d.NextFireAt)
	u.ConfigEnabled, u.Source, u.ConfigHash, u.UpdatedAt = d.Enabled, core.SourceConfig, hash, at
	return u
}

// nextFire is the next fire time of routine u, which was cur: none when it
// is disabled; next when it became enabled, its schedule or timezone
// changed, or it had none; else what it had.
func nextFire(u, cur core.Routine, becameEnabled bool, next time.Time) *time.Time {
	switch {
	case !u.Enabled:
		return nil
	case becameEnabled, u.Schedule != cur.Schedule, u.Timezone != cur.Timezone, u.NextFireAt == nil:
		return timePtr(next)
	}
	return u.NextFireAt
}

// CreateRoutine implements core.RoutineStore. It takes the sync lock, so a
// create racing a sync (or another create) of the same id inserts once.
func (s Routines) CreateRoutine(ctx context.Context, d core.RoutineDef, at time.Time) (core.Routine, error) {
	if d.ID == "" || d.AgentID == "" {
		return core.Routine{}, errors.New("create routine: id and agent id are required")
	}
	if at.IsZero() {
		at = s.D.Now()
	}
	var out core.Routine
	err := s.D.RoutineTx(ctx, func(tx RoutineTx) error {
		if err := tx.LockRoutineSync(ctx); err != nil {
			return fmt.Errorf("take routine sync lock: %w", err)
		}
		r, ok, err := tx.InsertRoutine(ctx, newRoutine(d, core.SourceAPI, at))
		if err == nil && !ok {
			err = core.ErrRoutineExists
		}
		out = r
		return err
	})
	if err != nil {
		return core.Routine{}, fmt.Errorf("create routine %s: %w", d.ID, err)
	}
	return out, nil
}

// UpdateRoutine implements core.RoutineStore. It locks the routine's row
// first, as a fire does.
func (s Routines) UpdateRoutine(ctx context.Context, id string, p core.RoutinePatch) (core.Routine, error) {
	if p.At.IsZero() {
		p.At = s.D.Now()
	}
	var out core.Routine
	err := s.D.RoutineTx(ctx, func(tx RoutineTx) error {
		cur, err := tx.LockRoutine(ctx, id)
		if err != nil {
			return err
		}
		out, err = tx.WriteRoutine(ctx, patched(cur, p))
		return err
	})
	if err != nil {
		return core.Routine{}, fmt.Errorf("update routine %s: %w", id, err)
	}
	return out, nil
}

// patched is stored routine cur after patch p (see
// core.RoutineStore.UpdateRoutine).
func patched(cur RoutineRow, p core.RoutinePatch) RoutineRow {
	u := cur
	set(&u.AgentID, p.AgentID)
	set(&u.Schedule, p.Schedule)
	set(&u.Timezone, p.Timezone)
	set(&u.Input, p.Input)
	set(&u.DeliverTo, p.DeliverTo)
	set(&u.Missed, p.Missed)
	set(&u.MaxFailures, p.MaxFailures)
	set(&u.Callers, p.Callers)
	if p.By != "" {
		u.ChangedBy = p.By
	}
	becameEnabled := false
	if p.Enabled != nil && *p.Enabled != cur.Enabled {
		becameEnabled = *p.Enabled
		u.Enabled, u.DisabledReason = *p.Enabled, ""
		if becameEnabled {
			u.ConsecutiveFailures = 0
		}
	}
	u.NextFireAt = nextFire(u.Routine, cur.Routine, becameEnabled, p.NextFireAt)
	u.UpdatedAt = p.At
	return u
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// DeleteRoutine implements core.RoutineStore.
func (s Routines) DeleteRoutine(ctx context.Context, id string) error {
	err := s.D.RoutineTx(ctx, func(tx RoutineTx) error {
		ok, err := tx.DeleteRoutine(ctx, id)
		if err == nil && !ok {
			err = core.ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("delete routine %s: %w", id, err)
	}
	return nil
}

// SetRoutineEnabled implements core.RoutineStore.
func (s Routines) SetRoutineEnabled(ctx context.Context, id string, t core.RoutineToggle) (core.Routine, error) {
	if t.At.IsZero() {
		t.At = s.D.Now()
	}
	var out core.Routine
	err := s.D.RoutineTx(ctx, func(tx RoutineTx) error {
		r, err := tx.LockRoutine(ctx, id)
		if err != nil {
			return err
		}
		if r.Enabled == t.Enabled {
			out = r.Routine
			return nil
		}
		r.Enabled, r.UpdatedAt = t.Enabled, t.At
		if t.Enabled {
			r.NextFireAt, r.ConsecutiveFailures, r.DisabledReason = timePtr(t.NextFireAt), 0, ""
		} else {
			r.NextFireAt, r.DisabledReason = nil, t.Reason
		}
		out, err = tx.WriteRoutine(ctx, r)
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
// ErrFireConflict), or for a manual fire by touching last_fire_at. Then the
// missed due times, the runs with their entries and jobs, and the audit
// entry.
func (s Routines) FireRoutine(ctx context.Context, f core.RoutineFire) ([]core.Run, error) {
	now := s.D.Now()
	if f.At.IsZero() {
		f.At = now
	}
	runs := make([]core.NewRun, len(f.Runs))
	for i, fr := range f.Runs {
		nr, err := fr.Run.Normalize(now)
		if err != nil {
			return nil, fmt.Errorf("fire routine %s: %w", f.RoutineID, err)
		}
		if nr.Run.RoutineID != f.RoutineID {
			return nil, fmt.Errorf("fire routine %s: run %s is for routine %q", f.RoutineID, nr.Run.ID, nr.Run.RoutineID)
		}
		if nr.Events, err = CheckEvents(nr.Events, nr.Run.CreatedAt); err != nil {
			return nil, fmt.Errorf("fire routine %s: %w", f.RoutineID, err)
		}
		runs[i] = nr
	}
	var out []core.Run
	err := s.D.RoutineTx(ctx, func(tx RoutineTx) error {
		if err := lockForFire(ctx, tx, f, len(runs) > 0); err != nil {
			return err
		}
		for i, due := range f.Missed {
			note := ""
			if i == 0 && f.MissedOmitted > 0 {
				note = fmt.Sprintf("%d earlier due times were missed too", f.MissedOmitted)
			}
			if i == len(f.Missed)-1 && f.MissedNote != "" {
				note = strings.TrimPrefix(note+"; "+f.MissedNote, "; ")
			}
			if err := tx.InsertEntry(ctx, Entry{RoutineID: f.RoutineID, Kind: core.FireMissed, DueAt: due, FiredAt: f.At, Note: note}); err != nil {
				return err
			}
		}
		if len(runs) > 0 {
			var err error
			if out, err = tx.CreateRuns(ctx, runs); err != nil {
				return err
			}
		}
		for i, fr := range f.Runs {
			if err := tx.InsertEntry(ctx, Entry{RoutineID: f.RoutineID, Kind: fr.Kind, DueAt: fr.DueAt, FiredAt: f.At,
				RunID: runs[i].Run.ID}); err != nil {
				return err
			}
		}
		if f.Audit != nil {
			e := *f.Audit
			if e.At.IsZero() {
				e.At = f.At
			}
			return tx.InsertAudit(ctx, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fire routine %s: %w", f.RoutineID, err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	s.D.Created()
	return out, nil
}

// lockForFire takes routine f.RoutineID's row for fire f: the
// compare-and-set of a scheduled fire (ErrFireConflict when it lost), or
// the touch of a manual one. ErrNotFound when there is no such routine.
func lockForFire(ctx context.Context, tx RoutineTx, f core.RoutineFire, fires bool) error {
	var last *time.Time
	if fires {
		last = &f.At
	}
	var ok bool
	var err error
	switch {
	case !f.Manual:
		ok, err = tx.AdvanceRoutine(ctx, f.RoutineID, f.Expected, timePtr(f.Next), last, f.At)
	case fires:
		ok, err = tx.RoutineFired(ctx, f.RoutineID, f.At)
	default:
		_, err = tx.LockRoutine(ctx, f.RoutineID)
		ok = err == nil
	}
	if err != nil || ok {
		return err
	}
	if _, err := tx.LockRoutine(ctx, f.RoutineID); err != nil {
		return err
	}
	return core.ErrFireConflict
}

// SettleRoutineRun implements core.RoutineStore. It locks the routine's row
// (when the routine still exists), then records the outcome with a
// compare-and-set on the entry's empty outcome: of concurrent settles of
// one run, the first applies the outcome to the failure budget and the
// others find it recorded and return the entry as it committed.
func (s Routines) SettleRoutineRun(ctx context.Context, st core.RoutineSettle) (core.RoutineEntry, error) {
	if st.RunID == "" {
		return core.RoutineEntry{}, errors.New("settle routine run: run id is required")
	}
	if st.At.IsZero() {
		st.At = s.D.Now()
	}
	var out core.RoutineEntry
	err := s.D.RoutineTx(ctx, func(tx RoutineTx) error {
		routineID, err := tx.EntryRoutine(ctx, st.RunID)
		if err != nil {
			return err
		}
		r, err := tx.LockRoutine(ctx, routineID)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return err
		}
		live := err == nil && r.Enabled
		var u RoutineRow
		changed, disables := false, false
		if live {
			u, changed, disables = settled(r, st)
		}
		recorded, err := tx.SetOutcome(ctx, st.RunID, st.Status, disables)
		if err != nil {
			return err
		}
		if recorded && changed {
			if _, err := tx.WriteRoutine(ctx, u); err != nil {
				return err
			}
		}
		out, err = tx.EntryOfRun(ctx, st.RunID)
		return err
	})
	if err != nil {
		return core.RoutineEntry{}, fmt.Errorf("settle routine run %s: %w", st.RunID, err)
	}
	return out, nil
}

// settled is enabled routine r after run outcome st: completed resets the
// failure count, failed counts one more and disables the routine when that
// reaches its max_failures, cancelled changes nothing.
func settled(r RoutineRow, st core.RoutineSettle) (u RoutineRow, changed, disables bool) {
	u = r
	switch st.Status {
	case core.RunCompleted:
		u.ConsecutiveFailures = 0
	case core.RunFailed:
		u.ConsecutiveFailures = r.ConsecutiveFailures + 1
		if r.MaxFailures > 0 && u.ConsecutiveFailures >= r.MaxFailures {
			u.Enabled, u.NextFireAt, u.DisabledReason = false, nil, st.DisableReason
			disables = true
		}
	default:
		return r, false, false
	}
	u.UpdatedAt = st.At
	return u, true, disables
}

// SetRoutineDelivery implements core.RoutineStore.
func (s Routines) SetRoutineDelivery(ctx context.Context, runID, delivery string) error {
	err := s.D.RoutineTx(ctx, func(tx RoutineTx) error {
		ok, err := tx.SetDelivery(ctx, runID, delivery)
		if err == nil && !ok {
			err = core.ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("routine delivery of run %s: %w", runID, err)
	}
	return nil
}

// timePtr is t, or nil when t is zero.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
