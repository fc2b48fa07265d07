// Package gateway wires agentgate together and serves it: the store and the
// queue, the agents, the engine, the chat interfaces, approvals, routines,
// the REST API and MCP. New builds a gateway from Settings and binds its
// listeners; Start serves until its context ends. `agentgate serve` is
// flags around them, and tests start a gateway in-process the same way.
package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
	"github.com/agentgate/agentgate/core/lease"
	"github.com/agentgate/agentgate/core/metrics"
	"github.com/agentgate/agentgate/core/retention"
	"github.com/agentgate/agentgate/core/routine"
	"github.com/agentgate/agentgate/interfaces/api"
	ichat "github.com/agentgate/agentgate/interfaces/chat"
)

// Settings are what `agentgate serve` takes from its flags and the
// AGENTGATE_* environment. The credentials of the chat platforms the config
// turns on (SLACK_*, DISCORD_*, TELEGRAM_*) and the MCP approval settings
// (AGENTGATE_MCP_*) New reads from the environment itself.
type Settings struct {
	// ConfigPath is the YAML config file; "" = the built-in demo agent
	// (config.Default).
	ConfigPath string
	// Addr is the API's listen address, host:port; port 0 takes a free
	// port (Gateway.Addr tells which). Without API keys it must be a
	// loopback address. serve's default is 127.0.0.1:8080.
	Addr string
	// DataDir holds the embedded store (agentgate.db), its attachments
	// (blobs/) and the lock (agentgate.lock) that keeps a second gateway
	// off them; created if missing, unused with DatabaseURL. serve's
	// default is agentgate-data.
	DataDir string
	// APIKeys are admin bearer keys for the API, added to the config's
	// server.api_keys. None at all = the API is open, and Addr must be a
	// loopback address.
	APIKeys []string
	// LocalKey is the key of a process that embeds this gateway and is its
	// only client (agentgate mcp). Used only when no other key is set: the
	// API then answers that process alone, whose caller is key:local, an
	// admin, as on an open API.
	LocalKey string
	// NodeID names this process in run claims and leases; "" = "local" on
	// the embedded store, host-pid with DatabaseURL (replicas sharing a
	// store need different names).
	NodeID string
	// SQLiteSync is the embedded store's synchronous mode: "full" (the
	// default: a commit survives power loss) or "normal".
	SQLiteSync string
	// DatabaseURL, when set, is a PostgreSQL store
	// (postgres://user:pw@host:5432/db) in place of the embedded one.
	DatabaseURL string
	// DatabaseSchema is the PostgreSQL schema of the tables; "" = public.
	DatabaseSchema string
	// RedisURL, when set, is a Redis Streams queue (redis://host:6379/0)
	// fed from the store's outbox; it needs DatabaseURL. "" = the store's
	// own queue.
	RedisURL string
	// RedisPrefix names the queue's Redis keys; "" = "default".
	RedisPrefix string
	// ClaimTTL is how long a node's claim on a run and lease on a job last
	// without a heartbeat; a dead node's work moves after it. 0 = 30s.
	ClaimTTL time.Duration
	// JanitorInterval is how often queued and running runs are re-enqueued
	// from the store; 0 = 30s with DatabaseURL, 5m on the embedded store.
	JanitorInterval time.Duration
	// Version is this build's version, logged at start; MCP clients see it
	// as BuildVersion completes it. "" = "dev".
	Version string
}

// withDefaults fills the settings whose default depends on others.
func (s Settings) withDefaults() Settings {
	if s.NodeID == "" {
		s.NodeID = "local"
		if s.DatabaseURL != "" {
			// Replicas share the store: each needs its own name.
			host, _ := os.Hostname()
			s.NodeID = fmt.Sprintf("%s-%d", host, os.Getpid())
		}
	}
	s.Version = cmp.Or(s.Version, "dev")
	return s
}

// UsageError is a setting to fix before a gateway can start: a platform
// token that is missing, an open address without API keys, a Redis queue
// without PostgreSQL. agentgate exits with code 2 on it.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// BuildVersion is version completed with what the binary knows of its
// build: the module version when version is "dev", and the Go version.
func BuildVersion(version string) string {
	v := version
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		v += " (" + strings.TrimPrefix(info.GoVersion, "go") + ")"
	}
	return v
}

