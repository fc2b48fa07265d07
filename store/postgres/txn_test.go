package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/postgres"
)

// TestFailedTransaction: a statement that fails inside a transaction,
// whether its result was waited for or it was queued to go out later (with
// the next statement or with COMMIT), fails the whole transaction with its
// error, wrapped as the operation wraps it; nothing of the transaction
// stays, and the connection (the pool has only one) serves the next call.
func TestFailedTransaction(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	t0 := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	// claimed creates a run in a new session and claims it for w1.
	claimed := func(t *testing.T, db *postgres.DB) core.Run {
		t.Helper()
		sid := core.NewID("ses")
		r, err := db.CreateRun(t.Context(), tripRun(sid, "hi", "", t0))
		if err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
		if r, err = db.ClaimRun(t.Context(), r.ID, "w1", t0, t0.Add(time.Hour), nil); err != nil {
			t.Fatalf("ClaimRun: %v", err)
		}
		return r
	}
	duplicate := func(t *testing.T, err error, prefix string) {
		t.Helper()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
			t.Fatalf("err = %v, want a unique violation", err)
		}
		if !strings.HasPrefix(err.Error(), prefix) {
			t.Errorf("err = %q, want it to start with %q", err, prefix)
		}
	}
	tests := []struct {
		name string
		// fail makes a transaction fail and checks the error and that
		// nothing of it stayed.
		fail func(t *testing.T, db *postgres.DB)
	}{
		{"queued enqueue of a job id the queue holds", func(t *testing.T, db *postgres.DB) {
			ctx := t.Context()
			j := core.Job{ID: "job_1", Kind: "deliver", Payload: json.RawMessage(`{}`)}
			if err := db.Enqueue(ctx, j); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			duplicate(t, db.Enqueue(ctx, j), "enqueue deliver job: ")
			if n, err := db.Depth(ctx); err != nil || n != 1 {
				t.Errorf("Depth = %d, %v; want 1", n, err)
			}
		}},
		{"queued statement fails the finish, whose writes go", func(t *testing.T, db *postgres.DB) {
			ctx := t.Context()
			r := claimed(t, db)
			drain(t, db)
			if err := db.Enqueue(ctx, core.Job{ID: "job_taken", Kind: "deliver", Payload: json.RawMessage(`{}`)}); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			_, err := db.FinishRun(ctx, r.ID, "w1", core.Finish{Status: core.RunCompleted, At: t0,
				Events: tripStatus(core.RunCompleted), Jobs: []core.Job{{ID: "job_taken", Kind: "deliver"}}})
			duplicate(t, err, "finish run "+r.ID+": enqueue deliver job: ")
			if got, err := db.GetRun(ctx, r.ID); err != nil || got.Status != core.RunRunning || got.LastSeq != r.LastSeq {
				t.Errorf("run after the failed finish = %s at seq %d, %v; want running at seq %d", got.Status, got.LastSeq, err, r.LastSeq)
			}
			if evs, err := db.Events(ctx, r.ID, r.LastSeq, 0); err != nil || len(evs) != 0 {
				t.Errorf("events after the failed finish = %v, %v; want none", evs, err)
			}
			if _, err := db.FinishRun(ctx, r.ID, "w1", core.Finish{Status: core.RunCompleted, At: t0}); err != nil {
				t.Errorf("FinishRun again: %v", err)
			}
		}},
		{"statement sent with COMMIT stops it", func(t *testing.T, db *postgres.DB) {
			ctx := t.Context()
			r := claimed(t, db)
			nr := tripRun(core.NewID("ses"), "again", "", t0)
			nr.Run.ID = r.ID
			_, err := db.CreateRun(ctx, nr)
			duplicate(t, err, "create run "+r.ID+": insert run: ")
			if _, err := db.GetSession(ctx, nr.Session.ID); !errors.Is(err, core.ErrNotFound) {
				t.Errorf("GetSession of the failed CreateRun's new session: %v, want ErrNotFound", err)
			}
		}},
		{"queued statement keeps the context it was queued in", func(t *testing.T, db *postgres.DB) {
			ctx := t.Context()
			r := claimed(t, db)
			routine, err := db.CreateRoutine(ctx, core.RoutineDef{ID: "nightly", AgentID: "agent", Schedule: "@daily",
				Input: "go", Enabled: true}, t0)
			if err != nil {
				t.Fatalf("CreateRoutine: %v", err)
			}
			nr := tripRun(core.NewID("ses"), "go", "", t0)
			nr.Run.ID, nr.Run.Type, nr.Run.RoutineID = r.ID, core.RunTypeRoutine, routine.ID
			_, err = db.FireRoutine(ctx, core.RoutineFire{RoutineID: routine.ID, Manual: true, At: t0,
				Runs: []core.FireRun{{Kind: core.FireManual, Run: nr}}})
			duplicate(t, err, "fire routine nightly: create run "+r.ID+": insert run: ")
			if h, err := db.RoutineHistory(ctx, routine.ID, core.ListOptions{}); err != nil || len(h.Items) != 0 {
				t.Errorf("routine history after the failed fire = %v, %v; want none", h.Items, err)
			}
		}},
		{"queued read fails the transaction", func(t *testing.T, db *postgres.DB) {
			_, err := db.FinishRun(t.Context(), "run_none", "w1", core.Finish{Status: core.RunCompleted, At: t0})
			if !errors.Is(err, core.ErrNotFound) || err.Error() != "finish run run_none: not found" {
				t.Errorf("FinishRun of no run: %v, want finish run run_none: not found", err)
			}
		}},
		{"refused check rolls back what was read ahead", func(t *testing.T, db *postgres.DB) {
			ctx := t.Context()
			r := claimed(t, db)
			if _, err := db.FinishRun(ctx, r.ID, "w2", core.Finish{Status: core.RunCompleted, At: t0}); !errors.Is(err, core.ErrClaimLost) {
				t.Fatalf("FinishRun by another owner: %v, want ErrClaimLost", err)
			}
			if got, err := db.GetRun(ctx, r.ID); err != nil || got.Status != core.RunRunning {
				t.Errorf("run after the refused finish = %s, %v; want running", got.Status, err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, url, newSchema(t, url), postgres.Options{MaxConns: 1})
			tc.fail(t, db)
			// The same connection serves the next transaction.
			if _, err := db.CreateRun(t.Context(), tripRun(core.NewID("ses"), "next", "", t0)); err != nil {
				t.Fatalf("CreateRun after the failure: %v", err)
			}
			if n := db.NewConns(); n != 1 {
				t.Errorf("the pool opened %d connections, want 1: the failed transaction's was not fit for reuse", n)
			}
		})
	}
}

