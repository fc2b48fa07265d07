// Package postgres is the PostgreSQL store and queue (github.com/jackc/pgx/v5):
// one schema holds sessions, runs, the run journal, approvals, the job
// queue, routines and named leases, so a state change and the job it
// enqueues commit in one transaction, exactly as in store/sqlite. Unlike
// SQLite, PostgreSQL runs transactions concurrently, so the store takes row
// locks where SQLite relied on its single writer:
//
//   - routine row (the compare-and-set UPDATE in FireRoutine, FOR NO KEY
//     UPDATE elsewhere): fires, toggles, syncs and settles of one routine
//     serialize, so a due time fires once and an outcome counts once;
//     SyncRoutines calls of one schema also serialize on an advisory lock;
//   - session row (FOR NO KEY UPDATE, or the upsert's lock in CreateRun):
//     CreateRun, FinishRun and CancelRun of one session serialize, so "finish
//     the head, enqueue the next run" always sees every run created before it;
//   - run row (FOR UPDATE, or the UPDATE that claims or appends): claims,
//     appends, pauses, finishes and decisions of one run serialize, so
//     journal seqs never clash;
//   - approval decisions are a compare-and-set (UPDATE … WHERE status =
//     'pending' RETURNING);
//   - Dequeue takes a due job with FOR UPDATE SKIP LOCKED;
//   - Enqueue of a keyed job takes a transaction-scoped advisory lock on the
//     key, so coalescing into a waiting job is race-free;
//   - AcquireLease is one upsert (INSERT … ON CONFLICT … DO UPDATE … WHERE);
//   - inbox row (the upsert in CreateRun; ClaimInbox skips locked rows,
//     AppendInbox inserts a batch in key order): a message is marked
//     processed by one run only.
//
// Locks are always taken in the order inbox row → routine → session → run →
// approval → job key (the routine sync lock before any routine; a routine
// history entry only alone or with its routine held), so the store's own
// transactions cannot deadlock.
//
// A waiting Dequeue is woken by LISTEN/NOTIFY (pg_notify in the enqueueing
// transaction, delivered on commit to a dedicated listener connection) across
// processes, and at once in-process; an enqueue wakes one waiting Dequeue,
// which wakes the next when it takes a job. Between wake-ups it sleeps until the
// next job is due (a delayed job, a retry, a lease running out), looking at
// least every PollInterval — every listenLostPoll while the listener
// connection is down.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/lease"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// notifyChannel is the LISTEN/NOTIFY channel of enqueued jobs; the payload is
// the schema, so stores in other schemas of the database ignore the wake-up.
const notifyChannel = "agentgate_jobs"

// Advisory lock classes (the first key of the two-int4 form). The one-bigint
// form is a separate key space, so these never collide with other users of
// pg_advisory_lock(bigint).
const (
	lockClassMigrate     int32 = 0x61676d67 // "agmg": schema migrations, per schema
	lockClassJobKey      int32 = 0x61676a6b // "agjk": enqueue of one job key
	lockClassRoutineSync int32 = 0x61677273 // "agrs": SyncRoutines, per schema
)

// Options configure Open. The zero value is valid.
type Options struct {
	// Clock tells the time for queue due-times and leases, and for rows
	// created without a time. Default: system clock.
	Clock core.Clock
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// MaxAttempts is the queue's default delivery limit before a job is
	// dead-lettered. Default 5.
	MaxAttempts int
	// Backoff is the delay before retry number attempt (1-based) of a failed
	// job. Default: DefaultBackoff, 1s·2^(attempt-1) capped at 5 minutes.
	Backoff func(attempt int) time.Duration
	// PollInterval is the longest a waiting Dequeue sleeps without looking
	// for due jobs. It sleeps until the next job is due and is woken by every
	// enqueue (here, or on another replica through NOTIFY) and by a retry
	// here; the look every PollInterval finds what it could not foresee: a
	// retry on another replica, a lease taken after it last looked that ran
	// out. While the listener connection is down it looks every 250ms.
	// Default 5s.
	PollInterval time.Duration
	// Schema holds the tables; every connection's search_path is set to it
	// (overriding a search_path in the URL). Migrate creates it when missing.
	// Default "public".
	Schema string
	// SkipMigrate: Open does not call Migrate (run it from a deploy step, or
	// call it yourself).
	SkipMigrate bool
	// MaxConns caps the connection pool. Default: pool_max_conns from the
	// URL, else pgxpool's default (the greater of 4 and the number of CPUs).
	// The first Dequeue also opens one dedicated connection, outside the
	// pool, that LISTENs for enqueued jobs until Close.
	MaxConns int
}