// Cluster-wide singletons run under these leases.
const (
	leaseTTL          = 15 * time.Second
	leaseApprovals    = "approvals-expiry"
	leaseRoutineTicks = "routine-scheduler"
	leaseRetention    = "retention"
)

// Gateway is one agentgate server, built and listening; Start serves it.
type Gateway struct {
	s      Settings
	log    *slog.Logger
	b      *backend
	eng    *core.Engine
	aps    *approval.Service
	rt     *routine.Scheduler
	prune  *retention.Pruner
	agents int
	auth   string // how the API authenticates, for the start line

	srv   *http.Server // the API, on ln
	ln    net.Listener
	ops   *http.Server // server.metrics_addr, on opsLn; nil without
	opsLn net.Listener

	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc // ends a running Start
	done    chan struct{}      // closed when Start has returned
	closed  sync.Once          // closes the listeners and the backend
}

// New builds a gateway from s: it loads the config, opens the store (and
// migrates it) and the queue, checks the chat platforms' tokens, builds the
// engine, approvals, routines and the API, and binds the listeners. On
// error everything it opened is closed again. Call Start to serve, or Stop
// to release it unstarted. log nil discards the logs.
func New(ctx context.Context, s Settings, log *slog.Logger) (_ *Gateway, err error) {
	s = s.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := loadConfig(s.ConfigPath)
	if err != nil {
		return nil, err
	}
	keys, err := apiKeys(s.APIKeys, cfg)
	if err != nil {
		return nil, err
	}
	local := len(keys) == 0 && s.LocalKey != ""
	if local {
		keys = []api.Key{{Name: api.LocalName, Secret: s.LocalKey, Role: approval.RoleAdmin}}
	}
	if why := exposed(s.Addr, cfg, keys); why != "" {
		return nil, &UsageError{why}
	}

	b, err := openBackend(ctx, s, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	db := b.db

	clock := core.SystemClock{}
	built, err := buildAgents(cfg, clock, log)
	if err != nil {
		return nil, err
	}
	closeBackend := b.close
	b.close = func() error { built.close(); return closeBackend() } // MCP servers stop with the store
	if err := checkModels(ctx, built, log); err != nil {
		return nil, err
	}
	agents := built.agents
	m := metrics.New(db, b.queue, log)
	sw, err := newSlack(ctx, cfg, db, s.NodeID, clock, log, m)
	if err != nil {
		return nil, err
	}
	chatDeliver := map[string]routine.ChatDeliverer{}
	renderers := map[string]ichat.ApprovalRenderer{}
	if sw != nil {
		chatDeliver[ichat.PlatformSlack] = sw.notifier
		renderers[ichat.PlatformSlack] = sw.notifier
	}
	tw, err := newTelegram(ctx, cfg, db, s.NodeID, clock, log, m)
	if err != nil {
		return nil, err
	}
	if tw != nil {
		chatDeliver[ichat.PlatformTelegram] = tw.notifier
		renderers[ichat.PlatformTelegram] = tw.notifier
	}
	dw, err := newDiscord(ctx, cfg, db, s.NodeID, clock, log, m)
	if err != nil {
		return nil, err
	}
	if dw != nil {
		chatDeliver[ichat.PlatformDiscord] = dw.notifier
		renderers[ichat.PlatformDiscord] = dw.notifier
	}
	rt, err := newRoutines(ctx, cfg, db, b.alone, clock, log, chatDeliver)
	if err != nil {
		return nil, err
	}
	prune := newRetention(cfg.Retention, b, clock, log, m.Pruned)
	jobs := core.NewJobRouter(core.LogJobs(log, m)) // every kind once, with its log fields and metrics
	if err := jobs.HandleAll(rt.Handlers()); err != nil {
		return nil, err
	}
	if err := jobs.HandleAll((&ichat.Approvals{Store: db, Renderers: renderers, Clock: clock, Logger: log}).Handlers()); err != nil {
		return nil, err
	}
	platforms := map[string]ichat.Platform{} // who answers a chat run, by the run's platform
	if sw != nil {
		platforms[ichat.PlatformSlack] = sw.notifier
	}
	if tw != nil {
		platforms[ichat.PlatformTelegram] = tw.notifier
	}
	if dw != nil {
		platforms[ichat.PlatformDiscord] = dw.notifier
	}
	for p := range platforms {
		m.WatchInbox(p)
	}
	replies, err := ichat.NewReplies(ichat.RepliesConfig{Store: db, Platforms: platforms, Blobs: b.blobs, Clock: clock, Logger: log})
	if err != nil {
		return nil, err
	}
	if err := jobs.HandleAll(replies.Handlers()); err != nil {
		return nil, err
	}
	onFinish := finishHooks(rt.OnFinish, replies.OnFinish)
	ms, err := mcpFromEnv()
	if err != nil {
		return nil, err
	}
	if b.redisTrips != nil {
		m.RoundTrips("redis", "Redis", b.redisTrips.Load)
	}
	hub := &core.Hub{}
	if b.hub != nil {
		b.services = append(b.services, b.hub(hub))
	}
	eng, err := core.NewEngine(core.EngineConfig{
		Store: db, Queue: b.queue, Agents: agents, Hub: hub, Clock: clock, Logger: log,
		Observer: m, NodeID: s.NodeID, Workers: cfg.Server.Workers, JanitorInterval: b.janitor, ClaimTTL: s.ClaimTTL,
		OnFinish: onFinish, Jobs: jobs, Progress: replies.Progress, Blobs: b.blobs, ExternalApproval: ms.approval,
	})
	if err != nil {
		return nil, err
	}
	aps := approval.New(approval.Config{Store: db, Hub: hub, Clock: clock, Logger: log, Observer: m,
		People: people(cfg), Cards: db})
	extra := map[string]http.Handler{}
	if sw != nil {
		h, err := sw.newHandler(eng, aps, rt, b.blobs)
		if err != nil {
			return nil, err
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
			return nil, err
		}
		if tw.webhook {
			extra["POST /telegram/webhook"] = h
		}
		b.services = append(b.services, tw.services(h, b.leases)...)
	}
	if dw != nil {
		h, err := dw.newHandler(eng, aps, rt, b.blobs)
		if err != nil {
			return nil, err
		}
		extra["POST /discord/interactions"] = h
		b.services = append(b.services, h.Start, dw.gateway(b.leases, s.NodeID, log, h)) // inbox; Gateway on one replica
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
		Engine: eng, Store: db, Approvals: aps, Keys: keys, Logger: log, Metrics: apiMetrics, Routines: rt, Jobs: b.queue, Extra: extra,
		Protected:    map[string]http.Handler{"/mcp": mcpHandler(ms, eng, db, aps, rt, keys, BuildVersion(s.Version), log)},
		Ready:        ready,
		AllowedHosts: cfg.Server.AllowedHosts, TrustedOrigins: cfg.Server.TrustedOrigins,
		MaxStreams: cfg.Server.MaxStreams, MaxStreamsPerKey: cfg.Server.MaxStreamsPerKey,
	})

	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w (is another agentgate running? pick another --addr)", s.Addr, err)
	}
	ln = limitConnections(ln, cmp.Or(cfg.Server.MaxConnections, config.DefaultMaxConnections), log)
	var opsLn net.Listener
	if ops != nil {
		if opsLn, err = net.Listen("tcp", ops.Addr); err != nil {
			ln.Close()
			return nil, fmt.Errorf("listen on server.metrics_addr %s: %w", ops.Addr, err)
		}
	}
	auth := "open on loopback (no API keys)"
	switch {
	case local:
		auth = "answers only the process that embeds it (a key made at its start)"
	case len(keys) > 0:
		auth = fmt.Sprintf("%d API key(s)", len(keys))
	}
	return &Gateway{
		s: s, log: log, b: b, eng: eng, aps: aps, rt: rt, prune: prune, agents: len(agents), auth: auth,
		// Headers must arrive within 10s and fit in 64 KiB; an idle
		// keep-alive connection is closed after 2 minutes. Bodies are
		// in size per route (1 MiB for the API and the webhooks) and must
		// arrive within bodyTimeout (bodyDeadline); there is no write
		// timeout because event streams, ?wait=true and MCP approval prompts
		// answer for as long as they wait.
		srv: &http.Server{Handler: bodyDeadline(handler, bodyTimeout), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
			MaxHeaderBytes: 64 << 10},
		ln: ln, ops: ops, opsLn: opsLn,
		done: make(chan struct{}),
	}, nil
}

