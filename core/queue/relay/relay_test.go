package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/queue/relay"
	"github.com/agentgate/agentgate/store/sqlite"
)

func open(t *testing.T, name string) *sqlite.DB { return openWith(t, name, nil) }

func openWith(t *testing.T, name string, clock core.Clock) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), name), sqlite.Options{Logger: slog.New(slog.DiscardHandler), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// refusing is a queue whose Enqueue fails while down is true.
type refusing struct {
	core.Queue
	down bool
}

func (q *refusing) Enqueue(ctx context.Context, j core.Job) error {
	if q.down {
		return errors.New("connection refused")
	}
	return q.Queue.Enqueue(ctx, j)
}

func TestDrainMovesEveryDueJobOnce(t *testing.T) {
	from, to := open(t, "outbox.db"), open(t, "queue.db")
	for i := range 3 {
		p, _ := json.Marshal(i)
		if err := from.Enqueue(t.Context(), core.Job{Kind: core.JobRun, Key: "", Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	if err := from.Enqueue(t.Context(), core.Job{Kind: core.JobRun, RunAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	r, _ := relay.New(relay.Config{From: from, To: to})
	n, err := r.Drain(t.Context())
	if err != nil || n != 3 {
		t.Fatalf("Drain = %d, %v; want 3 due jobs", n, err)
	}
	if d, _ := from.Depth(t.Context()); d != 1 {
		t.Fatalf("outbox depth %d, want 1 (the delayed job stays until due)", d)
	}
	var got []string
	for {
		j, ok, err := to.TryDequeue(t.Context(), "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, string(j.Payload))
	}
	if len(got) != 3 || got[0] != "0" || got[2] != "2" {
		t.Fatalf("forwarded %v, want [0 1 2] in order", got)
	}
}

func TestRefusedJobStaysInTheOutbox(t *testing.T) {
	from, to := open(t, "outbox.db"), open(t, "queue.db")
	if err := from.Enqueue(t.Context(), core.RunJobFor("run_1")); err != nil {
		t.Fatal(err)
	}
	q := &refusing{Queue: to, down: true}
	r, _ := relay.New(relay.Config{From: from, To: q})
	if _, err := r.Drain(t.Context()); err == nil {
		t.Fatal("Drain succeeded while the queue refused jobs")
	}
	if d, _ := from.Depth(t.Context()); d != 1 {
		t.Fatalf("outbox depth %d after a refused forward, want 1", d)
	}
	if d, _ := to.Depth(t.Context()); d != 0 {
		t.Fatalf("queue depth %d, want 0", d)
	}
}

// A job other than a run's stays in the outbox until its forwarded copy was
// handled: when the queue loses it (Redis restarted empty), it is forwarded
// again after Recheck; once handled, it is gone for good.
func TestKeptJobSurvivesALostQueue(t *testing.T) {
	clock := &manualClock{now: time.Now()}
	from := openWith(t, "outbox.db", clock)
	lost, to := openWith(t, "lost.db", clock), openWith(t, "queue.db", clock)
	if err := from.Enqueue(t.Context(), core.Job{Kind: "slack.reply", Key: "slack.reply:run_1", Payload: json.RawMessage(`{"run_id":"run_1"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := from.Enqueue(t.Context(), core.RunJobFor("run_2")); err != nil {
		t.Fatal(err)
	}
	q := &refusing{Queue: lost}
	const recheck = 2 * time.Minute
	r, _ := relay.New(relay.Config{From: from, To: q, Recheck: recheck, Now: clock.Now})
	if n, err := r.Drain(t.Context()); err != nil || n != 2 {
		t.Fatalf("Drain = %d, %v; want both jobs", n, err)
	}
	if d, _ := from.Depth(t.Context()); d != 1 {
		t.Fatalf("outbox depth after forwarding = %d, want 1 (the reply job is kept, the run job gone)", d)
	}
	// Forwarded again while its copy is still queued: not doubled.
	if n, err := r.Drain(t.Context()); err != nil || n != 0 {
		t.Fatalf("Drain before Recheck = %d, %v; want nothing", n, err)
	}
	clock.Advance(recheck)
	if n, err := r.Drain(t.Context()); err != nil || n != 1 {
		t.Fatalf("Drain after Recheck = %d, %v; want the kept job", n, err)
	}
	if d, _ := lost.Depth(t.Context()); d != 2 {
		t.Fatalf("queue depth = %d, want 2 (one reply, one run): the copy still there was not doubled", d)
	}

	// The queue loses everything; after Recheck the reply job comes again.
	q.Queue = to
	clock.Advance(recheck)
	if n, err := r.Drain(t.Context()); err != nil || n != 1 {
		t.Fatalf("Drain after the queue lost its data = %d, %v; want the kept job again", n, err)
	}
	workers := relay.Receipts(to, from, nil)
	ager, ok := workers.(core.QueueAger)
	if due, err := ager.OldestDue(t.Context()); !ok || err != nil || due.IsZero() {
		t.Fatalf("the workers' OldestDue = %s, %v (an ager: %t); want the reply job's due time", due, err, ok)
	}
	j, ok, err := workers.TryDequeue(t.Context(), "w", time.Minute)
	if err != nil || !ok || j.Kind != "slack.reply" {
		t.Fatalf("worker got %+v, %v, %v; want the reply job", j, ok, err)
	}
	if err := workers.Ack(t.Context(), j); err != nil {
		t.Fatal(err)
	}
	clock.Advance(recheck)
	if n, err := r.Drain(t.Context()); err != nil || n != 0 {
		t.Fatalf("Drain after the receipt = %d, %v; want nothing", n, err)
	}
	if d, _ := from.Depth(t.Context()); d != 0 {
		t.Fatalf("outbox depth after the receipt = %d, want 0", d)
	}
}

// manualClock is a clock the test moves.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A queue that stays down longer than a job's delivery limit dead-letters
// nothing: refusals are not deliveries, and the job goes through once the
// queue is back.
func TestLongOutageDeadLettersNothing(t *testing.T) {
	clock := &manualClock{now: time.Now()}
	from, to := openWith(t, "outbox.db", clock), open(t, "queue.db")
	reply := core.Job{Kind: "reply", Key: "reply:run_1", Payload: json.RawMessage(`{"run_id":"run_1"}`), MaxAttempts: 3}
	for _, j := range []core.Job{core.RunJobFor("run_1"), reply} {
		if err := from.Enqueue(t.Context(), j); err != nil {
			t.Fatal(err)
		}
	}
	q := &refusing{Queue: to, down: true}
	r, _ := relay.New(relay.Config{From: from, To: q, Now: clock.Now})
	for range 10 { // ten refusals each, more than either job's limit
		if _, err := r.Drain(t.Context()); err == nil {
			t.Fatal("Drain succeeded while the queue refused jobs")
		}
		clock.Advance(2 * time.Second)
		if _, err := r.Drain(t.Context()); err == nil {
			t.Fatal("Drain succeeded while the queue refused jobs")
		}
		clock.Advance(2 * time.Second)
	}
	if dead, err := from.DeadLetters(t.Context(), 0); err != nil || len(dead) != 0 {
		t.Fatalf("dead letters after the outage = %+v, %v; want none", dead, err)
	}
	q.down = false
	if n, err := r.Drain(t.Context()); err != nil || n != 2 {
		t.Fatalf("Drain once the queue is back = %d, %v; want both jobs", n, err)
	}
	if d, _ := to.Depth(t.Context()); d != 2 {
		t.Fatalf("queue depth %d, want 2", d)
	}
}
