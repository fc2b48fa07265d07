package postgres_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/postgres"
	"github.com/agentgate/agentgate/store/routinetest"
)

func TestRoutines(t *testing.T) {
	url := testURL(t)
	routinetest.Run(t, func(t *testing.T) routinetest.Harness {
		// MaxConns: the racing schedulers of the suite run on separate connections.
		db := openDB(t, url, newSchema(t, url), postgres.Options{MaxConns: 8})
		return routinetest.Harness{Routines: db, Store: db, Queue: db}
	})
}

// replicas opens n stores on one fresh schema, as n gateway processes
// sharing a database would.
func replicas(t *testing.T, n int) []*postgres.DB {
	t.Helper()
	url := testURL(t)
	schema := newSchema(t, url)
	dbs := make([]*postgres.DB, n)
	for i := range dbs {
		dbs[i] = openDB(t, url, schema, postgres.Options{MaxConns: 4})
	}
	return dbs
}

var rt0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func routineDef(id string, maxFailures int) core.RoutineDef {
	return core.RoutineDef{ID: id, AgentID: "ops", Schedule: "@every 1h", Timezone: "UTC", Input: "report",
		DeliverTo: "none", Enabled: true, Missed: core.MissedSkip, MaxFailures: maxFailures, NextFireAt: rt0.Add(time.Hour)}
}

func routineFire(id string, manual bool, due time.Time) core.RoutineFire {
	sid := "ops:routine:" + id
	fr := core.FireRun{Kind: core.FireScheduled, DueAt: due, Run: core.NewRun{
		Session: core.Session{ID: sid, AgentID: "ops"},
		Run: core.Run{ID: core.NewID("run"), SessionID: sid, AgentID: "ops", Type: core.RunTypeRoutine,
			RoutineID: id, CreatedAt: due},
	}}
	f := core.RoutineFire{RoutineID: id, Expected: due, Next: due.Add(time.Hour), At: due, Runs: []core.FireRun{fr}}
	if manual {
		f.Manual, f.Runs[0].Kind, f.Runs[0].DueAt = true, core.FireManual, time.Time{}
	}
	return f
}

// TestSyncRoutinesReplicas: replicas that start together sync the same
// routines (listed in different orders) at once; every sync succeeds and
// the routines end as defined.
func TestSyncRoutinesReplicas(t *testing.T) {
	t.Parallel()
	dbs := replicas(t, 4)
	var defs []core.RoutineDef
	for i := range 10 {
		defs = append(defs, routineDef(fmt.Sprintf("r%02d", i), 3))
	}
	for round := range 3 {
		var wg sync.WaitGroup
		for i, db := range dbs {
			mine := defs[:len(defs)-round] // later rounds remove routines
			if i%2 == 1 {
				mine = make([]core.RoutineDef, len(mine))
				for j, d := range defs[:len(defs)-round] {
					mine[len(mine)-1-j] = d
				}
			}
			wg.Go(func() {
				if err := db.SyncRoutines(t.Context(), mine, rt0.Add(time.Duration(round)*time.Minute)); err != nil {
					t.Errorf("round %d: replica %d: SyncRoutines: %v", round, i, err)
				}
			})
		}
		wg.Wait()
		p, err := dbs[0].ListRoutines(t.Context(), core.RoutineFilter{})
		if err != nil {
			t.Fatalf("ListRoutines: %v", err)
		}
		if want := len(defs) - round; len(p.Items) != want {
			t.Fatalf("round %d: %d routines, want %d", round, len(p.Items), want)
		}
		for _, r := range p.Items {
			if !r.Enabled || r.NextFireAt == nil || !r.NextFireAt.Equal(rt0.Add(time.Hour)) {
				t.Errorf("round %d: routine %s: enabled=%t next=%v, want enabled at +1h", round, r.ID, r.Enabled, r.NextFireAt)
			}
		}
	}
}

