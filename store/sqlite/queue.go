package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

// The embedded queue lives in the jobs table. A waiting job has consumer ''
// and becomes due at visible_at; a delivered job carries its consumer and
// lease token, and visible_at is when the lease runs out, after which it is
// due again under a new token. Every change goes through the single writer
// connection, so selecting a due job and leasing it cannot race.

// maxAttempts is the effective delivery limit of a job whose stored limit is n.
func (db *DB) maxAttempts(n int) int { return sqlstore.MaxAttempts(n, db.opts.MaxAttempts) }

// Enqueue adds a job; see core.Queue. A non-empty j.ID is kept (it must be
// unique); otherwise one is generated.
func (db *DB) Enqueue(ctx context.Context, j core.Job) error {
	if err := db.tx(ctx, func(tx *txn) error { return db.enqueueTx(ctx, tx, j) }); err != nil {
		return err
	}
	db.wake()
	return nil
}

// Dequeue blocks until a job is due and leases it to consumer; see
// core.Queue. One process owns the database, so every change that makes a
// job due (enqueue, retry, recovery) wakes it at once; a delayed job or a
// lease running out wakes it when due. Options.PollInterval bounds a wait
// with no news.
func (db *DB) Dequeue(ctx context.Context, consumer string, lease time.Duration) (core.Job, error) {
	idle := false // this waiter found nothing due and waits (counted in hand.idle)
	setIdle := func(v bool) {
		if v == idle {
			return
		}
		d := 1
		if !v {
			d = -1
		}
		db.mu.Lock()
		db.hand.idle += d
		if v {
			db.hand.overflow = false
		}
		db.mu.Unlock()
		idle = v
	}
	defer setIdle(false)
	// A handed-off job wakes one waiter (handCh), not all as an enqueue does.
	return core.WaitDequeue(ctx, db.opts.PollInterval, db.notify.C, db.handCh, func() (core.Job, bool, time.Duration, error) {
		setIdle(false)
		if j, ok := db.handedOff(consumer); ok {
			return j, true, 0, nil
		}
		j, ok, next, err := db.tryDequeue(ctx, consumer, lease)
		setIdle(err == nil && !ok)
		return j, ok, next, err
	})
}

// handoff holds the jobs the store leased as it created their runs
// (core.NewRun.Start) until a worker waiting in Dequeue takes them: one
// process owns the database, so the lease written at creation is the
// delivery, and no second write or poll is needed.
type handoff struct {
	idle     int // goroutines in Dequeue that found nothing due: no backlog to jump
	reserved int // places promised by Reserve
	jobs     []handed
	// overflow: a Reserve was refused, so runs may wait in the table;
	// cleared when a worker finds nothing due there.
	overflow bool
}

// handed is a job leased at creation to consumer until until.
type handed struct {
	job      core.Job
	consumer string
	until    time.Time
}

// Reserve implements core.Handoff. Handed-off jobs are taken before due
// ones, so a place is given only while no run waits in the table (since a
// refusal, until a worker finds it empty): runs start in the order they
// came.
func (db *DB) Reserve(backlog int) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	h := &db.hand
	if h.overflow || h.reserved+len(h.jobs) >= h.idle+backlog {
		h.overflow = true
		return false
	}
	h.reserved++
	return true
}

// Unreserve implements core.Handoff.
func (db *DB) Unreserve() {
	db.mu.Lock()
	db.hand.reserved--
	db.mu.Unlock()
}

// Handoff implements core.Handoff.
func (db *DB) Handoff(j core.Job, consumer string, until time.Time) {
	db.mu.Lock()
	db.hand.reserved--
	db.hand.jobs = append(db.hand.jobs, handed{job: j, consumer: consumer, until: until})
	db.mu.Unlock()
	select {
	case db.handCh <- struct{}{}: // one waiter takes it
	default: // as many signals wait as can be taken; the poll finds the rest
	}
}

// handedOff takes the oldest handed-off job leased to consumer whose lease
// has not run out (one that did is due in the table again, and a dequeue
// there delivers it under a new lease).
func (db *DB) handedOff(consumer string) (core.Job, bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	now := db.opts.Clock.Now()
	// What ran out is due in the table again; drop it here.
	db.hand.jobs = slices.DeleteFunc(db.hand.jobs, func(h handed) bool { return !now.Before(h.until) })
	for i, h := range db.hand.jobs {
		if h.consumer == consumer {
			db.hand.jobs = slices.Delete(db.hand.jobs, i, i+1)
			return h.job, true
		}
	}
	return core.Job{}, false
}

