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
// runs out. asleep(n) returns once n Dequeue calls started after the call
// have looked and gone to sleep.
func RunWakesWhenDue(t *testing.T, q core.Queue, asleep func(n int)) {
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
	asleep(1)
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

// RunWakesEveryWorker checks, with the same queue, that jobs that become
// due together while several workers wait reach all of them however the
// wake-ups are shared out (a queue may wake one waiting worker and let it
// wake the next when it takes a job): the jobs of a crashed consumer,
// recovered in one statement, reach every waiting worker
// (RunRecoveredReachEveryWorker); and a delayed job is delivered when due
// while a job due now goes to the other worker.
func RunWakesEveryWorker(t *testing.T, q core.Queue, asleep func(n int)) {
	t.Helper()
	RunRecoveredReachEveryWorker(t, q, asleep)
	results := make(chan dequeued, 2)
	for range 2 {
		go waitFor(t, q, results)
	}
	asleep(2)
	if err := q.Enqueue(t.Context(), core.Job{Kind: "later", RunAt: time.Now().Add(300 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(t.Context(), core.Job{Kind: "now"}); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for range 2 {
		kinds[got(t, results).Kind] = true
	}
	if !kinds["later"] || !kinds["now"] {
		t.Fatalf("delivered %v, want the job due now and the delayed one", kinds)
	}
}

// waitFor sends what a Dequeue of q that waits up to 20 s returns.
func waitFor(t *testing.T, q core.Queue, results chan<- dequeued) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	j, err := q.Dequeue(ctx, "w", time.Minute)
	results <- dequeued{job: j, err: err}
}

// got is the next job a waiting Dequeue returned.
func got(t *testing.T, results <-chan dequeued) core.Job {
	t.Helper()
	r := <-results
	if r.err != nil {
		t.Fatalf("Dequeue = %v; a job that became due while it waited did not reach it", r.err)
	}
	return r.job
}

// RunRecoveredReachEveryWorker checks that the jobs of a crashed consumer,
// recovered in one call while six workers wait, reach every one of them
// (q's poll must be far longer than the test).
func RunRecoveredReachEveryWorker(t *testing.T, q core.Queue, asleep func(n int)) {
	t.Helper()
	const workers = 6
	for range workers {
		if err := q.Enqueue(t.Context(), core.Job{Kind: "held"}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Dequeue(t.Context(), "crashed", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	results := make(chan dequeued, workers)
	for range workers {
		go waitFor(t, q, results)
	}
	asleep(workers)
	if n, err := q.Recover(t.Context(), "crashed"); err != nil || n != workers {
		t.Fatalf("Recover = %d, %v; want %d", n, err, workers)
	}
	seen := map[string]bool{}
	for range workers {
		j := got(t, results)
		if seen[j.ID] {
			t.Fatalf("job %s delivered twice", j.ID)
		}
		seen[j.ID] = true
		if err := q.Ack(t.Context(), j); err != nil {
			t.Fatal(err)
		}
	}
}

// Quiet returns once count has not moved for 300 ms: for a queue that does
// not say when its waiting workers sleep, they have looked and gone to
// sleep. count is what the queue sends to its database.
func Quiet(count func() int64) {
	for last, quiet := count(), 0; quiet < 3; {
		time.Sleep(100 * time.Millisecond)
		if now := count(); now != last {
			last, quiet = now, 0
		} else {
			quiet++
		}
	}
}
