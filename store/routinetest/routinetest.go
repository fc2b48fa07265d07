// Package routinetest is the conformance suite of core.RoutineStore: every
// store implementation runs it (see Run), so the routine scheduler behaves
// the same on SQLite and PostgreSQL — above all, a due time fires once however
// many schedulers race for it.
package routinetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Harness is what a store implementation hands the suite for one test.
type Harness struct {
	// Routines is the store under test. It must be empty.
	Routines core.RoutineStore
	// Store is the same store's core.Store (runs created by fires).
	Store core.Store
	// Queue is the queue the store enqueues its jobs into (transactionally).
	// It must be empty and run on the wall clock, so a job enqueued for
	// "now" is due at once.
	Queue core.Queue
}

// Run runs the suite. newStore is called once per subtest with that
// subtest's t and must return an isolated, empty harness (register any
// cleanup with t.Cleanup). Subtests run in parallel.
func Run(t *testing.T, newStore func(t *testing.T) Harness) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"SyncCreates", testSyncCreates},
		{"SyncEnabledPrecedence", testSyncEnabledPrecedence},
		{"SyncKeepsNextFireAt", testSyncKeepsNextFireAt},
		{"SyncDeletesRemoved", testSyncDeletesRemoved},
		{"Create", testCreate},
		{"CreateConcurrent", testCreateConcurrent},
		{"SyncLeavesAPIRoutines", testSyncLeavesAPIRoutines},
		{"SyncKeepsAPIEdits", testSyncKeepsAPIEdits},
		{"Update", testUpdate},
		{"Callers", testCallers},
		{"Delete", testDelete},
		{"List", testList},
		{"DueRoutines", testDueRoutines},
		{"NextRoutineDue", testNextRoutineDue},
		{"Fire", testFire},
		{"FireConflict", testFireConflict},
		{"FireConcurrent", testFireConcurrent},
		{"FireSkipRecordsMissed", testFireSkipRecordsMissed},
		{"FireManual", testFireManual},
		{"FireManualDedupe", testFireManualDedupe},
		{"SetEnabled", testSetEnabled},
		{"SettleFailureBudget", testSettleFailureBudget},
		{"SettleDisabledRoutine", testSettleDisabledRoutine},
		{"History", testHistory},
		{"FinishRunEnqueuesJobs", testFinishRunEnqueuesJobs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// t0 is the suite's epoch; whole seconds so every store keeps it exactly.
var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

const agent = "ops"

func def(id string, enabled bool, next time.Time) core.RoutineDef {
	return core.RoutineDef{ID: id, AgentID: agent, Schedule: "@every 1h", Timezone: "UTC", Input: "report on " + id,
		DeliverTo: "none", Enabled: enabled, Missed: core.MissedSkip, MaxFailures: 3, NextFireAt: next}
}

func syncDefs(t *testing.T, h Harness, now time.Time, defs ...core.RoutineDef) {
	t.Helper()
	if err := h.Routines.SyncRoutines(t.Context(), defs, now); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

func get(t *testing.T, h Harness, id string) core.Routine {
	t.Helper()
	r, err := h.Routines.GetRoutine(t.Context(), id)
	if err != nil {
		t.Fatalf("get routine %s: %v", id, err)
	}
	return r
}

func history(t *testing.T, h Harness, id string) []core.RoutineEntry {
	t.Helper()
	var out []core.RoutineEntry
	cursor := ""
	for {
		p, err := h.Routines.RoutineHistory(t.Context(), id, core.ListOptions{Cursor: cursor, Limit: 2})
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		out = append(out, p.Items...)
		if cursor = p.NextCursor; cursor == "" {
			return out
		}
	}
}

// newRun builds the run of one fire of routine id.
func newRun(id string, created time.Time) core.NewRun {
	sid := agent + ":routine:" + id
	ev := core.NewEvent(core.EventUserMessage, core.UserMessage{Text: "report on " + id, UserID: "routine:" + id})
	ev.CreatedAt = created
	return core.NewRun{
		Session: core.Session{ID: sid, AgentID: agent, UserID: "routine:" + id, CreatedAt: created, UpdatedAt: created},
		Run: core.Run{ID: core.NewID("run"), SessionID: sid, AgentID: agent, UserID: "routine:" + id,
			Type: core.RunTypeRoutine, RoutineID: id, Input: "report on " + id, CreatedAt: created},
		Events: []core.Event{ev},
	}
}

// scheduled is the fire of the due time `due` of an @every 1h routine.
func scheduled(id string, due time.Time) core.RoutineFire {
	return core.RoutineFire{RoutineID: id, Expected: due, Next: due.Add(time.Hour), At: due,
		Runs: []core.FireRun{{Kind: core.FireScheduled, DueAt: due, Run: newRun(id, due)}}}
}

func fire(t *testing.T, h Harness, f core.RoutineFire) []core.Run {
	t.Helper()
	runs, err := h.Routines.FireRoutine(t.Context(), f)
	if err != nil {
		t.Fatalf("fire %s: %v", f.RoutineID, err)
	}
	return runs
}

func manual(t *testing.T, h Harness, id string, now time.Time) core.Run {
	t.Helper()
	runs := fire(t, h, core.RoutineFire{RoutineID: id, Manual: true, At: now,
		Runs: []core.FireRun{{Kind: core.FireManual, Run: newRun(id, now)}}})
	if len(runs) != 1 {
		t.Fatalf("manual fire created %d runs, want 1", len(runs))
	}
	return runs[0]
}

// drainJobs takes every due job off the queue and returns "kind:key".
func drainJobs(t *testing.T, h Harness) []string {
	t.Helper()
	var out []string
	for {
		j, ok, err := h.Queue.TryDequeue(t.Context(), "suite", time.Minute)
		if err != nil {
			t.Fatalf("dequeue: %v", err)
		}
		if !ok {
			return out
		}
		out = append(out, j.Kind+":"+j.Key)
		if err := h.Queue.Ack(t.Context(), j); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
}

func sameTime(t *testing.T, what string, got *time.Time, want time.Time) {
	t.Helper()
	switch {
	case want.IsZero() && got != nil:
		t.Errorf("%s = %v, want none", what, *got)
	case !want.IsZero() && got == nil:
		t.Errorf("%s = none, want %v", what, want)
	case got != nil && !got.Equal(want):
		t.Errorf("%s = %v, want %v", what, *got, want)
	}
}

func kinds(es []core.RoutineEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, string(e.Kind))
	}
	return out
}

func testSyncCreates(t *testing.T, h Harness) {
	d := def("digest", true, at(time.Hour))
	d.Schedule, d.Timezone, d.DeliverTo, d.Missed, d.MaxFailures = "0 9 * * 1-5", "Europe/Berlin", "webhook:https://example.com/h", core.MissedOnce, 5
	syncDefs(t, h, t0, d, def("off", false, at(time.Hour)))
	r := get(t, h, "digest")
	if r.AgentID != agent || r.Schedule != d.Schedule || r.Timezone != d.Timezone || r.Input != d.Input ||
		r.DeliverTo != d.DeliverTo || r.Missed != core.MissedOnce || r.MaxFailures != 5 || !r.Enabled || !r.ConfigEnabled {
		t.Errorf("routine = %+v, want it as defined: %+v", r, d)
	}
	sameTime(t, "next_fire_at", r.NextFireAt, at(time.Hour))
	sameTime(t, "last_fire_at", r.LastFireAt, time.Time{})
	if r.ConsecutiveFailures != 0 || r.DisabledReason != "" {
		t.Errorf("new routine has failures %d, reason %q", r.ConsecutiveFailures, r.DisabledReason)
	}
	off := get(t, h, "off")
	if off.Enabled || off.ConfigEnabled {
		t.Errorf("routine defined with enabled: false is enabled=%t config_enabled=%t", off.Enabled, off.ConfigEnabled)
	}
	sameTime(t, "next_fire_at of a disabled routine", off.NextFireAt, time.Time{})
	_, err := h.Routines.GetRoutine(t.Context(), "nope")
	if !errors.Is(err, core.ErrNotFound) {
		t.Errorf("get unknown routine: %v, want ErrNotFound", err)
	}
}

func testSyncEnabledPrecedence(t *testing.T, h Harness) {
	ctx := t.Context()
	syncDefs(t, h, t0, def("r", true, at(time.Hour)))
	// A toggle through the API is stored...
	if _, err := h.Routines.SetRoutineEnabled(ctx, "r", core.RoutineToggle{Enabled: false, At: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// ...and wins over an unchanged file.
	syncDefs(t, h, at(2*time.Minute), def("r", true, at(time.Hour)))
	if r := get(t, h, "r"); r.Enabled {
		t.Fatalf("re-sync of an unchanged file re-enabled a routine disabled through the API")
	}
	// The file's value changes (true → false → true): the file wins each time.
	syncDefs(t, h, at(3*time.Minute), def("r", false, at(time.Hour)))
	if r := get(t, h, "r"); r.Enabled || r.ConfigEnabled {
		t.Fatalf("after the file says false: enabled=%t config_enabled=%t", r.Enabled, r.ConfigEnabled)
	}
	syncDefs(t, h, at(4*time.Minute), def("r", true, at(2*time.Hour)))
	r := get(t, h, "r")
	if !r.Enabled {
		t.Fatalf("the file switched enabled from false to true but the routine is disabled")
	}
	sameTime(t, "next_fire_at after the file enabled it", r.NextFireAt, at(2*time.Hour))
	// Enabled through the API while the file says false: stays on across syncs.
	syncDefs(t, h, at(5*time.Minute), def("r", false, at(2*time.Hour)))
	if _, err := h.Routines.SetRoutineEnabled(ctx, "r", core.RoutineToggle{Enabled: true, NextFireAt: at(3 * time.Hour), At: at(6 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	syncDefs(t, h, at(7*time.Minute), def("r", false, at(2*time.Hour)))
	r = get(t, h, "r")
	if !r.Enabled || r.ConfigEnabled {
		t.Fatalf("API enable with an unchanged file (false): enabled=%t config_enabled=%t, want true/false", r.Enabled, r.ConfigEnabled)
	}
	sameTime(t, "next_fire_at", r.NextFireAt, at(3*time.Hour))
}

func testSyncKeepsNextFireAt(t *testing.T, h Harness) {
	syncDefs(t, h, t0, def("r", true, at(time.Hour)))
	// A later sync (a restart after downtime) keeps the stored due time, so
	// the scheduler sees what was missed.
	syncDefs(t, h, at(5*time.Hour), def("r", true, at(6*time.Hour)))
	sameTime(t, "next_fire_at after an unchanged re-sync", get(t, h, "r").NextFireAt, at(time.Hour))
	// Input, delivery and policy changes keep it too.
	d := def("r", true, at(7*time.Hour))
	d.Input, d.DeliverTo, d.Missed = "new input", "slack:C1", core.MissedOnce
	syncDefs(t, h, at(6*time.Hour), d)
	r := get(t, h, "r")
	sameTime(t, "next_fire_at after an input change", r.NextFireAt, at(time.Hour))
	if r.Input != "new input" || r.DeliverTo != "slack:C1" || r.Missed != core.MissedOnce {
		t.Errorf("re-sync did not update the definition: %+v", r)
	}
	// A new schedule or timezone takes the new due time.
	d.Schedule = "@every 2h"
	d.NextFireAt = at(8 * time.Hour)
	syncDefs(t, h, at(6*time.Hour), d)
	sameTime(t, "next_fire_at after a schedule change", get(t, h, "r").NextFireAt, at(8*time.Hour))
	d.Timezone = "Europe/Berlin"
	d.NextFireAt = at(9 * time.Hour)
	syncDefs(t, h, at(6*time.Hour), d)
	sameTime(t, "next_fire_at after a timezone change", get(t, h, "r").NextFireAt, at(9*time.Hour))
}

func testSyncDeletesRemoved(t *testing.T, h Harness) {
	syncDefs(t, h, t0, def("a", true, at(time.Hour)), def("b", true, at(time.Hour)))
	manual(t, h, "b", at(time.Minute))
	syncDefs(t, h, at(2*time.Minute), def("a", true, at(time.Hour)))
	if _, err := h.Routines.GetRoutine(t.Context(), "b"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("routine removed from the file: get = %v, want ErrNotFound", err)
	}
	if got := history(t, h, "b"); len(got) != 1 {
		t.Errorf("history of a removed routine has %d entries, want the 1 it had", len(got))
	}
	get(t, h, "a")
	syncDefs(t, h, at(3*time.Minute))
	if _, err := h.Routines.GetRoutine(t.Context(), "a"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("sync with no routines kept routine a: %v", err)
	}
}

func testList(t *testing.T, h Harness) {
	syncDefs(t, h, t0, def("c", true, at(time.Hour)), def("a", false, time.Time{}), def("b", true, at(time.Hour)))
	var ids []string
	cursor := ""
	for range 5 {
		p, err := h.Routines.ListRoutines(t.Context(), core.RoutineFilter{ListOptions: core.ListOptions{Limit: 2, Cursor: cursor}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Items {
			ids = append(ids, r.ID)
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(ids, want) {
		t.Errorf("listed %v, want %v in id order", ids, want)
	}
	p, err := h.Routines.ListRoutines(t.Context(), core.RoutineFilter{})
	if err != nil || len(p.Items) != 3 || p.NextCursor != "" {
		t.Errorf("default page: %d items, cursor %q, err %v", len(p.Items), p.NextCursor, err)
	}

	other := def("d", true, at(time.Hour))
	other.AgentID = "other-agent"
	syncDefs(t, h, t0, def("c", true, at(time.Hour)), def("a", false, time.Time{}), def("b", true, at(time.Hour)), other)
	p, err = h.Routines.ListRoutines(t.Context(), core.RoutineFilter{AgentIDs: []string{"other-agent"},
		ListOptions: core.ListOptions{Limit: 1}})
	if err != nil || len(p.Items) != 1 || p.Items[0].ID != "d" || p.NextCursor != "" {
		t.Errorf("routines of other-agent, one per page: %+v, err %v; want d alone on one page", p, err)
	}
}

func testDueRoutines(t *testing.T, h Harness) {
	syncDefs(t, h, t0, def("late", true, at(2*time.Hour)), def("soon", true, at(time.Hour)),
		def("off", false, at(time.Minute)), def("now", true, at(time.Hour)))
	due, err := h.Routines.DueRoutines(t.Context(), at(90*time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range due {
		ids = append(ids, r.ID)
	}
	if want := []string{"now", "soon"}; !slices.Equal(ids, want) {
		t.Errorf("due at +90m: %v, want %v (enabled, next_fire_at <= now, earliest first)", ids, want)
	}
	if due, _ := h.Routines.DueRoutines(t.Context(), at(3*time.Hour), 1); len(due) != 1 {
		t.Errorf("limit 1 returned %d routines", len(due))
	}
	if due, _ := h.Routines.DueRoutines(t.Context(), at(59*time.Minute), 0); len(due) != 0 {
		t.Errorf("nothing is due before +1h, got %d", len(due))
	}
}

// testNextRoutineDue: a store that says when its next routine is due (the
// embedded scheduler sleeps until then) names the earliest enabled one.
func testNextRoutineDue(t *testing.T, h Harness) {
	nd, ok := h.Routines.(interface { // routine.NextDuer
		NextRoutineDue(ctx context.Context) (time.Time, error)
	})
	if !ok {
		t.Skip("the store does not tell when its next routine is due")
	}
	if got, err := nd.NextRoutineDue(t.Context()); err != nil || !got.IsZero() {
		t.Fatalf("no routines: next due %v, %v; want the zero time", got, err)
	}
	syncDefs(t, h, t0, def("off", false, at(time.Minute)), def("late", true, at(2*time.Hour)), def("soon", true, at(time.Hour)))
	if got, err := nd.NextRoutineDue(t.Context()); err != nil || !got.Equal(at(time.Hour)) {
		t.Errorf("next due = %v, %v; want +1h (the earliest enabled routine)", got, err)
	}
}

func testFire(t *testing.T, h Harness) {
	ctx := t.Context()
	syncDefs(t, h, t0, def("r", true, at(time.Hour)))
	drainJobs(t, h)
	now := at(3*time.Hour + 10*time.Second)
	catchUp, sched := newRun("r", now), newRun("r", now)
	runs := fire(t, h, core.RoutineFire{RoutineID: "r", Expected: at(time.Hour), Next: at(4 * time.Hour), At: now,
		Missed: []time.Time{at(time.Hour), at(2 * time.Hour)}, MissedOmitted: 7,
		Runs: []core.FireRun{
			{Kind: core.FireCatchUp, DueAt: at(2 * time.Hour), Run: catchUp},
			{Kind: core.FireScheduled, DueAt: at(3 * time.Hour), Run: sched},
		}})
	if len(runs) != 2 || runs[0].ID != catchUp.Run.ID || runs[1].ID != sched.Run.ID {
		t.Fatalf("fire returned %+v, want the catch-up then the scheduled run", runs)
	}
	for _, id := range []string{catchUp.Run.ID, sched.Run.ID} {
		run, err := h.Store.GetRun(ctx, id)
		if err != nil {
			t.Fatalf("run created by the fire: %v", err)
		}
		if run.Type != core.RunTypeRoutine || run.RoutineID != "r" || run.Status != core.RunQueued ||
			run.SessionID != agent+":routine:r" || run.Input != "report on r" {
			t.Errorf("run = %+v, want a queued routine run of r in its session", run)
		}
		evs, err := h.Store.Events(ctx, id, 0, 0)
		if err != nil || len(evs) != 1 || evs[0].Type != core.EventUserMessage {
			t.Errorf("journal of %s = %v (err %v), want the user message", id, evs, err)
		}
	}
	if _, err := h.Store.GetSession(ctx, agent+":routine:r"); err != nil {
		t.Errorf("session of the routine: %v", err)
	}
	jobs := drainJobs(t, h)
	slices.Sort(jobs)
	want := []string{core.JobRun + ":run:" + catchUp.Run.ID, core.JobRun + ":run:" + sched.Run.ID}
	slices.Sort(want)
	if !slices.Equal(jobs, want) {
		t.Errorf("jobs = %v, want %v (one JobRun per run, in the fire's transaction)", jobs, want)
	}
	r := get(t, h, "r")
	sameTime(t, "next_fire_at", r.NextFireAt, at(4*time.Hour))
	sameTime(t, "last_fire_at", r.LastFireAt, now)
	hist := history(t, h, "r")
	if got, want := kinds(hist), []string{"missed", "missed", "catch_up", "scheduled"}; !slices.Equal(got, want) {
		t.Fatalf("history kinds = %v, want %v", got, want)
	}
	sameTime(t, "missed[0].due_at", hist[0].DueAt, at(time.Hour))
	sameTime(t, "missed[1].due_at", hist[1].DueAt, at(2*time.Hour))
	if hist[0].Note == "" || hist[0].RunID != "" || hist[1].Note != "" {
		t.Errorf("missed entries: %+v, %+v; want a note about the 7 omitted on the oldest, and no run", hist[0], hist[1])
	}
	if hist[2].RunID != catchUp.Run.ID || hist[3].RunID != sched.Run.ID || hist[3].RunStatus != core.RunQueued {
		t.Errorf("run entries: %+v, %+v", hist[2], hist[3])
	}
	sameTime(t, "scheduled.due_at", hist[3].DueAt, at(3*time.Hour))
	if !hist[3].FiredAt.Equal(now) {
		t.Errorf("fired_at = %v, want %v", hist[3].FiredAt, now)
	}
}

func testFireConflict(t *testing.T, h Harness) {
	ctx := t.Context()
	syncDefs(t, h, t0, def("r", true, at(time.Hour)), def("off", false, at(time.Hour)))
	fire(t, h, scheduled("r", at(time.Hour)))
	// The same due time again (another replica, late): nothing happens.
	late := scheduled("r", at(time.Hour))
	if _, err := h.Routines.FireRoutine(ctx, late); !errors.Is(err, core.ErrFireConflict) {
		t.Fatalf("second fire of one due time: %v, want ErrFireConflict", err)
	}
	if _, err := h.Store.GetRun(ctx, late.Runs[0].Run.Run.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("the losing fire's run exists (err %v)", err)
	}
	if n := len(history(t, h, "r")); n != 1 {
		t.Errorf("history has %d entries after a lost fire, want 1", n)
	}
	sameTime(t, "next_fire_at", get(t, h, "r").NextFireAt, at(2*time.Hour))
	// A disabled routine never fires on schedule.
	if _, err := h.Routines.FireRoutine(ctx, scheduled("off", at(time.Hour))); !errors.Is(err, core.ErrFireConflict) {
		t.Errorf("fire of a disabled routine: %v, want ErrFireConflict", err)
	}
	if _, err := h.Routines.FireRoutine(ctx, scheduled("nope", at(time.Hour))); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("fire of an unknown routine: %v, want ErrNotFound", err)
	}
}

func testFireConcurrent(t *testing.T, h Harness) {
	const racers = 8
	syncDefs(t, h, t0, def("r", true, at(time.Hour)))
	for round := range 5 {
		due := at(time.Duration(round+1) * time.Hour)
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, lost := 0, 0
		for range racers {
			wg.Go(func() {
				_, err := h.Routines.FireRoutine(t.Context(), scheduled("r", due))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case errors.Is(err, core.ErrFireConflict):
					lost++
				default:
					t.Errorf("fire: %v", err)
				}
			})
		}
		wg.Wait()
		if won != 1 || lost != racers-1 {
			t.Fatalf("round %d: %d fires won, %d lost; want exactly 1 winner", round, won, lost)
		}
	}
	hist := history(t, h, "r")
	if len(hist) != 5 {
		t.Fatalf("history has %d entries, want 5 (one per due time)", len(hist))
	}
	p, err := h.Store.ListRuns(t.Context(), core.RunFilter{SessionID: agent + ":routine:r"})
	if err != nil || len(p.Items) != 5 {
		t.Fatalf("runs: %d (err %v), want 5", len(p.Items), err)
	}
}

func testFireSkipRecordsMissed(t *testing.T, h Harness) {
	syncDefs(t, h, t0, def("r", true, at(time.Hour)))
	runs := fire(t, h, core.RoutineFire{RoutineID: "r", Expected: at(time.Hour), Next: at(4 * time.Hour), At: at(3*time.Hour + 30*time.Minute),
		Missed: []time.Time{at(time.Hour), at(2 * time.Hour), at(3 * time.Hour)}})
	if len(runs) != 0 {
		t.Fatalf("a fire with only missed times created %d runs", len(runs))
	}
	r := get(t, h, "r")
	sameTime(t, "next_fire_at", r.NextFireAt, at(4*time.Hour))
	sameTime(t, "last_fire_at", r.LastFireAt, time.Time{})
	hist := history(t, h, "r")
	if got, want := kinds(hist), []string{"missed", "missed", "missed"}; !slices.Equal(got, want) {
		t.Fatalf("history = %v, want %v", got, want)
	}
	sameTime(t, "last missed due_at", hist[2].DueAt, at(3*time.Hour))
}

func testFireManual(t *testing.T, h Harness) {
	ctx := t.Context()
	syncDefs(t, h, t0, def("off", false, at(time.Hour)), def("on", true, at(time.Hour)))
	run := manual(t, h, "off", at(time.Minute))
	if got, err := h.Store.GetRun(ctx, run.ID); err != nil || got.Status != core.RunQueued {
		t.Fatalf("manual run of a disabled routine: %+v, %v", got, err)
	}
	manual(t, h, "on", at(2*time.Minute))
	on := get(t, h, "on")
	sameTime(t, "next_fire_at after a manual fire", on.NextFireAt, at(time.Hour))
	sameTime(t, "last_fire_at after a manual fire", on.LastFireAt, at(2*time.Minute))
	hist := history(t, h, "off")
	if len(hist) != 1 || hist[0].Kind != core.FireManual || hist[0].DueAt != nil || hist[0].RunID != run.ID {
		t.Errorf("history of a manual fire = %+v", hist)
	}
	_, err := h.Routines.FireRoutine(ctx, core.RoutineFire{RoutineID: "nope", Manual: true, At: t0,
		Runs: []core.FireRun{{Kind: core.FireManual, Run: newRun("nope", t0)}}})
	if !errors.Is(err, core.ErrNotFound) {
		t.Errorf("manual fire of an unknown routine: %v, want ErrNotFound", err)
	}
}

// A command asking for a manual fire, delivered twice (a chat platform's
// redelivery), fires once: the second fire creates nothing, names the
// first run and adds no second audit entry.
func testFireManualDedupe(t *testing.T, h Harness) {
	ctx := t.Context()
	syncDefs(t, h, t0, def("r", false, at(time.Hour)))
	ask := func() (core.Run, error) {
		nr := newRun("r", at(time.Minute))
		nr.Platform, nr.DedupeKey = "slack", "run:command:1337.42"
		runs, err := h.Routines.FireRoutine(ctx, core.RoutineFire{RoutineID: "r", Manual: true, At: at(time.Minute),
			Runs:  []core.FireRun{{Kind: core.FireManual, Run: nr}},
			Audit: &core.AuditEntry{Principal: "slack:T1/U1", Route: "slack", Action: core.AuditTrigger, Target: "r", Detail: "run " + nr.Run.ID}})
		if err != nil {
			return core.Run{}, err
		}
		return runs[0], nil
	}
	first, err := ask()
	if err != nil {
		t.Fatal(err)
	}
	_, err = ask()
	var dup *core.DuplicateError
	if !errors.As(err, &dup) || dup.RunID != first.ID {
		t.Fatalf("second delivery: %v, want a DuplicateError naming run %s", err, first.ID)
	}
	if hist := history(t, h, "r"); len(hist) != 1 {
		t.Errorf("history after a command delivered twice = %+v, want one fire", hist)
	}
	audit, err := h.Store.ListAudit(ctx, core.AuditFilter{Action: core.AuditTrigger})
	if err != nil {
		t.Fatal(err)
	}
	if len(audit.Items) != 1 || audit.Items[0].Principal != "slack:T1/U1" || audit.Items[0].Detail != "run "+first.ID ||
		audit.Items[0].Outcome != core.AuditOK || !audit.Items[0].At.Equal(at(time.Minute)) {
		t.Errorf("audit after a command delivered twice = %+v, want the one trigger at its fire time", audit.Items)
	}
}

func testSetEnabled(t *testing.T, h Harness) {
	ctx := t.Context()
	syncDefs(t, h, t0, def("r", true, at(time.Hour)))
	r, err := h.Routines.SetRoutineEnabled(ctx, "r", core.RoutineToggle{Enabled: false, Reason: "because", At: at(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Enabled || r.DisabledReason != "because" {
		t.Errorf("disabled routine: enabled=%t reason=%q", r.Enabled, r.DisabledReason)
	}
	sameTime(t, "next_fire_at of a disabled routine", r.NextFireAt, time.Time{})
	if due, _ := h.Routines.DueRoutines(ctx, at(10*time.Hour), 0); len(due) != 0 {
		t.Errorf("a disabled routine is due")
	}
	r, err = h.Routines.SetRoutineEnabled(ctx, "r", core.RoutineToggle{Enabled: true, NextFireAt: at(5 * time.Hour), At: at(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Enabled || r.DisabledReason != "" || r.ConsecutiveFailures != 0 {
		t.Errorf("enabled routine: %+v", r)
	}
	sameTime(t, "next_fire_at after enable", r.NextFireAt, at(5*time.Hour))
	// Enabling an enabled routine changes nothing (its due time stays).
	r, err = h.Routines.SetRoutineEnabled(ctx, "r", core.RoutineToggle{Enabled: true, NextFireAt: at(9 * time.Hour), At: at(3 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	sameTime(t, "next_fire_at after a second enable", r.NextFireAt, at(5*time.Hour))
	if _, err := h.Routines.SetRoutineEnabled(ctx, "nope", core.RoutineToggle{Enabled: true}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("enable unknown routine: %v, want ErrNotFound", err)
	}
}

func settle(t *testing.T, h Harness, runID string, st core.RunStatus) core.RoutineEntry {
	t.Helper()
	e, err := h.Routines.SettleRoutineRun(t.Context(), core.RoutineSettle{RunID: runID, Status: st, At: at(time.Minute), DisableReason: "too many failures"})
	if err != nil {
		t.Fatalf("settle %s: %v", runID, err)
	}
	return e
}

func testSettleFailureBudget(t *testing.T, h Harness) {
	syncDefs(t, h, t0, def("r", true, at(time.Hour))) // max_failures 3
	runs := make([]core.Run, 7)
	for i := range runs {
		runs[i] = manual(t, h, "r", at(time.Duration(i)*time.Second))
	}
	settle(t, h, runs[0].ID, core.RunFailed)
	settle(t, h, runs[1].ID, core.RunFailed)
	settle(t, h, runs[1].ID, core.RunFailed) // the same run again: counted once
	if n := get(t, h, "r").ConsecutiveFailures; n != 2 {
		t.Fatalf("after 2 failed runs (one settled twice): failures = %d, want 2", n)
	}
	settle(t, h, runs[2].ID, core.RunCancelled)
	if n := get(t, h, "r").ConsecutiveFailures; n != 2 {
		t.Errorf("a cancelled run changed the failure count to %d", n)
	}
	settle(t, h, runs[3].ID, core.RunCompleted)
	if n := get(t, h, "r").ConsecutiveFailures; n != 0 {
		t.Fatalf("a completed run left failures at %d, want 0", n)
	}
	for _, run := range runs[4:6] {
		if e := settle(t, h, run.ID, core.RunFailed); e.DisabledRoutine {
			t.Fatalf("routine disabled before max_failures")
		}
	}
	e := settle(t, h, runs[6].ID, core.RunFailed)
	if !e.DisabledRoutine || e.RunID != runs[6].ID {
		t.Fatalf("third consecutive failure: entry %+v, want disabled_routine", e)
	}
	r := get(t, h, "r")
	if r.Enabled || r.DisabledReason != "too many failures" || r.ConsecutiveFailures != 3 {
		t.Fatalf("after max_failures: enabled=%t reason=%q failures=%d", r.Enabled, r.DisabledReason, r.ConsecutiveFailures)
	}
	sameTime(t, "next_fire_at of the disabled routine", r.NextFireAt, time.Time{})
	// Settling again reports the same entry and changes nothing.
	if e := settle(t, h, runs[6].ID, core.RunFailed); !e.DisabledRoutine {
		t.Errorf("second settle of the disabling run lost disabled_routine")
	}
	_, err := h.Routines.SettleRoutineRun(t.Context(), core.RoutineSettle{RunID: "run_nope", Status: core.RunFailed})
	if !errors.Is(err, core.ErrNotFound) {
		t.Errorf("settle of an unknown run: %v, want ErrNotFound", err)
	}
}

func testSettleDisabledRoutine(t *testing.T, h Harness) {
	d := def("r", false, at(time.Hour))
	d.MaxFailures = 1
	syncDefs(t, h, t0, d)
	run := manual(t, h, "r", at(time.Second))
	if e := settle(t, h, run.ID, core.RunFailed); e.DisabledRoutine {
		t.Errorf("a run of a disabled routine was counted as disabling it")
	}
	if r := get(t, h, "r"); r.ConsecutiveFailures != 0 || r.DisabledReason != "" {
		t.Errorf("runs of a disabled routine count against its budget: %+v", r)
	}
}

func testHistory(t *testing.T, h Harness) {
	ctx := t.Context()
	syncDefs(t, h, t0, def("r", true, at(time.Hour)), def("other", true, at(time.Hour)))
	var ids []string
	for i := range 5 {
		ids = append(ids, manual(t, h, "r", at(time.Duration(i)*time.Second)).ID)
	}
	manual(t, h, "other", at(time.Minute))
	hist := history(t, h, "r")
	var got []string
	for _, e := range hist {
		got = append(got, e.RunID)
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("history runs = %v, want %v in recorded order", got, ids)
	}
	if err := h.Routines.SetRoutineDelivery(ctx, ids[0], "delivered"); err != nil {
		t.Fatal(err)
	}
	if err := h.Routines.SetRoutineDelivery(ctx, "run_nope", "delivered"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("delivery of an unknown run: %v, want ErrNotFound", err)
	}
	claimed, err := h.Store.ClaimRun(ctx, ids[0], "node", at(time.Minute), at(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Store.FinishRun(ctx, claimed.ID, "node", core.Finish{Status: core.RunCompleted, Output: "ok", At: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	hist = history(t, h, "r")
	if hist[0].Delivery != "delivered" || hist[0].RunStatus != core.RunCompleted || hist[1].RunStatus != core.RunQueued {
		t.Errorf("entries = %+v, %+v; want delivery and the runs' current status", hist[0], hist[1])
	}
	if p, err := h.Routines.RoutineHistory(ctx, "r", core.ListOptions{Cursor: "junk"}); !errors.Is(err, core.ErrInvalidCursor) {
		t.Errorf("junk cursor: %v (%d items), want ErrInvalidCursor", err, len(p.Items))
	}
	if p, err := h.Routines.RoutineHistory(ctx, "nope", core.ListOptions{}); err != nil || len(p.Items) != 0 || p.Items == nil {
		t.Errorf("history of an unknown routine: %+v, %v; want an empty page", p, err)
	}
}

// testFinishRunEnqueuesJobs checks core.Finish.Jobs, which routine result
// delivery relies on: the jobs commit with the finished run.
func testFinishRunEnqueuesJobs(t *testing.T, h Harness) {
	ctx := t.Context()
	syncDefs(t, h, t0, def("r", true, at(time.Hour)))
	run := manual(t, h, "r", at(time.Second))
	drainJobs(t, h)
	if _, err := h.Store.ClaimRun(ctx, run.ID, "node", at(time.Minute), at(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]string{"run_id": run.ID})
	_, err := h.Store.FinishRun(ctx, run.ID, "node", core.Finish{Status: core.RunCompleted, At: at(time.Minute),
		Jobs: []core.Job{{Kind: "routine_result", Key: "routine_result:" + run.ID, Payload: payload}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := drainJobs(t, h), []string{"routine_result:routine_result:" + run.ID}; !slices.Equal(got, want) {
		t.Errorf("jobs after finish = %v, want %v", got, want)
	}
	// A finish that fails enqueues nothing.
	_, err = h.Store.FinishRun(ctx, run.ID, "node", core.Finish{Status: core.RunFailed, At: at(time.Minute),
		Jobs: []core.Job{{Kind: "routine_result", Key: fmt.Sprintf("again:%s", run.ID), Payload: payload}}})
	if !errors.Is(err, core.ErrRunFinished) {
		t.Fatalf("finish of a finished run: %v, want ErrRunFinished", err)
	}
	if got := drainJobs(t, h); len(got) != 0 {
		t.Errorf("a rejected finish enqueued %v", got)
	}
}

func ptr[T any](v T) *T { return &v }

func create(t *testing.T, h Harness, d core.RoutineDef, now time.Time) core.Routine {
	t.Helper()
	r, err := h.Routines.CreateRoutine(t.Context(), d, now)
	if err != nil {
		t.Fatalf("create routine %s: %v", d.ID, err)
	}
	return r
}

func testCreate(t *testing.T, h Harness) {
	ctx := t.Context()
	syncDefs(t, h, t0, def("file", true, at(time.Hour)))
	d := def("mine", true, at(time.Hour))
	d.Schedule, d.Timezone, d.DeliverTo, d.Missed = "0 9 * * 1-5", "Europe/Berlin", "webhook:https://example.com/h", core.MissedOnce
	r := create(t, h, d, at(time.Minute))
	if r.ID != "mine" || r.Source != core.SourceAPI || r.AgentID != agent || r.Schedule != d.Schedule ||
		r.Timezone != d.Timezone || r.Input != d.Input || r.DeliverTo != d.DeliverTo || r.Missed != core.MissedOnce ||
		r.MaxFailures != 3 || !r.Enabled || !r.CreatedAt.Equal(at(time.Minute)) {
		t.Errorf("created routine = %+v, want it as defined with source api", r)
	}
	sameTime(t, "next_fire_at", r.NextFireAt, at(time.Hour))
	if got := get(t, h, "mine"); got.Source != core.SourceAPI || got.Input != d.Input {
		t.Errorf("get after create = %+v", got)
	}
	if got := get(t, h, "file"); got.Source != core.SourceConfig {
		t.Errorf("synced routine has source %q, want config", got.Source)
	}
	off := create(t, h, def("off", false, at(time.Hour)), at(time.Minute))
	if off.Enabled {
		t.Errorf("routine created disabled is enabled")
	}
	sameTime(t, "next_fire_at of a routine created disabled", off.NextFireAt, time.Time{})
	for _, id := range []string{"mine", "file"} {
		if _, err := h.Routines.CreateRoutine(ctx, def(id, true, at(time.Hour)), at(2*time.Minute)); !errors.Is(err, core.ErrRoutineExists) {
			t.Errorf("create of existing %s: %v, want ErrRoutineExists", id, err)
		}
	}
	if got := get(t, h, "file"); got.Source != core.SourceConfig {
		t.Errorf("a refused create changed routine file: %+v", got)
	}
}

func testCreateConcurrent(t *testing.T, h Harness) {
	const racers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, lost := 0, 0
	for i := range racers {
		wg.Go(func() {
			d := def("r", true, at(time.Hour))
			d.Input = fmt.Sprintf("racer %d", i)
			_, err := h.Routines.CreateRoutine(t.Context(), d, t0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, core.ErrRoutineExists):
				lost++
			default:
				t.Errorf("create: %v", err)
			}
		})
	}
	wg.Wait()
	if won != 1 || lost != racers-1 {
		t.Fatalf("%d creates won, %d lost; want exactly 1 winner", won, lost)
	}
}

func testSyncLeavesAPIRoutines(t *testing.T, h Harness) {
	ctx := t.Context()
	create(t, h, def("mine", true, at(time.Hour)), t0)
	manual(t, h, "mine", at(time.Minute))
	if _, err := h.Routines.SetRoutineEnabled(ctx, "mine", core.RoutineToggle{Enabled: false, At: at(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	syncDefs(t, h, at(3*time.Minute), def("file", true, at(time.Hour)))
	syncDefs(t, h, at(4*time.Minute)) // the file has no routines at all
	r := get(t, h, "mine")
	if r.Source != core.SourceAPI || r.Enabled || r.Input != "report on mine" {
		t.Errorf("API routine after syncs = %+v, want it as it was (disabled, source api)", r)
	}
	if _, err := h.Routines.GetRoutine(ctx, "file"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("config routine removed from the file: %v, want ErrNotFound", err)
	}
	// The file comes to define the API routine's id: the file takes it over.
	d := def("mine", true, at(2*time.Hour))
	d.Input = "from the file"
	syncDefs(t, h, at(5*time.Minute), d)
	r = get(t, h, "mine")
	if r.Source != core.SourceConfig || !r.Enabled || !r.ConfigEnabled || r.Input != "from the file" {
		t.Errorf("API routine the file now defines = %+v, want the file's definition, source config", r)
	}
	sameTime(t, "next_fire_at after the takeover", r.NextFireAt, at(2*time.Hour))
	if n := len(history(t, h, "mine")); n != 1 {
		t.Errorf("history after the takeover has %d entries, want 1", n)
	}
	syncDefs(t, h, at(6*time.Minute))
	if _, err := h.Routines.GetRoutine(ctx, "mine"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("taken-over routine removed from the file: %v, want ErrNotFound", err)
	}
}

func testSyncKeepsAPIEdits(t *testing.T, h Harness) {
	ctx := t.Context()
	syncDefs(t, h, t0, def("r", true, at(time.Hour)))
	if _, err := h.Routines.UpdateRoutine(ctx, "r", core.RoutinePatch{Input: ptr("edited"), Schedule: ptr("@every 2h"),
		NextFireAt: at(2 * time.Hour), At: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// An unchanged file keeps the edit.
	syncDefs(t, h, at(2*time.Minute), def("r", true, at(time.Hour)))
	r := get(t, h, "r")
	if r.Input != "edited" || r.Schedule != "@every 2h" || r.Source != core.SourceConfig {
		t.Fatalf("re-sync of an unchanged file = %+v, want the API edit kept", r)
	}
	sameTime(t, "next_fire_at after an unchanged re-sync", r.NextFireAt, at(2*time.Hour))
	// The file's definition changes: the file wins.
	d := def("r", true, at(3*time.Hour))
	d.DeliverTo = "slack:C1"
	syncDefs(t, h, at(3*time.Minute), d)
	r = get(t, h, "r")
	if r.Input != d.Input || r.Schedule != d.Schedule || r.DeliverTo != "slack:C1" {
		t.Fatalf("after the file changed = %+v, want the file's definition", r)
	}
	sameTime(t, "next_fire_at after the file changed the schedule back", r.NextFireAt, at(3*time.Hour))
}

func testUpdate(t *testing.T, h Harness) {
	ctx := t.Context()
	create(t, h, def("r", true, at(time.Hour)), t0)
	// Fields other than schedule and timezone keep the due time.
	r, err := h.Routines.UpdateRoutine(ctx, "r", core.RoutinePatch{Input: ptr("new"), DeliverTo: ptr("slack:C1"),
		Missed: ptr(core.MissedOnce), MaxFailures: ptr(0), AgentID: ptr("other"), NextFireAt: at(9 * time.Hour), At: at(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Input != "new" || r.DeliverTo != "slack:C1" || r.Missed != core.MissedOnce || r.MaxFailures != 0 ||
		r.AgentID != "other" || r.Schedule != "@every 1h" || !r.Enabled || r.Source != core.SourceAPI {
		t.Errorf("after a patch = %+v", r)
	}
	sameTime(t, "next_fire_at after an input change", r.NextFireAt, at(time.Hour))
	if got := get(t, h, "r"); got.Input != "new" || !got.UpdatedAt.Equal(at(time.Minute)) {
		t.Errorf("get after update = %+v", got)
	}
	// A new schedule, or timezone, takes the new due time.
	r, err = h.Routines.UpdateRoutine(ctx, "r", core.RoutinePatch{Schedule: ptr("@every 2h"), NextFireAt: at(2 * time.Hour), At: at(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	sameTime(t, "next_fire_at after a schedule change", r.NextFireAt, at(2*time.Hour))
	r, err = h.Routines.UpdateRoutine(ctx, "r", core.RoutinePatch{Timezone: ptr("Europe/Berlin"), NextFireAt: at(3 * time.Hour), At: at(3 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	sameTime(t, "next_fire_at after a timezone change", r.NextFireAt, at(3*time.Hour))
	// enabled works as SetRoutineEnabled does.
	r, err = h.Routines.UpdateRoutine(ctx, "r", core.RoutinePatch{Enabled: ptr(false), NextFireAt: at(4 * time.Hour), At: at(4 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Enabled {
		t.Errorf("patched enabled=false, routine is enabled")
	}
	sameTime(t, "next_fire_at after disable", r.NextFireAt, time.Time{})
	// A schedule change of a disabled routine does not schedule it.
	r, err = h.Routines.UpdateRoutine(ctx, "r", core.RoutinePatch{Schedule: ptr("@every 3h"), NextFireAt: at(5 * time.Hour), At: at(5 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	sameTime(t, "next_fire_at of a disabled routine after a schedule change", r.NextFireAt, time.Time{})
	r, err = h.Routines.UpdateRoutine(ctx, "r", core.RoutinePatch{Enabled: ptr(true), NextFireAt: at(6 * time.Hour), At: at(6 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Enabled || r.Schedule != "@every 3h" {
		t.Errorf("after enable = %+v", r)
	}
	sameTime(t, "next_fire_at after enable", r.NextFireAt, at(6*time.Hour))
	if _, err := h.Routines.UpdateRoutine(ctx, "nope", core.RoutinePatch{Input: ptr("x")}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("update of an unknown routine: %v, want ErrNotFound", err)
	}
}

func testDelete(t *testing.T, h Harness) {
	ctx := t.Context()
	create(t, h, def("r", true, at(time.Hour)), t0)
	manual(t, h, "r", at(time.Minute))
	if err := h.Routines.DeleteRoutine(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Routines.GetRoutine(ctx, "r"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}
	if n := len(history(t, h, "r")); n != 1 {
		t.Errorf("history after delete has %d entries, want the 1 it had", n)
	}
	if due, _ := h.Routines.DueRoutines(ctx, at(10*time.Hour), 0); len(due) != 0 {
		t.Errorf("a deleted routine is due")
	}
	if err := h.Routines.DeleteRoutine(ctx, "r"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	// The id can be used again.
	create(t, h, def("r", false, time.Time{}), at(2*time.Minute))
}

// testCallers: a routine's callers are stored as defined by the file or the
// API, survive a sync that does not change them and are replaced or cleared
// by a patch.
func testCallers(t *testing.T, h Harness) {
	ctx := t.Context()
	file := def("file", true, at(time.Hour))
	file.Callers = []string{"ana", "role:operator", "channel:slack:C1"}
	syncDefs(t, h, t0, file)
	if got := get(t, h, "file").Callers; !slices.Equal(got, file.Callers) {
		t.Errorf("synced callers = %q, want %q", got, file.Callers)
	}
	file.Callers = []string{"bo"}
	syncDefs(t, h, at(time.Minute), file)
	if got := get(t, h, "file").Callers; !slices.Equal(got, []string{"bo"}) {
		t.Errorf("callers after the file changed them = %q, want [bo]", got)
	}
	d := def("mine", true, at(time.Hour))
	d.Callers = []string{"slack:T1/U1", "S0GROUP"}
	if got := create(t, h, d, t0).Callers; !slices.Equal(got, d.Callers) {
		t.Errorf("created callers = %q, want %q", got, d.Callers)
	}
	r, err := h.Routines.UpdateRoutine(ctx, "mine", core.RoutinePatch{Input: ptr("new input"), At: at(time.Minute)})
	if err != nil || !slices.Equal(r.Callers, d.Callers) {
		t.Errorf("a patch without callers: %q, %v; want them unchanged", r.Callers, err)
	}
	r, err = h.Routines.UpdateRoutine(ctx, "mine", core.RoutinePatch{Callers: ptr([]string{"telegram:5550001"}), At: at(2 * time.Minute)})
	if err != nil || !slices.Equal(r.Callers, []string{"telegram:5550001"}) {
		t.Errorf("patched callers = %q, %v; want [telegram:5550001]", r.Callers, err)
	}
	r, err = h.Routines.UpdateRoutine(ctx, "mine", core.RoutinePatch{Callers: ptr([]string{}), At: at(3 * time.Minute)})
	if err != nil || len(r.Callers) != 0 {
		t.Errorf("cleared callers = %q, %v; want none", r.Callers, err)
	}
	if got := get(t, h, "mine").Callers; len(got) != 0 {
		t.Errorf("cleared callers read back as %q", got)
	}
}
