// Package queuetest is the conformance suite every core.Queue implementation
// runs (store/sqlite, store/postgres, Redis Streams). It uses only the
// core.Queue interface and a FakeClock that the tests advance explicitly.
// Run covers one handle on the queue's storage; RunPeers covers several
// handles on shared storage, as separate processes hold them, for the
// backends that support that.
//
// The queue under test must be configured with:
//   - the FakeClock passed to the harness as its clock, for due times,
//     leases and retries;
//   - a default backoff of exactly 1s·2^(attempt-1) (sqlite.DefaultBackoff);
//   - a default MaxAttempts of 5;
//   - a short poll interval (tens of milliseconds) for noticing due jobs
//     that no Enqueue announced, so the blocking tests finish quickly.
//
// A waiting Dequeue must read the clock each time it looks for a due job
// (the blocking tests use FakeClock.NextNow to know it has looked).
package queuetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
)

// FakeClock is a core.Clock that moves only when a test says so. It is safe
// for concurrent use.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []chan struct{}
}

var _ core.Clock = (*FakeClock)(nil)

// NewFakeClock returns a clock stopped at t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now returns the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiters {
		close(w)
	}
	c.waiters = nil
	return c.now
}

// NextNow returns a channel that is closed by the next call of Now. A test
// that starts a Dequeue and then waits on it knows the Dequeue has looked at
// the queue (at the time Now returned) and found nothing due.
func (c *FakeClock) NextNow() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := make(chan struct{})
	c.waiters = append(c.waiters, w)
	return w
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Start is where every subtest's FakeClock starts (whole seconds, UTC, so
// backends that store coarser times still compare equal).
var Start = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// NewQueue opens an empty queue for one subtest, using clock. It registers
// its own cleanup with t. reopen closes the queue and opens the same storage
// again, returning the new handle (the old one is not used afterwards); nil
// skips the subtests that need it.
type NewQueue func(t *testing.T, clock *FakeClock) (q core.Queue, reopen func() core.Queue)

// waitLimit bounds how long a test waits for a blocked Dequeue before it
// declares the queue stuck. It is a failure guard, not synchronisation.
const waitLimit = 10 * time.Second

// lease is long enough that no test's clock moves reach it by accident.
const lease = time.Hour

// Run runs the conformance suite against the queues newQueue opens. Each
// subtest gets a fresh queue and clock and runs in parallel with the others.
func Run(t *testing.T, newQueue NewQueue) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"DeliversAllFields", testDeliversAllFields},
		{"NilPayloadIsNull", testNilPayloadIsNull},
		{"PayloadBytesKept", testPayloadBytesKept},
		{"RejectsBadArguments", testRejectsBadArguments},
		{"ForgedLease", testForgedLease},
		{"HeldIDRefused", testHeldIDRefused},
		{"EmptyQueue", testEmptyQueue},
		{"FIFO", testFIFO},
		{"DueOrder", testDueOrder},
		{"Delayed", testDelayed},
		{"RunAtInPastIsDue", testRunAtInPast},
		{"LeaseHidesJob", testLeaseHidesJob},
		{"LeaseExpiryRedelivers", testLeaseExpiryRedelivers},
		{"Extend", testExtend},
		{"Ack", testAck},
		{"FailBackoff", testFailBackoff},
		{"FailRetryAfter", testFailRetryAfter},
		{"FailReleasesLease", testFailReleasesLease},
		{"DeadLetterAfterFails", testDeadLetterAfterFails},
		{"DeadLetterAfterLeaseExpiries", testDeadLetterAfterLeaseExpiries},
		{"ExpiredLeaseDeadLetterKeepsLastError", testExpiredLeaseDeadLetterKeepsLastError},
		{"PerJobMaxAttempts", testPerJobMaxAttempts},
		{"DeadLettersOrderAndLimit", testDeadLettersOrderAndLimit},
		{"RetryDead", testRetryDead},
		{"PruneDeadLetters", testPruneDeadLetters},
		{"OldestDue", testOldestDue},
		{"KeyCoalescesWaiting", testKeyCoalescesWaiting},
		{"KeyCoalesceMovesEarlier", testKeyCoalesceMovesEarlier},
		{"KeyNotCoalescedWhileDelivered", testKeyNotCoalescedWhileDelivered},
		{"FailWhileSameKeyWaits", testFailWhileSameKeyWaits},
		{"KeyCoalescesConcurrentEnqueues", func(t *testing.T, h *harness) { keyCoalescesConcurrently(h, h.q) }},
		{"Recover", testRecover},
		{"DequeueWakesOnEnqueue", testDequeueWakesOnEnqueue},
		{"DequeueWaitsForDelayed", testDequeueWaitsForDelayed},
		{"DequeueWaitsForExpiredLease", testDequeueWaitsForExpiredLease},
		{"DequeueCancel", testDequeueCancel},
		{"ConcurrentConsumers", func(t *testing.T, h *harness) { concurrentConsumers(h, h.q) }},
		{"SurvivesReopen", testSurvivesReopen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := NewFakeClock(Start)
			q, reopen := newQueue(t, clock)
			tt.fn(t, &harness{t: t, q: q, reopen: reopen, clock: clock})
		})
	}
}

// NewPeers prepares empty storage for one subtest and returns open, which
// opens one more handle on it, as another process would: all handles share
// the jobs. Handles are configured as Run requires, except that their poll
// interval is longer than any test (an hour), so a waiting Dequeue is woken
// only by what the backend tells the other processes. listening, when not
// nil, is closed once the handle's Dequeue hears the other handles' jobs
// (store/postgres LISTENs from the first Dequeue on). open registers the
// handle's cleanup with t.
type NewPeers func(t *testing.T, clock *FakeClock) (open func() (q core.Queue, listening <-chan struct{}))

// RunPeers runs the suite of handles that share storage against the queues
// newPeers opens, for the backends that processes share (store/sqlite has
// one owner process and is not one of them). Each subtest gets fresh storage
// and a fresh clock and runs in parallel with the others.
func RunPeers(t *testing.T, newPeers NewPeers) {
	tests := []struct {
		name string
		fn   func(t *testing.T, p *peers)
	}{
		{"KeyCoalescesAcrossPeers", testKeyCoalescesAcrossPeers},
		{"DequeueWokenByPeer", testDequeueWokenByPeer},
		{"ConcurrentConsumersAcrossPeers", testConcurrentConsumersAcrossPeers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := NewFakeClock(Start)
			tt.fn(t, &peers{t: t, clock: clock, newPeers: newPeers, open: newPeers(t, clock)})
		})
	}
}

