package core_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
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

// patientModel answers once the engine logged that the job's lease was
// lost (it has acted on it), unless its context ends first.
type patientModel struct {
	logged      chan struct{}
	interrupted chan struct{}
}

func (m *patientModel) Generate(ctx context.Context, _ core.ModelRequest, _ func(string)) (core.ModelResponse, error) {
	select {
	case <-m.logged:
		return core.ModelResponse{Text: "done"}, nil
	case <-ctx.Done():
		close(m.interrupted)
		return core.ModelResponse{}, ctx.Err()
	}
}

// logSeen closes seen at the first record whose message has text.
type logSeen struct {
	text string
	once sync.Once
	seen chan struct{}
}

func (l *logSeen) Enabled(context.Context, slog.Level) bool { return true }
func (l *logSeen) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logSeen) WithGroup(string) slog.Handler            { return l }
func (l *logSeen) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, l.text) {
		l.once.Do(func() { close(l.seen) })
	}
	return nil
}

// TestLostJobLeaseLeavesTheStepAlone: a run step whose job lease is lost
// (Redis flushed, or down) goes on under the run's claim, which keeps
// other workers off the run; it is not cut short, to be called again.
func TestLostJobLeaseLeavesTheStepAlone(t *testing.T) {
	t.Parallel()
	q := &lostLease{lost: make(chan struct{})}
	logs := &logSeen{text: "job lease lost", seen: make(chan struct{})}
	m := &patientModel{logged: logs.seen, interrupted: make(chan struct{})}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{Logger: slog.New(logs)}, func(h *harness) {
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

// flakyClaim is a store whose first claim extend works, the second fails
// at once, and the later ones hang; it records how long the third was
// given.
type flakyClaim struct {
	core.Store
	mu    sync.Mutex
	calls int
	given time.Duration // the third extend's time, -1 before it came
}

func (s *flakyClaim) ExtendClaim(ctx context.Context, id, owner string, until time.Time) error {
	s.mu.Lock()
	s.calls++
	n := s.calls
	if n == 3 {
		dl, _ := ctx.Deadline()
		s.given = time.Until(dl)
	}
	s.mu.Unlock()
	switch n {
	case 1:
		return s.Store.ExtendClaim(ctx, id, owner, until)
	case 2:
		return errors.New("store unavailable")
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestHangAfterAFailureStopsInTime: after a failed extend, the next one
// may hang only until half a heartbeat before the claim runs out, so the
// work stops while the claim holds (given the full third of the TTL, it
// stopped as the claim ran out).
func TestHangAfterAFailureStopsInTime(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	m := &stuckModel{stopped: make(chan struct{})}
	st := &flakyClaim{given: -1}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{}, func(h *harness) {
		h.claimTTL = ttl
		h.store = func(inner core.Store) core.Store { st.Store = inner; return st }
	})
	h.submit("a", "", "hi")
	select {
	case <-m.stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the step went on while the claim's extends failed and hung")
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if every := ttl / 3; st.given > every*3/4 {
		t.Errorf("the extend after a failure was given %s, want at most half a heartbeat (%s) and the time before the claim runs out", st.given, every/2)
	}
}

// downQueue is a queue whose lease extends fail (Redis down), counting
// them.
type downQueue struct {
	core.Queue
	mu    sync.Mutex
	calls int
	third chan struct{}
}

func (q *downQueue) Extend(context.Context, core.Job, time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.calls++; q.calls == 3 {
		close(q.third)
	}
	return errors.New("redis: connection refused")
}

// waitingModel answers once the queue was asked a third time to extend.
type waitingModel struct{ q *downQueue }

func (m waitingModel) Generate(ctx context.Context, _ core.ModelRequest, _ func(string)) (core.ModelResponse, error) {
	select {
	case <-m.q.third:
		return core.ModelResponse{Text: "done"}, nil
	case <-ctx.Done():
		return core.ModelResponse{}, ctx.Err()
	}
}

// TestRunJobLeaseKeptTrying: while Redis is down, a run step goes on and
// its job's lease is still extended, every heartbeat (so that the job is
// not delivered again once Redis is back).
func TestRunJobLeaseKeptTrying(t *testing.T) {
	t.Parallel()
	q := &downQueue{third: make(chan struct{})}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: waitingModel{q}}}, sqlite.Options{}, func(h *harness) {
		h.claimTTL = 300 * time.Millisecond
		h.queue = func(inner core.Queue) core.Queue { q.Queue = inner; return q }
	})
	run := h.submit("a", "", "hi")
	h.waitStatus(run.ID, core.RunCompleted)
}
