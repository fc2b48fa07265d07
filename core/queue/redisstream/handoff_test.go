package redisstream

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
)

// A job handed to a worker of this process that waits reaches it without
// a command to Redis; its ack and lease renewals send none either; a
// retry puts it into the stream for any replica. With no worker waiting
// there is nothing to reserve.
func TestHandoffToAWaitingWorker(t *testing.T) {
	prefix := testPrefix(t, testClient(t))
	q, n := openCounted(t, prefix)
	if q.Reserve(0) {
		t.Fatal("reserved a worker while none waits")
	}
	got := make(chan core.Job, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	dequeue := func() {
		j, err := q.Dequeue(ctx, "w", time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- j
	}
	go dequeue()
	for n.Load() == 0 { // the worker's first look
		time.Sleep(10 * time.Millisecond)
	}
	n.asleep(1)
	if !q.Reserve(0) {
		t.Fatal("no worker to reserve while one waits")
	}
	if q.Reserve(0) {
		t.Fatal("reserved the one waiting worker twice")
	}
	before := n.Load()
	q.Handoff(core.RunJobFor("run_handed"), "w", time.Now().Add(time.Minute))
	j := <-got
	if j.Kind != core.JobRun || j.Attempt != 1 || j.MaxAttempts != 5 {
		t.Fatalf("handed job = %+v, want run_handed's run job, attempt 1 of 5", j)
	}
	if err := q.Extend(t.Context(), j, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := q.Ack(t.Context(), j); err != nil {
		t.Fatal(err)
	}
	if sent := n.Load() - before; sent != 0 {
		t.Errorf("hand-off, extend and ack sent %d commands to Redis, want none", sent)
	}
	if depth, err := q.Depth(t.Context()); err != nil || depth != 0 {
		t.Errorf("queue depth after a hand-off = %d, %v; want 0", depth, err)
	}

	// handOne hands run's job to a worker that waits for it.
	handOne := func(run string) core.Job {
		t.Helper()
		go dequeue()
		n.asleep(1)
		if !q.Reserve(0) {
			t.Fatalf("no worker to reserve for %s while one waits", run)
		}
		q.Handoff(core.RunJobFor(run), "w", time.Now().Add(time.Minute))
		return <-got
	}

	// A handed job that fails is retried from the stream.
	j = handOne("run_retried")
	if dead, err := q.Fail(t.Context(), j, "model unavailable", time.Millisecond); err != nil || dead {
		t.Fatalf("fail a handed job: dead %v, %v", dead, err)
	}
	other, err := New(testClient(t), Options{Prefix: prefix, PollInterval: 20 * time.Millisecond}) // another replica
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer rcancel()
	retried, err := other.Dequeue(rctx, "other", time.Minute)
	if err != nil || retried.ID != j.ID || retried.Lease == localLease {
		t.Fatalf("the retry reached another replica as %+v, %v; want job %s from the stream", retried, err, j.ID)
	}
	if err := other.Ack(t.Context(), retried); err != nil && !errors.Is(err, core.ErrLeaseLost) {
		t.Fatal(err)
	}

	// A handed job whose step did not end when this process stops (Recover
	// at shutdown) goes into the stream for another replica.
	j = handOne("run_interrupted")
	if n, err := q.Recover(t.Context(), "w"); err != nil || n != 1 {
		t.Fatalf("recover with a handed job in flight: %d, %v; want 1", n, err)
	}
	again, err := other.Dequeue(rctx, "other", time.Minute)
	if err != nil || again.ID != j.ID || again.Lease == localLease {
		t.Fatalf("the interrupted job reached another replica as %+v, %v; want job %s from the stream", again, err, j.ID)
	}
}

// Jobs handed over together reach as many waiting workers, though their
// wake-ups coalesce: each worker that takes one while more wait wakes the
// next (the queue polls once an hour here).
func TestHandoffsReachEveryWaitingWorker(t *testing.T) {
	q, n := openCounted(t, testPrefix(t, testClient(t)))
	const workers = 3
	got := make(chan error, workers)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for range workers {
		go func() {
			j, err := q.Dequeue(ctx, "w", time.Minute)
			if err == nil && j.Lease != localLease {
				err = errors.New("took a job from the stream")
			}
			got <- err
		}()
	}
	for n.Load() < workers { // each worker's first look
		time.Sleep(10 * time.Millisecond)
	}
	n.asleep(workers)
	for i := range workers {
		if !q.Reserve(0) {
			t.Fatalf("reservation %d of %d refused with %d workers waiting", i+1, workers, workers)
		}
	}
	for i := range workers {
		q.Handoff(core.RunJobFor(fmt.Sprintf("run_%d", i)), "w", time.Now().Add(time.Minute))
	}
	for range workers {
		if err := <-got; err != nil {
			t.Fatalf("a handed job did not reach a waiting worker: %v", err)
		}
	}
}

// The rule that makes that so, without the scheduler's luck: taking one of
// two handed jobs wakes another waiting worker.
func TestTakingAHandedJobWakesTheNext(t *testing.T) {
	q := &Queue{one: make(chan struct{}, 1)}
	q.hand.jobs = []core.Job{{ID: "job_a"}, {ID: "job_b"}}
	if j, ok := q.handedOff(); !ok || j.ID != "job_a" {
		t.Fatalf("took %+v, %v; want job_a", j, ok)
	}
	if len(q.one) != 1 {
		t.Fatal("taking one of two handed jobs woke no other worker")
	}
	<-q.one
	if j, ok := q.handedOff(); !ok || j.ID != "job_b" || len(q.one) != 0 {
		t.Fatalf("took %+v, %v with %d wake-ups; want job_b and none (nothing left)", j, ok, len(q.one))
	}
}
