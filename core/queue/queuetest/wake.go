package queuetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
)

// RunWakesWhenDue checks a queue whose waiting Dequeue sleeps until the
// next job is due instead of polling; q must be configured with the real
// clock and a poll far longer than the test (an hour), so that each
// delivery below comes from the sleep until due or from a wake-up: a
// delayed job, a retry scheduled while a worker already waits, a lease that
// runs out. asleep returns once a Dequeue started after the call has
// looked and gone to sleep.
func RunWakesWhenDue(t *testing.T, q core.Queue, asleep func()) {
	t.Helper()
	wait := func() (core.Job, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		return q.Dequeue(ctx, "w", time.Minute)
	}
	dequeue := func(what string) core.Job {
		t.Helper()
		j, err := wait()
		if err != nil {
			t.Fatalf("%s: Dequeue = %v; the wait did not end when the job was due", what, err)
		}
		return j
	}

	if err := q.Enqueue(t.Context(), core.Job{Kind: "later", RunAt: time.Now().Add(200 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	j := dequeue("delayed job")
	if j.Kind != "later" {
		t.Fatalf("dequeued %q, want the delayed job", j.Kind)
	}
	// A worker waits (the only job is leased for a minute), then the job
	// fails with a retry due before that minute.
	got := make(chan core.Job, 1)
	go func() {
		j, err := wait()
		if err != nil {
			t.Errorf("retry: Dequeue = %v; the waiting worker was not told of the retry", err)
		}
		got <- j
	}()
	asleep()
	if _, err := q.Fail(t.Context(), j, "try again", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if j = <-got; j.Attempt != 2 {
		t.Fatalf("retry delivered attempt %d, want 2", j.Attempt)
	}
	if err := q.Ack(t.Context(), j); err != nil {
		t.Fatal(err)
	}

	// A lease that runs out: the holder stopped heartbeating.
	if err := q.Enqueue(t.Context(), core.Job{Kind: "held"}); err != nil {
		t.Fatal(err)
	}
	held, err := q.Dequeue(t.Context(), "gone", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if j = dequeue("expired lease"); j.ID != held.ID || j.Lease == held.Lease {
		t.Fatalf("after the lease ran out got %s (lease %s), want %s under a new lease", j.ID, j.Lease, held.ID)
	}
}
