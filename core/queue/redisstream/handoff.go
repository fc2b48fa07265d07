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
	idle     int                 // Dequeue calls that found nothing and wait, not looking now
	reserved int                 // places promised by Reserve
	jobs     []core.Job          // handed over, not yet taken
	taken    map[string]core.Job // taken by a worker, not yet acked or failed
}

var _ core.Handoff = (*Queue)(nil)

// Reserve implements core.Handoff: true while a Dequeue of this Queue
// waits with nothing due in the stream that no earlier reservation or
// handed job claims. A Dequeue woken to look in the stream does not count
// (the look may find it a job). backlog is ignored: a job handed to a busy
// worker would wait in memory, out of other replicas' reach.
func (q *Queue) Reserve(int) bool {
	q.hmu.Lock()
	defer q.hmu.Unlock()
	if q.hand.reserved+len(q.hand.jobs) >= q.hand.idle {
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
// this process ends first. consumer and until are not used. Should the
// waiting Dequeue reserved for j have gone to look in the stream
// meanwhile, j goes into the stream instead.
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
	kept := len(q.hand.jobs) < q.hand.idle
	if kept {
		q.hand.jobs = append(q.hand.jobs, j)
	}
	q.hmu.Unlock()
	if kept {
		q.passOn() // one waiting Dequeue takes it
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), handoffEnqueueTimeout)
	defer cancel()
	_ = q.enqueueAgain(ctx, j, time.Time{}, 0, "") // failing that, the janitor enqueues its run
}

// handoffEnqueueTimeout bounds Handoff's enqueue of a job no waiting
// Dequeue is left for.
const handoffEnqueueTimeout = 10 * time.Second

// setIdle counts the calling Dequeue as waiting, Reserve may promise it a
// job (v: it found nothing in the stream), or stops counting it (it ends).
func (q *Queue) setIdle(idle *bool, v bool) {
	if *idle == v {
		return
	}
	q.hmu.Lock()
	q.setIdleLocked(idle, v)
	q.hmu.Unlock()
}

// setIdleLocked is setIdle under hmu.
func (q *Queue) setIdleLocked(idle *bool, v bool) {
	switch {
	case *idle == v:
		return
	case v:
		q.hand.idle++
	default:
		q.hand.idle--
	}
	*idle = v
}

// handedOff takes the oldest job handed to this process, if any, and
// wakes another waiting Dequeue when more wait or the stream has news
// (wake-ups coalesce: the one it took may have been for either). The
// calling Dequeue stops counting as waiting: it takes a job, or it looks
// in the stream next.
func (q *Queue) handedOff(idle *bool) (core.Job, bool) {
	q.hmu.Lock()
	defer q.hmu.Unlock()
	q.setIdleLocked(idle, false)
	if len(q.hand.jobs) == 0 {
		return core.Job{}, false
	}
	j := q.hand.jobs[0]
	q.hand.jobs = slices.Delete(q.hand.jobs, 0, 1)
	q.keepTaken(j)
	if len(q.hand.jobs) > 0 || q.streamNews.Load() {
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
// taken by a step that was interrupted: that delivery counts, as a leased
// job's does) into the stream, due now, for any replica: this process
// stops working on them (Recover at shutdown). A job the stream refused
// stays here for the next Recover.
func (q *Queue) recoverLocal(ctx context.Context) (int, error) {
	q.hmu.Lock()
	waiting, taken := q.hand.jobs, q.hand.taken
	q.hand.jobs, q.hand.taken = nil, nil
	q.hmu.Unlock()
	var errs []error
	n := 0
	back := func(j core.Job, attempt int) {
		if err := q.enqueueAgain(ctx, j, time.Time{}, attempt, j.LastError); err != nil {
			errs = append(errs, err)
			q.hmu.Lock()
			if attempt == 0 {
				q.hand.jobs = append(q.hand.jobs, j)
			} else {
				q.keepTaken(j)
			}
			q.hmu.Unlock()
			return
		}
		n++
	}
	for _, j := range waiting {
		back(j, 0)
	}
	for _, j := range taken {
		back(j, 1)
	}
	return n, errors.Join(errs...)
}

// keepTaken records j as taken and not acked or failed (under hmu).
func (q *Queue) keepTaken(j core.Job) {
	if q.hand.taken == nil {
		q.hand.taken = map[string]core.Job{}
	}
	q.hand.taken[j.ID] = j
}

// enqueueAgain puts handed job j into the stream as a new job due at runAt
// (zero: now) that has had attempt deliveries, the last ending with
// lastErr; one with its id there already is enough.
func (q *Queue) enqueueAgain(ctx context.Context, j core.Job, runAt time.Time, attempt int, lastErr string) error {
	again := j.Again(runAt)
	again.Attempt, again.LastError = attempt, lastErr
	if err := q.enqueue(ctx, again); err != nil && !errors.Is(err, core.ErrJobExists) {
		return err
	}
	return nil
}

// failLocal schedules the retry of a handed job that failed: it goes into
// the stream like a job failed on its first delivery, due after the delay,
// where any replica may take it. Should the stream refuse it, it stays
// here as taken (Recover at shutdown tries again; the janitor enqueues its
// run in any case).
func (q *Queue) failLocal(ctx context.Context, j core.Job, reason string, delay time.Duration) (bool, error) {
	if delay <= 0 {
		delay = q.opts.Backoff(1)
	}
	if err := q.enqueueAgain(ctx, j, q.opts.Clock.Now().Add(delay), 1, reason); err != nil {
		return false, fmt.Errorf("fail job %s: %w", j.ID, err)
	}
	q.doneLocal(j.ID)
	return false, nil
}
