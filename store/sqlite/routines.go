package sqlite

import (
	"context"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

// This file implements core.RoutineStore.

var _ core.RoutineStore = (*DB)(nil)
var _ core.Outbox = (*DB)(nil)
var _ sqlstore.RoutineDriver = routineDriver{}

// routineDriver runs the routine rules of sqlstore.Routines on db.
type routineDriver struct{ db *DB }

func (d routineDriver) RoutineTx(ctx context.Context, fn func(sqlstore.RoutineTx) error) error {
	return d.db.tx(ctx, func(tx *txn) error {
		return fn(routineTx{runTx{db: d.db, tx: tx}, sqlstore.RoutineSQL{C: conn{tx}, D: dialect}})
	})
}

func (d routineDriver) Now() time.Time { return d.db.opts.Clock.Now() }
func (d routineDriver) Created()       { d.db.wake() }

// routineTx is sqlstore.RoutineTx on a SQLite transaction. SQLite has one
// writer, so a read in a write transaction holds what it read until commit.
type routineTx struct {
	runTx               // CreateRuns (without jobs), Enqueue, InsertAudit
	sqlstore.RoutineSQL // the rest
}

func (t routineTx) LockRoutineSync(context.Context) error { return nil }

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
