// Package sqlite is the embedded store and queue: one SQLite database
// (modernc.org/sqlite, no cgo, WAL) holds sessions, runs, the run journal,
// approvals and the job queue, so a state change and the job it enqueues
// commit in one transaction.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/lease"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// readers is how many reader connections the store keeps open.
const readers = 4

// Options configure Open. The zero value is valid.
type Options struct {
	// Clock tells the time for queue due-times and leases. Default: system clock.
	Clock core.Clock
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// Synchronous is SQLite's synchronous pragma: "full" (default; a commit
	// survives power loss) or "normal" (survives a process crash, faster).
	Synchronous string
	// MaxAttempts is the queue's default delivery limit before a job is
	// dead-lettered. Default 5.
	MaxAttempts int
	// Backoff is the delay before retry number attempt (1-based) of a failed
	// job. Default: 1s·2^(attempt-1), capped at 5 minutes.
	Backoff func(attempt int) time.Duration
	// PollInterval is the longest a waiting Dequeue sleeps without news. It
	// is woken at once by every change that makes a job due (this DB is the
	// only writer: the gateway locks the data dir) and when the next delayed
	// job or lease is due, so the poll is a safety net. Default 5s.
	PollInterval time.Duration
}

// DB is the SQLite store (core.Store) and embedded queue (core.Queue).
type DB struct {
	w       *sql.DB       // single connection: SQLite has one writer; serializing in Go avoids SQLITE_BUSY
	commits *committer    // runs the transactions on w, several per commit
	wst     *stmtCache    // statements prepared on w
	r       *readPool     // readers, with their prepared statements
	ck      *checkpointer // copies committed WAL frames into the database file in the background
	path    string
	opts    Options

	mu     sync.Mutex
	notify core.Broadcast // wakes waiting Dequeue calls: a job may be due
	hand   handoff        // jobs leased at creation, for workers waiting in Dequeue (under mu)
	handCh chan struct{}  // a signal per handed-off job, for one waiting worker

	sqlstore.Routines // the routine rules, over routineDriver
	sqlstore.Runs     // the run rules written once, over runDriver
	sqlstore.Data     // reads, audit, outbox and inbox claims
	sqlstore.Jobs     // the queue, but for Enqueue and Dequeue
}

var (
	_ core.Store   = (*DB)(nil)
	_ core.Queue   = (*DB)(nil)
	_ core.Handoff = (*DB)(nil)
	_ lease.Store  = (*DB)(nil)
)

// Open opens (creating if needed) the database file at path and applies
// pending migrations. Use ":memory:"-free temp files in tests: the reader and
// writer pools must see the same database.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	if opts.Clock == nil {
		opts.Clock = core.SystemClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	if opts.Backoff == nil {
		opts.Backoff = DefaultBackoff
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 5 * time.Second
	}
	syncMode := strings.ToUpper(opts.Synchronous)
	if syncMode == "" {
		syncMode = "FULL"
	}
	if syncMode != "FULL" && syncMode != "NORMAL" {
		return nil, fmt.Errorf("sqlite: synchronous must be full or normal, got %q", opts.Synchronous)
	}
	dsn := func(extra string) string {
		return path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)" +
			"&_pragma=synchronous(" + syncMode + ")" + extra
	}
	w, err := sql.Open("sqlite", dsn("&_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	r, err := sql.Open("sqlite", dsn("&_pragma=query_only(1)"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r.SetMaxOpenConns(readers)
	r.SetMaxIdleConns(readers) // a reader closed when idle is opened again (its pragmas, its statements) by the next poll
	r.SetConnMaxIdleTime(0)
	ck, err := startCheckpointer(dsn(""))
	if err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db := &DB{w: w, wst: newStmtCache(w), r: &readPool{DB: r, st: newStmtCache(r)}, ck: ck, path: path, opts: opts, handCh: make(chan struct{}, 1024), commits: newCommitter()}
	db.Routines = sqlstore.Routines{D: routineDriver{db}, R: conn{db.r}, Dialect: dialect}
	db.Data = sqlstore.Data{R: conn{db.r}, W: writeConn{db}, Tx: db, Dialect: dialect, Now: db.opts.Clock.Now}
	db.Jobs = sqlstore.Jobs{R: conn{db.r}, W: writeConn{db}, Dialect: dialect, Now: db.opts.Clock.Now,
		MaxAttempts: db.opts.MaxAttempts, Backoff: db.opts.Backoff, Due: func(context.Context) { db.wake() }, Moved: db.wake}
	db.Runs = sqlstore.Runs{D: runDriver{db}}
	go db.commits.run(db)
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// DefaultBackoff is core.DefaultBackoff, kept for callers of this package.
var DefaultBackoff = core.DefaultBackoff

// Close closes the database.
func (db *DB) Close() error {
	db.commits.close()
	db.wst.close()
	db.r.st.close()
	return errors.Join(db.ck.stop(), db.r.Close(), db.w.Close())
}

// Path is the database file.
func (db *DB) Path() string { return db.path }

// Checkpoint folds the WAL into the main database file and truncates it.
func (db *DB) Checkpoint(ctx context.Context) error {
	_, err := db.w.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	return err
}

// migration is one numbered schema step, migrations/NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	ents, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range ents {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number and _", e.Name())
		}
		b, err := migrationFS.ReadFile(filepath.ToSlash(filepath.Join("migrations", e.Name())))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", ms[i-1].name, ms[i].name, ms[i].version)
		}
	}
	return ms, nil
}

