package sqlstore

import (
	"context"
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

// NextDueStmt finds when the next job is due: a waiting job's visible_at,
// or when a delivered job's lease runs out.
const NextDueStmt = `SELECT MIN(visible_at) FROM jobs WHERE dead_at IS NULL`

// JobCols are the columns ScanJob reads, in order.
const JobCols = `id, kind, key, payload, attempt, max_attempts, visible_at, last_error, created_at, lease`

// Jobs implements the parts of core.Queue (and relay.Keeper) that are plain
// statements on the jobs table; a driver adds Enqueue and Dequeue.
type Jobs struct {
	R, W        Conn // reads; single statements that write
	Dialect     *Dialect
	Now         func() time.Time
	MaxAttempts int                     // a job's default delivery limit
	Backoff     func(int) time.Duration // delay before retry number attempt
	// Due is told that jobs became due now: the driver wakes consumers.
	Due func(ctx context.Context)
	// Moved (nil: none) is told that a job will be due at a new time (a
	// retry, a kept job): a driver whose waiting consumers sleep until the
	// next due time wakes them to learn it.
	Moved func()
}

// moved calls Moved when there is one.
func (q Jobs) moved() {
	if q.Moved != nil {
		q.Moved()
	}
}

// ScanJob reads JobCols, then the extra columns; a job's delivery limit is
// def when it was stored without one.
func ScanJob(r Row, def int, extra ...any) (core.Job, error) {
	var j core.Job
	var payload []byte
	dest := append([]any{&j.ID, &j.Kind, &j.Key, &payload, &j.Attempt, &j.MaxAttempts,
		At(&j.RunAt), &j.LastError, At(&j.CreatedAt), &j.Lease}, extra...)
	if err := r.Scan(dest...); err != nil {
		return core.Job{}, err
	}
	j.Payload = payload
	j.MaxAttempts = MaxAttempts(j.MaxAttempts, def)
	return j, nil
}

// Extend renews the lease of a delivered job; see core.Queue. The lease
// token does not change.
func (q Jobs) Extend(ctx context.Context, j core.Job, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("extend job %s: lease must be positive, got %s", j.ID, lease)
	}
	n, err := q.held(ctx, j, `UPDATE jobs SET visible_at = ? WHERE id = ? AND lease = ? AND dead_at IS NULL`,
		q.Now().Add(lease), j.ID, j.Lease)
	if err == nil && n == 0 {
		err = core.ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("extend job %s: %w", j.ID, err)
	}
	return nil
}

// held runs a statement on job j unless it holds no lease (core.ErrLeaseLost).
func (q Jobs) held(ctx context.Context, j core.Job, stmt string, args ...any) (int64, error) {
	if j.Lease == "" {
		return 0, core.ErrLeaseLost
	}
	return q.W.Exec(ctx, stmt, args...)
}

// AckStmt deletes a delivered job (id, lease) while it holds its lease.
const AckStmt = `DELETE FROM jobs WHERE id = ? AND lease = ? AND dead_at IS NULL`

// Ack removes a delivered job; see core.Queue.
func (q Jobs) Ack(ctx context.Context, j core.Job) error {
	n, err := q.held(ctx, j, AckStmt, j.ID, j.Lease)
	if err == nil && n == 0 {
		err = core.ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("ack job %s: %w", j.ID, err)
	}
	return nil
}

// Fail records reason and schedules a retry after retryAfter (<= 0: after
// Backoff(attempt)), or dead-letters the job when it has used its last
// attempt; see core.Queue.
func (q Jobs) Fail(ctx context.Context, j core.Job, reason string, retryAfter time.Duration) (bool, error) {
	if j.Lease == "" {
		return false, fmt.Errorf("fail job %s: %w", j.ID, core.ErrLeaseLost)
	}
	// No transaction: the statements hold while j holds its lease, which
	// the update checks again.
	var attempt, maxAttempts int
	err := One(ctx, q.R, `SELECT attempt, max_attempts FROM jobs WHERE id = ? AND lease = ? AND dead_at IS NULL`,
		[]any{j.ID, j.Lease}, func(r Row) error { return r.Scan(&attempt, &maxAttempts) })
	now := q.Now()
	dead, delay := Retry(attempt, MaxAttempts(maxAttempts, q.MaxAttempts), retryAfter, q.Backoff)
	var n int64
	switch {
	case err != nil:
	case dead:
		n, err = q.W.Exec(ctx, `UPDATE jobs SET dead_at = ?, last_error = ?, consumer = '', lease = ''
			WHERE id = ? AND lease = ? AND dead_at IS NULL`, now, reason, j.ID, j.Lease)
	default:
		n, err = q.W.Exec(ctx, `UPDATE jobs SET last_error = ?, consumer = '', lease = '', visible_at = ?
			WHERE id = ? AND lease = ? AND dead_at IS NULL`, reason, now.Add(delay), j.ID, j.Lease)
	}
	if errors.Is(err, core.ErrNotFound) || err == nil && n == 0 {
		err = core.ErrLeaseLost
	}
	if err != nil {
		return false, fmt.Errorf("fail job %s: %w", j.ID, err)
	}
	if !dead {
		q.moved()
	}
	return dead, nil
}

