package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/postgres"
	"github.com/agentgate/agentgate/store/storetest"
)

// testURL returns the database the tests use, or skips the test.
func testURL(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv("AGENTGATE_TEST_DATABASE_URL")
	if url == "" {
		tb.Skip("AGENTGATE_TEST_DATABASE_URL is not set: set it to a PostgreSQL database the tests may create " +
			"schemas in (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the PostgreSQL store tests")
	}
	return url
}

// schemaName returns a fresh schema name; dropSchema drops it (and all it
// holds) when the test ends.
func schemaName(tb testing.TB, url string) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "agt_" + hex.EncodeToString(b[:])
	tb.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := adminExec(ctx, url, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`); err != nil {
			tb.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// newSchema creates a fresh, empty schema for one test.
func newSchema(tb testing.TB, url string) string {
	tb.Helper()
	name := schemaName(tb, url)
	if err := adminExec(tb.Context(), url, `CREATE SCHEMA `+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("create schema %s: %v", name, err)
	}
	return name
}

func adminExec(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// quiet drops the migration log lines.
var quiet = slog.New(slog.DiscardHandler)

// openDB opens the store in schema and closes it when the test ends. Pools
// are small so that parallel tests stay well within max_connections.
func openDB(tb testing.TB, url, schema string, opts postgres.Options) *postgres.DB {
	tb.Helper()
	opts.Schema = schema
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = 4
	}
	db, err := postgres.Open(tb.Context(), url, opts)
	if err != nil {
		tb.Fatalf("open schema %s: %v", schema, err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func TestStore(t *testing.T) {
	url := testURL(t)
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		db := openDB(t, url, newSchema(t, url), postgres.Options{})
		return storetest.Harness{Store: db, Queue: db}
	})
}

func TestBlobs(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	storetest.Blobs(t, openDB(t, url, newSchema(t, url), postgres.Options{}))
}

// The database's clock, read between two local times: on this host, it is
// between them (give or take PostgreSQL's microseconds).
func TestClock(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	db := openDB(t, url, newSchema(t, url), postgres.Options{})
	before, now, after, err := db.Clock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if now.Before(before.Add(-time.Millisecond)) || now.After(after.Add(time.Millisecond)) {
		t.Errorf("the database's clock read %s, not between %s and %s", now, before, after)
	}
}

// TestCreateRunWhileFinishingHeads runs one session the way the engine does
// while runs keep arriving: creators add runs concurrently, and workers take
// run jobs, drop the job of a run that is not the session head (finishing
// the head enqueues the next run) and otherwise claim and finish the run. A
// run created while its predecessor finishes must still get a job, or it is
// stranded and the session never drains.
func TestCreateRunWhileFinishingHeads(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	db := openDB(t, url, newSchema(t, url), postgres.Options{MaxConns: 16, PollInterval: 50 * time.Millisecond})
	const (
		creators   = 8
		perCreator = 15
		workers    = 4
		total      = creators * perCreator
	)
	sid := core.NewID("ses")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	var finished atomic.Int64
	// advance is the engine's step for one run job.
	advance := func(owner, id string) error {
		r, err := db.GetRun(ctx, id)
		if err != nil {
			return err
		}
		if r.Status.Terminal() {
			return nil
		}
		head, err := db.SessionHead(ctx, r.SessionID)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return err
		}
		if head.ID != id {
			return nil // not its turn: finishing the head enqueues it
		}
		now := time.Now()
		if _, err := db.ClaimRun(ctx, id, owner, now, now.Add(time.Minute), nil); err != nil {
			if errors.Is(err, core.ErrClaimed) || errors.Is(err, core.ErrRunFinished) {
				return nil
			}
			return err
		}
		if _, err := db.FinishRun(ctx, id, owner, core.Finish{Status: core.RunCompleted, At: time.Now()}); err != nil {
			return err
		}
		if finished.Add(1) == total {
			cancel()
		}
		return nil
	}

	var wg sync.WaitGroup
	for c := range creators {
		wg.Go(func() {
			for i := range perCreator {
				_, err := db.CreateRun(ctx, core.NewRun{
					Session: core.Session{ID: sid, AgentID: "agent"},
					Run: core.Run{ID: core.NewID("run"), SessionID: sid, AgentID: "agent", Type: core.RunTypeChat,
						Input: fmt.Sprintf("creator %d run %d", c, i)},
				})
				if err != nil {
					t.Errorf("creator %d: CreateRun: %v", c, err)
					return
				}
			}
		})
	}
	for w := range workers {
		wg.Go(func() {
			owner := fmt.Sprint("w", w)
			for {
				j, err := db.Dequeue(ctx, owner, time.Minute)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("%s: Dequeue: %v", owner, err)
					}
					return
				}
				var p core.RunJob
				if err := json.Unmarshal(j.Payload, &p); err != nil {
					t.Errorf("%s: job payload %s: %v", owner, j.Payload, err)
					return
				}
				if err := advance(owner, p.RunID); err != nil {
					if ctx.Err() == nil {
						t.Errorf("%s: advance run %s: %v", owner, p.RunID, err)
					}
					return
				}
				if err := db.Ack(ctx, j); err != nil && ctx.Err() == nil {
					t.Errorf("%s: Ack: %v", owner, err)
				}
			}
		})
	}
	wg.Wait()

	if n := finished.Load(); n != total {
		counts, err := db.CountRuns(context.Background())
		depth, derr := db.Depth(context.Background())
		t.Fatalf("%d of %d runs finished within the deadline: runs were stranded without a job "+
			"(run counts %v, %v; queue depth %d, %v)", n, total, counts, err, depth, derr)
	}
	counts, err := db.CountRuns(context.Background())
	if err != nil {
		t.Fatalf("CountRuns: %v", err)
	}
	if counts[core.RunCompleted] != total {
		t.Errorf("completed runs = %d, want %d (counts %v)", counts[core.RunCompleted], total, counts)
	}
}

// TestDecideApprovalWhileCancelling races decisions against CancelRun on
// the same runs: both lock the run before the approval, so neither
// deadlocks, and each approval ends decided exactly once.
func TestDecideApprovalWhileCancelling(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	db := openDB(t, url, newSchema(t, url), postgres.Options{MaxConns: 8})
	ctx := t.Context()
	t0 := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	const runs = 20
	type paused struct{ run, approval string }
	var ps []paused
	for range runs {
		sid := core.NewID("ses")
		r, err := db.CreateRun(ctx, core.NewRun{
			Session: core.Session{ID: sid, AgentID: "agent"},
			Run:     core.Run{ID: core.NewID("run"), SessionID: sid, AgentID: "agent", Type: core.RunTypeChat, CreatedAt: t0},
		})
		if err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
		if _, err := db.ClaimRun(ctx, r.ID, "w1", t0, t0.Add(time.Minute), nil); err != nil {
			t.Fatalf("ClaimRun: %v", err)
		}
		a := core.Approval{ID: core.NewID("apr"), ToolCallID: "call_1", Tool: "deploy", Arguments: json.RawMessage(`{}`),
			ExpiresAt: t0.Add(time.Hour)}
		if _, err := db.PauseRun(ctx, r.ID, "w1", a, nil); err != nil {
			t.Fatalf("PauseRun: %v", err)
		}
		ps = append(ps, paused{r.ID, a.ID})
	}
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() {
			_, err := db.DecideApproval(ctx, p.approval, core.Decision{Status: core.ApprovalApproved, By: "boss", At: t0})
			var np *core.NotPendingError
			if err != nil && !errors.As(err, &np) {
				t.Errorf("DecideApproval(%s): %v", p.approval, err)
			}
		})
		wg.Go(func() {
			_, err := db.CancelRun(ctx, p.run, core.Cancel{By: "u1", At: t0})
			if err != nil {
				t.Errorf("CancelRun(%s): %v", p.run, err)
			}
		})
	}
	wg.Wait()
	for _, p := range ps {
		evs, err := db.Events(ctx, p.run, 0, 0)
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		decided := 0
		for _, e := range evs {
			if e.Type == core.EventApprovalDecided {
				decided++
			}
		}
		if decided != 1 {
			t.Errorf("run %s: %d approval_decided events, want 1", p.run, decided)
		}
		if r, err := db.GetRun(ctx, p.run); err != nil || r.Status != core.RunCancelled {
			t.Errorf("run %s = %s, %v; want cancelled", p.run, r.Status, err)
		}
	}
}

// withApplicationName adds application_name to a URL or key=value DSN, so
// pg_stat_activity tells this test's connections from others'.
func withApplicationName(url, name string) string {
	switch {
	case !strings.Contains(url, "://"):
		return url + " application_name=" + name
	case strings.Contains(url, "?"):
		return url + "&application_name=" + name
	}
	return url + "?application_name=" + name
}

// TestCloseRunWaitsForCreateRunInFlight stops a CreateRun inside its
// transaction (after it inserted the run, before it commits: the test holds
// the advisory lock its enqueue takes) and checks that FinishRun or
// CancelRun of the session's head waits for it, and then enqueues the new
// run. Without the session lock the closing transaction would not see the
// uncommitted run, and a run whose own job a worker had already dropped
// (not the head yet) would be stranded.
func TestCloseRunWaitsForCreateRunInFlight(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	t0 := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		close func(ctx context.Context, db *postgres.DB, id string) error
	}{
		{"FinishRun", func(ctx context.Context, db *postgres.DB, id string) error {
			_, err := db.FinishRun(ctx, id, "w1", core.Finish{Status: core.RunCompleted, At: t0})
			return err
		}},
		{"CancelRun", func(ctx context.Context, db *postgres.DB, id string) error {
			_, err := db.CancelRun(ctx, id, core.Cancel{By: "u1", At: t0})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			schema := newSchema(t, url)
			db := openDB(t, withApplicationName(url, schema), schema, postgres.Options{MaxConns: 4})
			sid := core.NewID("ses")
			newRun := func() core.NewRun {
				return core.NewRun{
					Session: core.Session{ID: sid, AgentID: "agent"},
					Run:     core.Run{ID: core.NewID("run"), SessionID: sid, AgentID: "agent", Type: core.RunTypeChat, CreatedAt: t0},
				}
			}
			head, err := db.CreateRun(ctx, newRun())
			if err != nil {
				t.Fatalf("CreateRun: %v", err)
			}
			if _, err := db.ClaimRun(ctx, head.ID, "w1", t0, t0.Add(time.Hour), nil); err != nil {
				t.Fatalf("ClaimRun: %v", err)
			}
			drain(t, db)

			admin, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close(context.Background())
			next := newRun()
			class, objid := postgres.JobKeyLock(core.RunJobFor(next.Run.ID).Key)
			if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, class, objid); err != nil {
				t.Fatal(err)
			}
			// blocked waits until n of this test's connections wait for a lock.
			blocked := func(n int, done <-chan error) {
				t.Helper()
				tick := time.NewTicker(5 * time.Millisecond)
				defer tick.Stop()
				deadline := time.After(10 * time.Second)
				for {
					var waiting int
					if err := admin.QueryRow(ctx, `SELECT COUNT(*) FROM pg_stat_activity
						WHERE application_name = $1 AND cardinality(pg_blocking_pids(pid)) > 0`, schema).Scan(&waiting); err != nil {
						t.Fatal(err)
					}
					if waiting >= n {
						return
					}
					select {
					case err := <-done:
						t.Fatalf("%s returned (%v) while a CreateRun of the session was in flight: it must wait for it", tc.name, err)
					case <-deadline:
						t.Fatalf("%d connections blocked after 10s, want %d", waiting, n)
					case <-tick.C:
					}
				}
			}

			created := make(chan error, 1)
			go func() {
				_, err := db.CreateRun(ctx, next)
				created <- err
			}()
			blocked(1, created) // CreateRun holds the session and waits at its enqueue
			closed := make(chan error, 1)
			go func() { closed <- tc.close(ctx, db, head.ID) }()
			blocked(2, closed) // the close waits for the session
			if _, err := admin.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, class, objid); err != nil {
				t.Fatal(err)
			}
			if err := <-created; err != nil {
				t.Fatalf("CreateRun: %v", err)
			}
			if err := <-closed; err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			// The new run's own job and the one the close enqueued coalesce.
			if got := drain(t, db); len(got) != 1 || got[0] != next.Run.ID {
				t.Errorf("due run jobs = %v, want [%s]", got, next.Run.ID)
			}
		})
	}
}

// drain acks every due job and returns the run ids of the run jobs.
func drain(t *testing.T, db *postgres.DB) []string {
	t.Helper()
	var ids []string
	for {
		j, ok, err := db.TryDequeue(t.Context(), "drain", time.Minute)
		if err != nil {
			t.Fatalf("TryDequeue: %v", err)
		}
		if !ok {
			return ids
		}
		var p core.RunJob
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			t.Fatalf("payload %s: %v", j.Payload, err)
		}
		ids = append(ids, p.RunID)
		if err := db.Ack(t.Context(), j); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
}

// TestFinishRunEnqueuesJobs: the jobs a finished run calls for commit with
// it, and a refused finish enqueues nothing.
func TestFinishRunEnqueuesJobs(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	db := openDB(t, url, newSchema(t, url), postgres.Options{})
	ctx := t.Context()
	t0 := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	sid := core.NewID("ses")
	r, err := db.CreateRun(ctx, core.NewRun{
		Session: core.Session{ID: sid, AgentID: "agent"},
		Run:     core.Run{ID: core.NewID("run"), SessionID: sid, AgentID: "agent", Type: core.RunTypeRoutine, CreatedAt: t0},
	})
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	if _, err := db.ClaimRun(ctx, r.ID, "w1", t0, t0.Add(time.Hour), nil); err != nil {
		t.Fatalf("ClaimRun: %v", err)
	}
	drain(t, db)
	f := core.Finish{Status: core.RunCompleted, At: t0, Jobs: []core.Job{
		{Kind: "deliver", Key: "deliver:" + r.ID, Payload: json.RawMessage(`{"run_id":"` + r.ID + `"}`)},
	}}
	if _, err := db.FinishRun(ctx, r.ID, "w2", f); !errors.Is(err, core.ErrClaimLost) {
		t.Fatalf("FinishRun by another owner: err = %v, want ErrClaimLost", err)
	}
	if n, err := db.Depth(ctx); err != nil || n != 0 {
		t.Fatalf("Depth after a refused finish = %d, %v; want 0", n, err)
	}
	if _, err := db.FinishRun(ctx, r.ID, "w1", f); err != nil {
		t.Fatalf("FinishRun: %v", err)
	}
	j, ok, err := db.TryDequeue(ctx, "c1", time.Minute)
	if err != nil || !ok || j.Kind != "deliver" || j.Key != "deliver:"+r.ID {
		t.Fatalf("TryDequeue = %+v, %v, %v; want the deliver job", j, ok, err)
	}
}
