package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/sqlite"
)

// refusingQueue is an external queue that is down.
type refusingQueue struct{ core.Queue }

func (refusingQueue) Enqueue(context.Context, core.Job) error {
	return errors.New("connection refused")
}

// With an external queue, a new run's job goes to it straight after the
// commit, not through the store's outbox; when the queue refuses it, the
// outbox holds it for the relay.
func TestRunJobGoesStraightToTheExternalQueue(t *testing.T) {
	open := func(name string) *sqlite.DB {
		db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), name), sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	runOf := func(j core.Job) string {
		var p core.RunJob
		_ = json.Unmarshal(j.Payload, &p)
		return p.RunID
	}
	for _, tc := range []struct {
		name         string
		down         bool
		wantInOutbox bool
	}{
		{"queue up", false, false},
		{"queue down", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, external := open("store.db"), open("queue.db")
			var q core.Queue = external
			if tc.down {
				q = refusingQueue{external}
			}
			eng, err := core.NewEngine(core.EngineConfig{Store: store, Queue: q, Logger: slog.New(slog.DiscardHandler),
				Agents: map[string]*core.Agent{"a": {ID: "a"}}, JanitorInterval: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			run, err := eng.Submit(t.Context(), core.SubmitRequest{AgentID: "a", Input: "hi", UserID: "u1"})
			if err != nil {
				t.Fatal(err)
			}
			j, inQueue, err := external.TryDequeue(t.Context(), "w", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			o, inOutbox, err := store.TryDequeue(t.Context(), "relay", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if inQueue == tc.down || inQueue && (j.Kind != core.JobRun || runOf(j) != run.ID) {
				t.Errorf("external queue: job %v (%+v), want one for run %s: %t", inQueue, j, run.ID, !tc.down)
			}
			if inOutbox != tc.wantInOutbox || inOutbox && runOf(o) != run.ID {
				t.Errorf("outbox: job %v (%+v), want one for run %s: %t", inOutbox, o, run.ID, tc.wantInOutbox)
			}
		})
	}
}