// TestCancelledTransaction: a transaction whose context ends while its
// last round trip (the one that carries COMMIT) waits for a lock commits
// nothing, though the server had all of it, and fails with the context's
// error; the pool goes on with a new connection.
func TestCancelledTransaction(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := newSchema(t, url)
	db := openDB(t, withApplicationName(url, schema), schema, postgres.Options{MaxConns: 1})
	t0 := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	admin, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	nr := tripRun(core.NewID("ses"), "hi", "", t0)
	class, objid := postgres.JobKeyLock(core.RunJobFor(nr.Run.ID).Key)
	if _, err := admin.Exec(t.Context(), `SELECT pg_advisory_lock($1, $2)`, class, objid); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	created := make(chan error, 1)
	go func() {
		_, err := db.CreateRun(ctx, nr)
		created <- err
	}()
	// Wait until CreateRun waits for the job key, in its last round trip.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for waiting := 0; waiting == 0; {
		if err := admin.QueryRow(t.Context(), `SELECT COUNT(*) FROM pg_stat_activity
			WHERE application_name = $1 AND cardinality(pg_blocking_pids(pid)) > 0`, schema).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-created:
			t.Fatalf("CreateRun returned (%v) while its job key was locked", err)
		case <-tick.C:
		}
	}
	cancel()
	if err := <-created; !errors.Is(err, context.Canceled) {
		t.Fatalf("CreateRun cancelled while waiting for its job key: %v, want context.Canceled", err)
	}
	// Were the COMMIT left behind, it would run now.
	if _, err := admin.Exec(t.Context(), `SELECT pg_advisory_unlock($1, $2)`, class, objid); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateRun(t.Context(), tripRun(core.NewID("ses"), "next", "", t0)); err != nil {
		t.Errorf("CreateRun after the cancelled one: %v", err)
	}
	if _, err := db.GetRun(t.Context(), nr.Run.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("GetRun of the cancelled CreateRun's run: %v, want ErrNotFound", err)
	}
	if n := db.NewConns(); n != 2 {
		t.Errorf("the pool opened %d connections, want 2 (the cancelled transaction's is closed)", n)
	}
}

// TestClaimLeavesLaterCommitsDurable: a run's claim commits without waiting
// for its WAL to be flushed (it is a lease), but only the claim: the
// connection (the pool has only one) goes on to the run's append and finish
// with the server's synchronous_commit, so their commits wait for the disk.
func TestClaimLeavesLaterCommitsDurable(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	db := openDB(t, url, newSchema(t, url), postgres.Options{MaxConns: 1})
	ctx := t.Context()
	t0 := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	before, err := db.Setting(ctx, "synchronous_commit")
	if err != nil {
		t.Fatal(err)
	}
	run, err := db.CreateRun(ctx, tripRun(core.NewID("ses"), "hi", "", t0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.StartRun(ctx, core.Start{ID: run.ID, Owner: "w1", Now: t0, Until: t0.Add(time.Minute),
		Events: tripStatus(core.RunRunning)}); err != nil {
		t.Fatal(err)
	}
	after, err := db.Setting(ctx, "synchronous_commit")
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("synchronous_commit after a claim = %q, want the server's %q: the run's later commits would not wait for the disk", after, before)
	}
	if _, err := db.FinishRun(ctx, run.ID, "w1", core.Finish{Status: core.RunCompleted, Output: "done", At: t0,
		Events: tripStatus(core.RunCompleted)}); err != nil {
		t.Fatalf("FinishRun by the claim's holder: %v", err)
	}
}