// DB is the PostgreSQL store (core.Store, core.RoutineStore, lease.Store)
// and queue (core.Queue).
type DB struct {
	pool  *pgxpool.Pool
	opts  Options
	trips *trips
	own   *backends    // the pool's connections: their notifications woke Dequeue already
	heard atomic.Int64 // notifications from other processes' connections that woke Dequeue

	mu     sync.Mutex
	notify core.Broadcast // wakes every waiting Dequeue (the listener came or went)
	one    chan struct{}  // buffered 1: wakes one waiting Dequeue (a job may be due)
	wakes  uint64         // wake-ups so far: a next due time read since the last one holds

	dueMu sync.Mutex // one read of the next due time at a time (untilDue)
	next  *nextDue   // the last one read; nil: read it at the next look

	lmu         sync.Mutex
	listening   bool        // the listener goroutine was started
	listened    atomic.Bool // LISTEN is in effect: enqueues elsewhere wake Dequeue
	closed      bool
	stopListen  context.CancelFunc
	listenCtx   context.Context
	listenReady chan struct{} // closed when LISTEN first took effect
	readyOnce   sync.Once
	wg          sync.WaitGroup

	sqlstore.Routines // the routine rules, over routineDriver
	sqlstore.Runs     // the run rules written once, over runDriver
	sqlstore.Data     // reads, audit, outbox and inbox claims
	sqlstore.Jobs     // the queue, but for Enqueue and Dequeue
}

var (
	_ core.Store  = (*DB)(nil)
	_ core.Queue  = (*DB)(nil)
	_ lease.Store = (*DB)(nil)
)

