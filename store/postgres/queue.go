package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

// The queue lives in the jobs table, with the semantics of store/sqlite's. A
// waiting job has consumer '' and becomes due at visible_at; a delivered job
// carries its consumer and lease token, and visible_at is when the lease runs
// out, after which it is due again under a new token. Dequeue takes the oldest
// due job with FOR UPDATE SKIP LOCKED, so concurrent consumers (in this
// process or others) never wait on each other or take the same job; every
// other change is a single conditional UPDATE/DELETE on the job's lease.

// jobColumns are the columns scanJob reads, in order.
const jobColumns = `id, kind, key, payload, attempt, max_attempts, visible_at, last_error, created_at, lease`

// scanJob reads one row of jobColumns, then the extra columns.
func (db *DB) scanJob(row sqlstore.Row, extra ...any) (core.Job, error) {
	var j core.Job
	var payload []byte
	dest := append([]any{&j.ID, &j.Kind, &j.Key, &payload, &j.Attempt, &j.MaxAttempts,
		&j.RunAt, &j.LastError, &j.CreatedAt, &j.Lease}, extra...)
	if err := row.Scan(dest...); err != nil {
		return core.Job{}, err
	}
	j.Payload = payload
	j.MaxAttempts = db.maxAttempts(j.MaxAttempts)
	j.RunAt = utc(j.RunAt)
	j.CreatedAt = utc(j.CreatedAt)
	return j, nil
}

// maxAttempts is the effective delivery limit of a job whose stored limit is n.
func (db *DB) maxAttempts(n int) int { return sqlstore.MaxAttempts(n, db.opts.MaxAttempts) }

// Enqueue adds a job; see core.Queue. A non-empty j.ID is kept (it must be
// unique); otherwise one is generated. Waiting Dequeue calls in this and
// other processes are notified when the job commits.
func (db *DB) Enqueue(ctx context.Context, j core.Job) error {
	return db.tx(ctx, func(tx *txn) error { db.enqueueTx(tx, j); return nil })
}

// Dequeue blocks until a job is due and leases it to consumer; see
// core.Queue. Jobs enqueued in this process wake it at once, those enqueued
// by other processes through LISTEN/NOTIFY; delayed jobs and expired leases
// are noticed within Options.PollInterval.
func (db *DB) Dequeue(ctx context.Context, consumer string, lease time.Duration) (core.Job, error) {
	db.startListener()
	return core.WaitDequeue(ctx, db.opts.PollInterval, db.wakeCh, nil, func() (core.Job, bool, error) {
		return db.TryDequeue(ctx, consumer, lease)
	})
}

// TryDequeue leases the oldest due job to consumer, or reports ok=false when
// none is due. Due jobs that have used up their deliveries are dead-lettered
// on the way ("delivery limit reached") and skipped. Jobs locked by a
// concurrent Dequeue are skipped, not waited for. The returned job's
// MaxAttempts is its effective limit (the queue default when it was enqueued
// with 0), and RunAt is when it became due.
func (db *DB) TryDequeue(ctx context.Context, consumer string, lease time.Duration) (core.Job, bool, error) {
	if err := sqlstore.CheckDequeue(consumer, lease); err != nil {
		return core.Job{}, false, err
	}
	now := db.opts.Clock.Now()
	for {
		// One statement: the oldest due job is dead-lettered when it used
		// up its deliveries (then look again), else leased.
		var spent bool
		token := core.NewID("lease")
		j, err := db.scanJob(db.pool.QueryRow(ctx, `WITH next AS (
				SELECT pk, visible_at, attempt >= CASE WHEN max_attempts > 0 THEN max_attempts ELSE $2 END AS spent
				FROM jobs WHERE dead_at IS NULL AND visible_at <= $1
				ORDER BY visible_at, pk LIMIT 1 FOR UPDATE SKIP LOCKED)
			UPDATE jobs SET
				dead_at = CASE WHEN spent THEN $1::timestamptz END,
				last_error = CASE WHEN NOT spent THEN last_error
					ELSE 'delivery limit reached: ' || attempt || ' attempts'
						|| CASE WHEN last_error = '' THEN '' ELSE '; last error: ' || last_error END END,
				consumer = CASE WHEN spent THEN '' ELSE $3 END,
				lease = CASE WHEN spent THEN '' ELSE $4 END,
				attempt = CASE WHEN spent THEN attempt ELSE attempt + 1 END,
				visible_at = CASE WHEN spent THEN jobs.visible_at ELSE $5::timestamptz END
			FROM next WHERE jobs.pk = next.pk
			RETURNING jobs.id, kind, key, payload, attempt, max_attempts, next.visible_at, last_error, created_at, lease, spent`,
			now, db.opts.MaxAttempts, consumer, token, now.Add(lease)), &spent)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return core.Job{}, false, nil
		case err != nil:
			return core.Job{}, false, fmt.Errorf("dequeue: %w", err)
		case !spent:
			return j, true, nil
		}
	}
}