// migrate applies every migration newer than the database's version, each in
// its own transaction.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	if _, err := db.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var cur int
	if err := db.w.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range ms {
		if m.version <= cur {
			continue
		}
		err := db.tx(ctx, func(tx *txn) error {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, time.Now().UnixNano())
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate %s: %w", m.name, err)
		}
		db.opts.Logger.Info("applied migration", "store", "sqlite", "migration", m.name)
	}
	return nil
}

// SchemaVersion returns the newest applied migration.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := db.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// tx runs fn in a write transaction (BEGIN IMMEDIATE) and returns once it
// committed, or was rolled back when fn returned an error; transactions
// that wait together share a commit (see committer). fn may run only
// statements on tx: it must not wait for another write. After a commit
// that enqueued jobs, the caller wakes waiting consumers.
func (db *DB) tx(ctx context.Context, fn func(tx *txn) error) error {
	return db.commits.do(ctx, false, fn)
}

// writeTx is tx; an urgent transaction goes before the others waiting for
// the write connection (see committer).
func (db *DB) writeTx(ctx context.Context, urgent bool, fn func(tx *txn) error) error {
	return db.commits.do(ctx, urgent, fn)
}

// wake tells waiting Dequeue calls that a job may be due.
func (db *DB) wake() { db.notify.Wake() }

// coalesceStmt moves a waiting job with key (?2) earlier to ?1. Its WHERE
// names every term of the partial index jobs_key, which SQLite needs to use
// it.
const coalesceStmt = `UPDATE jobs SET visible_at = MIN(visible_at, ?)
	WHERE key = ? AND key <> '' AND consumer = '' AND dead_at IS NULL`

// enqueueTx inserts job j inside tx (the transactional enqueue used by the
// store's state changes and by Enqueue). A non-empty key is coalesced into a
// waiting, undelivered job with the same key. The caller must call db.wake()
// after the commit.
func (db *DB) enqueueTx(ctx context.Context, tx *txn, j core.Job) error {
	now := db.opts.Clock.Now()
	j = sqlstore.NewJob(j, now)
	runAt := j.RunAt
	if j.Key != "" {
		// A waiting job with this key already exists: move it earlier if needed.
		res, err := tx.ExecContext(ctx, coalesceStmt, runAt.UnixNano(), j.Key)
		if err != nil {
			return fmt.Errorf("enqueue %s: %w", j.Kind, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return nil
		}
	}
	return insertJobTx(ctx, tx, j, "", runAt, now)
}

// insertJobTx inserts job j (as sqlstore.NewJob made it), visible at
// visibleAt: a waiting job (consumer "", j.Attempt 0), or one delivered to
// consumer under j.Lease until visibleAt.
func insertJobTx(ctx context.Context, tx *txn, j core.Job, consumer string, visibleAt, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO jobs(id, kind, key, payload, attempt, max_attempts, visible_at, created_at,
		consumer, lease) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, j.ID, j.Kind, j.Key, []byte(j.Payload), j.Attempt,
		j.MaxAttempts, visibleAt.UnixNano(), now.UnixNano(), consumer, j.Lease)
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", j.Kind, err)
	}
	return nil
}

// nanos converts a stored unix-nanosecond value to UTC time.
func nanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// toNull converts an optional time for storage.
func toNull(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}
