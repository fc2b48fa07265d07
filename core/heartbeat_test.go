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

// hangingClaim is a store whose claim extends hang until their context
// ends: a store that stopped answering.
type hangingClaim struct {
	core.Store
}

func (hangingClaim) ExtendClaim(ctx context.Context, _, _ string, _ time.Time) error {
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

// TestHangingExtendStopsTheWork: a worker whose claim extends hang stops
// its step before the claim can run out, as when they fail: otherwise
// another worker takes the run over while the first still runs it (a tool
// called twice at once).
func TestHangingExtendStopsTheWork(t *testing.T) {
	t.Parallel()
	m := &stuckModel{stopped: make(chan struct{})}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{}, func(h *harness) {
		h.claimTTL = 300 * time.Millisecond
		h.store = func(s core.Store) core.Store { return hangingClaim{s} }
	})
	h.submit("a", "", "hi")
	select {
	case <-m.stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the step went on while the claim's extends hung")
	}
}

// failingClaim is a store whose claim extends fail after the first.
type failingClaim struct {
	core.Store
	mu    sync.Mutex
	calls int
}

func (s *failingClaim) ExtendClaim(ctx context.Context, id, owner string, until time.Time) error {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	if n == 1 {
		return s.Store.ExtendClaim(ctx, id, owner, until)
	}
	return errors.New("store unavailable")
}

func (s *failingClaim) failed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls - 1
}

// TestFailingExtendsStopTheWork: extends come every third of the claim's
// time; after the last one that worked, the work stops at the second
// failure, while the claim still holds, not at the third, when it has run
// out.
func TestFailingExtendsStopTheWork(t *testing.T) {
	t.Parallel()
	m := &stuckModel{stopped: make(chan struct{})}
	st := &failingClaim{}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{}, func(h *harness) {
		h.claimTTL = 3 * time.Second
		h.store = func(inner core.Store) core.Store { st.Store = inner; return st }
	})
	h.submit("a", "", "hi")
	select {
	case <-m.stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the step went on while the claim's extends failed")
	}
	if n := st.failed(); n != 2 {
		t.Errorf("the work stopped after %d failed extends, want 2", n)
	}
}

// lostLease is a queue that answers every lease extend with ErrLeaseLost
// (Redis flushed), and tells when it did.
type lostLease struct {
	core.Queue
	once sync.Once
	lost chan struct{}
}

func (q *lostLease) Extend(context.Context, core.Job, time.Duration) error {
	q.once.Do(func() { close(q.lost) })
	return core.ErrLeaseLost
}

// patientModel answers a while after the queue said the job's lease was
// lost, unless its context ends first.
type patientModel struct {
	q           *lostLease
	interrupted chan struct{}
}

func (m *patientModel) Generate(ctx context.Context, _ core.ModelRequest, _ func(string)) (core.ModelResponse, error) {
	select {
	case <-m.q.lost:
	case <-ctx.Done():
	}
	select {
	case <-time.After(300 * time.Millisecond): // time for the heartbeat to act on it
		return core.ModelResponse{Text: "done"}, nil
	case <-ctx.Done():
		close(m.interrupted)
		return core.ModelResponse{}, ctx.Err()
	}
}

// TestLostJobLeaseLeavesTheStepAlone: a run step whose job lease is lost
// (Redis flushed, or down) goes on under the run's claim, which keeps
// other workers off the run; it is not cut short, to be called again.
func TestLostJobLeaseLeavesTheStepAlone(t *testing.T) {
	t.Parallel()
	q := &lostLease{lost: make(chan struct{})}
	m := &patientModel{q: q, interrupted: make(chan struct{})}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{}, func(h *harness) {
		h.claimTTL = 300 * time.Millisecond
		h.queue = func(inner core.Queue) core.Queue { q.Queue = inner; return q }
	})
	run := h.submit("a", "", "hi")
	h.wait(run.ID, "completed or interrupted", func(r core.Run) bool {
		select {
		case <-m.interrupted:
			t.Fatal("the step was cut short when its job lease was lost")
		default:
		}
		return r.Status == core.RunCompleted
	})
}

// interruptedModel hangs (until its context ends: the gateway stops) on
// its first calls, then answers.
type interruptedModel struct {
	mu      sync.Mutex
	calls   int
	hangs   int
	started chan struct{}
}

func (m *interruptedModel) Generate(ctx context.Context, _ core.ModelRequest, _ func(string)) (core.ModelResponse, error) {
	m.mu.Lock()
	m.calls++
	hang := m.calls <= m.hangs
	m.mu.Unlock()
	if !hang {
		return core.ModelResponse{Text: "done"}, nil
	}
	m.started <- struct{}{}
	<-ctx.Done()
	return core.ModelResponse{}, ctx.Err()
}

// TestJanitorRescuesARunWhoseJobDied: a step interrupted at every delivery
// (the gateway stopped during a long call, again and again) has its job
// dead-lettered when it is next dequeued; on the embedded store the
// janitor gives the still running run a job again, without a restart.
func TestJanitorRescuesARunWhoseJobDied(t *testing.T) {
	t.Parallel()
	const maxAttempts = 3
	m := &interruptedModel{hangs: maxAttempts, started: make(chan struct{}, maxAttempts)}
	opts := sqlite.Options{MaxAttempts: maxAttempts}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, opts, func(h *harness) {
		h.janitor, h.drain = 200*time.Millisecond, 100*time.Millisecond
	})
	run := h.submit("a", "", "hi")
	for range maxAttempts {
		select {
		case <-m.started:
		case <-time.After(20 * time.Second):
			t.Fatal("the step was not delivered again after a restart")
		}
		h.restart(opts)
	}
	h.waitStatus(run.ID, core.RunCompleted)
}