// peers is one RunPeers subtest's storage and clock.
type peers struct {
	t        *testing.T
	clock    *FakeClock
	newPeers NewPeers
	open     func() (core.Queue, <-chan struct{})
}

// handle opens one more handle on the subtest's storage.
func (p *peers) handle() (h *harness, listening <-chan struct{}) {
	q, listening := p.open()
	return &harness{t: p.t, q: q, clock: p.clock}, listening
}

func testKeyCoalescesAcrossPeers(t *testing.T, p *peers) {
	a, _ := p.handle()
	b, _ := p.handle()
	keyCoalescesConcurrently(a, a.q, b.q)
}

func testConcurrentConsumersAcrossPeers(t *testing.T, p *peers) {
	producer, _ := p.handle()
	a, _ := p.handle()
	b, _ := p.handle()
	concurrentConsumers(producer, a.q, b.q)
}

func testDequeueWokenByPeer(t *testing.T, p *peers) {
	producer, _ := p.handle()
	consumer, listening := p.handle()
	// A queue on other storage of the same server (another schema, another
	// prefix): what it holds is not delivered here.
	q, _ := p.newPeers(t, p.clock)()
	stranger := &harness{t: t, q: q, clock: p.clock}
	for round := range 3 {
		ch := consumer.dequeueBlocked(t.Context(), "c1")
		if listening != nil {
			select {
			case <-listening:
			case <-time.After(waitLimit):
				t.Fatalf("round %d: the waiting handle did not start listening within %s", round, waitLimit)
			}
		}
		stranger.enqueue(core.Job{Kind: "elsewhere", Payload: payload(-1)})
		producer.enqueue(core.Job{Kind: "test", Payload: payload(round)})
		select {
		case d := <-ch:
			if d.err != nil || string(d.job.Payload) != string(payload(round)) {
				t.Fatalf("round %d: Dequeue = %s, %v; want %s", round, d.job.Payload, d.err, payload(round))
			}
			consumer.ack(d.job)
		case <-time.After(waitLimit):
			t.Fatalf("round %d: Dequeue not woken within %s by a job another handle enqueued", round, waitLimit)
		}
	}
	stranger.depth(3)
	producer.depth(0)
}

// harness bundles one subtest's queue and clock with assertion helpers.
type harness struct {
	t      *testing.T
	q      core.Queue
	reopen func() core.Queue
	clock  *FakeClock
}

// payload is the JSON payload that names test job n.
func payload(n int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)) }

func (h *harness) enqueue(j core.Job) {
	h.t.Helper()
	if err := h.q.Enqueue(h.t.Context(), j); err != nil {
		h.t.Fatalf("Enqueue(%s): %v", j.Payload, err)
	}
}

// enqueueN enqueues jobs with payloads 1..n in order.
func (h *harness) enqueueN(n int) {
	h.t.Helper()
	for i := 1; i <= n; i++ {
		h.enqueue(core.Job{Kind: "test", Payload: payload(i)})
	}
}

// next dequeues a job that must be due.
func (h *harness) next(consumer string, lease time.Duration) core.Job {
	h.t.Helper()
	j, ok, err := h.q.TryDequeue(h.t.Context(), consumer, lease)
	if err != nil {
		h.t.Fatalf("TryDequeue: %v", err)
	}
	if !ok {
		h.t.Fatalf("TryDequeue at %s: no job due, want one", h.clock.Now().Format(time.RFC3339Nano))
	}
	return j
}

// nextPayload dequeues a job that must be due and carry payload p.
func (h *harness) nextPayload(consumer string, p json.RawMessage) core.Job {
	h.t.Helper()
	j := h.next(consumer, lease)
	if string(j.Payload) != string(p) {
		h.t.Fatalf("delivered %s, want %s", j.Payload, p)
	}
	return j
}

// none asserts that no job is due.
func (h *harness) none() {
	h.t.Helper()
	j, ok, err := h.q.TryDequeue(h.t.Context(), "probe", lease)
	if err != nil {
		h.t.Fatalf("TryDequeue: %v", err)
	}
	if ok {
		h.t.Fatalf("TryDequeue at %s delivered %s (attempt %d), want nothing due",
			h.clock.Now().Format(time.RFC3339Nano), j.Payload, j.Attempt)
	}
}

func (h *harness) ack(j core.Job) {
	h.t.Helper()
	if err := h.q.Ack(h.t.Context(), j); err != nil {
		h.t.Fatalf("Ack(%s): %v", j.Payload, err)
	}
}

func (h *harness) fail(j core.Job, reason string, retryAfter time.Duration) (dead bool) {
	h.t.Helper()
	dead, err := h.q.Fail(h.t.Context(), j, reason, retryAfter)
	if err != nil {
		h.t.Fatalf("Fail(%s): %v", j.Payload, err)
	}
	return dead
}

func (h *harness) depth(want int64) {
	h.t.Helper()
	got, err := h.q.Depth(h.t.Context())
	if err != nil {
		h.t.Fatalf("Depth: %v", err)
	}
	if got != want {
		h.t.Fatalf("Depth = %d, want %d", got, want)
	}
}

func (h *harness) deadLetters(limit int) []core.Job {
	h.t.Helper()
	jobs, err := h.q.DeadLetters(h.t.Context(), limit)
	if err != nil {
		h.t.Fatalf("DeadLetters: %v", err)
	}
	return jobs
}

// leaseLost asserts that op failed with core.ErrLeaseLost.
func (h *harness) leaseLost(op string, err error) {
	h.t.Helper()
	if !errors.Is(err, core.ErrLeaseLost) {
		h.t.Fatalf("%s: err = %v, want ErrLeaseLost", op, err)
	}
}

func testDeliversAllFields(t *testing.T, h *harness) {
	h.enqueue(core.Job{Kind: "email", Key: "user:7", Payload: json.RawMessage(`{"to":"a@example.com"}`), MaxAttempts: 3})
	h.depth(1)
	j := h.next("c1", lease)
	if j.ID == "" {
		t.Error("ID is empty")
	}
	if j.Kind != "email" || j.Key != "user:7" || string(j.Payload) != `{"to":"a@example.com"}` {
		t.Errorf("Kind, Key, Payload = %q, %q, %s; want email, user:7, {\"to\":\"a@example.com\"}", j.Kind, j.Key, j.Payload)
	}
	if j.Attempt != 1 || j.MaxAttempts != 3 {
		t.Errorf("Attempt, MaxAttempts = %d, %d; want 1, 3", j.Attempt, j.MaxAttempts)
	}
	if !j.RunAt.Equal(Start) || !j.CreatedAt.Equal(Start) {
		t.Errorf("RunAt, CreatedAt = %s, %s; want both %s", j.RunAt, j.CreatedAt, Start)
	}
	if j.RunAt.Location() != time.UTC || j.CreatedAt.Location() != time.UTC {
		t.Errorf("RunAt, CreatedAt locations = %s, %s; want UTC", j.RunAt.Location(), j.CreatedAt.Location())
	}
	if j.LastError != "" {
		t.Errorf("LastError = %q, want empty", j.LastError)
	}
	if j.Lease == "" {
		t.Error("Lease is empty")
	}
	h.depth(1) // a leased job still counts until it is acked

	// A job enqueued with MaxAttempts 0 reports the queue default.
	h.enqueue(core.Job{Kind: "plain", Payload: payload(1)})
	if j := h.next("c1", lease); j.MaxAttempts != 5 || j.Key != "" {
		t.Errorf("default job: MaxAttempts, Key = %d, %q; want 5, empty", j.MaxAttempts, j.Key)
	}
}

