package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/queue/queuetest"
	"github.com/agentgate/agentgate/store/sqlite"
)

func newRunAt(now time.Time, id, session string, start *core.StartAtCreate) core.NewRun {
	return core.NewRun{
		Session: core.Session{ID: session, AgentID: "a", CreatedAt: now},
		Run:     core.Run{ID: id, SessionID: session, AgentID: "a", Type: core.RunTypeAPI, Input: "hi", CreatedAt: now},
		Events:  []core.Event{core.NewEvent(core.EventUserMessage, core.UserMessage{Text: "hi"})},
		Start:   start,
	}
}

func startFor(now time.Time) *core.StartAtCreate {
	return &core.StartAtCreate{Owner: "local", Until: now.Add(30 * time.Second),
		Events: []core.Event{core.NewEvent(core.EventStatus, core.StatusChange{Status: core.RunRunning})}}
}

// waitIdle parks a worker in Dequeue until it has found the table empty,
// and returns what it dequeues.
func waitIdle(t *testing.T, db *sqlite.DB) <-chan core.Job {
	t.Helper()
	got := make(chan core.Job, 1)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	go func() {
		j, err := db.Dequeue(ctx, "local", 30*time.Second)
		if err == nil {
			got <- j
		}
		close(got)
	}()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !db.Reserve(0) {
		select {
		case <-deadline:
			t.Fatal("no worker became idle")
		case <-tick.C:
		}
	}
	db.Unreserve()
	return got
}

// A run created with Start while a worker waits is running, journaled and
// leased at once, and the worker gets its job from memory: two write
// transactions for a single-turn run (create, finish). A later run of the
// same session is left queued, and a handed job whose lease ran out is
// delivered again from the table.
func TestStartAtCreate(t *testing.T) {
	clock := queuetest.NewFakeClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	db := openQueue(t, sqlite.Options{Clock: clock, PollInterval: 10 * time.Millisecond})
	ctx := t.Context()
	now := clock.Now()

	if db.Reserve(0) {
		t.Fatal("Reserve with no worker waiting and no backlog: true")
	}
	got := waitIdle(t, db)
	if !db.Reserve(0) {
		t.Fatal("Reserve with a worker idle: false")
	}
	_, txBefore := db.Commits()
	st := startFor(now)
	run, err := db.CreateRun(ctx, newRunAt(now, "run_1", "s1", st))
	if err != nil {
		t.Fatal(err)
	}
	if st.Job == nil || run.Status != core.RunRunning || run.LastSeq != 2 {
		t.Fatalf("created %s with last seq %d, job %v; want running, 2 events, a leased job", run.Status, run.LastSeq, st.Job)
	}
	if _, ok, err := db.TryDequeue(ctx, "other", time.Minute); ok || err != nil {
		t.Fatalf("the leased job was due in the table: %v %v", ok, err)
	}
	db.Handoff(*st.Job, st.Owner, st.Until)
	j := <-got
	if j.ID != st.Job.ID || j.Lease == "" || j.Attempt != 1 {
		t.Fatalf("worker got %+v, want the handed job on its first delivery", j)
	}
	started, err := db.StartRun(ctx, core.Start{ID: run.ID, Owner: "local", Now: now, Until: now.Add(30 * time.Second)})
	if err != nil || started.Began || len(started.Journal) != 2 {
		t.Fatalf("start of a run started at create: began %t, %d events, %v; want not began, 2, nil", started.Began, len(started.Journal), err)
	}
	if _, err := db.FinishRun(ctx, run.ID, "local", core.Finish{Status: core.RunCompleted, Output: "ok", At: now, Ack: &j}); err != nil {
		t.Fatal(err)
	}
	if n, _ := db.Depth(ctx); n != 0 {
		t.Fatalf("queue depth after the finish acked the job: %d", n)
	}
	if _, tx := db.Commits(); tx-txBefore != 2 {
		t.Fatalf("write transactions from create to finish: %d, want 2", tx-txBefore)
	}

	// Same session while its head is active: queued, its job in the table.
	head, err := db.CreateRun(ctx, newRunAt(now, "run_2", "s2", nil))
	if err != nil {
		t.Fatal(err)
	}
	st = startFor(now)
	second, err := db.CreateRun(ctx, newRunAt(now, "run_3", "s2", st))
	if err != nil || st.Job != nil || second.Status != core.RunQueued {
		t.Fatalf("second run of a busy session: %s, job %v, %v; want queued without a job", second.Status, st.Job, err)
	}
	if head.Status != core.RunQueued {
		t.Fatalf("head run: %s", head.Status)
	}

	// A handed job whose lease ran out comes from the table, leased anew.
	db2 := openQueue(t, sqlite.Options{Clock: clock, PollInterval: 10 * time.Millisecond})
	got = waitIdle(t, db2)
	if !db2.Reserve(0) {
		t.Fatal("Reserve with a worker idle: false")
	}
	st = startFor(now)
	if _, err := db2.CreateRun(ctx, newRunAt(now, "run_4", "s4", st)); err != nil || st.Job == nil {
		t.Fatalf("create: %v, job %v", err, st.Job)
	}
	clock.Advance(31 * time.Second)
	db2.Handoff(*st.Job, st.Owner, st.Until)
	j = <-got
	if j.ID != st.Job.ID || j.Attempt != 2 || j.Lease == st.Job.Lease {
		t.Fatalf("after the lease ran out the worker got %+v, want the job again from the table (attempt 2, new lease)", j)
	}
}