// Open connects to the database at url (a postgres:// URL or key=value DSN,
// see pgxpool.ParseConfig) and, unless opts.SkipMigrate, applies pending
// migrations.
func Open(ctx context.Context, url string, opts Options) (*DB, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's error quotes the URL, redacting the password only on a best
		// effort basis: do not pass it on.
		return nil, errors.New("postgres: database URL: cannot parse it; check its syntax and parameters " +
			"(postgres://user:password@host:port/dbname?sslmode=disable)")
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	if opts.MaxConns > 0 {
		cfg.MaxConns = int32(opts.MaxConns)
	}
	tr := &trips{}
	cfg.ConnConfig.Tracer = tr
	own := &backends{pids: map[uint32]bool{}}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error { own.set(c.PgConn().PID(), true); return nil }
	cfg.BeforeClose = func(c *pgx.Conn) { own.set(c.PgConn().PID(), false) }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	lctx, stop := context.WithCancel(context.Background())
	db := &DB{pool: pool, opts: opts, trips: tr, own: own, one: make(chan struct{}, 1),
		listenCtx: lctx, stopListen: stop, listenReady: make(chan struct{})}
	db.Routines = sqlstore.Routines{D: routineDriver{db}, R: poolConn{db.pool}, Dialect: dialect}
	db.Data = sqlstore.Data{R: poolConn{db.pool}, W: poolConn{db.pool}, Tx: db, Dialect: dialect, Now: db.opts.Clock.Now}
	db.Jobs = sqlstore.Jobs{R: poolConn{db.pool}, W: poolConn{db.pool}, Dialect: dialect, Now: db.opts.Clock.Now,
		MaxAttempts: db.opts.MaxAttempts, Backoff: db.opts.Backoff, Due: db.due, Moved: db.wakeOne}
	db.Runs = sqlstore.Runs{D: runDriver{db}}
	if opts.SkipMigrate {
		err = db.Ping(ctx)
	} else {
		err = db.Migrate(ctx)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func (o *Options) setDefaults() {
	if o.Clock == nil {
		o.Clock = core.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.Backoff == nil {
		o.Backoff = DefaultBackoff
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 5 * time.Second
	}
	if o.Schema == "" {
		o.Schema = "public"
	}
}

func (o Options) validate() error {
	if len(o.Schema) > maxIdentifier {
		// PostgreSQL would silently cut it to a different name.
		return fmt.Errorf("postgres: schema %q: must be at most %d bytes", o.Schema, maxIdentifier)
	}
	if o.MaxConns < 0 {
		return fmt.Errorf("postgres: max conns must not be negative, got %d", o.MaxConns)
	}
	return nil
}

// maxIdentifier is the longest identifier PostgreSQL keeps (NAMEDATALEN-1).
const maxIdentifier = 63

// DefaultBackoff is core.DefaultBackoff, kept for callers of this package.
var DefaultBackoff = core.DefaultBackoff

// Close stops the listener and closes the pool; it waits for connections in
// use to be released.
func (db *DB) Close() error {
	db.lmu.Lock()
	db.closed = true
	db.lmu.Unlock()
	db.stopListen()
	db.wg.Wait()
	db.pool.Close()
	return nil
}

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	return nil
}

// Schema is the schema that holds the tables.
func (db *DB) Schema() string { return db.opts.Schema }

// Clock reads the database's clock on a connection of the pool (opened
// first, so that the read is one round trip), and returns it with the
// local times just before and after the read.
func (db *DB) Clock(ctx context.Context) (before, dbNow, after time.Time, err error) {
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return before, dbNow, after, fmt.Errorf("postgres: read the clock: %w", err)
	}
	defer c.Release()
	before = time.Now()
	if err := c.QueryRow(ctx, `SELECT now()`).Scan(&dbNow); err != nil {
		return before, dbNow, after, fmt.Errorf("postgres: read the clock: %w", err)
	}
	return before, dbNow, time.Now(), nil
}

// migration is one numbered schema step: migrations/NNNN_name.up.sql and
// its inverse NNNN_name.down.sql.
type migration struct {
	version  int
	name     string
	up, down string
}

func loadMigrations() ([]migration, error) {
	ents, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]*migration{}
	for _, e := range ents {
		base, dir := strings.TrimSuffix(e.Name(), ".sql"), ""
		switch {
		case strings.HasSuffix(base, ".up"):
			base, dir = strings.TrimSuffix(base, ".up"), "up"
		case strings.HasSuffix(base, ".down"):
			base, dir = strings.TrimSuffix(base, ".down"), "down"
		default:
			return nil, fmt.Errorf("migration %s: name must end in .up.sql or .down.sql", e.Name())
		}
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and _", e.Name())
		}
		b, err := migrationFS.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		m := byVersion[v]
		if m == nil {
			m = &migration{version: v, name: base}
			byVersion[v] = m
		}
		if m.name != base {
			return nil, fmt.Errorf("migrations %s and %s share version %d", m.name, base, v)
		}
		if dir == "up" {
			m.up = string(b)
		} else {
			m.down = string(b)
		}
	}
	var ms []migration
	for _, m := range byVersion {
		if m.up == "" {
			return nil, fmt.Errorf("migration %s: %s.up.sql is missing", m.name, m.name)
		}
		ms = append(ms, *m)
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	return ms, nil
}

// withMigrateLock runs fn on one connection that holds the schema's
// migration lock (a session-level advisory lock), so replicas that start
// together migrate one after the other. It creates the schema when missing.
func (db *DB) withMigrateLock(ctx context.Context, fn func(conn *pgx.Conn) error) (err error) {
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	conn := c.Conn()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, lockClassMigrate, keyHash(db.opts.Schema)); err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(uctx, `SELECT pg_advisory_unlock($1, $2)`, lockClassMigrate, keyHash(db.opts.Schema)); uerr != nil {
			// Closing the session releases the lock; the pool drops the closed connection.
			_ = conn.Close(uctx)
			err = errors.Join(err, fmt.Errorf("release migration lock: %w", uerr))
		}
	}()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, db.opts.Schema).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{db.opts.Schema}.Sanitize()); err != nil {
			return fmt.Errorf("create schema %s: %w", db.opts.Schema, err)
		}
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	return fn(conn)
}

