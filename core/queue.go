package core

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// ErrLeaseLost: the job's lease expired and it was delivered again, or it was
// already acknowledged.
var ErrLeaseLost = errors.New("job lease lost")

// ErrJobExists: Enqueue was given the id of a job the queue still holds (a
// relay forwarding again a job that was not lost after all).
var ErrJobExists = errors.New("job already queued")

// Job is a unit of work in a Queue.
type Job struct {
	ID      string          `json:"id"`
	Kind    string          `json:"kind"`
	Key     string          `json:"key,omitempty"`
	Payload json.RawMessage `json:"payload"`
	// Attempt counts deliveries, including the current one (1 on first delivery).
	Attempt int `json:"attempt"`
	// MaxAttempts: deliveries before the job is dead-lettered; 0 at Enqueue =
	// the queue's default. A delivered job reports the limit in force.
	MaxAttempts int       `json:"max_attempts"`
	RunAt       time.Time `json:"run_at"`
	LastError   string    `json:"last_error,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	// Lease is an opaque token of the current delivery (set by Dequeue).
	Lease string `json:"-"`
}

// Again is j as a new job to enqueue (a job forwarded, retried or taken
// back): its id, kind, key, payload and delivery limit, due at runAt (zero:
// now), without a delivery's state.
func (j Job) Again(runAt time.Time) Job {
	return Job{ID: j.ID, Kind: j.Kind, Key: j.Key, Payload: j.Payload, MaxAttempts: j.MaxAttempts, RunAt: runAt}
}

// Queue is a durable at-least-once job queue with leases (visibility
// timeouts), retries with backoff and a dead-letter list.
//
// A delivered job is invisible until its lease expires; a job neither acked
// nor failed before then is delivered again (Attempt+1). A job delivered more
// than MaxAttempts times, or failed on its last attempt, is dead-lettered.
type Queue interface {
	// Enqueue adds a job; RunAt zero = now. A job with a non-empty Key is
	// coalesced into a job with the same Key that waits undelivered.
	Enqueue(ctx context.Context, j Job) error
	// Dequeue blocks until a job is due, leases it to consumer for lease and
	// returns it; it returns ctx.Err() when ctx ends first.
	Dequeue(ctx context.Context, consumer string, lease time.Duration) (Job, error)
	// TryDequeue is Dequeue without waiting; ok is false when no job is due.
	TryDequeue(ctx context.Context, consumer string, lease time.Duration) (j Job, ok bool, err error)
	// Extend renews the lease of a delivered job; ErrLeaseLost if it is gone.
	Extend(ctx context.Context, j Job, lease time.Duration) error
	// Ack removes a delivered job for good; ErrLeaseLost if its lease was lost.
	Ack(ctx context.Context, j Job) error
	// Fail records reason and schedules the job again after retryAfter
	// (0 = the queue's exponential backoff), or dead-letters it when this was
	// its last attempt; dead reports which.
	Fail(ctx context.Context, j Job, reason string, retryAfter time.Duration) (dead bool, err error)
	// Recover makes the jobs leased to consumer visible again at once; a
	// restarted consumer that keeps its name calls it before Dequeue.
	Recover(ctx context.Context, consumer string) (int, error)
	// DeadLetters lists dead-lettered jobs, oldest first.
	DeadLetters(ctx context.Context, limit int) ([]Job, error)
	// RetryDead makes the dead-lettered job id due now, its attempts
	// counted anew, and returns it; ErrNotFound when no dead job has that
	// id (never was, or was retried already).
	RetryDead(ctx context.Context, id string) (Job, error)
	// Depth counts jobs not yet acked (due, delayed and leased), not dead ones.
	Depth(ctx context.Context) (int64, error)
}

// QueueAger is a queue that tells how long its jobs wait: OldestDue is
// when the job that has waited longest for a worker became due — a due
// job nobody took, or a leased one whose lease ran out (from its end) —
// and the zero time when none waits. Every queue here implements it; the
// metrics read it.
type QueueAger interface {
	OldestDue(ctx context.Context) (time.Time, error)
}

// Handoff is a queue whose store can lease a job as it creates it
// (NewRun.Start) and hand it to a local worker waiting in Dequeue, without
// a poll or a second write: the embedded queue, where one process owns the
// store. The job stays leased in the store, so a crash loses nothing.
type Handoff interface {
	// Reserve reserves a worker waiting in Dequeue, or else a place among
	// at most backlog jobs the next free workers take first; false when
	// there is none (or jobs wait in the queue: handing off would jump
	// them). Each true is followed by exactly one Handoff or Unreserve.
	Reserve(backlog int) bool
	// Unreserve ends a reservation that has no job to hand over.
	Unreserve()
	// Handoff ends a reservation: the next Dequeue by consumer returns j,
	// which the store leased to it until until, before any due job (unless
	// the lease ran out first: the job is then due in the queue again).
	Handoff(j Job, consumer string, until time.Time)
}

// DefaultBackoff is the retry delay every queue uses unless configured:
// 1s·2^(attempt-1), capped at 5 minutes.
func DefaultBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 9 {
		return 5 * time.Minute
	}
	return min(time.Second<<(attempt-1), 5*time.Minute)
}

// Broadcast wakes every waiter at once: Wake closes the channel C handed
// out and makes a new one. The zero value is ready; it is safe for
// concurrent use.
type Broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

// C returns the channel the next Wake closes.
func (b *Broadcast) C() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// Wake wakes everyone waiting on a channel C returned.
func (b *Broadcast) Wake() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// WaitDequeue is the blocking Dequeue of a polling queue: it calls try until
// a job is due, waiting between looks for wake (taken before each look, so a
// job enqueued just after it still wakes the wait) or poll, and returns
// ctx.Err() when ctx ends first. A value on one (nil: none) also ends a
// wait: a signal meant for a single waiter, where wake's close wakes all.
// When try finds no job but knows when the next one is due (next > 0: a
// delayed job, a lease running out), the wait ends then if that comes
// before poll.
func WaitDequeue(ctx context.Context, poll time.Duration, wake func() <-chan struct{}, one <-chan struct{},
	try func() (j Job, ok bool, next time.Duration, err error)) (Job, error) {
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		if err := ctx.Err(); err != nil {
			return Job{}, err
		}
		woken := wake()
		j, ok, next, err := try()
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return Job{}, ctxErr
			}
			return Job{}, err
		}
		if ok {
			return j, nil
		}
		wait := poll
		if next > 0 && next < poll {
			wait = next
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return Job{}, ctx.Err()
		case <-woken:
		case <-one:
		case <-timer.C:
		}
	}
}
