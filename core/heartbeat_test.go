package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/sqlite"
)

// hangingExtend is a queue whose lease extends hang until their context
// ends: a store that stopped answering.
type hangingExtend struct {
	core.Queue
}

func (hangingExtend) Extend(ctx context.Context, _ core.Job, _ time.Duration) error {
	<-ctx.Done()
	return ctx.Err()
}

// stuckModel answers only when its context ends, and says so.
type stuckModel struct {
	once    sync.Once
	stopped chan struct{}
}

func (m *stuckModel) Generate(ctx context.Context, _ core.ModelRequest, _ func(string)) (core.ModelResponse, error) {
	<-ctx.Done()
	m.once.Do(func() { close(m.stopped) })
	return core.ModelResponse{}, ctx.Err()
}

// TestHangingExtendStopsTheWork: a worker whose lease extends hang stops
// its step before the lease can run out, as when they fail: otherwise
// another worker takes the job over while the first still runs it (a tool
// called twice at once).
func TestHangingExtendStopsTheWork(t *testing.T) {
	t.Parallel()
	m := &stuckModel{stopped: make(chan struct{})}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{}, func(h *harness) {
		h.claimTTL = 300 * time.Millisecond
		h.queue = func(q core.Queue) core.Queue { return hangingExtend{q} }
	})
	h.submit("a", "", "hi")
	select {
	case <-m.stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the step went on while the lease's extends hung")
	}
}

// failingExtend is a queue whose lease extends fail after the first.
type failingExtend struct {
	core.Queue
	mu    sync.Mutex
	calls int
}

func (q *failingExtend) Extend(ctx context.Context, job core.Job, ttl time.Duration) error {
	q.mu.Lock()
	q.calls++
	n := q.calls
	q.mu.Unlock()
	if n == 1 {
		return q.Queue.Extend(ctx, job, ttl)
	}
	return errors.New("store unavailable")
}

func (q *failingExtend) failed() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.calls - 1
}

// TestFailingExtendsStopTheWork: extends come every third of the lease's
// time; after the last one that worked, the work stops at the second
// failure, while the lease still holds, not at the third, when it has run
// out.
func TestFailingExtendsStopTheWork(t *testing.T) {
	t.Parallel()
	m := &stuckModel{stopped: make(chan struct{})}
	q := &failingExtend{}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{}, func(h *harness) {
		h.claimTTL = 3 * time.Second
		h.queue = func(inner core.Queue) core.Queue { q.Queue = inner; return q }
	})
	h.submit("a", "", "hi")
	select {
	case <-m.stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the step went on while the lease's extends failed")
	}
	if n := q.failed(); n != 2 {
		t.Errorf("the work stopped after %d failed extends, want 2", n)
	}
}