// Recover makes the live jobs leased to consumer due at once and returns how
// many there were; see core.Queue. Their Attempt still counts the lost
// delivery.
func (q Jobs) Recover(ctx context.Context, consumer string) (int, error) {
	if consumer == "" {
		return 0, errors.New("recover: consumer must not be empty")
	}
	now := q.Now()
	n, err := q.W.Exec(ctx, `UPDATE jobs SET consumer = '', lease = '',
		visible_at = CASE WHEN visible_at < ? THEN visible_at ELSE ? END
		WHERE consumer = ? AND dead_at IS NULL`, now, now, consumer)
	if err != nil {
		return 0, fmt.Errorf("recover %s: %w", consumer, err)
	}
	if n > 0 {
		q.Due(ctx)
	}
	return int(n), nil
}

// DeadLetters lists up to limit (0 = all) dead-lettered jobs in the order
// they died, oldest first; see core.Queue.
func (q Jobs) DeadLetters(ctx context.Context, limit int) ([]core.Job, error) {
	jobs, err := Collect(ctx, q.R, `SELECT `+JobCols+` FROM jobs WHERE dead_at IS NOT NULL ORDER BY dead_at, `+
		q.Dialect.Seq+` LIMIT ?`, []any{q.Dialect.Limit(limit)}, func(r Row) (core.Job, error) { return ScanJob(r, q.MaxAttempts) })
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	return jobs, nil
}

// RetryDead makes a dead-lettered job due now with its attempts counted
// anew; see core.Queue.
func (q Jobs) RetryDead(ctx context.Context, id string) (j core.Job, err error) {
	err = One(ctx, q.W, `UPDATE jobs SET dead_at = NULL, attempt = 0, visible_at = ?
		WHERE id = ? AND dead_at IS NOT NULL RETURNING `+JobCols, []any{q.Now(), id},
		func(r Row) (err error) { j, err = ScanJob(r, q.MaxAttempts); return err })
	if err != nil {
		return core.Job{}, fmt.Errorf("retry dead job %s: %w", id, err)
	}
	q.Due(ctx)
	return j, nil
}

// Depth counts jobs not yet acked and not dead; see core.Queue.
func (q Jobs) Depth(ctx context.Context) (n int64, err error) {
	err = One(ctx, q.R, `SELECT COUNT(*) FROM jobs WHERE dead_at IS NULL`, nil, func(r Row) error { return r.Scan(&n) })
	if err != nil {
		return 0, fmt.Errorf("queue depth: %w", err)
	}
	return n, nil
}

// OldestDue implements core.QueueAger: a job's visible_at is when it is
// due, or when its lease ends, so the smallest one is the oldest wait
// unless it lies ahead.
func (q Jobs) OldestDue(ctx context.Context) (time.Time, error) {
	var at *time.Time
	err := One(ctx, q.R, NextDueStmt, nil,
		func(r Row) error { return r.Scan(AtOpt(&at)) })
	if err != nil {
		return time.Time{}, fmt.Errorf("queue oldest due: %w", err)
	}
	if at == nil || at.After(q.Now()) {
		return time.Time{}, nil
	}
	return *at, nil
}

// Keep implements relay.Keeper: a job forwarded to another queue stays here,
// hidden until until, its lease released and its delivery not counted.
func (q Jobs) Keep(ctx context.Context, j core.Job, until time.Time) error {
	if _, err := q.W.Exec(ctx, `UPDATE jobs SET consumer = '', lease = '',
		attempt = CASE WHEN attempt > 0 THEN attempt - 1 ELSE 0 END,
		visible_at = ? WHERE id = ? AND lease = ? AND dead_at IS NULL`, until, j.ID, j.Lease); err != nil {
		return fmt.Errorf("keep job %s: %w", j.ID, err)
	}
	q.moved()
	return nil
}

// Done implements relay.Keeper: the forwarded copy of job id was handled.
func (q Jobs) Done(ctx context.Context, id string) error {
	if _, err := q.W.Exec(ctx, `DELETE FROM jobs WHERE id = ? AND dead_at IS NULL`, id); err != nil {
		return fmt.Errorf("done job %s: %w", id, err)
	}
	return nil
}
