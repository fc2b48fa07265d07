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

// Enqueue adds a job; see core.Queue. A non-empty j.ID is kept (it must be
// unique); otherwise one is generated. Waiting Dequeue calls in this and
// other processes are notified when the job commits.
func (db *DB) Enqueue(ctx context.Context, j core.Job) error {
	return db.tx(ctx, func(tx *txn) error { db.enqueueTx(tx, j); return nil })
}

// listenLostPoll is how often a waiting Dequeue looks for due jobs while
// the listener connection is down: enqueues on other replicas wake nobody.
const listenLostPoll = 250 * time.Millisecond

// Dequeue blocks until a job is due and leases it to consumer; see
// core.Queue. Jobs enqueued in this process wake a waiting Dequeue at once,
// those enqueued by other processes through LISTEN/NOTIFY; otherwise it
// sleeps until the next job is due, looking at least every
// Options.PollInterval.
func (db *DB) Dequeue(ctx context.Context, consumer string, lease time.Duration) (core.Job, error) {
	db.startListener()
	j, err := core.WaitDequeue(ctx, db.opts.PollInterval, db.notify.C, db.one, db.look(ctx, consumer, lease))
	if err != nil && ctx.Err() != nil {
		db.passOn() // a wake-up this call took as it ended goes to another
	}
	return j, err
}

// look is one look of a waiting Dequeue (see core.WaitDequeue).
func (db *DB) look(ctx context.Context, consumer string, lease time.Duration) func() (core.Job, bool, time.Duration, error) {
	return func() (core.Job, bool, time.Duration, error) {
		j, ok, err := db.TryDequeue(ctx, consumer, lease)
		if ok || err != nil {
			db.passOn() // there may be more: the next waiting worker looks
			return j, ok, 0, err
		}
		next, err := db.untilDue(ctx)
		if !db.listened.Load() && (next == 0 || next > listenLostPoll) {
			next = listenLostPoll
		}
		return j, false, next, err
	}
}

// untilDue says how long until the next job is due: 0 when there is none,
// listenLostPoll when one is due already (another consumer is taking it, or
// its dequeue has not committed yet: look again soon). It is read once per
// wake-up, whichever consumers find nothing meanwhile (the one woken, the
// one it passes on to, all of them when the listener came or went): until
// the next wake-up no job becomes due sooner than it says (a job taken or
// acked meanwhile only makes one of them look early).
func (db *DB) untilDue(ctx context.Context) (time.Duration, error) {
	db.mu.Lock()
	gen := db.wakes
	db.mu.Unlock()
	db.dueMu.Lock()
	defer db.dueMu.Unlock()
	if db.next == nil || db.next.gen != gen {
		db.next = &nextDue{gen: gen}
		if err := db.pool.QueryRow(ctx, sqlstore.NextDueStmt).Scan(&db.next.at); err != nil {
			db.next = nil
			return 0, fmt.Errorf("dequeue: next due job: %w", err)
		}
	}
	if db.next.at == nil {
		return 0, nil
	}
	if wait := db.next.at.Sub(db.opts.Clock.Now()); wait > 0 {
		return wait, nil
	}
	db.next = nil // due already: read it again at the next look
	return listenLostPoll, nil
}

// nextDue is the next due time (nil: no job) read after wake-up gen.
type nextDue struct {
	at  *time.Time
	gen uint64
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
		j, err := sqlstore.ScanJob(db.pool.QueryRow(ctx, `WITH next AS (
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
			now, db.opts.MaxAttempts, consumer, token, now.Add(lease)), db.opts.MaxAttempts, &spent)
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

// ackTx queues the ack of j inside tx when it still holds its lease
// (core.Finish.Ack); nil or a lost lease does nothing.
func ackTx(tx *txn, j *core.Job) {
	if j == nil || j.Lease == "" {
		return
	}
	tx.Later(dollars(sqlstore.AckStmt), j.ID, j.Lease)
}

// due wakes a consumer waiting here and, through NOTIFY, one on each of the
// other replicas (best effort: they also poll); each passes it on while
// there are jobs.
func (db *DB) due(ctx context.Context) {
	if _, err := db.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, db.opts.Schema); err != nil {
		db.opts.Logger.Debug("notify due jobs", "err", err)
	}
	db.wakeOne()
}
