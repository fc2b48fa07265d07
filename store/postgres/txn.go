package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// beginSQL begins every transaction of the store: the locking in this
// package relies on each statement seeing what committed before it started.
const beginSQL = "begin isolation level read committed"

// txn is a transaction on one connection of the pool that spends as few
// round trips as it can. Its statements wait in a queue and go out together,
// as one pgx batch (an extended-protocol pipeline with one Sync), when a
// result is needed: BEGIN goes out with the first of them, a statement whose
// result nobody waits for (Later) with the next one that is waited for
// (Exec, QueryRow, Flush), and whatever is left with COMMIT. PostgreSQL runs
// them one after the other, each with its own READ COMMITTED snapshot, as if
// they had been sent one by one; after one fails it skips the rest, and the
// transaction is aborted.
//
// The first failure fails the transaction: nothing more is sent, and tx
// rolls it back. The error of a statement someone waited for goes to that
// caller; the error of a queued statement, which nobody was waiting for, is
// the transaction's and tx returns it in place of fn's, so each queued
// statement carries the context its error is wrapped in (Wrap), the one
// fn's caller would have seen had the statement been sent on its own.
//
// A statement that goes out with COMMIT cannot stop it: what its reader
// decides comes too late, and a reader's own error (only a decoding bug can
// cause one, a failing statement aborts the commit) is reported although the
// transaction committed. Reads that decide whether to commit are flushed
// before. A context that ends while COMMIT is on its way stops the batch on
// the server, not only on the client (see stopOnCancel).
//
// A failed transaction is rolled back on its connection, which goes back to
// the pool for the next caller (it is closed instead when the rollback
// fails, or after a cancel request).
type txn struct {
	db    *DB
	conn  *pgxpool.Conn // acquired by the first send
	begun bool          // BEGIN was sent
	queue []*queued
	scope []string // see within
	// failed is the first failure; the transaction cannot commit.
	failed error
	// report is failed when a queued statement failed, or BEGIN or COMMIT:
	// no caller read that error when it happened.
	report    error
	enqueued  bool // a job was enqueued: notify listeners on commit
	cancelled bool // a cancel request was sent for the connection (see stopOnCancel)
}

// queued is a statement waiting in a txn's queue.
type queued struct {
	sql   string
	args  []any
	scope []string             // the txn's scope when it was queued
	wrap  func(error) error    // nil: its error is returned as is
	read  func(pgx.Rows) error // reads its result; nil: its result is not read
	tag   *pgconn.CommandTag   // receives its command tag, when not nil
}

// Later queues a statement whose result nobody waits for: it goes out with
// the next statement that is waited for, or with COMMIT. Row, Rows and Tag
// read its result when it arrives, for a caller that needs it only after
// that.
func (t *txn) Later(sql string, args ...any) *queued {
	q := &queued{sql: sql, args: args, scope: t.scope}
	t.queue = append(t.queue, q)
	return q
}

// Wrap makes the statement's error read "what: err".
func (q *queued) Wrap(what string) *queued {
	q.wrap = func(err error) error { return fmt.Errorf("%s: %w", what, err) }
	return q
}

// WrapFunc makes wrap(err) the statement's error; wrap runs when it failed,
// so it may use what the statements before it read.
func (q *queued) WrapFunc(wrap func(error) error) *queued {
	q.wrap = wrap
	return q
}

// Row has scan read the statement's row when it arrives, pgx.ErrNoRows when
// there is none, as from Conn.QueryRow. An error scan returns fails the
// transaction: scan handles pgx.ErrNoRows itself when no row is an answer.
func (q *queued) Row(scan func(row pgx.Row) error) *queued {
	q.read = func(rows pgx.Rows) error { return scan(firstRow{rows}) }
	return q
}

// Rows has read read the statement's rows when they arrive; an error it
// returns fails the transaction.
func (q *queued) Rows(read func(rows pgx.Rows) error) *queued {
	q.read = read
	return q
}

// Tag stores the statement's command tag in *tag when it arrives.
func (q *queued) Tag(tag *pgconn.CommandTag) *queued {
	q.tag = tag
	return q
}

// err is err as the statement's caller would have seen it: wrapped by the
// statement, then by the scopes it was queued in.
func (q *queued) err(err error) error {
	if q.wrap != nil {
		err = q.wrap(err)
	}
	for i := len(q.scope) - 1; i >= 0; i-- {
		err = fmt.Errorf("%s: %w", q.scope[i], err)
	}
	return err
}