func testNilPayloadIsNull(t *testing.T, h *harness) {
	h.enqueue(core.Job{Kind: "test"})
	if j := h.next("c1", lease); string(j.Payload) != "null" {
		t.Errorf("nil payload delivered as %s, want null", j.Payload)
	}
}

func testPayloadBytesKept(t *testing.T, h *harness) {
	// Characters JSON encoders escape differently, a number a float would
	// round, and nested JSON: the payload comes back byte for byte on every
	// delivery, after a Fail and in the dead letter.
	p := json.RawMessage(`{"s":"a/b <&> \"q\" \\ é ☃ \u0001","n":12345678901234567890,"f":0.1,"a":[],"o":{}}`)
	h.enqueue(core.Job{Kind: "test", Payload: p, MaxAttempts: 2})
	j := h.nextPayload("c1", p)
	if h.fail(j, "boom", time.Second) {
		t.Fatal("Fail on attempt 1 of 2 dead-lettered the job")
	}
	h.clock.Advance(time.Second)
	j = h.nextPayload("c1", p)
	if !h.fail(j, "boom", 0) {
		t.Fatal("Fail on attempt 2 of 2 did not dead-letter the job")
	}
	if dl := h.deadLetters(0); len(dl) != 1 || string(dl[0].Payload) != string(p) {
		t.Fatalf("DeadLetters = %+v, want one with payload %s", dl, p)
	}
}

func testRejectsBadArguments(t *testing.T, h *harness) {
	ctx := t.Context()
	h.enqueueN(1)
	// A refused dequeue leases nothing, blocking or not.
	for _, bad := range []struct {
		what     string
		consumer string
		lease    time.Duration
	}{
		{"empty consumer", "", time.Minute},
		{"zero lease", "c1", 0},
		{"negative lease", "c1", -time.Second},
	} {
		if j, ok, err := h.q.TryDequeue(ctx, bad.consumer, bad.lease); err == nil || ok {
			t.Errorf("TryDequeue with %s = %s, %v, %v; want an error and no job", bad.what, j.Payload, ok, err)
		}
		if d := h.wait(h.dequeueAsyncFor(ctx, bad.consumer, bad.lease)); d.err == nil {
			t.Errorf("Dequeue with %s = %s; want an error", bad.what, d.job.Payload)
		}
	}
	j := h.nextPayload("c1", payload(1))
	if j.Attempt != 1 {
		t.Errorf("Attempt after refused dequeues = %d, want 1 (they delivered nothing)", j.Attempt)
	}
	if _, err := h.q.Recover(ctx, ""); err == nil {
		t.Error("Recover with empty consumer: want error")
	}
	h.none() // the refused Recover released nothing
	for _, d := range []time.Duration{0, -time.Second} {
		err := h.q.Extend(ctx, j, d)
		if err == nil {
			t.Errorf("Extend with lease %s: want error", d)
		}
		if errors.Is(err, core.ErrLeaseLost) {
			t.Errorf("Extend with lease %s: err = %v, want a refusal, not ErrLeaseLost (the lease is held)", d, err)
		}
	}
	// The refused Extends left the lease as it was.
	h.clock.Advance(lease - time.Millisecond)
	h.none()
	h.ack(j)
	h.depth(0)
}

func testForgedLease(t *testing.T, h *harness) {
	h.enqueueN(1)
	j := h.next("c1", lease)
	forged := j
	forged.Lease = "not-a-lease"
	h.leaseLost("Ack with a forged lease", h.q.Ack(t.Context(), forged))
	h.leaseLost("Extend with a forged lease", h.q.Extend(t.Context(), forged, lease))
	_, err := h.q.Fail(t.Context(), forged, "x", 0)
	h.leaseLost("Fail with a forged lease", err)
	// The real lease still holds the job.
	h.none()
	h.depth(1)
	h.ack(j)
	h.depth(0)
}

func testHeldIDRefused(t *testing.T, h *harness) {
	// A job given an id keeps it; a second job with the id of one the queue
	// still holds (waiting or delivered) is refused and changes nothing.
	const id = "job_fixed"
	held := func(state string) {
		t.Helper()
		if err := h.q.Enqueue(t.Context(), core.Job{ID: id, Kind: "test", Payload: payload(9)}); err == nil {
			t.Errorf("Enqueue of the id of a %s job: want error", state)
		}
		h.depth(1)
	}
	h.enqueue(core.Job{ID: id, Kind: "test", Payload: payload(1)})
	held("waiting")
	j := h.nextPayload("c1", payload(1))
	if j.ID != id {
		t.Errorf("ID = %q, want %q", j.ID, id)
	}
	held("delivered")
	h.none()
	h.ack(j)
	// Once acked, the id may be used again.
	h.enqueue(core.Job{ID: id, Kind: "test", Payload: payload(2)})
	if j := h.nextPayload("c1", payload(2)); j.ID != id || j.Attempt != 1 {
		t.Errorf("reused id: ID, Attempt = %q, %d; want %q, 1", j.ID, j.Attempt, id)
	}
}

func testEmptyQueue(t *testing.T, h *harness) {
	h.none()
	h.depth(0)
	if dl := h.deadLetters(10); len(dl) != 0 {
		t.Fatalf("DeadLetters = %d jobs, want none", len(dl))
	}
	n, err := h.q.Recover(t.Context(), "nobody")
	if err != nil || n != 0 {
		t.Fatalf("Recover(nobody) = %d, %v; want 0, nil", n, err)
	}
}

func testFIFO(t *testing.T, h *harness) {
	h.enqueueN(10)
	h.depth(10)
	for i := 1; i <= 10; i++ {
		h.ack(h.nextPayload("c1", payload(i)))
	}
	h.none()
	h.depth(0)
}