// Migrate applies every migration newer than the schema's version, each in
// its own transaction, under the schema's migration lock. Open calls it
// unless Options.SkipMigrate.
func (db *DB) Migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	err = db.withMigrateLock(ctx, func(conn *pgx.Conn) error {
		cur, err := currentVersion(ctx, conn)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.version <= cur {
				continue
			}
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, m.up); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
				return err
			})
			if err != nil {
				return fmt.Errorf("apply %s: %w", m.name, err)
			}
			db.opts.Logger.Info("applied migration", "store", "postgres", "schema", db.opts.Schema, "migration", m.name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: migrate schema %s: %w", db.opts.Schema, err)
	}
	return nil
}

// MigrateDown reverts the applied migrations newer than version to, newest
// first, each in its own transaction. MigrateDown(ctx, 0) drops every table
// but schema_migrations. The data in the dropped tables is lost.
func (db *DB) MigrateDown(ctx context.Context, to int) error {
	if to < 0 {
		return fmt.Errorf("postgres: migrate down: version must not be negative, got %d", to)
	}
	ms, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("postgres: migrate down: %w", err)
	}
	byVersion := map[int]migration{}
	for _, m := range ms {
		byVersion[m.version] = m
	}
	err = db.withMigrateLock(ctx, func(conn *pgx.Conn) error {
		rows, _ := conn.Query(ctx, `SELECT version FROM schema_migrations WHERE version > $1 ORDER BY version DESC`, to)
		applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return err
		}
		for _, v := range applied {
			m, ok := byVersion[v]
			if !ok || m.down == "" {
				return fmt.Errorf("migration %d has no down migration in this build", v)
			}
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, m.down); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `DELETE FROM schema_migrations WHERE version = $1`, v)
				return err
			})
			if err != nil {
				return fmt.Errorf("revert %s: %w", m.name, err)
			}
			db.opts.Logger.Info("reverted migration", "store", "postgres", "schema", db.opts.Schema, "migration", m.name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: migrate schema %s down to %d: %w", db.opts.Schema, to, err)
	}
	return nil
}

// SchemaVersion returns the newest applied migration, 0 when none is.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("postgres: schema version: %w", err)
	}
	defer c.Release()
	v, err := currentVersion(ctx, c.Conn())
	if err != nil {
		return 0, fmt.Errorf("postgres: schema version: %w", err)
	}
	return v, nil
}

func currentVersion(ctx context.Context, conn *pgx.Conn) (int, error) {
	var table *string
	if err := conn.QueryRow(ctx, `SELECT to_regclass('schema_migrations')::text`).Scan(&table); err != nil {
		return 0, err
	}
	if table == nil {
		return 0, nil
	}
	var v int
	err := conn.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// keyHash maps a string to the second key of a two-int4 advisory lock.
func keyHash(s string) int32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return int32(h.Sum32())
}

// wake wakes every waiting Dequeue call: the listener came or went, so
// how often they must look changed.
func (db *DB) wake() {
	db.mu.Lock()
	db.wakes++ // a due time read before now may be stale
	db.mu.Unlock()
	db.notify.Wake()
}

// wakeOne tells one waiting Dequeue call that a job may be due (an
// enqueue, a notification, a retry). The one woken that takes a job passes
// the wake-up on (passOn), so a batch of jobs reaches as many workers
// while a single job costs one look, not one per waiting worker. A wake-up
// while one is pending is dropped: the pass-on covers its job.
func (db *DB) wakeOne() {
	db.mu.Lock()
	db.wakes++ // a due time read before now may be stale
	db.mu.Unlock()
	db.passOn()
}

// passOn wakes one more waiting Dequeue call, if none is pending.
func (db *DB) passOn() {
	select {
	case db.one <- struct{}{}:
	default:
	}
}

// backends is the set of server process ids of a pool's connections.
type backends struct {
	mu   sync.Mutex
	pids map[uint32]bool
}

func (b *backends) set(pid uint32, open bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if open {
		b.pids[pid] = true
	} else {
		delete(b.pids, pid)
	}
}

func (b *backends) has(pid uint32) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pids[pid]
}

// startListener starts the LISTEN goroutine once; a store that never waits
// in Dequeue does not hold the extra connection.
func (db *DB) startListener() {
	db.lmu.Lock()
	defer db.lmu.Unlock()
	if db.listening || db.closed {
		return
	}
	db.listening = true
	db.wg.Go(func() { db.listen(db.listenCtx) })
}