// TryDequeue leases the oldest due job to consumer, or reports ok=false when
// none is due. Due jobs that have used up their deliveries are dead-lettered
// on the way ("delivery limit reached") and skipped. The returned job's
// MaxAttempts is its effective limit (the queue default when it was
// enqueued with 0), and RunAt is when it became due.
func (db *DB) TryDequeue(ctx context.Context, consumer string, lease time.Duration) (core.Job, bool, error) {
	j, ok, _, err := db.tryDequeue(ctx, consumer, lease)
	return j, ok, err
}

// untilDue reads sqlstore.NextDueStmt's row: whether a job is due at now,
// else how long until one is (0: no job at all).
func untilDue(row *sql.Row, now time.Time) (bool, time.Duration, error) {
	var at sql.NullInt64
	if err := row.Scan(&at); err != nil {
		return false, 0, err
	}
	if !at.Valid {
		return false, 0, nil
	}
	if wait := time.Unix(0, at.Int64).Sub(now); wait > 0 {
		return false, wait, nil
	}
	return true, 0, nil
}

// tryDequeue is TryDequeue; when no job is due it also says how long until
// the next one is (0: the table holds none).
func (db *DB) tryDequeue(ctx context.Context, consumer string, lease time.Duration) (core.Job, bool, time.Duration, error) {
	if err := sqlstore.CheckDequeue(consumer, lease); err != nil {
		return core.Job{}, false, 0, err
	}
	// Look on a reader first: workers woken together by one enqueue, and
	// polls that find nothing, take no write transaction.
	due, next, err := untilDue(db.r.QueryRowContext(ctx, sqlstore.NextDueStmt), db.opts.Clock.Now())
	if err != nil {
		return core.Job{}, false, 0, fmt.Errorf("dequeue: %w", err)
	}
	if !due {
		return core.Job{}, false, next, nil
	}
	var (
		j  core.Job
		ok bool
	)
	err = db.tx(ctx, func(tx *txn) error {
		now := db.opts.Clock.Now()
		for {
			var err error
			j, err = sqlstore.ScanJob(tx.QueryRowContext(ctx, `SELECT `+sqlstore.JobCols+` FROM jobs
				WHERE dead_at IS NULL AND visible_at <= ?
				ORDER BY visible_at, rowid LIMIT 1`, now.UnixNano()), db.opts.MaxAttempts)
			if errors.Is(err, sql.ErrNoRows) { // taken by another consumer, or dead-lettered above
				_, next, err = untilDue(tx.QueryRowContext(ctx, sqlstore.NextDueStmt), now)
				return err
			}
			if err != nil {
				return err
			}
			if j.Attempt >= j.MaxAttempts {
				reason := "delivery limit reached: " + strconv.Itoa(j.Attempt) + " attempts"
				if j.LastError != "" {
					reason += "; last error: " + j.LastError
				}
				if _, err := tx.ExecContext(ctx, `UPDATE jobs SET dead_at = ?, last_error = ?, consumer = '', lease = ''
					WHERE id = ?`, now.UnixNano(), reason, j.ID); err != nil {
					return err
				}
				continue
			}
			j.Attempt++
			j.Lease = core.NewID("lease")
			if _, err := tx.ExecContext(ctx, `UPDATE jobs SET consumer = ?, lease = ?, attempt = ?, visible_at = ?
				WHERE id = ?`, consumer, j.Lease, j.Attempt, now.Add(lease).UnixNano(), j.ID); err != nil {
				return err
			}
			ok = true
			return nil
		}
	})
	if err != nil {
		return core.Job{}, false, 0, fmt.Errorf("dequeue: %w", err)
	}
	if !ok {
		return core.Job{}, false, next, nil
	}
	return j, true, 0, nil
}

// ackTx acks j inside tx when it still holds its lease (core.Finish.Ack);
// nil or a lost lease does nothing.
func ackTx(ctx context.Context, tx *txn, j *core.Job) error {
	if j == nil || j.Lease == "" {
		return nil
	}
	_, err := tx.ExecContext(ctx, sqlstore.AckStmt, j.ID, j.Lease)
	return err
}