func testDueOrder(t *testing.T, h *harness) {
	// Jobs run in the order they become due, not the order they were enqueued.
	h.enqueue(core.Job{Kind: "test", Payload: payload(1), RunAt: Start.Add(3 * time.Second)})
	h.enqueue(core.Job{Kind: "test", Payload: payload(2), RunAt: Start.Add(1 * time.Second)})
	h.enqueue(core.Job{Kind: "test", Payload: payload(3), RunAt: Start.Add(2 * time.Second)})
	h.none()
	h.clock.Advance(3 * time.Second)
	for _, n := range []int{2, 3, 1} {
		h.nextPayload("c1", payload(n))
	}
	h.none()
}

func testDelayed(t *testing.T, h *harness) {
	runAt := Start.Add(time.Minute)
	h.enqueue(core.Job{Kind: "test", Payload: payload(1), RunAt: runAt})
	h.depth(1) // delayed jobs count
	h.none()
	h.clock.Advance(time.Minute - time.Millisecond)
	h.none()
	h.clock.Advance(time.Millisecond)
	j := h.nextPayload("c1", payload(1))
	if !j.RunAt.Equal(runAt) || !j.CreatedAt.Equal(Start) {
		t.Errorf("RunAt, CreatedAt = %s, %s; want %s, %s", j.RunAt, j.CreatedAt, runAt, Start)
	}
	if j.Attempt != 1 {
		t.Errorf("Attempt = %d, want 1", j.Attempt)
	}
}

func testRunAtInPast(t *testing.T, h *harness) {
	h.enqueue(core.Job{Kind: "test", Payload: payload(1), RunAt: Start.Add(-time.Hour)})
	h.nextPayload("c1", payload(1))
}

func testLeaseHidesJob(t *testing.T, h *harness) {
	h.enqueueN(2)
	h.nextPayload("c1", payload(1))
	// The leased job is hidden; the next consumer gets the next job.
	h.nextPayload("c2", payload(2))
	h.clock.Advance(lease - time.Millisecond)
	h.none()
}

func testLeaseExpiryRedelivers(t *testing.T, h *harness) {
	const short = 30 * time.Second
	h.enqueueN(1)
	first := h.next("c1", short)
	h.clock.Advance(short - time.Millisecond)
	h.none()
	h.clock.Advance(time.Millisecond)
	second := h.nextPayload("c2", payload(1))
	if second.ID != first.ID {
		t.Errorf("redelivered job ID = %s, want %s", second.ID, first.ID)
	}
	if second.Attempt != 2 {
		t.Errorf("redelivered Attempt = %d, want 2", second.Attempt)
	}
	if second.Lease == first.Lease {
		t.Errorf("redelivery kept the lease token %q", first.Lease)
	}
	// The first consumer's lease is gone: it can no longer settle the job.
	h.leaseLost("Ack with expired lease", h.q.Ack(t.Context(), first))
	h.leaseLost("Extend with expired lease", h.q.Extend(t.Context(), first, short))
	_, err := h.q.Fail(t.Context(), first, "late", 0)
	h.leaseLost("Fail with expired lease", err)
	h.depth(1)
	// The current holder still can.
	h.ack(second)
	h.depth(0)
}

func testExtend(t *testing.T, h *harness) {
	const short = 30 * time.Second
	h.enqueueN(1)
	j := h.next("c1", short)
	h.clock.Advance(20 * time.Second)
	if err := h.q.Extend(t.Context(), j, short); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	// Hidden until 20s+30s, past the original 30s.
	h.clock.Advance(29*time.Second + 999*time.Millisecond)
	h.none()
	// The same job value (same lease) still settles it after Extend.
	h.ack(j)
	h.depth(0)

	// Without an Ack the extended lease runs out and the job comes back.
	h.enqueueN(1)
	j = h.next("c1", short)
	if err := h.q.Extend(t.Context(), j, 2*short); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	h.clock.Advance(2*short - time.Millisecond)
	h.none()
	h.clock.Advance(time.Millisecond)
	if again := h.nextPayload("c2", payload(1)); again.Attempt != 2 {
		t.Errorf("after extended lease ran out: Attempt = %d, want 2", again.Attempt)
	}
}

func testAck(t *testing.T, h *harness) {
	h.enqueueN(2)
	j := h.nextPayload("c1", payload(1))
	h.ack(j)
	h.depth(1)
	// An acked job is gone for good: not redelivered once its lease would
	// have run out, and its lease can no longer be used.
	h.clock.Advance(2 * lease)
	h.nextPayload("c1", payload(2))
	h.none()
	h.leaseLost("second Ack", h.q.Ack(t.Context(), j))
	h.leaseLost("Extend after Ack", h.q.Extend(t.Context(), j, lease))
	_, err := h.q.Fail(t.Context(), j, "late", 0)
	h.leaseLost("Fail after Ack", err)
	// A job value that was never delivered has no lease.
	h.leaseLost("Ack of undelivered job", h.q.Ack(t.Context(), core.Job{ID: j.ID}))
}

func testFailBackoff(t *testing.T, h *harness) {
	h.enqueueN(1)
	j := h.next("c1", lease)
	// The default backoff after attempt n is 1s·2^(n-1).
	for _, step := range []struct {
		attempt int
		backoff time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}} {
		if j.Attempt != step.attempt {
			t.Fatalf("Attempt = %d, want %d", j.Attempt, step.attempt)
		}
		reason := fmt.Sprintf("boom %d", step.attempt)
		if h.fail(j, reason, 0) {
			t.Fatalf("Fail on attempt %d dead-lettered the job", step.attempt)
		}
		failedAt := h.clock.Now()
		h.depth(1)
		h.clock.Advance(step.backoff - time.Millisecond)
		h.none()
		h.clock.Advance(time.Millisecond)
		j = h.nextPayload("c1", payload(1))
		if j.LastError != reason {
			t.Errorf("LastError = %q, want %q", j.LastError, reason)
		}
		if want := failedAt.Add(step.backoff); !j.RunAt.Equal(want) {
			t.Errorf("retry RunAt = %s, want %s", j.RunAt, want)
		}
	}
	if j.Attempt != 4 {
		t.Errorf("Attempt = %d, want 4", j.Attempt)
	}
}

func testFailRetryAfter(t *testing.T, h *harness) {
	h.enqueueN(1)
	j := h.next("c1", lease)
	if h.fail(j, "rate limited", 10*time.Second) {
		t.Fatal("Fail dead-lettered the job")
	}
	h.clock.Advance(10*time.Second - time.Millisecond)
	h.none()
	h.clock.Advance(time.Millisecond)
	j = h.nextPayload("c1", payload(1))
	if j.Attempt != 2 || j.LastError != "rate limited" {
		t.Errorf("Attempt, LastError = %d, %q; want 2, \"rate limited\"", j.Attempt, j.LastError)
	}
}

