package redisstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
	if retried.Attempt != 2 || retried.LastError != "model unavailable" {
		t.Errorf("the retry of a handed job: attempt %d, last error %q; want attempt 2 after %q", retried.Attempt, retried.LastError, "model unavailable")
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

	var idle bool
	if j, ok := q.handedOff(&idle); !ok || j.ID != "job_a" {
		t.Fatalf("took %+v, %v; want job_a", j, ok)
	}
	if len(q.one) != 1 {
		t.Fatal("taking one of two handed jobs woke no other worker")
	}
	<-q.one
	if j, ok := q.handedOff(&idle); !ok || j.ID != "job_b" || len(q.one) != 0 {
		t.Fatalf("took %+v, %v with %d wake-ups; want job_b and none (nothing left)", j, ok, len(q.one))
	}

	// A wake-up for a new entry in the stream, coalesced with a hand-off's
	// and taken for the handed job, goes on to another waiting worker.
	q.hand.jobs = []core.Job{{ID: "job_c"}}
	q.wakeForStream()
	<-q.one // one worker wakes, for either
	if j, ok := q.handedOff(&idle); !ok || j.ID != "job_c" || len(q.one) != 1 {
		t.Fatalf("took %+v, %v with %d wake-ups; want job_c and the stream's wake-up passed on", j, ok, len(q.one))
	}
}

// scriptFault is a go-redis hook that, while armed, holds the next script
// call until released (block) or fails it.
type scriptFault struct {
	mu      sync.Mutex
	block   chan struct{} // armed to hold: closed by release
	entered chan struct{} // closed when a held call arrives
	fail    bool          // armed to fail
}

func (f *scriptFault) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *scriptFault) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (f *scriptFault) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		f.mu.Lock()
		block, entered, fail := f.block, f.entered, f.fail
		f.block, f.fail = nil, false
		f.mu.Unlock()
		if fail {
			cmd.SetErr(errors.New("redis unreachable (test)"))
			return cmd.Err()
		}
		if block != nil {
			close(entered)
			<-block
		}
		return next(ctx, cmd)
	}
}

// hold arms f to hold the next script call; it returns a channel closed
// when the call arrives, and release.
func (f *scriptFault) hold() (entered <-chan struct{}, release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	block := make(chan struct{})
	f.block, f.entered = block, make(chan struct{})
	return f.entered, sync.OnceFunc(func() { close(block) })
}

// failNext arms f to fail the next script call.
func (f *scriptFault) failNext() {
	f.mu.Lock()
	f.fail = true
	f.mu.Unlock()
}

// openFaulty opens a queue on prefix whose client goes through a
// scriptFault, polling once an hour.
func openFaulty(t *testing.T, prefix string) (*Queue, *scriptFault) {
	t.Helper()
	f := &scriptFault{}
	return openHooked(t, prefix, f), f
}

// startWorker starts a Dequeue by worker w and waits until it found
// nothing and sleeps; the job it takes comes on the channel.
func startWorker(ctx context.Context, t *testing.T, q *Queue) <-chan core.Job {
	t.Helper()
	got := make(chan core.Job, 1)
	go func() {
		j, err := q.Dequeue(ctx, "w", time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- j
	}()
	for q.idleWorkers() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	return got
}

// idleWorkers is how many Dequeue calls Reserve may promise a job.
func (q *Queue) idleWorkers() int {
	q.hmu.Lock()
	defer q.hmu.Unlock()
	return q.hand.idle
}

// A worker woken to look in the stream does not count as waiting: its look
// may find it a job, and a run handed to it would wait in memory behind
// that job, out of other replicas' reach. A hand-off whose worker went to
// look after the reservation goes into the stream instead.
func TestHandoffSkipsAWorkerThatLooks(t *testing.T) {
	prefix := testPrefix(t, testClient(t))
	q, fault := openFaulty(t, prefix)
	producer, err := New(testClient(t), Options{Prefix: prefix}) // another replica
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// wake has a job of the other replica wake the waiting worker and
	// holds its look until release.
	wake := func(peerJob string) (release func()) {
		t.Helper()
		entered, release := fault.hold()
		if err := producer.Enqueue(t.Context(), core.Job{ID: peerJob, Kind: "peer"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-entered: // the worker, woken by the listener, looks in the stream
		case <-ctx.Done():
			t.Fatal("the worker never looked for the peer's job")
		}
		return release
	}

	got := startWorker(ctx, t, q)
	if !q.Reserve(0) { // a run about to be created reserves the waiting worker
		t.Fatal("no worker to reserve while one waits")
	}
	release := wake("job_peer")
	q.Handoff(core.RunJobFor("run_late"), "w", time.Now().Add(time.Minute))
	release()
	if j := <-got; j.ID != "job_peer" {
		t.Fatalf("the worker took %+v, want the peer's job", j)
	}
	late, err := producer.Dequeue(ctx, "other", time.Minute)
	if err != nil || late.Kind != core.JobRun || !strings.Contains(string(late.Payload), "run_late") || late.Attempt != 1 {
		t.Fatalf("another replica took %+v, %v; want run_late's job from the stream, first delivery", late, err)
	}

	got = startWorker(ctx, t, q)
	release = wake("job_peer2")
	reserved := q.Reserve(0)
	if reserved {
		q.Unreserve()
	}
	release()
	if j := <-got; j.ID != "job_peer2" {
		t.Fatalf("the worker took %+v, want the peer's second job", j)
	}
	if reserved {
		t.Error("reserved a worker that was looking in the stream")
	}
}

// A handed job whose retry the stream refused stays with this process:
// Recover at shutdown puts it into the stream.
func TestHandedJobKeptWhenTheStreamRefusesItsRetry(t *testing.T) {
	prefix := testPrefix(t, testClient(t))
	q, fault := openFaulty(t, prefix)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	got := startWorker(ctx, t, q)
	if !q.Reserve(0) {
		t.Fatal("no worker to reserve while one waits")
	}
	q.Handoff(core.RunJobFor("run_kept"), "w", time.Now().Add(time.Minute))
	j := <-got
	fault.failNext()
	if _, err := q.Fail(t.Context(), j, "tool timed out", time.Millisecond); err == nil {
		t.Fatal("failing a handed job while Redis refuses its retry reported no error")
	}
	if n, err := q.Recover(t.Context(), "w"); err != nil || n != 1 {
		t.Fatalf("recover after the refused retry: %d, %v; want the handed job put back", n, err)
	}
	other, err := New(testClient(t), Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	back, err := other.Dequeue(ctx, "other", time.Minute)
	if err != nil || back.ID != j.ID {
		t.Fatalf("another replica took %+v, %v; want job %s", back, err, j.ID)
	}
}
