package lease_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core/lease"
	"github.com/agentgate/agentgate/store/sqlite"
)

func TestRunHandsOverWhenTheHolderStops(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mu sync.Mutex
	active, maxActive := 0, 0
	started := make(chan string, 10)
	work := func(holder string) func(context.Context) {
		return func(ctx context.Context) {
			mu.Lock()
			active++
			maxActive = max(maxActive, active)
			mu.Unlock()
			started <- holder
			<-ctx.Done()
			mu.Lock()
			active--
			mu.Unlock()
		}
	}
	ctxA, stopA := context.WithCancel(t.Context())
	doneA := make(chan struct{})
	go func() { defer close(doneA); lease.Run(ctxA, db, "sweep", "a", 300*time.Millisecond, log, work("a")) }()
	if got := <-started; got != "a" {
		t.Fatalf("first holder %s", got)
	}
	ctxB, stopB := context.WithCancel(t.Context())
	doneB := make(chan struct{})
	go func() { defer close(doneB); lease.Run(ctxB, db, "sweep", "b", 300*time.Millisecond, log, work("b")) }()
	stopA() // a releases the lease on its way out; b takes over
	<-doneA
	select {
	case got := <-started:
		if got != "b" {
			t.Fatalf("second holder %s", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b never took over the lease")
	}
	stopB()
	<-doneB
	if maxActive != 1 {
		t.Fatalf("%d holders ran at once", maxActive)
	}
}