// listen keeps a dedicated connection LISTENing on notifyChannel until ctx
// ends, reconnecting with backoff when it is lost (Dequeue polls meanwhile).
func (db *DB) listen(ctx context.Context) {
	const maxDelay = 30 * time.Second
	delay := 100 * time.Millisecond
	for {
		listened, err := db.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if listened {
			delay = 100 * time.Millisecond
		}
		db.opts.Logger.Warn("job listener lost; polling until it reconnects",
			"store", "postgres", "schema", db.opts.Schema, "retry_in", delay, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, maxDelay)
	}
}

// listenOnce connects, LISTENs and wakes Dequeue for every notification of
// this schema until the connection fails or ctx ends. listened reports
// whether LISTEN took effect.
func (db *DB) listenOnce(ctx context.Context) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, db.pool.Config().ConnConfig)
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{notifyChannel}.Sanitize()); err != nil {
		return false, err
	}
	// Jobs enqueued before LISTEN took effect were not announced: look again.
	db.listened.Store(true)
	db.wake()
	db.readyOnce.Do(func() { close(db.listenReady) })
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			// Waiting Dequeue calls poll every listenLostPoll from now on.
			db.listened.Store(false)
			db.wake()
			return true, err
		}
		// A notification sent on one of this pool's connections woke a
		// local Dequeue when its transaction committed.
		if n.Payload == db.opts.Schema && !db.own.has(n.PID) {
			db.heard.Add(1)
			db.wakeOne()
		}
	}
}

// jobKeyHash is the advisory lock key of a job key.
func jobKeyHash(key string) int32 { return keyHash("job:" + key) }

// enqueueTx queues the adding of jobs inside tx (the transactional enqueue
// used by the store's state changes and by Enqueue): they go out with the
// transaction's next round trip, and tx notifies listeners. A job with a
// non-empty key is coalesced into a waiting (undelivered, not dead) job with
// the same key, whose due time moves earlier if needed; the enqueues of one
// key serialize on an advisory lock held until commit, so two of them never
// both insert.
func (db *DB) enqueueTx(tx *txn, jobs ...core.Job) {
	if len(jobs) == 0 {
		return
	}
	now := db.opts.Clock.Now()
	// Lock keys in one order (by lock key) so that transactions enqueueing
	// several keys cannot deadlock each other.
	jobs = slices.Clone(jobs)
	slices.SortStableFunc(jobs, func(a, b core.Job) int {
		return int(int64(jobKeyHash(a.Key)) - int64(jobKeyHash(b.Key)))
	})
	what := fmt.Sprintf("enqueue %d jobs", len(jobs))
	if len(jobs) == 1 {
		what = fmt.Sprintf("enqueue %s job", jobs[0].Kind)
	}
	for _, j := range jobs {
		j = sqlstore.NewJob(j, now)
		id, payload, runAt := j.ID, []byte(j.Payload), j.RunAt
		if j.Key == "" {
			tx.Later(`INSERT INTO jobs (id, kind, key, payload, max_attempts, visible_at, created_at)
				VALUES ($1, $2, '', $3, $4, $5, $6)`, id, j.Kind, payload, j.MaxAttempts, runAt, now).Wrap(what)
			continue
		}
		// Separate statements: the upsert's snapshot must be taken after
		// the lock is held, so that it sees the job another holder inserted.
		tx.Later(`SELECT pg_advisory_xact_lock($1, $2)`, lockClassJobKey, jobKeyHash(j.Key)).Wrap(what)
		tx.Later(`WITH waiting AS (
				UPDATE jobs SET visible_at = LEAST(visible_at, $5)
				WHERE key = $3 AND consumer = '' AND dead_at IS NULL
				RETURNING 1)
			INSERT INTO jobs (id, kind, key, payload, max_attempts, visible_at, created_at)
			SELECT $1, $2, $3, $4, $6, $5, $7 WHERE NOT EXISTS (SELECT 1 FROM waiting)`,
			id, j.Kind, j.Key, payload, runAt, j.MaxAttempts, now).Wrap(what)
	}
	tx.enqueued = true
}

// stored is t as the database keeps it: microseconds, UTC.
func stored(t time.Time) time.Time { return t.Truncate(time.Microsecond).UTC() }
