package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
	"github.com/agentgate/agentgate/core/lease"
	"github.com/agentgate/agentgate/core/metrics"
	"github.com/agentgate/agentgate/core/routine"
	"github.com/agentgate/agentgate/interfaces/api"
	ichat "github.com/agentgate/agentgate/interfaces/chat"
)

// settings are the server's flags and environment, resolved.
type settings struct {
	configPath     string
	addr           string
	dataDir        string
	apiKeys        []string
	nodeID         string
	logLevel       string
	sqliteSync     string
	databaseURL    string
	databaseSchema string
	redisURL       string
	redisPrefix    string
	claimTTL       time.Duration
	janitor        time.Duration
	downTo         int // migrate only: revert to this schema version (-1 = no)
}

const serveHelp = `Usage: agentgate serve [flags]

Settings (a flag wins over its environment variable):
  --config FILE      AGENTGATE_CONFIG      YAML config; none = the built-in demo agent
  --addr HOST:PORT   AGENTGATE_ADDR        listen address (default 127.0.0.1:8080)
  --data-dir DIR     AGENTGATE_DATA_DIR    SQLite database directory (default ./agentgate-data)
                     AGENTGATE_API_KEYS    comma-separated bearer keys for the API; none = API open,
                                           and then only a loopback --addr is allowed
  --node-id NAME     AGENTGATE_NODE_ID     this process's name in run claims and leases
                                           (default "local" on SQLite, host-pid on PostgreSQL)
  --log-level LEVEL  AGENTGATE_LOG_LEVEL   debug, info (default), warn, error
                     AGENTGATE_SQLITE_SYNC full (default: a commit survives power loss) or normal
                     AGENTGATE_DATABASE_URL  PostgreSQL store, e.g. postgres://user:pw@host:5432/db
                                           (unset = SQLite in the data dir)
                     AGENTGATE_DATABASE_SCHEMA  PostgreSQL schema for the tables (default public)
                     AGENTGATE_REDIS_URL   Redis Streams queue, e.g. redis://host:6379/0
                                           (needs AGENTGATE_DATABASE_URL; unset = the store's queue)
                     AGENTGATE_REDIS_PREFIX  names the queue's Redis keys (default "default")
                     AGENTGATE_CLAIM_TTL   how long a node's claim on a run and lease on a job last
                                           without a heartbeat; a dead node's work moves after it
                                           (default 30s)
                     AGENTGATE_JANITOR_INTERVAL  how often queued and running runs are re-enqueued
                                           from the store (default 30s on PostgreSQL, off on SQLite)
`

func parseSettings(name string, args []string, stderr io.Writer) (settings, error) {
	s := settings{
		configPath:     os.Getenv("AGENTGATE_CONFIG"),
		addr:           envOr("AGENTGATE_ADDR", "127.0.0.1:8080"),
		dataDir:        envOr("AGENTGATE_DATA_DIR", "agentgate-data"),
		nodeID:         os.Getenv("AGENTGATE_NODE_ID"),
		logLevel:       envOr("AGENTGATE_LOG_LEVEL", "info"),
		sqliteSync:     envOr("AGENTGATE_SQLITE_SYNC", "full"),
		databaseURL:    os.Getenv("AGENTGATE_DATABASE_URL"),
		databaseSchema: os.Getenv("AGENTGATE_DATABASE_SCHEMA"),
		redisURL:       os.Getenv("AGENTGATE_REDIS_URL"),
		redisPrefix:    os.Getenv("AGENTGATE_REDIS_PREFIX"),
	}
	for _, d := range []struct {
		env string
		to  *time.Duration
	}{{"AGENTGATE_CLAIM_TTL", &s.claimTTL}, {"AGENTGATE_JANITOR_INTERVAL", &s.janitor}} {
		if v := os.Getenv(d.env); v != "" {
			dur, err := time.ParseDuration(v)
			if err != nil || dur <= 0 {
				return s, &usageError{fmt.Sprintf("%s: must be a positive duration like 30s, got %q", d.env, v)}
			}
			*d.to = dur
		}
	}
	for _, k := range strings.Split(os.Getenv("AGENTGATE_API_KEYS"), ",") {
		if k = strings.TrimSpace(k); k != "" {
			s.apiKeys = append(s.apiKeys, k)
		}
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, serveHelp) }
	fs.StringVar(&s.configPath, "config", s.configPath, "config file")
	fs.StringVar(&s.addr, "addr", s.addr, "listen address")
	fs.StringVar(&s.dataDir, "data-dir", s.dataDir, "data directory")
	fs.StringVar(&s.nodeID, "node-id", s.nodeID, "node name")
	fs.StringVar(&s.logLevel, "log-level", s.logLevel, "log level")
	s.downTo = -1
	if name == "migrate" {
		fs.IntVar(&s.downTo, "down-to", -1, "revert the PostgreSQL schema to this version")
		fs.Usage = func() {
			fmt.Fprint(stderr, "Usage: agentgate migrate [--down-to N] [serve's store settings]\n\n"+
				"Applies pending migrations (serve does too, at start) and prints the schema version;\n"+
				"--down-to N reverts a PostgreSQL schema to version N (SQLite migrates only up).\n")
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return s, err
		}
		return s, &usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return s, &usageError{fmt.Sprintf("%s takes no arguments, got %q", name, fs.Args())}
	}
	if s.nodeID == "" {
		s.nodeID = "local"
		if s.databaseURL != "" {
			// Replicas share the store: each needs its own name.
			host, _ := os.Hostname()
			s.nodeID = fmt.Sprintf("%s-%d", host, os.Getpid())
		}
	}
	return s, nil
}

