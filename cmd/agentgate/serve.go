package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	// gw, not gateway: in this package's tests, gateway is a running binary.
	"github.com/agentgate/agentgate/core/tracing"
	"github.com/agentgate/agentgate/core/tracing/otlp"
	gw "github.com/agentgate/agentgate/gateway"
)

// settings are the server's flags and environment, resolved: the gateway's
// settings, and the command's own.
type settings struct {
	gw.Settings
	logLevel  string
	logFormat string
	downTo    int      // migrate only: revert to this schema version (-1 = no)
	offline   bool     // config check only: do not ask the model providers
	json      bool     // doctor only: print JSON
	args      []string // backup only: the positional arguments
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
                     AGENTGATE_LOG_FORMAT  text (default: key=value lines) or json (one object a line)
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
                                           from the store (default 30s on PostgreSQL, 5m on SQLite)
`

func parseSettings(name string, args []string, stderr io.Writer) (settings, error) {
	s := settings{Settings: gw.Settings{
		ConfigPath:     os.Getenv("AGENTGATE_CONFIG"),
		Addr:           envOr("AGENTGATE_ADDR", "127.0.0.1:8080"),
		DataDir:        envOr("AGENTGATE_DATA_DIR", "agentgate-data"),
		NodeID:         os.Getenv("AGENTGATE_NODE_ID"),
		SQLiteSync:     envOr("AGENTGATE_SQLITE_SYNC", "full"),
		DatabaseURL:    os.Getenv("AGENTGATE_DATABASE_URL"),
		DatabaseSchema: os.Getenv("AGENTGATE_DATABASE_SCHEMA"),
		RedisURL:       os.Getenv("AGENTGATE_REDIS_URL"),
		RedisPrefix:    os.Getenv("AGENTGATE_REDIS_PREFIX"),
		Version:        version,
	}, logLevel: envOr("AGENTGATE_LOG_LEVEL", "info"), logFormat: envOr("AGENTGATE_LOG_FORMAT", "text")}
	for _, d := range []struct {
		env string
		to  *time.Duration
	}{{"AGENTGATE_CLAIM_TTL", &s.ClaimTTL}, {"AGENTGATE_JANITOR_INTERVAL", &s.JanitorInterval}} {
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
			s.APIKeys = append(s.APIKeys, k)
		}
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, serveHelp) }
	fs.StringVar(&s.ConfigPath, "config", s.ConfigPath, "config file")
	fs.StringVar(&s.Addr, "addr", s.Addr, "listen address")
	fs.StringVar(&s.DataDir, "data-dir", s.DataDir, "data directory")
	fs.StringVar(&s.NodeID, "node-id", s.NodeID, "node name")
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
	switch name {
	case "config check":
		fs.BoolVar(&s.offline, "offline", false, "do not ask the model providers")
	case "doctor":
		fs.BoolVar(&s.json, "json", false, "print the checks as JSON")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return s, err
		}
		return s, &usageError{err.Error()}
	}
	if s.args = fs.Args(); len(s.args) > 0 && name != "backup" {
		return s, &usageError{fmt.Sprintf("%s takes no arguments, got %q", name, fs.Args())}
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
	log, err = newLogger(s.logLevel, s.logFormat, stderr)
	return s, log, false, err
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, &usageError{fmt.Sprintf("log level: must be debug, info, warn or error, got %q", level)}
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, &usageError{fmt.Sprintf("AGENTGATE_LOG_FORMAT: must be text or json, got %q", format)}
}

func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s, log, done, err := prepare("migrate", args, stderr)
	if done || err != nil {
		return err
	}
	store, v, err := gw.Migrate(ctx, s.Settings, s.downTo, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "store %s is at schema version %d\n", store, v)
	return nil
}

// serve runs the gateway until ctx ends; it prints where it listens on
// stdout (test/testbin and `agentgate mcp` read that line).
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return serveLocal(ctx, args, "", stdout, stderr)
}

// serveLocal is serve with a gateway's LocalKey: the key of the process
// embedding it, used when no other key is set.
func serveLocal(ctx context.Context, args []string, localKey string, stdout, stderr io.Writer) error {
	s, log, done, err := prepare("serve", args, stderr)
	if done || err != nil {
		return err
	}
	s.LocalKey = localKey
	stopTraces, err := otlp.Setup(ctx, version)
	if err != nil {
		return &usageError{err.Error()}
	}
	defer func() {
		// Send the spans still batched; a collector that is gone costs at most 5s.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := stopTraces(sctx); err != nil {
			log.Warn("traces: flush at exit", "err", err)
		}
	}()
	if tracing.Enabled() {
		log = slog.New(tracing.Logs(log.Handler()))
		log.Info("traces: sending OTLP over HTTP", "endpoint", cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")))
	}
	g, err := gw.New(ctx, s.Settings, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "agentgate listening on http://%s\n", g.Addr())
	return g.Start(ctx)
}