// Extend renews the lease of a delivered job; see core.Queue. The lease
// token does not change.
func (db *DB) Extend(ctx context.Context, j core.Job, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("extend job %s: lease must be positive, got %s", j.ID, lease)
	}
	if j.Lease == "" {
		return fmt.Errorf("extend job %s: %w", j.ID, core.ErrLeaseLost)
	}
	tag, err := db.pool.Exec(ctx, `UPDATE jobs SET visible_at = $1 WHERE id = $2 AND lease = $3 AND dead_at IS NULL`,
		db.opts.Clock.Now().Add(lease), j.ID, j.Lease)
	if err != nil {
		return fmt.Errorf("extend job %s: %w", j.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("extend job %s: %w", j.ID, core.ErrLeaseLost)
	}
	return nil
}

// Ack removes a delivered job; see core.Queue.
func (db *DB) Ack(ctx context.Context, j core.Job) error {
	if j.Lease == "" {
		return fmt.Errorf("ack job %s: %w", j.ID, core.ErrLeaseLost)
	}
	tag, err := db.pool.Exec(ctx, `DELETE FROM jobs WHERE id = $1 AND lease = $2 AND dead_at IS NULL`, j.ID, j.Lease)
	if err != nil {
		return fmt.Errorf("ack job %s: %w", j.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("ack job %s: %w", j.ID, core.ErrLeaseLost)
	}
	return nil
}

// ackTx queues the ack of j inside tx when it still holds its lease
// (core.Finish.Ack); nil or a lost lease does nothing.
func ackTx(tx *txn, j *core.Job) {
	if j == nil || j.Lease == "" {
		return
	}
	tx.Later(`DELETE FROM jobs WHERE id = $1 AND lease = $2 AND dead_at IS NULL`, j.ID, j.Lease)
}

// Fail records reason and schedules a retry after retryAfter (<= 0: after
// Options.Backoff(attempt)), or dead-letters the job when it has used its
// last attempt; see core.Queue.
func (db *DB) Fail(ctx context.Context, j core.Job, reason string, retryAfter time.Duration) (bool, error) {
	if j.Lease == "" {
		return false, fmt.Errorf("fail job %s: %w", j.ID, core.ErrLeaseLost)
	}
	var dead bool
	err := db.tx(ctx, func(tx *txn) error {
		var attempt, maxAttempts int
		err := tx.QueryRow(ctx, `SELECT attempt, max_attempts FROM jobs
			WHERE id = $1 AND lease = $2 AND dead_at IS NULL FOR UPDATE`, j.ID, j.Lease).Scan(&attempt, &maxAttempts)
		if errors.Is(err, pgx.ErrNoRows) {
			return core.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		now := db.opts.Clock.Now()
		var delay time.Duration
		if dead, delay = sqlstore.Retry(attempt, db.maxAttempts(maxAttempts), retryAfter, db.opts.Backoff); dead {
			tx.Later(`UPDATE jobs SET dead_at = $1, last_error = $2, consumer = '', lease = ''
				WHERE id = $3`, now, reason, j.ID)
			return nil
		}
		tx.Later(`UPDATE jobs SET last_error = $1, consumer = '', lease = '', visible_at = $2
			WHERE id = $3`, reason, now.Add(delay), j.ID)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("fail job %s: %w", j.ID, err)
	}
	return dead, nil
}

// Recover makes the live jobs leased to consumer due at once and returns how
// many there were; see core.Queue. Their Attempt still counts the lost
// delivery.
func (db *DB) Recover(ctx context.Context, consumer string) (int, error) {
	if consumer == "" {
		return 0, errors.New("recover: consumer must not be empty")
	}
	var n int64
	err := db.tx(ctx, func(tx *txn) error {
		tag, err := tx.Exec(ctx, `UPDATE jobs SET consumer = '', lease = '', visible_at = LEAST(visible_at, $1)
			WHERE consumer = $2 AND dead_at IS NULL`, db.opts.Clock.Now(), consumer)
		if err != nil {
			return err
		}
		if n = tag.RowsAffected(); n > 0 {
			tx.enqueued = true // notify: the jobs are due now
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("recover %s: %w", consumer, err)
	}
	return int(n), nil
}

// DeadLetters lists up to limit (0 = all) dead-lettered jobs in the order
// they died, oldest first; see core.Queue.
func (db *DB) DeadLetters(ctx context.Context, limit int) ([]core.Job, error) {
	rows, _ := db.pool.Query(ctx, `SELECT `+jobColumns+` FROM jobs
		WHERE dead_at IS NOT NULL ORDER BY dead_at, pk LIMIT $1`, dialect.Limit(limit))
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (core.Job, error) { return db.scanJob(row) })
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	return jobs, nil
}

// RetryDead makes a dead-lettered job due now with its attempts counted
// anew; see core.Queue.
func (db *DB) RetryDead(ctx context.Context, id string) (core.Job, error) {
	j, err := db.scanJob(db.pool.QueryRow(ctx, `UPDATE jobs SET dead_at = NULL, attempt = 0, visible_at = $1
		WHERE id = $2 AND dead_at IS NOT NULL RETURNING `+jobColumns, db.opts.Clock.Now(), id))
	if errors.Is(err, pgx.ErrNoRows) {
		err = core.ErrNotFound
	}
	if err != nil {
		return core.Job{}, fmt.Errorf("retry dead job %s: %w", id, err)
	}
	// Wake waiting consumers here and on other replicas (best effort: they
	// also poll).
	if _, err := db.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, db.opts.Schema); err != nil {
		db.opts.Logger.Debug("notify retried job", "job", id, "err", err)
	}
	db.wake()
	return j, nil
}

// Depth counts jobs not yet acked and not dead; see core.Queue.
func (db *DB) Depth(ctx context.Context) (int64, error) {
	var n int64
	if err := db.pool.QueryRow(ctx, `SELECT COUNT(*) FROM jobs WHERE dead_at IS NULL`).Scan(&n); err != nil {
		return 0, fmt.Errorf("queue depth: %w", err)
	}
	return n, nil
}

// Keep implements relay.Keeper: a job forwarded to another queue stays here,
// hidden until until, its lease released and its delivery not counted.
func (db *DB) Keep(ctx context.Context, j core.Job, until time.Time) error {
	if _, err := db.pool.Exec(ctx, `UPDATE jobs SET consumer = '', lease = '', attempt = GREATEST(attempt - 1, 0),
		visible_at = $1 WHERE id = $2 AND lease = $3 AND dead_at IS NULL`, until, j.ID, j.Lease); err != nil {
		return fmt.Errorf("keep job %s: %w", j.ID, err)
	}
	return nil
}

// Done implements relay.Keeper: the forwarded copy of job id was handled.
func (db *DB) Done(ctx context.Context, id string) error {
	if _, err := db.pool.Exec(ctx, `DELETE FROM jobs WHERE id = $1 AND dead_at IS NULL`, id); err != nil {
		return fmt.Errorf("done job %s: %w", id, err)
	}
	return nil
}