// prepare parses the settings and makes the logger; done reports --help.
func prepare(name string, args []string, stderr io.Writer) (s settings, log *slog.Logger, done bool, err error) {
	s, err = parseSettings(name, args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return s, nil, true, nil
	}
	if err != nil {
		return s, nil, false, err
	}
	log, err = newLogger(s.logLevel, stderr)
	return s, log, false, err
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func newLogger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, &usageError{fmt.Sprintf("log level: must be debug, info, warn or error, got %q", level)}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// loopbackOnly reports whether addr listens only on a loopback interface.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s, log, done, err := prepare("migrate", args, stderr)
	if done || err != nil {
		return err
	}
	b, err := openBackend(ctx, s, log)
	if err != nil {
		return err
	}
	defer b.close()
	if s.downTo >= 0 {
		down, ok := b.db.(interface {
			MigrateDown(ctx context.Context, to int) error
		})
		if !ok {
			return &usageError{"--down-to: the SQLite store migrates only up; to go back, restore a copy of the data dir"}
		}
		if err := down.MigrateDown(ctx, s.downTo); err != nil {
			return err
		}
	}
	v, err := b.db.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "store %s is at schema version %d\n", b.desc, v)
	return nil
}

// Cluster-wide singletons run under these leases.
const (
	leaseTTL          = 15 * time.Second
	leaseApprovals    = "approvals-expiry"
	leaseRoutineTicks = "routine-scheduler"
)

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s, log, done, err := prepare("serve", args, stderr)
	if done || err != nil {
		return err
	}
	cfg := config.Default()
	if s.configPath != "" {
		if cfg, err = config.Load(s.configPath); err != nil {
			return err
		}
	}
	keys, err := apiKeys(s.apiKeys, cfg)
	if err != nil {
		return err
	}
	if len(keys) == 0 && !loopbackOnly(s.addr) {
		return &usageError{fmt.Sprintf("--addr %s is reachable from other machines but no API keys are set; "+
			"set AGENTGATE_API_KEYS or listen on 127.0.0.1", s.addr)}
	}

	b, err := openBackend(ctx, s, log)
	if err != nil {
		return err
	}
	defer b.close()
	db := b.db

	clock := core.SystemClock{}
	agents, err := buildAgents(cfg, clock)
	if err != nil {
		return err
	}
	sw, err := newSlack(ctx, cfg, db, s.nodeID, clock, log)
	if err != nil {
		return err
	}
	chatDeliver := map[string]routine.ChatDeliverer{}
	renderers := map[string]ichat.ApprovalRenderer{}
	if sw != nil {
		chatDeliver[ichat.PlatformSlack] = sw.notifier
		renderers[ichat.PlatformSlack] = sw.notifier
	}
	tw, err := newTelegram(ctx, cfg, db, s.nodeID, clock, log)
	if err != nil {
		return err
	}
	if tw != nil {
		chatDeliver[ichat.PlatformTelegram] = tw.notifier
		renderers[ichat.PlatformTelegram] = tw.notifier
	}
	dw, err := newDiscord(ctx, cfg, db, s.nodeID, clock, log)
	if err != nil {
		return err
	}
	if dw != nil {
		chatDeliver[ichat.PlatformDiscord] = dw.notifier
		renderers[ichat.PlatformDiscord] = dw.notifier
	}
	rt, err := newRoutines(ctx, cfg, db, clock, log, chatDeliver)
	if err != nil {
		return err
	}
	m := metrics.New(db, b.queue, log)
	jobs := core.NewJobRouter(core.LogJobs(log, m)) // every kind once, with its log fields and metrics
	if err := jobs.HandleAll(rt.Handlers()); err != nil {
		return err
	}
	if err := jobs.HandleAll((&ichat.Approvals{Store: db, Renderers: renderers, Logger: log}).Handlers()); err != nil {
		return err
	}
	platforms := map[string]ichat.Platform{} // who answers a chat run, by the run's platform
	if sw != nil {
		platforms[ichat.PlatformSlack] = sw.replier
	}
	if tw != nil {
		platforms[ichat.PlatformTelegram] = tw.notifier
	}
	if dw != nil {
		platforms[ichat.PlatformDiscord] = dw.replier
	}
	replies, err := ichat.NewReplies(ichat.RepliesConfig{Store: db, Platforms: platforms, Blobs: b.blobs, Clock: clock, Logger: log})
	if err != nil {
		return err
	}
	if err := jobs.HandleAll(replies.Handlers()); err != nil {
		return err
	}
	onFinish := finishHooks(rt.OnFinish, replies.OnFinish)
	ms, err := mcpFromEnv()
	if err != nil {
		return err
	}
	if b.redisTrips != nil {
		m.RoundTrips("redis", "Redis", b.redisTrips.n.Load)
	}
	hub := &core.Hub{}
	if b.hub != nil {
		b.services = append(b.services, b.hub(hub))
	}
	eng, err := core.NewEngine(core.EngineConfig{
		Store: db, Queue: b.queue, Agents: agents, Hub: hub, Clock: clock, Logger: log,
		Observer: m, NodeID: s.nodeID, Workers: cfg.Server.Workers, JanitorInterval: b.janitor, ClaimTTL: s.claimTTL,
		OnFinish: onFinish, Jobs: jobs, Progress: replies.Progress, Blobs: b.blobs, ExternalApproval: ms.approval,
	})
	if err != nil {
		return err
	}
	aps := approval.New(approval.Config{Store: db, Hub: hub, Clock: clock, Logger: log, Observer: m,
		People: people(cfg), Cards: db})
	extra := map[string]http.Handler{}
	if sw != nil {
		h, err := sw.newHandler(eng, aps, rt, b.blobs)
		if err != nil {
			return err
		}
		extra["POST /slack/events"] = h
		b.services = append(b.services, h.Start) // the inbox writer and processor
		if sw.socket != nil {
			b.services = append(b.services, func(ctx context.Context) error { return sw.socket(ctx, h) })
		}
	}
	if tw != nil {
		h, err := tw.newHandler(eng, aps, rt, b.blobs)
		if err != nil {
			return err
		}
		if tw.webhook {
			extra["POST /telegram/webhook"] = h
		}
		b.services = append(b.services, tw.services(h)...)
	}
	if dw != nil {
		h, err := dw.newHandler(eng, aps, rt, b.blobs)
		if err != nil {
			return err
		}
		extra["POST /discord/interactions"] = h
		b.services = append(b.services, h.Start, dw.gateway(db, s.nodeID, log, h)) // inbox; Gateway on one replica
	}
	for pattern, h := range extra {
		extra[pattern] = webhookLimits(h)
	}
	ready := func(ctx context.Context) error { _, err := db.SchemaVersion(ctx); return err }
	apiMetrics := m.Handler()
	var ops *http.Server // server.metrics_addr: /metrics, /readyz, /healthz without a key
	if addr := cfg.Server.MetricsAddr; addr != "" {
		ops = &http.Server{Addr: addr, Handler: api.OpsHandler(m.Handler(), ready), ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout: 2 * time.Minute, WriteTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}
		apiMetrics = nil // /metrics moves there
	}
	handler := api.New(api.Config{
		Engine: eng, Store: db, Approvals: aps, Keys: keys, Logger: log, Metrics: apiMetrics, Routines: rt, Extra: extra,
		Protected:    map[string]http.Handler{"/mcp": mcpHandler(ms, eng, db, aps, rt, keys, log)},
		Ready:        ready,
		AllowedHosts: cfg.Server.AllowedHosts, TrustedOrigins: cfg.Server.TrustedOrigins,
		MaxStreams: cfg.Server.MaxStreams, MaxStreamsPerKey: cfg.Server.MaxStreamsPerKey,
	})

	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another agentgate running? pick another --addr)", s.addr, err)
	}
	ln = limitConnections(ln, cmp.Or(cfg.Server.MaxConnections, config.DefaultMaxConnections), log)
	var opsLn net.Listener
	if ops != nil {
		if opsLn, err = net.Listen("tcp", ops.Addr); err != nil {
			ln.Close()
			return fmt.Errorf("listen on server.metrics_addr %s: %w", ops.Addr, err)
		}
	}
	// Headers must arrive within 10s and fit in 64 KiB; an idle keep-alive
	// connection is closed after 2 minutes. Bodies are bounded per route
	// (webhooks: 15s and 1 MiB, see webhookLimits); there is no write
	// timeout because event streams, ?wait=true and MCP approval prompts
	// answer for as long as they wait.
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 4+len(b.services))
	wg.Go(func() { errc <- eng.Start(runCtx) })
	singleton := func(name string, start func(context.Context) error) {
		wg.Go(func() {
			lease.Run(runCtx, db, name, s.nodeID, leaseTTL, log, func(ctx context.Context) {
				if err := start(ctx); err != nil {
					log.Error("singleton stopped", "lease", name, "err", err)
				}
			})
		})
	}
	singleton(leaseApprovals, aps.Start)
	singleton(leaseRoutineTicks, rt.Start)
	for _, svc := range b.services {
		wg.Go(func() { errc <- svc(runCtx) })
	}
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	})
	if ops != nil {
		wg.Go(func() {
			if err := ops.Serve(opsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		})
		log.Info("metrics and probes serving", "addr", "http://"+opsLn.Addr().String())
	}
	auth := "open on loopback (no API keys)"
	if len(keys) > 0 {
		auth = fmt.Sprintf("%d API key(s)", len(keys))
	}
	log.Info("agentgate serving", "addr", "http://"+ln.Addr().String(), "store", b.desc, "node", s.nodeID,
		"agents", len(agents), "auth", auth, "version", version)
	fmt.Fprintf(stdout, "agentgate listening on http://%s\n", ln.Addr())

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	log.Info("shutting down: no new work; in-flight steps get 10s to finish")
	shutdownCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer stop()
	_ = srv.Shutdown(shutdownCtx)
	if ops != nil {
		_ = ops.Shutdown(shutdownCtx)
	}
	cancel()
	wg.Wait()
	return runErr
}