// Addr is the address the API listens on, host:port (with the port the
// system chose when Settings.Addr asked for port 0).
func (g *Gateway) Addr() string { return g.ln.Addr().String() }

// Start serves until ctx ends or Stop is called: the engine, the
// cluster-wide singletons (approval expiry, the routine scheduler) under
// their leases, the chat interfaces' services, the API and the metrics
// address. Then it stops taking requests, gives in-flight work 10s to
// finish, closes the store and returns: nil after a shutdown that ctx or
// Stop asked for, else the error of the part that stopped first. A gateway
// starts once.
func (g *Gateway) Start(ctx context.Context) error {
	g.mu.Lock()
	if g.started || g.stopped {
		g.mu.Unlock()
		return errors.New("gateway: Start called twice, or after Stop")
	}
	g.started = true
	runCtx, cancel := context.WithCancel(ctx)
	g.cancel = cancel
	g.mu.Unlock()
	defer close(g.done)
	defer g.close()
	defer cancel()

	log, leases, nodeID := g.log, g.b.leases, g.s.NodeID
	var wg sync.WaitGroup
	errc := make(chan error, 4+len(g.b.services))
	wg.Go(func() { errc <- g.eng.Start(runCtx) })
	singleton := func(name string, start func(context.Context) error) {
		wg.Go(func() {
			lease.Run(runCtx, leases, name, nodeID, leaseTTL, log, func(ctx context.Context) {
				if err := start(ctx); err != nil {
					log.Error("singleton stopped", "lease", name, "err", err)
				}
			})
		})
	}
	singleton(leaseApprovals, g.aps.Start)
	singleton(leaseRoutineTicks, g.rt.Start)
	if g.prune.Enabled() {
		singleton(leaseRetention, g.prune.Start)
	}
	for _, svc := range g.b.services {
		wg.Go(func() { errc <- svc(runCtx) })
	}
	wg.Go(func() {
		if err := g.srv.Serve(g.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	})
	if g.ops != nil {
		wg.Go(func() {
			if err := g.ops.Serve(g.opsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		})
		log.Info("metrics and probes serving", "addr", "http://"+g.opsLn.Addr().String())
	}
	log.Info("agentgate serving", "addr", "http://"+g.Addr(), "store", g.b.desc, "node", nodeID,
		"agents", g.agents, "auth", g.auth, "version", g.s.Version)

	var runErr error
	select {
	case <-runCtx.Done():
	case runErr = <-errc:
	}
	log.Info("shutting down: no new work; in-flight steps get 10s to finish")
	shutdownCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer stop()
	_ = g.srv.Shutdown(shutdownCtx)
	if g.ops != nil {
		_ = g.ops.Shutdown(shutdownCtx)
	}
	cancel()
	wg.Wait()
	return runErr
}

// Stop ends a running Start and waits until it has returned; on a gateway
// never started it releases what New opened: the listeners, the store and
// the data dir's lock. Stop may be called more than once.
func (g *Gateway) Stop() {
	g.mu.Lock()
	g.stopped = true
	cancel := g.cancel
	g.mu.Unlock()
	if cancel != nil {
		cancel()
		<-g.done
		return
	}
	g.close()
}

// close releases the listeners and the backend, once.
func (g *Gateway) close() {
	g.closed.Do(func() {
		_ = g.ln.Close()
		if g.opsLn != nil {
			_ = g.opsLn.Close()
		}
		_ = g.b.close()
	})
}

// Migrate opens the store s names, which applies its pending migrations,
// then reverts a PostgreSQL schema to version downTo when downTo >= 0 (the
// embedded store migrates only up: that is a *UsageError). It returns the
// store's description and its schema version.
func Migrate(ctx context.Context, s Settings, downTo int, log *slog.Logger) (store string, version int, err error) {
	s = s.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b, err := openBackend(ctx, s, log)
	if err != nil {
		return "", 0, err
	}
	defer b.close()
	if downTo >= 0 {
		down, ok := b.db.(interface {
			MigrateDown(ctx context.Context, to int) error
		})
		if !ok {
			return "", 0, &UsageError{"--down-to: the SQLite store migrates only up; to go back, restore a copy of the data dir"}
		}
		if err := down.MigrateDown(ctx, downTo); err != nil {
			return "", 0, err
		}
	}
	v, err := b.db.SchemaVersion(ctx)
	if err != nil {
		return "", 0, err
	}
	return b.desc, v, nil
}

// CheckConfig loads and validates the config of s the way New does before
// it opens the store, without touching the store or the network: the file,
// the API keys against the listen address, the agents' models and tools.
// It returns the config (nil when it does not load) and its problems, one
// line each.
func CheckConfig(s Settings) (*config.Config, []string) {
	cfg, err := loadConfig(s.ConfigPath)
	if err != nil {
		if ce := (*config.Error)(nil); errors.As(err, &ce) {
			return nil, ce.Lines()
		}
		return nil, []string{err.Error()}
	}
	var problems []string
	keys, err := apiKeys(s.APIKeys, cfg)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if why := exposed(s.Addr, cfg, keys); err == nil && why != "" {
		problems = append(problems, why)
	}
	if built, err := buildAgents(cfg, core.SystemClock{}, slog.New(slog.DiscardHandler)); err != nil {
		problems = append(problems, err.Error())
	} else {
		built.close()
	}
	return cfg, problems
}

// CheckModels asks the provider of every agent's model (and fallback)
// whether it accepts the key and knows the model, as New does at start:
// problems are refusals, warnings providers it could not ask.
func CheckModels(ctx context.Context, cfg *config.Config) (problems, warnings []string) {
	built, err := buildAgents(cfg, core.SystemClock{}, slog.New(slog.DiscardHandler))
	if err != nil {
		return []string{err.Error()}, nil
	}
	defer built.close()
	return built.checkModels(ctx)
}

// checkModels stops a start whose models' providers refuse their key or
// model, and logs those it could not ask.
func checkModels(ctx context.Context, built *builtAgents, log *slog.Logger) error {
	problems, warnings := built.checkModels(ctx)
	for _, w := range warnings {
		log.Warn("model check", "problem", w)
	}
	if len(problems) > 0 {
		return &UsageError{"the model provider refused:\n  " + joinLines(problems)}
	}
	return nil
}

// loadConfig loads the config file at path, or the built-in demo config
// when path is "".
func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Default(), nil
	}
	return config.Load(path)
}