func testFailReleasesLease(t *testing.T, h *harness) {
	h.enqueueN(1)
	j := h.next("c1", lease)
	h.fail(j, "boom", time.Minute)
	// The failed delivery is over: its lease settles nothing any more.
	h.leaseLost("Ack after Fail", h.q.Ack(t.Context(), j))
	h.leaseLost("Extend after Fail", h.q.Extend(t.Context(), j, lease))
	_, err := h.q.Fail(t.Context(), j, "again", 0)
	h.leaseLost("second Fail", err)
	h.depth(1)
}

func testDeadLetterAfterFails(t *testing.T, h *harness) {
	h.enqueue(core.Job{Kind: "test", Key: "k", Payload: payload(1)})
	var j core.Job
	for attempt := 1; attempt <= 5; attempt++ {
		j = h.nextPayload("c1", payload(1))
		if j.Attempt != attempt {
			t.Fatalf("Attempt = %d, want %d", j.Attempt, attempt)
		}
		dead := h.fail(j, fmt.Sprintf("boom %d", attempt), time.Second)
		if dead != (attempt == 5) {
			t.Fatalf("Fail on attempt %d: dead = %v, want %v", attempt, dead, attempt == 5)
		}
		h.clock.Advance(time.Second)
	}
	h.clock.Advance(time.Hour)
	h.none()
	h.depth(0)
	h.leaseLost("Ack of dead job", h.q.Ack(t.Context(), j))
	dl := h.deadLetters(10)
	if len(dl) != 1 {
		t.Fatalf("DeadLetters = %d jobs, want 1", len(dl))
	}
	d := dl[0]
	if d.ID != j.ID || d.Kind != "test" || d.Key != "k" || string(d.Payload) != string(payload(1)) {
		t.Errorf("dead letter = %+v, want job %s", d, j.ID)
	}
	if d.Attempt != 5 || d.LastError != "boom 5" || !d.CreatedAt.Equal(Start) {
		t.Errorf("dead letter Attempt, LastError, CreatedAt = %d, %q, %s; want 5, \"boom 5\", %s",
			d.Attempt, d.LastError, d.CreatedAt, Start)
	}
	// A dead job no longer absorbs new jobs with its key.
	h.enqueue(core.Job{Kind: "test", Key: "k", Payload: payload(2)})
	h.nextPayload("c1", payload(2))
}

func testDeadLetterAfterLeaseExpiries(t *testing.T, h *harness) {
	const short = 10 * time.Second
	h.enqueueN(1)
	var j core.Job
	for attempt := 1; attempt <= 5; attempt++ {
		j = h.next("c1", short)
		if j.Attempt != attempt {
			t.Fatalf("Attempt = %d, want %d", j.Attempt, attempt)
		}
		h.clock.Advance(short) // the consumer never settles the job
	}
	// A sixth delivery would exceed MaxAttempts: the job is dead instead.
	h.none()
	h.depth(0)
	dl := h.deadLetters(10)
	if len(dl) != 1 || dl[0].ID != j.ID {
		t.Fatalf("DeadLetters = %+v, want job %s", dl, j.ID)
	}
	if dl[0].Attempt != 5 || dl[0].LastError == "" {
		t.Errorf("dead letter Attempt, LastError = %d, %q; want 5 and a reason", dl[0].Attempt, dl[0].LastError)
	}
	h.leaseLost("Ack of dead job", h.q.Ack(t.Context(), j))
}

func testExpiredLeaseDeadLetterKeepsLastError(t *testing.T, h *harness) {
	// A job that failed and then used up its last delivery without settling
	// it dies with a reason that still names the last Fail's error.
	h.enqueue(core.Job{Kind: "test", Payload: payload(1), MaxAttempts: 2})
	if h.fail(h.next("c1", time.Minute), "boom", time.Second) {
		t.Fatal("Fail on attempt 1 of 2 dead-lettered the job")
	}
	h.clock.Advance(time.Second)
	if j := h.next("c1", time.Minute); j.Attempt != 2 { // the retry, never settled
		t.Fatalf("retry Attempt = %d, want 2", j.Attempt)
	}
	h.clock.Advance(time.Minute)
	h.none() // no third delivery of a job with MaxAttempts 2
	h.depth(0)
	dl := h.deadLetters(0)
	if want := "delivery limit reached: 2 attempts; last error: boom"; len(dl) != 1 || dl[0].LastError != want {
		t.Fatalf("DeadLetters = %+v, want one with LastError %q", dl, want)
	}
}

func testPerJobMaxAttempts(t *testing.T, h *harness) {
	// Limits below and above the queue default of 5 both apply.
	for _, limit := range []int{1, 2, 7} {
		h.enqueue(core.Job{Kind: "test", Payload: payload(limit), MaxAttempts: limit})
		for attempt := 1; attempt <= limit; attempt++ {
			j := h.nextPayload("c1", payload(limit))
			if j.Attempt != attempt || j.MaxAttempts != limit {
				t.Fatalf("Attempt, MaxAttempts = %d, %d; want %d, %d", j.Attempt, j.MaxAttempts, attempt, limit)
			}
			if dead := h.fail(j, "boom", time.Second); dead != (attempt == limit) {
				t.Fatalf("MaxAttempts %d: Fail on attempt %d: dead = %v, want %v", limit, attempt, dead, attempt == limit)
			}
			h.clock.Advance(time.Second)
		}
		h.none()
	}
	if n := len(h.deadLetters(0)); n != 3 {
		t.Fatalf("DeadLetters(0) = %d jobs, want all 3", n)
	}
}

func testDeadLettersOrderAndLimit(t *testing.T, h *harness) {
	for n := 1; n <= 3; n++ {
		h.enqueue(core.Job{Kind: "test", Payload: payload(n), MaxAttempts: 1})
	}
	for n := 1; n <= 3; n++ {
		if !h.fail(h.nextPayload("c1", payload(n)), "boom", 0) {
			t.Fatalf("job %d not dead-lettered", n)
		}
		h.clock.Advance(time.Second)
	}
	got := h.deadLetters(10)
	if len(got) != 3 {
		t.Fatalf("DeadLetters(10) = %d jobs, want 3", len(got))
	}
	for i, j := range got {
		if string(j.Payload) != string(payload(i+1)) {
			t.Errorf("DeadLetters[%d] = %s, want %s (oldest first)", i, j.Payload, payload(i+1))
		}
	}
	got = h.deadLetters(2)
	if len(got) != 2 || string(got[0].Payload) != string(payload(1)) || string(got[1].Payload) != string(payload(2)) {
		t.Errorf("DeadLetters(2) = %+v, want jobs 1 and 2", got)
	}
}

