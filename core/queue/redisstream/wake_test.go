package redisstream

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/queue/queuetest"
)

// counter counts the commands a client sends (the queue sends no
// pipelines).
type counter struct{ RoundTrips }

// asleep waits for waiting workers to look and go to sleep.
func (c *counter) asleep(int) { queuetest.Quiet(c.Load) }

// openCounted opens a queue on a fresh prefix whose client counts its
// commands, polling once an hour: a waiting Dequeue is woken only by the
// listener hearing a new entry or by this process.
func openCounted(t *testing.T, prefix string) (*Queue, *counter) {
	t.Helper()
	n := &counter{}
	return openHooked(t, prefix, n), n
}

// openHooked opens a queue on prefix whose client goes through hook,
// polling once an hour.
func openHooked(t *testing.T, prefix string, hook redis.Hook) *Queue {
	t.Helper()
	c := testClient(t)
	c.AddHook(hook)
	q, err := New(c, Options{Prefix: prefix, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// The jobs of a crashed consumer, recovered while six workers wait, reach
// all six, though Recover wakes only one: each that takes a job wakes the
// next.
func TestRecoveredReachEveryWorker(t *testing.T) {
	q, n := openCounted(t, testPrefix(t, testClient(t)))
	queuetest.RunRecoveredReachEveryWorker(t, q, n.asleep)
}

// Jobs another replica enqueues together reach as many waiting workers
// here, though the listener wakes one: each that takes a job while newer
// entries wait wakes the next.
func TestPeerJobsReachEveryWorker(t *testing.T) {
	prefix := testPrefix(t, testClient(t))
	q, n := openCounted(t, prefix)
	producer, _ := openCounted(t, prefix)
	const workers = 6
	got := make(chan error, workers)
	for range workers {
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			j, err := q.Dequeue(ctx, "w", time.Minute)
			if err == nil {
				err = q.Ack(t.Context(), j)
			}
			got <- err
		}()
	}
	n.asleep(workers)
	for range workers {
		if err := producer.Enqueue(t.Context(), core.Job{Kind: "batch"}); err != nil {
			t.Fatal(err)
		}
	}
	for range workers {
		if err := <-got; err != nil {
			t.Fatalf("a job another replica enqueued did not reach a waiting worker: %v", err)
		}
	}
}

// An enqueue wakes one of the workers waiting, not all: with eight waiting
// the commands from the enqueue to a quiet queue are a handful (the
// enqueue, the listener's next XREAD, the look that takes the job), where
// waking them all cost a look and an XREAD per worker.
func TestEnqueueWakesOneWorker(t *testing.T) {
	q, n := openCounted(t, testPrefix(t, testClient(t)))
	const workers = 8
	got := make(chan error, workers)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for range workers {
		go func() {
			_, err := q.Dequeue(ctx, "w", time.Minute)
			got <- err
		}()
	}
	for n.Load() < workers { // each worker's first look
		time.Sleep(10 * time.Millisecond)
	}
	n.asleep(workers)
	before := n.Load()
	if err := q.Enqueue(t.Context(), core.Job{Kind: "one"}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	n.asleep(workers - 1)
	if sent := n.Load() - before; sent > 5 {
		t.Errorf("one enqueue with %d workers waiting: %d commands; want a handful, not a look by every worker", workers, sent)
	} else {
		t.Logf("one enqueue with %d workers waiting: %d commands", workers, sent)
	}
}

// While every worker is busy the listener sends nothing: the jobs another
// replica enqueues meanwhile cost this one no commands until a worker
// waits again.
func TestListenerQuietWhileWorkersBusy(t *testing.T) {
	prefix := testPrefix(t, testClient(t))
	q, n := openCounted(t, prefix)
	producer, _ := openCounted(t, prefix)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	got := make(chan core.Job, 1)
	go func() {
		j, err := q.Dequeue(ctx, "w", time.Minute) // waits: the listener starts
		if err != nil {
			t.Error(err)
		}
		got <- j
	}()
	n.asleep(1)
	if err := producer.Enqueue(t.Context(), core.Job{Kind: "first"}); err != nil {
		t.Fatal(err)
	}
	busy := <-got // the only worker holds it and does not ask for more
	n.asleep(0)
	before := n.Load()
	for range 20 {
		if err := producer.Enqueue(t.Context(), core.Job{Kind: "later"}); err != nil {
			t.Fatal(err)
		}
	}
	n.asleep(0)
	if sent := n.Load() - before; sent > 0 {
		t.Errorf("20 jobs enqueued elsewhere while no worker here waits: %d commands here; want none", sent)
	}
	if err := q.Ack(t.Context(), busy); err != nil {
		t.Fatal(err)
	}
	for range 20 { // the worker asks again: every job is there
		j, err := q.Dequeue(ctx, "w", time.Minute)
		if err != nil || j.Kind != "later" {
			t.Fatalf("Dequeue = %s, %v; want a later job", j.Kind, err)
		}
		if err := q.Ack(t.Context(), j); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEntryAfter(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"10-0", "9-5", true}, // by number, not as text
		{"9-5", "10-0", false},
		{"5-10", "5-9", true},
		{"5-9", "5-9", false},
		{"1-0", "0-0", true},
		{"", "0-0", false},
		{"x-1", "0-0", false},
	} {
		if got := entryAfter(tt.a, tt.b); got != tt.want {
			t.Errorf("entryAfter(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
