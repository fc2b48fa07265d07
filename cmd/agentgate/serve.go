package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
	"github.com/agentgate/agentgate/core/metrics"
	"github.com/agentgate/agentgate/interfaces/api"
	"github.com/agentgate/agentgate/store/sqlite"
)

// settings are the server's flags and environment, resolved.
type settings struct {
	configPath string
	addr       string
	dataDir    string
	apiKeys    []string
	nodeID     string
	logLevel   string
	sqliteSync string
}

const serveHelp = `Usage: agentgate serve [flags]

Settings (a flag wins over its environment variable):
  --config FILE      AGENTGATE_CONFIG      YAML config; none = the built-in demo agent
  --addr HOST:PORT   AGENTGATE_ADDR        listen address (default 127.0.0.1:8080)
  --data-dir DIR     AGENTGATE_DATA_DIR    SQLite database directory (default ./agentgate-data)
                     AGENTGATE_API_KEYS    comma-separated bearer keys for the API; none = API open,
                                           and then only a loopback --addr is allowed
  --node-id NAME     AGENTGATE_NODE_ID     this process's name in run claims (default local)
  --log-level LEVEL  AGENTGATE_LOG_LEVEL   debug, info (default), warn, error
                     AGENTGATE_SQLITE_SYNC full (default: a commit survives power loss) or normal
                     AGENTGATE_DATABASE_URL, AGENTGATE_REDIS_URL: PostgreSQL and Redis Streams
                                           (not in this build yet: unset them)
`

func parseSettings(name string, args []string, stderr io.Writer) (settings, *flag.FlagSet, error) {
	s := settings{
		configPath: os.Getenv("AGENTGATE_CONFIG"),
		addr:       envOr("AGENTGATE_ADDR", "127.0.0.1:8080"),
		dataDir:    envOr("AGENTGATE_DATA_DIR", "agentgate-data"),
		nodeID:     envOr("AGENTGATE_NODE_ID", "local"),
		logLevel:   envOr("AGENTGATE_LOG_LEVEL", "info"),
		sqliteSync: envOr("AGENTGATE_SQLITE_SYNC", "full"),
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return s, fs, err
		}
		return s, fs, &usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return s, fs, &usageError{fmt.Sprintf("%s takes no arguments, got %q", name, fs.Args())}
	}
	if os.Getenv("AGENTGATE_DATABASE_URL") != "" || os.Getenv("AGENTGATE_REDIS_URL") != "" {
		return s, fs, errors.New("AGENTGATE_DATABASE_URL / AGENTGATE_REDIS_URL are set, but this build has only the embedded SQLite store and queue; unset them")
	}
	return s, fs, nil
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

func openStore(ctx context.Context, s settings, log *slog.Logger) (*sqlite.DB, error) {
	if err := os.MkdirAll(s.dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	db, err := sqlite.Open(ctx, filepath.Join(s.dataDir, "agentgate.db"), sqlite.Options{Logger: log, Synchronous: s.sqliteSync})
	if err != nil {
		return nil, fmt.Errorf("open store in %s: %w", s.dataDir, err)
	}
	return db, nil
}

func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s, _, err := parseSettings("migrate", args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, err := newLogger(s.logLevel, stderr)
	if err != nil {
		return err
	}
	db, err := openStore(ctx, s, log)
	if err != nil {
		return err
	}
	defer db.Close()
	v, err := db.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "store %s is at schema version %d\n", db.Path(), v)
	return nil
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s, _, err := parseSettings("serve", args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, err := newLogger(s.logLevel, stderr)
	if err != nil {
		return err
	}
	cfg := config.Default()
	if s.configPath != "" {
		if cfg, err = config.Load(s.configPath); err != nil {
			return err
		}
	}
	keys := append(s.apiKeys, cfg.Server.APIKeys...)
	if len(keys) == 0 && !loopbackOnly(s.addr) {
		return &usageError{fmt.Sprintf("--addr %s is reachable from other machines but no API keys are set; "+
			"set AGENTGATE_API_KEYS or listen on 127.0.0.1", s.addr)}
	}

	db, err := openStore(ctx, s, log)
	if err != nil {
		return err
	}
	defer db.Close()

	clock := core.SystemClock{}
	agents, err := buildAgents(cfg, clock)
	if err != nil {
		return err
	}
	rt, err := newRoutines(ctx, cfg, db, clock, log)
	if err != nil {
		return err
	}
	m := metrics.New(db, db, log)
	hub := &core.Hub{}
	eng, err := core.NewEngine(core.EngineConfig{
		Store: db, Queue: db, Agents: agents, Hub: hub, Clock: clock, Logger: log,
		Observer: m, NodeID: s.nodeID, Workers: cfg.Server.Workers,
		OnFinish: rt.OnFinish, Handlers: rt.Handlers(),
	})
	if err != nil {
		return err
	}
	aps := approval.New(approval.Config{Store: db, Hub: hub, Clock: clock, Logger: log, Observer: m})
	handler := api.New(api.Config{
		Engine: eng, Store: db, Approvals: aps, Keys: keys, Logger: log, Metrics: m.Handler(), Routines: rt,
		Ready: func(ctx context.Context) error { _, err := db.SchemaVersion(ctx); return err },
	})

	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another agentgate running? pick another --addr)", s.addr, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	wg.Go(func() { errc <- eng.Start(runCtx) })
	wg.Go(func() { errc <- aps.Start(runCtx) })
	wg.Go(func() { errc <- rt.Start(runCtx) })
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	})
	auth := "open on loopback (no API keys)"
	if len(keys) > 0 {
		auth = fmt.Sprintf("%d API key(s)", len(keys))
	}
	log.Info("agentgate serving", "addr", "http://"+ln.Addr().String(), "data_dir", s.dataDir,
		"agents", len(agents), "auth", auth, "version", version)
	fmt.Fprintf(stdout, "agentgate listening on http://%s\n", ln.Addr())

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	log.Info("shutting down")
	shutdownCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer stop()
	_ = srv.Shutdown(shutdownCtx)
	cancel()
	wg.Wait()
	return runErr
}
