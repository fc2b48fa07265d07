package sqlite

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/queue/queuetest"
)

// woken reports whether ch (from db.notify.C) was closed: idle workers were told
// to look for a job.
func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A finished run wakes the idle workers only when its finish enqueued a job
// for them (here: the session's next run); a finish with nothing to take
// leaves them asleep, instead of sending every one of them to the table.
func TestFinishWakesWorkersOnlyForAJob(t *testing.T) {
	ctx := t.Context()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "db"), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Now().UTC()
	newRun := func(id string) core.NewRun {
		return core.NewRun{
			Session: core.Session{ID: "s1", AgentID: "a", CreatedAt: now},
			Run:     core.Run{ID: id, SessionID: "s1", AgentID: "a", Type: core.RunTypeAPI, Input: "hi", CreatedAt: now},
			Events:  []core.Event{core.NewEvent(core.EventUserMessage, core.UserMessage{Text: "hi"})},
		}
	}
	for _, id := range []string{"run_1", "run_2"} {
		if _, err := db.CreateRun(ctx, newRun(id)); err != nil {
			t.Fatal(err)
		}
	}
	finish := func(id string) (woke bool) {
		t.Helper()
		if _, err := db.ClaimRun(ctx, id, "w", now, now.Add(time.Minute), nil); err != nil {
			t.Fatalf("claim %s: %v", id, err)
		}
		ch := db.notify.C()
		if _, err := db.FinishRun(ctx, id, "w", core.Finish{Status: core.RunCompleted, Output: "done"}); err != nil {
			t.Fatal(err)
		}
		return woken(ch)
	}
	if !finish("run_1") {
		t.Error("finishing run_1 enqueued the job of run_2, queued behind it in the session, and woke no worker")
	}
	if finish("run_2") {
		t.Error("finishing run_2 enqueued nothing and woke the idle workers all the same")
	}
}

// Reader connections stay open between reads: a reader closed when idle
// is opened again by the next read, its pragmas run and its statements
// prepared anew (a fifth of the CPU of a run at one client).
func TestReadersStayOpen(t *testing.T) {
	db := openCommitTest(t)
	var wg sync.WaitGroup
	for range 20 {
		for range readers {
			wg.Go(func() {
				var n int
				if err := db.r.QueryRowContext(context.Background(), `SELECT count(*) FROM sqlite_master`).Scan(&n); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if st := db.r.Stats(); st.MaxIdleClosed > 0 || st.MaxIdleTimeClosed > 0 {
		t.Errorf("readers closed when idle: %d (idle pool full), %d (idle too long)", st.MaxIdleClosed, st.MaxIdleTimeClosed)
	}
}

// A waiting Dequeue sleeps until the next job is due instead of polling
// (queuetest.RunWakesWhenDue).
func TestDequeueWakesWhenDue(t *testing.T) {
	db := openHourPoll(t)
	queuetest.RunWakesWhenDue(t, db, asleep(db))
}

// Jobs enqueued while several workers wait reach all of them
// (queuetest.RunWakesEveryWorker).
func TestDequeueWakesEveryWorker(t *testing.T) {
	db := openHourPoll(t)
	queuetest.RunWakesEveryWorker(t, db, asleep(db))
}

// openHourPoll opens a store whose waiting Dequeue looks on its own only
// once an hour: whatever it delivers sooner came from a wake-up.
func openHourPoll(t *testing.T) *DB {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "db"), Options{Logger: slog.New(slog.DiscardHandler), PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// asleep returns a func that waits until n Dequeue calls wait.
func asleep(db *DB) func(n int) {
	return func(n int) {
		for waiting := 0; waiting < n; {
			time.Sleep(time.Millisecond)
			db.mu.Lock()
			waiting = db.hand.idle
			db.mu.Unlock()
		}
	}
}
