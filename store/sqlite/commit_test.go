package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	msqlite "modernc.org/sqlite"
)

// giveUp is called by the SQL function give_up(), in the middle of a
// statement.
var giveUp atomic.Pointer[context.CancelFunc]

func init() {
	msqlite.MustRegisterScalarFunction("give_up", 0, func(*msqlite.FunctionContext, []driver.Value) (driver.Value, error) {
		if f := giveUp.Load(); f != nil {
			(*f)()
		}
		return int64(1), nil
	})
}

func openCommitTest(t *testing.T) *DB {
	t.Helper()
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.tx(t.Context(), func(tx *txn) error {
		_, err := tx.Exec(`CREATE TABLE t (name TEXT PRIMARY KEY)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return db
}

func insert(name string) func(*txn) error {
	return func(tx *txn) error {
		_, err := tx.Exec(`INSERT INTO t(name) VALUES (?)`, name)
		return err
	}
}

func (db *DB) stored(t *testing.T, name string) bool {
	t.Helper()
	var n int
	if err := db.r.QueryRow(`SELECT COUNT(*) FROM t WHERE name = ?`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// hold keeps the committer busy until the returned release is called, so
// the transactions queued meanwhile share the next commit.
func (db *DB) hold(t *testing.T) (release func()) {
	t.Helper()
	started, gate := make(chan struct{}), make(chan struct{})
	go func() {
		_ = db.tx(context.Background(), func(*txn) error { close(started); <-gate; return nil })
	}()
	<-started
	return func() { close(gate) }
}

// waiting waits until n transactions are queued.
func (c *committer) waiting(n int) {
	for {
		c.mu.Lock()
		got := len(c.urgent) + len(c.other)
		c.mu.Unlock()
		if got == n {
			return
		}
		runtime.Gosched()
	}
}

// Transactions that wait together share one commit; one that fails is
// rolled back alone; urgent ones run first, each kind in arrival order.
func TestGroupCommit(t *testing.T) {
	db := openCommitTest(t)
	release := db.hold(t)
	var order []string
	var mu sync.Mutex
	record := func(name string, fn func(*txn) error) func(*txn) error {
		return func(tx *txn) error {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			return fn(tx)
		}
	}
	const n = 50
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("row-%02d", i)
		fn := insert(name)
		if i == 7 { // writes, then fails: its row must not stay
			fn = func(tx *txn) error {
				if err := insert(name)(tx); err != nil {
					return err
				}
				return errors.New("refused")
			}
		}
		wg.Go(func() { errs[i] = db.writeTx(context.Background(), i == 40, record(name, fn)) })
		db.commits.waiting(i + 1) // queued in this order
	}
	before, _ := db.Commits()
	release()
	wg.Wait()
	after, _ := db.Commits()
	for i, err := range errs {
		name := fmt.Sprintf("row-%02d", i)
		switch {
		case i == 7 && (err == nil || err.Error() != "refused" || db.stored(t, name)):
			t.Errorf("failing transaction: err %v, row stored %t; want its own error and no row", err, db.stored(t, name))
		case i != 7 && (err != nil || !db.stored(t, name)):
			t.Errorf("%s: err %v, stored %t; want committed", name, err, db.stored(t, name))
		}
	}
	if got := after - before; got != 2 { // the held one, then all 50
		t.Errorf("%d transactions waiting together took %d commits, want 2 (the held one and theirs)", n, got)
	}
	if order[0] != "row-40" || order[1] != "row-00" || order[n-1] != "row-49" {
		t.Errorf("order = %v…, want the urgent row-40 first, then arrival order", order[:3])
	}
}

// A transaction whose caller gives up before it started writes nothing; one
// that started runs to its end.
func TestGroupCommitCancel(t *testing.T) {
	db := openCommitTest(t)
	release := db.hold(t)
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() { gone <- db.tx(ctx, insert("never")) }()
	db.commits.waiting(1)
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before it started: %v", err)
	}
	release()
	if err := db.tx(t.Context(), insert("after")); err != nil {
		t.Fatal(err)
	}
	if db.stored(t, "never") || !db.stored(t, "after") {
		t.Fatal("a transaction cancelled while waiting was written, or the next one was not")
	}

	started := make(chan struct{})
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- db.tx(ctx, func(tx *txn) error {
			close(started)
			cancel() // the caller gives up mid-transaction
			return insert("started")(tx)
		})
	}()
	<-started
	if err := <-done; err != nil || !db.stored(t, "started") {
		t.Fatalf("a started transaction whose caller gave up: %v, stored %t; want it committed", err, db.stored(t, "started"))
	}
}

// A caller that gives up while its statement runs in a shared commit
// interrupts nothing: SQLite rolls back a whole transaction when an INSERT
// in it is interrupted, which took the other callers' writes with it.
func TestGroupCommitCallerGivesUpMidStatement(t *testing.T) {
	db := openCommitTest(t)
	release := db.hold(t)
	first := make(chan error, 1)
	go func() { first <- db.tx(context.Background(), insert("first")) }()
	db.commits.waiting(1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	giveUp.Store(&cancel)
	defer giveUp.Store(nil)
	const rows = 200_000
	slow := make(chan error, 1)
	go func() {
		slow <- db.tx(ctx, func(tx *txn) error {
			// The caller gives up at the 100th of many rows.
			_, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO t(name)
				WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d)
				SELECT 'slow-' || x FROM c WHERE CASE WHEN x = 100 THEN give_up() ELSE 1 END`, rows))
			return err
		})
	}()
	db.commits.waiting(2)
	release()
	if err := <-slow; err != nil {
		t.Errorf("the caller that gave up mid-statement: %v; want its write committed", err)
	}
	if err := <-first; err != nil || !db.stored(t, "first") {
		t.Fatalf("a write sharing the commit: %v, stored %t; want it committed", err, db.stored(t, "first"))
	}
	var n int
	if err := db.r.QueryRow(`SELECT COUNT(*) FROM t WHERE name LIKE 'slow-%'`).Scan(&n); err != nil || n != rows {
		t.Fatalf("rows of the statement whose caller gave up: %d (%v), want %d", n, err, rows)
	}
}

// A write after Close is an error, not a hang.
func TestWriteAfterClose(t *testing.T) {
	db := openCommitTest(t)
	db.Close()
	if err := db.tx(context.Background(), insert("late")); !errors.Is(err, errClosed) {
		t.Fatalf("write after Close: %v", err)
	}
}
