package redisstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentgate/agentgate/core"
)

// localLease marks a job handed to a worker of this process (Handoff): it
// was never added to the stream, so its ack and lease renewals touch
// nothing in Redis, and a retry adds it to the stream then.
const localLease = "local/1"

// handoff holds the jobs handed to this process's waiting workers (under
// Queue.hmu).
type handoff struct {
	reserved int                 // places promised by Reserve
	jobs     []core.Job          // handed over, not yet taken
	taken    map[string]core.Job // taken by a worker, not yet acked or failed
}

var _ core.Handoff = (*Queue)(nil)

// Reserve implements core.Handoff: true while a Dequeue of this Queue
// waits with nothing due in the stream that no earlier reservation or
// handed job claims. backlog is ignored: a job handed to a busy worker
// would wait in memory, out of other replicas' reach.
func (q *Queue) Reserve(int) bool {
	q.hmu.Lock()
	defer q.hmu.Unlock()
	if q.hand.reserved+len(q.hand.jobs) >= int(q.waiting.Load()) {
		return false
	}
	q.hand.reserved++
	return true
}

// Unreserve implements core.Handoff.
func (q *Queue) Unreserve() {
	q.hmu.Lock()
	q.hand.reserved--
	q.hmu.Unlock()
}

// Handoff implements core.Handoff: the next Dequeue of this Queue returns
// j, which is not in Redis. Whoever hands a job over must keep what it
// names recoverable without it: the engine hands over only run jobs,
// which its janitor rebuilds from the runs (core.Store.RequeueActive) if
// this process ends first. consumer and until are not used.
func (q *Queue) Handoff(j core.Job, _ string, _ time.Time) {
	j.Attempt, j.Lease = 1, localLease
	if j.ID == "" {
		j.ID = core.NewID("job")
	}
	if j.CreatedAt.IsZero() {
		j.CreatedAt = q.opts.Clock.Now()
	}
	if j.MaxAttempts <= 0 {
		j.MaxAttempts = q.opts.MaxAttempts
	}
	q.hmu.Lock()
	q.hand.reserved--
	q.hand.jobs = append(q.hand.jobs, j)
	q.hmu.Unlock()
	q.passOn() // one waiting Dequeue takes it
}

// handedOff takes the oldest job handed to this process, if any, and
// wakes another waiting Dequeue when more wait (Handoff's wake-ups
// coalesce).
func (q *Queue) handedOff() (core.Job, bool) {
	q.hmu.Lock()
	defer q.hmu.Unlock()
	if len(q.hand.jobs) == 0 {
		return core.Job{}, false
	}
	j := q.hand.jobs[0]
	q.hand.jobs = slices.Delete(q.hand.jobs, 0, 1)
	if q.hand.taken == nil {
		q.hand.taken = map[string]core.Job{}
	}
	q.hand.taken[j.ID] = j
	if len(q.hand.jobs) > 0 {
		q.passOn()
	}
	return j, true
}

// doneLocal forgets handed job id: it was acked or failed.
func (q *Queue) doneLocal(id string) {
	q.hmu.Lock()
	delete(q.hand.taken, id)
	q.hmu.Unlock()
}

// recoverLocal puts the handed jobs not acked or failed yet (not taken, or
// taken by a step that was interrupted) into the stream, due now, for any
// replica: this process stops working on them (Recover at shutdown).
func (q *Queue) recoverLocal(ctx context.Context) (int, error) {
	q.hmu.Lock()
	jobs := q.hand.jobs
	for _, j := range q.hand.taken {
		jobs = append(jobs, j)
	}
	q.hand.jobs, q.hand.taken = nil, nil
	q.hmu.Unlock()
	var errs []error
	for _, j := range jobs {
		errs = append(errs, q.enqueueAgain(ctx, j, time.Time{}))
	}
	return len(jobs), errors.Join(errs...)
}

// enqueueAgain puts handed job j into the stream as a new job due at runAt
// (zero: now); one with its id there already is enough.
func (q *Queue) enqueueAgain(ctx context.Context, j core.Job, runAt time.Time) error {
	if err := q.Enqueue(ctx, j.Again(runAt)); err != nil && !errors.Is(err, core.ErrJobExists) {
		return err
	}
	return nil
}

// failLocal schedules the retry of a handed job that failed: it goes into
// the stream like a new job due after the delay, where any replica may
// take it (its attempts count from there).
func (q *Queue) failLocal(ctx context.Context, j core.Job, delay time.Duration) (bool, error) {
	q.doneLocal(j.ID)
	if delay <= 0 {
		delay = q.opts.Backoff(1)
	}
	if err := q.enqueueAgain(ctx, j, q.opts.Clock.Now().Add(delay)); err != nil {
		return false, fmt.Errorf("fail job %s: %w", j.ID, err)
	}
	return false, nil
}