// exposed says why the gateway may not serve as set, "" when it may: with
// no API keys every caller is an admin, so it serves only this machine.
// Listening on another interface, or answering a name other than the
// loopback ones (server.allowed_hosts: a name that reaches it through a
// proxy or tunnel), needs keys.
func exposed(addr string, cfg *config.Config, keys []api.Key) string {
	switch {
	case len(keys) > 0:
		return ""
	case !loopbackOnly(addr):
		return fmt.Sprintf("--addr %s is reachable from other machines but no API keys are set; "+
			"set AGENTGATE_API_KEYS or server.api_keys, or listen on 127.0.0.1", addr)
	case len(cfg.Server.AllowedHosts) > 0:
		return fmt.Sprintf("server.allowed_hosts lists %s, names that reach this gateway through a proxy or tunnel, but no API keys are set "+
			"and without keys every caller is an admin; set AGENTGATE_API_KEYS or server.api_keys (*.localhost names are served without listing them)",
			strings.Join(cfg.Server.AllowedHosts, ", "))
	}
	return ""
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

// apiKeys are the keys of AGENTGATE_API_KEYS (admins named env-<hash>) and
// of server.api_keys.
func apiKeys(env []string, cfg *config.Config) ([]api.Key, error) {
	var keys []api.Key
	for i, k := range env {
		if len(k) < config.MinKeyLen {
			return nil, &UsageError{fmt.Sprintf("AGENTGATE_API_KEYS: key %d is too short (%d of the %d characters a key needs; make one with openssl rand -hex 24)",
				i+1, len(k), config.MinKeyLen)}
		}
		if config.Placeholder(k) {
			return nil, &UsageError{fmt.Sprintf("AGENTGATE_API_KEYS: key %d is the placeholder from the documentation, which anyone can read; make your own with openssl rand -hex 24", i+1)}
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