func testRetryDead(t *testing.T, h *harness) {
	h.enqueue(core.Job{Kind: "test", Payload: payload(1), MaxAttempts: 2})
	j := h.nextPayload("c1", payload(1))
	h.fail(j, "slack down", 0)
	h.clock.Advance(time.Hour)
	if !h.fail(h.nextPayload("c1", payload(1)), "slack still down", 0) {
		t.Fatal("job 1 not dead-lettered on its last attempt")
	}
	h.enqueue(core.Job{Kind: "test", Payload: payload(2), MaxAttempts: 1})
	if !h.fail(h.nextPayload("c1", payload(2)), "boom", 0) {
		t.Fatal("job 2 not dead-lettered")
	}
	h.depth(0)
	if _, err := h.q.RetryDead(t.Context(), "job_nope"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("RetryDead of an unknown id: err = %v, want ErrNotFound", err)
	}
	if _, err := h.q.RetryDead(t.Context(), h.deadLetters(0)[0].ID); err != nil {
		t.Fatal(err)
	}
	if dl := h.deadLetters(0); len(dl) != 1 || string(dl[0].Payload) != string(payload(2)) {
		t.Fatalf("dead letters after the retry = %+v, want only job 2", dl)
	}
	h.depth(1)
	// Due at once, with its attempts counted anew: it gets its two again.
	again := h.nextPayload("c1", payload(1))
	if again.ID != j.ID || again.Attempt != 1 || again.Kind != "test" {
		t.Fatalf("retried job = %+v, want %s on attempt 1", again, j.ID)
	}
	if h.fail(again, "once more", 0) {
		t.Fatal("the retried job died on its first attempt again")
	}
	h.clock.Advance(time.Hour)
	h.ack(h.nextPayload("c1", payload(1)))
	h.depth(0)
	if _, err := h.q.RetryDead(t.Context(), j.ID); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("RetryDead of a job no longer dead: err = %v, want ErrNotFound", err)
	}
}

// testPruneDeadLetters: retention removes the jobs that died before its
// cutoff (by the queue's clock), oldest first and at most its limit; jobs
// that wait and younger dead letters stay.
func testPruneDeadLetters(t *testing.T, h *harness) {
	p, ok := h.q.(core.Pruner)
	if !ok {
		t.Skip("queue does not prune")
	}
	prune := func(before time.Time, limit, want int) {
		t.Helper()
		if n, err := p.Prune(t.Context(), core.PruneDeadJobs, before, limit); err != nil || n != want {
			t.Fatalf("Prune(dead jobs before %s, limit %d) = %d, %v; want %d", before.Sub(Start), limit, n, err, want)
		}
	}
	for i := 1; i <= 3; i++ {
		h.enqueue(core.Job{Kind: "test", Payload: payload(i), MaxAttempts: 1})
		if !h.fail(h.nextPayload("c1", payload(i)), "boom", 0) {
			t.Fatalf("job %d not dead-lettered", i)
		}
		h.clock.Advance(time.Hour)
	}
	h.enqueue(core.Job{Kind: "test", Payload: payload(4)})
	prune(Start, 10, 0) // none died before the start
	prune(Start.Add(2*time.Hour), 1, 1)
	prune(Start.Add(2*time.Hour), 10, 1)
	if dl := h.deadLetters(0); len(dl) != 1 || string(dl[0].Payload) != string(payload(3)) {
		t.Fatalf("dead letters after pruning those that died in the first two hours = %+v, want job 3", dl)
	}
	h.depth(1)
	if _, err := p.Prune(t.Context(), core.PruneDeadJobs, Start, 0); err == nil {
		t.Error("Prune with limit 0: no error")
	}
}

func testOldestDue(t *testing.T, h *harness) {
	a, ok := h.q.(core.QueueAger)
	if !ok {
		t.Skip("queue does not tell its age")
	}
	oldest := func(want time.Time) {
		t.Helper()
		got, err := a.OldestDue(t.Context())
		if err != nil || !got.Equal(want) {
			t.Fatalf("OldestDue at %s = %s, %v; want %s", h.clock.Now().Sub(Start), got, err, want)
		}
	}
	oldest(time.Time{}) // empty
	h.enqueue(core.Job{Kind: "test", Payload: payload(1), RunAt: Start.Add(time.Minute)})
	oldest(time.Time{}) // delayed: not waiting yet
	h.clock.Advance(2 * time.Minute)
	oldest(Start.Add(time.Minute)) // due a minute ago, not yet promoted by any dequeue
	h.enqueue(core.Job{Kind: "test", Payload: payload(2)})
	oldest(Start.Add(time.Minute))
	h.nextPayload("c1", payload(1))
	oldest(Start.Add(2 * time.Minute)) // the other one, enqueued due at once
	j := h.nextPayload("c1", payload(2))
	oldest(time.Time{}) // both in flight
	h.ack(j)
	h.clock.Advance(lease + 5*time.Second)
	oldest(Start.Add(2*time.Minute + lease)) // job 1's lease ran out 5s ago
	h.ack(h.nextPayload("c2", payload(1)))
	oldest(time.Time{})
}

func testKeyCoalescesWaiting(t *testing.T, h *harness) {
	h.enqueue(core.Job{Kind: "test", Key: "run:1", Payload: payload(1)})
	h.enqueue(core.Job{Kind: "test", Key: "run:1", Payload: payload(1)})
	h.enqueue(core.Job{Kind: "test", Key: "run:2", Payload: payload(2)})
	h.enqueue(core.Job{Kind: "test", Payload: payload(3)})
	h.enqueue(core.Job{Kind: "test", Payload: payload(3)}) // no key: never coalesced
	h.depth(4)
	for _, n := range []int{1, 2, 3, 3} {
		h.ack(h.nextPayload("c1", payload(n)))
	}
	h.clock.Advance(2 * lease)
	h.none()
}

func testKeyCoalesceMovesEarlier(t *testing.T, h *harness) {
	// A job scheduled for later is pulled forward by the same key enqueued
	// for now: coalescing never makes work wait longer.
	h.enqueue(core.Job{Kind: "test", Key: "k", Payload: payload(1), RunAt: Start.Add(time.Hour)})
	h.enqueue(core.Job{Kind: "test", Key: "k", Payload: payload(1)})
	h.depth(1)
	h.ack(h.nextPayload("c1", payload(1)))
	h.clock.Advance(time.Hour)
	h.none()
}

