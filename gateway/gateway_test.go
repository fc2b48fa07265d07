package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/gateway"
)

// demoConfig is the smallest config: one agent on the offline demo model.
const demoConfig = "agents:\n  demo:\n    model: {provider: demo}\n"

// settings are a gateway's on a fresh data dir, with demoConfig, on a
// loopback port the system picks.
func settings(t *testing.T) gateway.Settings {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "agentgate.yaml")
	if err := os.WriteFile(path, []byte(demoConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return gateway.Settings{ConfigPath: path, Addr: "127.0.0.1:0", DataDir: filepath.Join(dir, "data")}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// A gateway started in-process answers a run over the API, and Start
// returns nil once its context ends.
func TestStartServesUntilCtxEnds(t *testing.T) {
	t.Parallel()
	g, err := gateway.New(t.Context(), settings(t), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- g.Start(ctx) }()

	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Post("http://"+g.Addr()+"/api/v1/agents/demo/runs?wait=true", "application/json",
		strings.NewReader(`{"input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var run struct{ ID, Status, Output string }
	if err := json.NewDecoder(resp.Body).Decode(&run); err != nil {
		t.Fatalf("POST …/runs?wait=true: status %d, body: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK || run.Status != "completed" || !strings.Contains(run.Output, `"hi"`) {
		t.Fatalf("POST …/runs?wait=true: status %d, run %+v; want 200 and a completed run answering hi", resp.StatusCode, run)
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Start = %v after its context ended, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not return within 30s of its context ending")
	}
}

// Stop releases a gateway never started: its data dir and its port can be
// taken again at once. On a started gateway it ends Start and waits for it.
func TestStop(t *testing.T) {
	t.Parallel()
	s := settings(t)
	g, err := gateway.New(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := g.Addr()
	g.Stop()
	g.Stop() // a second Stop does nothing
	if err := g.Start(t.Context()); err == nil {
		t.Error("Start after Stop = nil, want an error")
	}

	s.Addr = addr
	again, err := gateway.New(t.Context(), s, nil)
	if err != nil {
		t.Fatalf("New on the stopped gateway's data dir and address: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- again.Start(context.WithoutCancel(t.Context())) }()
	// The listener is bound since New: this answers once Start serves.
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get("http://" + again.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	again.Stop()
	// Stop waited for Start's shutdown: the port is free at once. (Start's
	// own return races Stop's by a few instructions, so it is awaited.)
	ln, err := net.Listen("tcp", again.Addr())
	if err != nil {
		t.Fatalf("port still held after Stop: %v", err)
	}
	ln.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Start = %v after Stop, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not return after Stop")
	}
}

// Settings New refuses are usage errors (agentgate exits 2 on them).
func TestNewRefusesSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(*gateway.Settings)
		want   string
	}{
		{"open address without keys", func(s *gateway.Settings) { s.Addr = "0.0.0.0:0" }, "no API keys are set"},
		{"short key", func(s *gateway.Settings) { s.APIKeys = []string{"short"} }, "AGENTGATE_API_KEYS: key 1 is too short"},
		{"redis without postgres", func(s *gateway.Settings) { s.RedisURL = "redis://127.0.0.1:1/0" }, "AGENTGATE_REDIS_URL needs AGENTGATE_DATABASE_URL"},
		{"the documentation's placeholder key", func(s *gateway.Settings) { s.APIKeys = []string{"agentgate-dev-key-change-me"} },
			"AGENTGATE_API_KEYS: key 1 is the placeholder from the documentation"},
		// A listed name reaches a loopback gateway through a proxy or
		// tunnel: without keys every caller there would be an admin.
		{"allowed hosts without keys", func(s *gateway.Settings) {
			s.ConfigPath = filepath.Join(t.TempDir(), "agentgate.yaml")
			if err := os.WriteFile(s.ConfigPath, []byte("server: {allowed_hosts: [gw.example.com]}\nagents: {demo: {model: {provider: demo}}}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "server.allowed_hosts lists gw.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := settings(t)
			tc.change(&s)
			g, err := gateway.New(t.Context(), s, nil)
			var ue *gateway.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				if g != nil {
					g.Stop()
				}
				t.Fatalf("New = %v, want a *UsageError saying %q", err, tc.want)
			}
		})
	}
}