// TestFireRoutineReplicas: schedulers of several replicas fire the same due
// time, while people trigger manual runs; each due time fires once and
// every manual run is created.
func TestFireRoutineReplicas(t *testing.T) {
	t.Parallel()
	dbs := replicas(t, 4)
	ctx := t.Context()
	if err := dbs[0].SyncRoutines(ctx, []core.RoutineDef{routineDef("r", 0)}, rt0); err != nil {
		t.Fatal(err)
	}
	const rounds = 5
	for round := range rounds {
		due := rt0.Add(time.Duration(round+1) * time.Hour)
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i, db := range dbs {
			wg.Go(func() {
				_, err := db.FireRoutine(ctx, routineFire("r", false, due))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case !errors.Is(err, core.ErrFireConflict):
					t.Errorf("replica %d: scheduled fire: %v", i, err)
				}
			})
			wg.Go(func() {
				if _, err := db.FireRoutine(ctx, routineFire("r", true, due)); err != nil {
					t.Errorf("replica %d: manual fire: %v", i, err)
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("round %d: %d replicas fired due time %v, want 1", round, won, due)
		}
	}
	p, err := dbs[0].RoutineHistory(ctx, "r", core.ListOptions{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[core.FireKind]int{}
	for _, e := range p.Items {
		counts[e.Kind]++
	}
	if counts[core.FireScheduled] != rounds || counts[core.FireManual] != rounds*len(dbs) {
		t.Errorf("history = %v, want %d scheduled and %d manual", counts, rounds, rounds*len(dbs))
	}
	runs, err := dbs[0].ListRuns(ctx, core.RunFilter{SessionID: "ops:routine:r", ListOptions: core.ListOptions{Limit: 500}})
	if err != nil || len(runs.Items) != len(p.Items) {
		t.Errorf("runs = %d (%v), want one per history entry (%d)", len(runs.Items), err, len(p.Items))
	}
	if r, err := dbs[0].GetRoutine(ctx, "r"); err != nil || r.NextFireAt == nil || !r.NextFireAt.Equal(rt0.Add((rounds+1)*time.Hour)) {
		t.Errorf("routine after the rounds: %+v, %v; want next fire at +%dh", r, err, rounds+1)
	}
}

// TestSettleRoutineRunConcurrently settles each failed run of a routine
// from several replicas at once: every run counts once against the budget,
// the run that exhausts it (and only that one) disables the routine, and
// every call reports the entry as recorded.
func TestSettleRoutineRunConcurrently(t *testing.T) {
	t.Parallel()
	dbs := replicas(t, 4)
	ctx := t.Context()
	const budget = 3
	if err := dbs[0].SyncRoutines(ctx, []core.RoutineDef{routineDef("r", budget)}, rt0); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range budget + 2 { // two more than the budget: settled after it disabled the routine
		runs, err := dbs[0].FireRoutine(ctx, routineFire("r", true, rt0))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, runs[0].ID)
	}
	got := make([][]core.RoutineEntry, len(ids))
	for i := range got {
		got[i] = make([]core.RoutineEntry, len(dbs))
	}
	var wg sync.WaitGroup
	for i, id := range ids {
		for j, db := range dbs {
			wg.Go(func() {
				e, err := db.SettleRoutineRun(ctx, core.RoutineSettle{RunID: id, Status: core.RunFailed, At: rt0,
					DisableReason: "too many failures"})
				if err != nil {
					t.Errorf("replica %d: settle %s: %v", j, id, err)
				}
				got[i][j] = e
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	r, err := dbs[0].GetRoutine(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if r.ConsecutiveFailures != budget || r.Enabled || r.DisabledReason != "too many failures" {
		t.Errorf("routine: failures=%d enabled=%t reason=%q; want %d failures, disabled by the budget",
			r.ConsecutiveFailures, r.Enabled, r.DisabledReason, budget)
	}
	p, err := dbs[0].RoutineHistory(ctx, "r", core.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	disabling := 0
	for i, e := range p.Items {
		if e.DisabledRoutine {
			disabling++
		}
		for j, g := range got[i] {
			if g.RunID != e.RunID || g.DisabledRoutine != e.DisabledRoutine {
				t.Errorf("replica %d settled run %s: entry %+v, want it as recorded: %+v", j, ids[i], g, e)
			}
		}
	}
	if disabling != 1 {
		t.Errorf("%d entries disabled the routine, want 1", disabling)
	}
}
