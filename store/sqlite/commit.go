package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// maxBatch is the most transactions one commit carries.
const maxBatch = 128

// errClosed answers a write after Close.
var errClosed = errors.New("sqlite: database closed")

// committer runs the write transactions on SQLite's one write connection,
// in one goroutine. Transactions that wait together share one commit (group
// commit: one WAL append and one fsync for all of them), each inside a
// savepoint, so one that fails is rolled back alone and the others commit.
// A caller returns once its transaction committed (or failed), as with a
// transaction of its own.
//
// Urgent transactions (the inbox's, which webhook requests wait on before
// they are acknowledged) go before the others waiting; each kind goes in
// arrival order.
type committer struct {
	mu      sync.Mutex
	urgent  []*writeReq
	other   []*writeReq
	closed  bool
	kick    chan struct{} // buffered 1: something was queued
	stopped chan struct{}

	commits atomic.Int64 // commits made (each one fsync with synchronous=full)
	txs     atomic.Int64 // transactions committed in them
}

type writeReq struct {
	ctx   context.Context
	fn    func(*txn) error
	done  chan error // buffered 1
	taken bool       // in a batch: its outcome will come on done
}

func newCommitter() *committer {
	return &committer{kick: make(chan struct{}, 1), stopped: make(chan struct{})}
}

// do runs fn in a write transaction and returns its outcome. A caller whose
// ctx ends before its transaction started gets ctx's error and nothing is
// written; once started, the transaction runs to its end (a statement
// interrupted inside a shared transaction would roll back all of it).
func (c *committer) do(ctx context.Context, urgent bool, fn func(*txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errClosed
	}
	q := &c.other
	if urgent {
		q = &c.urgent
	}
	*q = append(*q, r)
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if !r.taken {
		if i := slices.Index(*q, r); i >= 0 {
			*q = slices.Delete(*q, i, i+1)
		}
		c.mu.Unlock()
		return ctx.Err()
	}
	c.mu.Unlock()
	return <-r.done
}

// take removes up to maxBatch waiting transactions, urgent ones first.
func (c *committer) take() (batch []*writeReq, closed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, q := range []*[]*writeReq{&c.urgent, &c.other} {
		n := min(len(*q), maxBatch-len(batch))
		for _, r := range (*q)[:n] {
			r.taken = true
		}
		batch = append(batch, (*q)[:n]...)
		*q = slices.Delete(*q, 0, n)
	}
	return batch, c.closed
}

// run commits batches until close; what is queued at close still runs.
func (c *committer) run(db *DB) {
	defer close(c.stopped)
	for {
		batch, closed := c.take()
		if len(batch) > 0 {
			db.commit(batch)
			continue
		}
		if closed {
			return
		}
		<-c.kick
	}
}

func (c *committer) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	<-c.stopped
}

// commit runs batch in one transaction, each in a savepoint, and commits.
func (db *DB) commit(batch []*writeReq) {
	results := make([]error, len(batch))
	defer func() {
		for i, r := range batch {
			r.done <- results[i]
		}
	}()
	defer db.wst.prepareNoted(context.Background()) // the connection is free again
	sqlTx, err := db.w.BeginTx(context.Background(), nil)
	if err != nil {
		for i := range results {
			results[i] = err
		}
		return
	}
	tx := &txn{Tx: sqlTx, st: db.wst}
	alone := len(batch) == 1 // no savepoint needed
	committed := 0
	for i, r := range batch {
		ctx := context.WithoutCancel(r.ctx)
		if !alone {
			if _, err := tx.ExecContext(ctx, "SAVEPOINT w"); err != nil {
				db.abort(tx, batch[:i], batch[i:], results, err)
				return
			}
		}
		err := r.fn(tx)
		switch {
		case err != nil && alone:
			_ = tx.Rollback()
			results[i] = err
			return
		case err != nil:
			results[i] = err
			if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO w"); rerr != nil {
				// SQLite ended the whole transaction (it does so on some
				// errors): the others' work is gone with it.
				db.abort(tx, batch[:i], batch[i+1:], results, rerr)
				return
			}
			fallthrough
		case !alone:
			if _, err := tx.ExecContext(ctx, "RELEASE w"); err != nil {
				db.abort(tx, batch[:i+1], batch[i+1:], results, err)
				return
			}
		}
		if results[i] == nil {
			committed++
		}
	}
	if err := tx.Commit(); err != nil {
		for i := range results {
			if results[i] == nil {
				results[i] = err
			}
		}
		return
	}
	db.commits.commits.Add(1)
	db.commits.txs.Add(int64(committed))
	db.ck.committed()
}

// abort rolls back a batch that cannot go on: the transactions that ran
// (ran) fail with err; those that did not (rest) run again in a batch of
// their own.
func (db *DB) abort(tx *txn, ran, rest []*writeReq, results []error, err error) {
	_ = tx.Rollback()
	for i := range ran {
		if results[i] == nil {
			results[i] = fmt.Errorf("sqlite: the shared commit this write was part of failed: %w", err)
		}
	}
	if len(rest) > 0 {
		off := len(results) - len(rest)
		// rest report through batch's done channels (the caller's defer):
		// run them in a batch of their own and take their results from it.
		sub := make([]*writeReq, len(rest))
		for i, r := range rest {
			sub[i] = &writeReq{ctx: r.ctx, fn: r.fn, done: make(chan error, 1), taken: true}
		}
		db.commit(sub)
		for i, r := range sub {
			results[off+i] = <-r.done
		}
	}
}

// Commits reports how many commits the store made and how many write
// transactions they carried (for benchmarks: each commit is one fsync with
// synchronous=full).
func (db *DB) Commits() (commits, txs int64) {
	return db.commits.commits.Load(), db.commits.txs.Load()
}
