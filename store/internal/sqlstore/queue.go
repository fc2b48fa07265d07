package sqlstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/core"
)

// The rules of the store's queue (core.Queue over the jobs table), the same
// on every database.

// NewJob is j as enqueued at now: its id (a fresh one when empty), its
// payload (JSON null when empty) and when it becomes due (now when unset).
func NewJob(j core.Job, now time.Time) core.Job {
	if j.ID == "" {
		j.ID = core.NewID("job")
	}
	if len(j.Payload) == 0 {
		j.Payload = []byte("null")
	}
	if j.RunAt.IsZero() {
		j.RunAt = now
	}
	return j
}

// CheckDequeue checks the arguments of a dequeue.
func CheckDequeue(consumer string, lease time.Duration) error {
	if consumer == "" {
		return errors.New("dequeue: consumer must not be empty")
	}
	if lease <= 0 {
		return fmt.Errorf("dequeue: lease must be positive, got %s", lease)
	}
	return nil
}

// MaxAttempts is the delivery limit of a job stored with limit n (0: the
// queue's default def).
func MaxAttempts(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// Retry decides a failed delivery: dead when the job used its last attempt,
// else due again after retryAfter (<= 0: after backoff(attempt)).
func Retry(attempt, maxAttempts int, retryAfter time.Duration, backoff func(int) time.Duration) (dead bool, delay time.Duration) {
	if attempt >= maxAttempts {
		return true, 0
	}
	if retryAfter <= 0 {
		retryAfter = backoff(attempt)
	}
	return false, retryAfter
}