// apiKeys are the keys of AGENTGATE_API_KEYS (admins named env-<hash>) and
// of server.api_keys.
func apiKeys(env []string, cfg *config.Config) ([]api.Key, error) {
	var keys []api.Key
	for i, k := range env {
		if len(k) < config.MinKeyLen {
			return nil, &usageError{fmt.Sprintf("AGENTGATE_API_KEYS: key %d is too short (%d of the %d characters a key needs; make one with openssl rand -hex 24)",
				i+1, len(k), config.MinKeyLen)}
		}
		keys = append(keys, api.Key{Name: api.KeyName(k), Secret: k, Role: approval.RoleAdmin})
	}
	for _, k := range cfg.Server.APIKeys {
		name := k.Name
		if k.Bare() {
			name = api.KeyName(k.Key)
		}
		role, err := approval.ParseRole(k.Role)
		if err != nil {
			return nil, fmt.Errorf("config: server.api_keys %s: %w", name, err)
		}
		keys = append(keys, api.Key{Name: name, Secret: k.Key, Role: role, Agents: k.Agents})
	}
	return keys, nil
}

// people is the config's people directory.
func people(cfg *config.Config) *approval.Directory {
	var ps []approval.Person
	for name, p := range cfg.People {
		ps = append(ps, approval.Person{Name: name, Slack: p.Slack, Discord: p.Discord, Telegram: p.Telegram, Keys: p.Keys})
	}
	return approval.NewDirectory(ps)
}

// webhookLimits bounds how long a platform's webhook request may take to
// send its body: a connection that declares a body and trickles it is cut
// after 15s. (The handlers check signature headers before reading and read
// at most 1 MiB.)
func webhookLimits(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(15 * time.Second))
		h.ServeHTTP(w, r)
	})
}