func testKeyNotCoalescedWhileDelivered(t *testing.T, h *harness) {
	h.enqueue(core.Job{Kind: "test", Key: "k", Payload: payload(1)})
	first := h.nextPayload("c1", payload(1))
	// The first job is being worked on; work enqueued now must not be lost
	// into it, so it becomes a second job.
	h.enqueue(core.Job{Kind: "test", Key: "k", Payload: payload(2)})
	h.depth(2)
	second := h.nextPayload("c2", payload(2))
	if second.ID == first.ID {
		t.Fatalf("second job has the first job's ID %s", first.ID)
	}
	if second.Attempt != 1 {
		t.Errorf("second job Attempt = %d, want 1", second.Attempt)
	}
	h.ack(first)
	h.ack(second)
	h.depth(0)
}

func testFailWhileSameKeyWaits(t *testing.T, h *harness) {
	// Work enqueued while a keyed job is delivered becomes a second job
	// (KeyNotCoalescedWhileDelivered); when the first then fails, it waits
	// again beside the second, with the same key, and neither is lost.
	h.enqueue(core.Job{Kind: "test", Key: "k", Payload: payload(1)})
	first := h.nextPayload("c1", payload(1))
	h.enqueue(core.Job{Kind: "test", Key: "k", Payload: payload(2)})
	if h.fail(first, "boom", time.Minute) {
		t.Fatal("Fail dead-lettered the job, want a retry")
	}
	h.depth(2)
	// More work with the key coalesces into a waiting job, which is due at
	// once; the failed job's retry is due by its retry time at the latest.
	h.enqueue(core.Job{Kind: "test", Key: "k", Payload: payload(3)})
	h.depth(2)
	attempts := map[string]int{} // payload → attempt delivered
	settle := func(j core.Job) {
		t.Helper()
		if _, dup := attempts[string(j.Payload)]; dup || j.Key != "k" {
			t.Fatalf("delivered %s (key %q) after %v, want each of jobs 1 and 2 once, key k", j.Payload, j.Key, attempts)
		}
		attempts[string(j.Payload)] = j.Attempt
		h.ack(j)
	}
	settle(h.next("c2", lease))
	h.clock.Advance(time.Minute)
	settle(h.next("c2", lease))
	if attempts[string(payload(1))] != 2 || attempts[string(payload(2))] != 1 {
		t.Errorf("deliveries (payload → attempt) = %v, want job 1 at attempt 2 and job 2 at attempt 1", attempts)
	}
	h.none()
	h.depth(0)
}

// keyCoalescesConcurrently enqueues a few keys from many goroutines at once,
// spread over handles: one job per key is left in h.q, and each is
// delivered once.
func keyCoalescesConcurrently(h *harness, handles ...core.Queue) {
	const keys, enqueuers = 5, 16
	t := h.t
	ctx := t.Context()
	want := map[string]string{} // key → payload of its job
	for k := range keys {
		want[fmt.Sprintf("k%d", k)] = string(payload(k))
	}
	var wg sync.WaitGroup
	for i := range enqueuers {
		q := handles[i%len(handles)]
		wg.Go(func() {
			for key, p := range want {
				if err := q.Enqueue(ctx, core.Job{Kind: "test", Key: key, Payload: json.RawMessage(p)}); err != nil {
					t.Errorf("Enqueue(%s): %v", key, err)
				}
			}
		})
	}
	wg.Wait()
	h.depth(keys) // one job per key
	for range keys {
		j := h.next("c1", lease)
		if p, ok := want[j.Key]; !ok || string(j.Payload) != p {
			t.Errorf("delivered %s with key %q; want one job for each key left of %v", j.Payload, j.Key, want)
		}
		delete(want, j.Key)
	}
	h.none()
}

func testRecover(t *testing.T, h *harness) {
	h.enqueueN(3)
	a1 := h.nextPayload("a", payload(1))
	b := h.nextPayload("b", payload(2))
	a2 := h.nextPayload("a", payload(3))
	h.none()
	n, err := h.q.Recover(t.Context(), "a")
	if err != nil || n != 2 {
		t.Fatalf("Recover(a) = %d, %v; want 2, nil", n, err)
	}
	// a's jobs are due again at once, without waiting for their leases;
	// b's job stays leased.
	got := map[string]int{}
	for range 2 {
		j := h.next("c", lease)
		got[string(j.Payload)] = j.Attempt
		h.ack(j)
	}
	if got[string(payload(1))] != 2 || got[string(payload(3))] != 2 || len(got) != 2 {
		t.Fatalf("recovered deliveries (payload → attempt) = %v, want jobs 1 and 3 at attempt 2", got)
	}
	h.none()
	h.leaseLost("Ack with recovered lease", h.q.Ack(t.Context(), a1))
	h.leaseLost("Ack with recovered lease", h.q.Ack(t.Context(), a2))
	h.ack(b)
	if n, err := h.q.Recover(t.Context(), "a"); err != nil || n != 0 {
		t.Fatalf("second Recover(a) = %d, %v; want 0, nil", n, err)
	}
	h.depth(0)
}

// dequeueAsync runs Dequeue in a goroutine and delivers its outcome.
func (h *harness) dequeueAsync(ctx context.Context, consumer string) <-chan dequeued {
	return h.dequeueAsyncFor(ctx, consumer, lease)
}

// dequeueAsyncFor is dequeueAsync with a lease of d.
func (h *harness) dequeueAsyncFor(ctx context.Context, consumer string, d time.Duration) <-chan dequeued {
	ch := make(chan dequeued, 1)
	go func() {
		j, err := h.q.Dequeue(ctx, consumer, d)
		ch <- dequeued{j, err}
	}()
	return ch
}

// dequeueBlocked starts a Dequeue on a queue with nothing due and returns
// once it has looked at the queue (read the clock) and not returned.
func (h *harness) dequeueBlocked(ctx context.Context, consumer string) <-chan dequeued {
	h.t.Helper()
	looked := h.clock.NextNow()
	ch := h.dequeueAsync(ctx, consumer)
	select {
	case <-looked:
	case d := <-ch:
		h.t.Fatalf("Dequeue with nothing due returned %s, %v", d.job.Payload, d.err)
	case <-time.After(waitLimit):
		h.t.Fatalf("Dequeue did not read the clock within %s", waitLimit)
	}
	return ch
}

type dequeued struct {
	job core.Job
	err error
}

// wait returns what a Dequeue started by dequeueAsync returned.
func (h *harness) wait(ch <-chan dequeued) dequeued {
	h.t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(waitLimit):
		h.t.Fatalf("Dequeue still blocked after %s", waitLimit)
		return dequeued{}
	}
}

