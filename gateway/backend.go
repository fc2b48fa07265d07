package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
	"github.com/agentgate/agentgate/core/hub/pghub"
	"github.com/agentgate/agentgate/core/hub/redishub"
	"github.com/agentgate/agentgate/core/lease"
	"github.com/agentgate/agentgate/core/queue/redisstream"
	"github.com/agentgate/agentgate/core/queue/relay"
	"github.com/agentgate/agentgate/core/retention"
	"github.com/agentgate/agentgate/store/blobdir"
	"github.com/agentgate/agentgate/store/postgres"
	"github.com/agentgate/agentgate/store/sqlite"
)

// storeDB is what every store package offers: the store, its own queue (the
// transactional outbox), leases and its schema version.
type storeDB interface {
	core.Store
	core.Queue
	core.RoutineStore
	core.Outbox
	core.Inbox
	core.Pruner
	core.BlobReferrer
	lease.Store
	relay.Keeper
	SchemaVersion(ctx context.Context) (int, error)
	Close() error
}

// backend is the store, the queue the workers consume, and what must run
// beside them.
type backend struct {
	db storeDB
	// leases keep the cluster-wide singletons on one process: the store's
	// on PostgreSQL; in memory on SQLite, whose data dir one process locks.
	leases lease.Store
	// alone: no other process writes the store (SQLite), so what this
	// process did not change stays as it left it.
	alone bool
	// queue is what workers consume: the store's own, or Redis Streams fed
	// by a relay from the store's outbox.
	queue core.Queue
	// janitor re-enqueues active runs periodically: every 30s when the
	// queue is not the store's (it may lose jobs), every embeddedJanitor on
	// the embedded store (a job dead-lettered or not queued).
	janitor time.Duration
	// services run beside the engine until shutdown (the relay).
	services []func(ctx context.Context) error
	// hub, when set, links the update hub to other replicas and returns the
	// service that listens for their changes.
	hub   func(*core.Hub) func(context.Context) error
	close func() error
	desc  string
	// redisTrips counts the commands and pipelines sent to Redis; nil
	// without Redis.
	redisTrips *redisstream.RoundTrips
	// blobs keeps attachments: the blobs table on PostgreSQL, the data
	// dir's blobs/ directory embedded.
	blobs core.Blobs
	// pruners remove what retention no longer keeps: the store, and Redis's
	// dead letters.
	pruners []core.Pruner
}

// tightenDataDir makes dir, which holds the whole journal, chat text and
// audit log, private to its owner (0700) when other users may open it and
// this process owns it; either way it logs a warning. MkdirAll only creates
// it 0700: a dir that already existed keeps its mode.
func tightenDataDir(dir string, log *slog.Logger) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	mode := fi.Mode().Perm()
	uid, ok := fileOwner(fi)
	if mode&0o077 == 0 || !ok {
		return nil // private already, or a platform without unix modes
	}
	if uid != os.Geteuid() {
		log.Warn("data dir is open to other users and not owned by this user: run chmod 700 on it", "dir", dir, "mode", mode.String())
		return nil
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("data dir: make %s private to its owner (it is %s): %w", dir, mode, err)
	}
	log.Warn("data dir was open to other users: its mode is now 0700", "dir", dir, "was", mode.String())
	return nil
}

// createPrivate creates the database file at path 0600 if it does not
// exist. SQLite creates it with the umask (0644 usually) and gives its -wal
// and -shm files the database file's mode.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// embeddedJanitor is how often the embedded store's queued and running
// runs are given a job again (one they hold already is not doubled).
const embeddedJanitor = 5 * time.Minute