// within runs fn with what as the outermost context of the errors of the
// statements fn queues, and wraps fn's own error in it too: for code that
// wraps the error of a function whose statements go out later.
func (t *txn) within(what string, fn func() error) error {
	outer := t.scope
	t.scope = append(outer[:len(outer):len(outer)], what)
	err := fn()
	t.scope = outer
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Flush sends the queued statements now. It returns the transaction's
// failure, if there is one (fn returns it as is: tx returns it anyway).
func (t *txn) Flush(ctx context.Context) error {
	if t.failed != nil {
		return t.failed
	}
	if len(t.queue) == 0 {
		return nil
	}
	return t.send(ctx, nil, false)
}

// Exec sends the queued statements and sql, and returns sql's command tag.
func (t *txn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := t.send(ctx, &queued{sql: sql, args: args, tag: &tag}, false)
	return tag, err
}

// QueryRow returns sql's row; the queued statements and sql go out when its
// Scan is called.
func (t *txn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return txnRow{ctx: ctx, t: t, sql: sql, args: args}
}

// txnRow is the row of txn.QueryRow, whose query is sent by Scan.
type txnRow struct {
	ctx  context.Context
	t    *txn
	sql  string
	args []any
}

func (r txnRow) Scan(dest ...any) error {
	return r.t.send(r.ctx, &queued{sql: r.sql, args: r.args, read: func(rows pgx.Rows) error {
		return firstRow{rows}.Scan(dest...)
	}}, false)
}

// firstRow reads the first of rows as pgx's Conn.QueryRow does.
type firstRow struct{ rows pgx.Rows }

func (r firstRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// send sends, in one round trip, BEGIN (unless it was sent), the queued
// statements, then now (the statement a caller waits for; nil: none) or
// COMMIT, and reads their results in order. It returns now's error, or the
// transaction's failure when there is no now (or when a queued statement
// failed, so that now was skipped).
func (t *txn) send(ctx context.Context, now *queued, commit bool) error {
	if t.failed != nil {
		return t.failed
	}
	queue := t.queue
	t.queue = nil
	if now != nil {
		queue = append(queue, now)
	}
	if t.conn == nil {
		conn, err := t.db.pool.Acquire(ctx)
		if err != nil {
			t.failed, t.report = err, err
			return err
		}
		t.conn = conn
	}
	b := &pgx.Batch{}
	begin := !t.begun
	if begin {
		b.Queue(beginSQL)
		t.begun = true
	}
	for _, q := range queue {
		b.Queue(q.sql, q.args...)
	}
	if commit {
		b.Queue("commit")
	}
	conn := t.conn.Conn()
	bctx, stop := ctx, func() bool { return false }
	if commit {
		bctx, stop = stopOnCancel(ctx, conn.PgConn())
	}
	br := conn.SendBatch(bctx, b)
	var nowErr error
	if begin {
		if _, err := br.Exec(); err != nil {
			t.failed, t.report = err, err
		}
	}
	for _, q := range queue {
		if t.failed != nil {
			break // the server skipped the rest; br.Close reads what is left
		}
		err := q.result(br)
		if err == nil {
			continue
		}
		var pgErr *pgconn.PgError
		switch {
		case q != now:
			t.failed = q.err(err)
			t.report = t.failed
		case errors.As(err, &pgErr) || conn.IsClosed():
			t.failed, nowErr = err, err
		default:
			nowErr = err // a read error (pgx.ErrNoRows): the caller's, the transaction goes on
		}
	}
	if commit && t.failed == nil {
		tag, err := br.Exec()
		if err == nil && tag.String() == "ROLLBACK" {
			err = pgx.ErrTxCommitRollback
		}
		if err != nil {
			t.failed, t.report = err, err
		}
	}
	cerr := br.Close()
	t.cancelled = stop()
	if t.failed == nil && (conn.IsClosed() || conn.PgConn().TxStatus() == 'E') {
		// Not seen above, but the transaction cannot go on.
		if cerr == nil {
			cerr = errors.New("transaction aborted")
		}
		t.failed, t.report = cerr, cerr
	}
	var pgErr *pgconn.PgError
	if t.cancelled && t.failed != nil && (conn.IsClosed() || errors.As(t.failed, &pgErr) && pgErr.Code == "57014") {
		// Stopped by stopOnCancel: fail as a statement whose context ended.
		t.failed = fmt.Errorf("%w: %w", ctx.Err(), t.failed)
		t.report = t.failed
	}
	if now == nil || t.report != nil {
		return t.report
	}
	return nowErr
}

// cancelWait bounds the wait for the server's answer to a cancel request,
// after which the connection is closed.
const cancelWait = 5 * time.Second

// stopOnCancel returns the context to send a batch that carries COMMIT in,
// for when ctx may end while it runs. PostgreSQL runs a pipeline it received
// to its end even when the client has gone (it notices only when it next
// reads or writes), so closing the connection, as pgx does when a context
// ends, would leave a COMMIT behind that may still run, say once a lock the
// batch waits for is free: the caller would see an error for a transaction
// that committed. Instead, when ctx ends, a cancel request stops the
// statement the server is on (the rest, COMMIT with it, is then skipped) and
// the batch ends with the server's answer, committed or not; only when that
// does not come within cancelWait does the returned context end, and pgx
// closes the connection. Once the batch is read, stop reports whether a
// cancel request went out: the connection must then be closed, since the
// request may reach the server late and stop a later statement.
func stopOnCancel(ctx context.Context, pgConn *pgconn.PgConn) (bctx context.Context, stop func() (cancelled bool)) {
	bctx, closeBatch := context.WithCancel(context.WithoutCancel(ctx))
	read := make(chan struct{})    // closed when the batch was read
	watched := make(chan struct{}) // closed when the watch is over
	stopWatch := context.AfterFunc(ctx, func() {
		defer close(watched)
		defer closeBatch()
		cctx, cancel := context.WithTimeout(context.Background(), cancelWait)
		defer cancel()
		if pgConn.CancelRequest(cctx) == nil {
			select {
			case <-read:
			case <-cctx.Done():
			}
		}
	})
	return bctx, func() bool {
		close(read)
		defer closeBatch()
		if stopWatch() {
			return false
		}
		<-watched
		return true
	}
}

// result reads the statement's result from br.
func (q *queued) result(br pgx.BatchResults) error {
	if q.read == nil {
		tag, err := br.Exec()
		if q.tag != nil {
			*q.tag = tag
		}
		return err
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	if err := q.read(rows); err != nil {
		return err
	}
	rows.Close()
	if q.tag != nil {
		*q.tag = rows.CommandTag()
	}
	return rows.Err()
}

// commit sends what is still queued with COMMIT. A transaction that sent
// and queued nothing has nothing to commit.
func (t *txn) commit(ctx context.Context) error {
	if t.failed != nil {
		return t.failed
	}
	if !t.begun && len(t.queue) == 0 {
		return nil
	}
	return t.send(ctx, nil, true)
}

// end rolls back a transaction that did not commit and gives the
// connection back to the pool, which closes it instead when the rollback
// failed (or a cancel request was sent for it).
func (t *txn) end(ctx context.Context) {
	if t.conn == nil {
		return
	}
	conn := t.conn.Conn()
	switch {
	case t.cancelled:
		// Closing the session also rolls back.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelWait)
		defer cancel()
		_ = conn.Close(cctx)
	case !conn.IsClosed() && conn.PgConn().TxStatus() != 'I':
		_, _ = conn.Exec(ctx, "rollback")
	}
	t.conn.Release()
}

// tx runs fn in a READ COMMITTED transaction (see txn) and commits when fn
// returns nil. A transaction that enqueued jobs notifies listeners
// (delivered on commit) and wakes a local waiting Dequeue call.
func (db *DB) tx(ctx context.Context, fn func(tx *txn) error) error {
	t := &txn{db: db}
	defer t.end(ctx)
	err := fn(t)
	if err == nil && t.failed == nil {
		if t.enqueued {
			t.Later(`SELECT pg_notify($1, $2)`, notifyChannel, db.opts.Schema).Wrap("notify")
		}
		err = t.commit(ctx)
		if t.enqueued {
			// Also when the commit's outcome is unknown: this replica's
			// listener skips the notification of its own connections.
			db.wakeOne()
		}
		if err == nil {
			return nil
		}
	}
	switch {
	case t.report != nil:
		return t.report
	case err == nil:
		// fn went on after a statement failed: COMMIT would have rolled back.
		return pgx.ErrTxCommitRollback
	}
	return err
}
