package redisstream

import (
	"context"
	"errors"
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