func testDequeueWakesOnEnqueue(t *testing.T, h *harness) {
	// A due job is returned at once.
	h.enqueueN(1)
	if d := h.wait(h.dequeueAsync(t.Context(), "c1")); d.err != nil || string(d.job.Payload) != string(payload(1)) {
		t.Fatalf("Dequeue = %s, %v; want %s", d.job.Payload, d.err, payload(1))
	}
	// On an empty queue Dequeue waits, and an Enqueue from another
	// goroutine wakes it without the clock moving.
	ch := h.dequeueBlocked(t.Context(), "c1")
	h.enqueue(core.Job{Kind: "test", Payload: payload(2)})
	d := h.wait(ch)
	if d.err != nil || string(d.job.Payload) != string(payload(2)) || d.job.Attempt != 1 || d.job.Lease == "" {
		t.Fatalf("Dequeue = %+v, %v; want %s at attempt 1 with a lease", d.job, d.err, payload(2))
	}
	h.ack(d.job)
}

func testDequeueWaitsForDelayed(t *testing.T, h *harness) {
	h.enqueue(core.Job{Kind: "test", Payload: payload(1), RunAt: Start.Add(time.Minute)})
	ch := h.dequeueBlocked(t.Context(), "c1")
	// No Enqueue announces it: the queue must notice the job became due.
	h.clock.Advance(time.Minute)
	if d := h.wait(ch); d.err != nil || string(d.job.Payload) != string(payload(1)) {
		t.Fatalf("Dequeue = %s, %v; want %s", d.job.Payload, d.err, payload(1))
	}
}

func testDequeueWaitsForExpiredLease(t *testing.T, h *harness) {
	h.enqueueN(1)
	first := h.next("c1", time.Minute)
	ch := h.dequeueBlocked(t.Context(), "c2")
	h.clock.Advance(time.Minute)
	d := h.wait(ch)
	if d.err != nil || d.job.ID != first.ID || d.job.Attempt != 2 {
		t.Fatalf("Dequeue = %+v, %v; want job %s at attempt 2", d.job, d.err, first.ID)
	}
}

func testDequeueCancel(t *testing.T, h *harness) {
	ctx, cancel := context.WithCancel(t.Context())
	ch := h.dequeueBlocked(ctx, "c1")
	cancel()
	if d := h.wait(ch); !errors.Is(d.err, context.Canceled) {
		t.Fatalf("Dequeue after cancel = %+v, %v; want context.Canceled", d.job, d.err)
	}
	// Already cancelled: returns at once even when a job is due, and does
	// not lease it.
	h.enqueueN(1)
	if d := h.wait(h.dequeueAsync(ctx, "c1")); !errors.Is(d.err, context.Canceled) {
		t.Fatalf("Dequeue with cancelled ctx = %+v, %v; want context.Canceled", d.job, d.err)
	}
	h.nextPayload("c2", payload(1))
}

// concurrentConsumers enqueues jobs on h.q while four consumers, spread over
// handles, dequeue and ack them: every job is delivered exactly once. A stop
// job for each then ends the consumers (ctx would too, but a Dequeue blocked
// in a Redis XREAD notices it only when its poll interval runs out).
func concurrentConsumers(h *harness, handles ...core.Queue) {
	const jobs, consumers = 200, 4
	t := h.t
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()

	var (
		mu        sync.Mutex
		delivered = map[string]int{} // payload → deliveries
		total     int
		wg        sync.WaitGroup
	)
	wg.Go(func() {
		for i := 1; i <= jobs; i++ {
			if err := h.q.Enqueue(ctx, core.Job{Kind: "test", Payload: payload(i)}); err != nil {
				t.Errorf("Enqueue %d: %v", i, err)
				return
			}
		}
	})
	for c := range consumers {
		q := handles[c%len(handles)]
		wg.Go(func() {
			name := fmt.Sprintf("c%d", c)
			for {
				j, err := q.Dequeue(ctx, name, lease)
				if err != nil {
					t.Errorf("%s: Dequeue: %v", name, err)
					return
				}
				if err := q.Ack(ctx, j); err != nil {
					t.Errorf("%s: Ack(%s): %v", name, j.Payload, err)
					return
				}
				if j.Kind == "stop" {
					return
				}
				mu.Lock()
				delivered[string(j.Payload)]++
				total++
				last := total == jobs
				mu.Unlock()
				if !last {
					continue
				}
				for range consumers { // every job acked: stop the consumers
					if err := h.q.Enqueue(ctx, core.Job{Kind: "stop"}); err != nil {
						t.Errorf("Enqueue stop: %v", err)
						return
					}
				}
			}
		})
	}
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(2 * waitLimit):
		t.Fatalf("consumers still running after %s", 2*waitLimit)
	}
	if total < jobs {
		t.Fatalf("%d of %d jobs delivered within %s", total, jobs, waitLimit)
	}
	for i := 1; i <= jobs; i++ {
		if n := delivered[string(payload(i))]; n != 1 {
			t.Errorf("job %d delivered %d times, want once", i, n)
		}
	}
	h.depth(0)
}

func testSurvivesReopen(t *testing.T, h *harness) {
	if h.reopen == nil {
		t.Skip("queue has no reopen hook")
	}
	// Two jobs leased for a minute, one acked after the reopen and one left
	// to expire; a dead letter; a waiting job; a job delayed two minutes.
	h.enqueueN(2)
	leased := h.next("c1", time.Minute)
	expiring := h.next("c1", time.Minute)
	h.enqueue(core.Job{Kind: "test", Payload: payload(3), MaxAttempts: 1})
	if !h.fail(h.next("c1", time.Minute), "boom", 0) {
		t.Fatal("job 3 not dead-lettered")
	}
	h.enqueue(core.Job{Kind: "test", Payload: payload(4), Key: "k"})
	h.enqueue(core.Job{Kind: "test", Payload: payload(5), RunAt: Start.Add(2 * time.Minute)})

	h.q = h.reopen()

	h.depth(4)
	if dl := h.deadLetters(10); len(dl) != 1 || string(dl[0].Payload) != string(payload(3)) || dl[0].LastError != "boom" {
		t.Fatalf("DeadLetters after reopen = %+v, want job 3 with \"boom\"", dl)
	}
	h.ack(leased) // a lease taken before the reopen still holds
	// The waiting job is due and still coalesces its key.
	h.enqueue(core.Job{Kind: "test", Payload: payload(4), Key: "k"})
	h.depth(3)
	h.ack(h.nextPayload("c2", payload(4)))
	h.none()
	h.clock.Advance(time.Minute)
	j := h.nextPayload("c2", payload(2))
	if j.ID != expiring.ID || j.Attempt != 2 {
		t.Errorf("expired lease redelivered %s at attempt %d, want %s at attempt 2", j.ID, j.Attempt, expiring.ID)
	}
	h.ack(j)
	h.none()
	h.clock.Advance(time.Minute)
	h.ack(h.nextPayload("c2", payload(5)))
	h.depth(0)
}