// openBackend picks the store (SQLite in the data dir, or PostgreSQL) and the
// queue (the store's own, or Redis Streams).
func openBackend(ctx context.Context, s Settings, log *slog.Logger) (*backend, error) {
	var (
		db      storeDB
		alone   bool
		desc    string
		janitor time.Duration
		closeDB func() error
		blobs   core.Blobs
	)
	switch {
	case s.DatabaseURL != "":
		pg, err := postgres.Open(ctx, s.DatabaseURL, postgres.Options{Logger: log, Schema: s.DatabaseSchema})
		if err != nil {
			return nil, fmt.Errorf("AGENTGATE_DATABASE_URL: %w", err)
		}
		if err := checkClock(ctx, pg, s.ClaimTTL); err != nil {
			pg.Close()
			return nil, err
		}
		db, desc, blobs = pg, "postgres (schema "+pg.Schema()+")", pg
		janitor = 30 * time.Second // replicas: a safety net for runs whose job went missing
	case s.RedisURL != "":
		return nil, &UsageError{"AGENTGATE_REDIS_URL needs AGENTGATE_DATABASE_URL: the Redis queue is for replicas sharing PostgreSQL; unset it to use the embedded store"}
	default:
		if err := os.MkdirAll(s.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
		if err := tightenDataDir(s.DataDir, log); err != nil {
			return nil, err
		}
		unlock, err := lockDataDir(s.DataDir)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(s.DataDir, "agentgate.db")
		if err := createPrivate(path); err != nil {
			unlock()
			return nil, fmt.Errorf("data dir: %w", err)
		}
		lite, err := sqlite.Open(ctx, path, sqlite.Options{Logger: log, Synchronous: s.SQLiteSync})
		if err != nil {
			unlock()
			return nil, fmt.Errorf("open store in %s: %w", s.DataDir, err)
		}
		if blobs, err = blobdir.Open(filepath.Join(s.DataDir, "blobs")); err != nil {
			unlock()
			lite.Close()
			return nil, err
		}
		db, desc, alone = lite, "sqlite "+lite.Path(), true
		// Jobs commit with the state, but a run can still lose its job: a
		// step interrupted at every delivery is dead-lettered when next
		// dequeued, and a job after a step may fail to be queued.
		janitor = embeddedJanitor
		closeDB = func() error { defer unlock(); return lite.Close() }
	}
	if s.JanitorInterval > 0 {
		janitor = s.JanitorInterval
	}
	if closeDB == nil {
		closeDB = db.Close
	}
	leases := lease.Store(db)
	if alone {
		leases = &lease.Local{}
	}
	b := &backend{db: db, leases: leases, alone: alone, queue: db, close: closeDB, desc: desc, janitor: janitor, blobs: blobs,
		pruners: []core.Pruner{db}}
	if rm, ok := blobs.(core.BlobRemover); ok {
		b.pruners = append(b.pruners, retention.Blobs{Refs: db, Store: rm})
	}
	if s.RedisURL == "" {
		if pg, ok := db.(*postgres.DB); ok {
			b.hub = func(hub *core.Hub) func(context.Context) error {
				return pghub.Bridge(s.DatabaseURL, pg.Schema(), hub, log)
			}
		}
		return b, nil
	}
	opt, err := redis.ParseURL(s.RedisURL)
	if err != nil {
		db.Close()
		return nil, errors.New("AGENTGATE_REDIS_URL: cannot parse it; use redis://[user:password@]host:port/db")
	}
	client := redis.NewClient(opt)
	b.redisTrips = &redisstream.RoundTrips{}
	client.AddHook(b.redisTrips)
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		db.Close()
		return nil, fmt.Errorf("AGENTGATE_REDIS_URL: %s unreachable: %w", opt.Addr, err)
	}
	q, err := redisstream.New(client, redisstream.Options{Prefix: s.RedisPrefix})
	if err != nil {
		client.Close()
		db.Close()
		return nil, err
	}
	// A job other than a run's that Redis lost is forwarded again after
	// four janitor intervals (2 minutes by default).
	r, err := relay.New(relay.Config{From: db, To: q, Consumer: "relay-" + s.NodeID, Recheck: 4 * janitor, Logger: log})
	if err != nil {
		client.Close()
		db.Close()
		return nil, err
	}
	b.pruners = append(b.pruners, q)
	b.queue = relay.Receipts(q, db, log) // jobs other than runs stay in PostgreSQL until handled
	b.hub = func(hub *core.Hub) func(context.Context) error {
		return redishub.Bridge(client, cmp.Or(s.RedisPrefix, "default"), hub, log)
	}
	b.services = append(b.services, r.Start)
	b.close = func() error { return errors.Join(client.Close(), db.Close()) }
	b.desc += " + redis streams " + opt.Addr
	return b, nil
}

// newRetention prunes b's store, and its queue when that is not the store.
func newRetention(r config.Retention, b *backend, clock core.Clock, log *slog.Logger, pruned func(core.Prunable, int)) *retention.Pruner {
	return retention.New(retention.Config{Keep: r.Keep(), Targets: b.pruners, Every: r.Every, Batch: r.Batch,
		Clock: clock, Logger: log, Pruned: pruned})
}

// checkClock refuses to serve from a host whose clock is too far off the
// database's. Replicas compare claims and leases each set from its own
// clock: one whose clock is ahead by two thirds of the claim TTL takes over
// runs another replica is still running, and calls their tools again.
func checkClock(ctx context.Context, pg *postgres.DB, ttl time.Duration) error {
	before, dbNow, after, err := pg.Clock(ctx)
	if err != nil {
		return fmt.Errorf("AGENTGATE_DATABASE_URL: %w", err)
	}
	return clockSkewError(before, dbNow, after, cmp.Or(ttl, 30*time.Second))
}

// clockSkewError is checkClock's verdict on the database's time dbNow,
// read between before and after: at most a sixth of the claim TTL off,
// beyond what the read's own time leaves unknown.
func clockSkewError(before, dbNow, after time.Time, ttl time.Duration) error {
	half := after.Sub(before) / 2
	skew := before.Add(half).Sub(dbNow)
	if limit := ttl / 6; skew.Abs()-half > limit {
		return fmt.Errorf("this host's clock is %s off the database's (more than %s): replicas would take over each other's runs and call their tools again; sync the clock (NTP) and start again",
			skew.Round(time.Millisecond), limit)
	}
	return nil
}
