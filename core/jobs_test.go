package core_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/sqlite"
)

func TestJobRouterRefusesAKindTwice(t *testing.T) {
	t.Parallel()
	r := core.NewJobRouter()
	h := func(context.Context, core.Job) error { return nil }
	if err := r.Handle("chat.reply", h); err != nil {
		t.Fatal(err)
	}
	err := r.HandleAll(map[string]func(context.Context, core.Job) error{"chat.reply": h})
	if err == nil || !strings.Contains(err.Error(), `kind "chat.reply" is registered twice`) {
		t.Fatalf("second registration: %v, want it refused", err)
	}
	// The engine refuses a router that takes its own kind.
	own := core.NewJobRouter()
	if err := own.Handle(core.JobRun, h); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = core.NewEngine(core.EngineConfig{Store: db, Queue: db, Agents: map[string]*core.Agent{"a": {ID: "a"}}, Jobs: own})
	if err == nil {
		t.Error("an engine took a router that handles run jobs")
	}
}

type jobCounts struct {
	mu   sync.Mutex
	seen []string
}

func (c *jobCounts) JobDone(kind string, _ time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, kind+" "+map[bool]string{true: "ok", false: "failed"}[err == nil])
}

func TestJobRouterMiddleware(t *testing.T) {
	t.Parallel()
	obs := &jobCounts{}
	r := core.NewJobRouter(core.LogJobs(slog.New(slog.DiscardHandler), obs))
	var logged bool
	if err := r.Handle("panics", func(ctx context.Context, job core.Job) error {
		logged = core.JobLogger(ctx, nil) != nil
		var m map[string]int
		m["x"] = 1 // a nil map: panics
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	type payload struct {
		RunID string `json:"run_id"`
	}
	var got string
	if err := core.HandleTyped(r, "typed", func(_ context.Context, _ core.Job, p payload) error {
		got = p.RunID
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	err, ok := r.Run(t.Context(), core.Job{ID: "job_1", Kind: "panics"})
	if !ok || err == nil || !strings.Contains(err.Error(), "panics job job_1 panicked") {
		t.Fatalf("a panicking handler: err %v, ok %v; want its panic as the job's error", err, ok)
	}
	if !logged {
		t.Error("the handler had no job logger")
	}
	if err, _ := r.Run(t.Context(), core.Job{ID: "job_2", Kind: "typed", Payload: []byte(`{"run_id":"run_9"}`)}); err != nil || got != "run_9" {
		t.Errorf("typed handler: err %v, payload %q", err, got)
	}
	err, _ = r.Run(t.Context(), core.Job{ID: "job_3", Kind: "typed", Payload: []byte(`[1]`)})
	if !errors.As(err, new(*core.PermanentError)) {
		t.Errorf("a payload that does not decode: %v, want a permanent error", err)
	}
	if _, ok := r.Run(t.Context(), core.Job{Kind: "nobody"}); ok {
		t.Error("a kind nobody registered was run")
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if want := "panics failed,typed ok,typed failed"; strings.Join(obs.seen, ",") != want {
		t.Errorf("observed %q, want %q", strings.Join(obs.seen, ","), want)
	}
}
