package postgres

import (
	"context"
	"time"

	"github.com/agentgate/agentgate/core"
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

// routineDriver runs the routine rules of sqlstore.Routines on db.
type routineDriver struct{ db *DB }

func (d routineDriver) RoutineTx(ctx context.Context, fn func(sqlstore.RoutineTx) error) error {
	return d.db.tx(ctx, func(tx *txn) error {
		return fn(routineTx{runTx{db: d.db, tx: tx}, sqlstore.RoutineSQL{C: txConn{tx}, D: dialect}})
	})
}

func (d routineDriver) Now() time.Time { return d.db.opts.Clock.Now() }
func (d routineDriver) Created()       {} // enqueueTx notifies the workers

// routineTx is sqlstore.RoutineTx on a PostgreSQL transaction.
type routineTx struct {
	runTx               // InsertAudit
	sqlstore.RoutineSQL // the rest
}

// LockRoutineSync takes an advisory lock per schema: syncs (replicas
// starting together) and creates serialize on it, so they never both insert
// a routine nor lock routines in different orders.
func (t routineTx) LockRoutineSync(ctx context.Context) error {
	_, err := t.tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, lockClassRoutineSync, keyHash(t.db.opts.Schema))
	return err
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
