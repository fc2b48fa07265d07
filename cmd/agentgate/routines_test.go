package main

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
	"github.com/agentgate/agentgate/core/model/demo"
	"github.com/agentgate/agentgate/core/routine"
	"github.com/agentgate/agentgate/interfaces/api"
	"github.com/agentgate/agentgate/store/sqlite"
)

const routinesTestConfig = `
agents:
  ops: {model: {provider: demo}}
routines:
  daily-digest:
    agent: ops
    schedule: "0 9 * * 1-5"
    timezone: Europe/Berlin
    input: Summarize yesterday's deploys.
    deliver_to: slack:C0123456789
    enabled: false
  heartbeat:
    agent: ops
    schedule: "@every 30m"
    input: Are you there?
`

// routinesAPI serves the API with the routines of routinesTestConfig over a
// fresh SQLite store, wired like the gateway does (the engine is not
// started, so triggered runs stay queued).
func routinesAPI(t *testing.T) (*httptest.Server, *sqlite.DB) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	cfg, err := config.Parse([]byte(routinesTestConfig), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	guard, err := cfg.Egress.Policy()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := routine.New(routine.Config{Store: db, Runs: db, Sessions: db, Logger: log, Agents: []string{"ops"}, Egress: guard})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Sync(t.Context(), cfg.RoutineDefs()); err != nil {
		t.Fatal(err)
	}
	agents := map[string]*core.Agent{"ops": {ID: "ops", Provider: "demo", ModelName: "demo", Model: demo.Model{}}}
	eng, err := core.NewEngine(core.EngineConfig{Store: db, Queue: db, Agents: agents, Logger: log,
		OnFinish: rt.OnFinish, Handlers: rt.Handlers()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Engine: eng, Store: db, Logger: log, Routines: rt,
		Approvals: approval.New(approval.Config{Store: db, Logger: log})}))
	t.Cleanup(srv.Close)
	return srv, db
}

// cli runs the agentgate command line against srv.
func cli(t *testing.T, srv *httptest.Server, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(t.Context(), append(args, "--server", srv.URL), strings.NewReader(""), &out, &errOut)
	return out.String() + errOut.String(), err
}

func TestRoutinesCLI(t *testing.T) {
	srv, db := routinesAPI(t)
	out, err := cli(t, srv, "routines", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ID", "daily-digest", "0 9 * * 1-5", "Europe/Berlin", "disabled", "slack:C0123456789",
		"heartbeat", "@every 30m", "enabled", "none"} {
		if !strings.Contains(out, want) {
			t.Errorf("list output lacks %q:\n%s", want, out)
		}
	}

	out, err = cli(t, srv, "routines", "run", "daily-digest", "focus", "on", "the", "API")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "routine daily-digest started run run_") {
		t.Errorf("run output:\n%s", out)
	}
	h, err := db.RoutineHistory(t.Context(), "daily-digest", core.ListOptions{})
	if err != nil || len(h.Items) != 1 {
		t.Fatalf("history after run: %+v, %v", h.Items, err)
	}
	run, err := db.GetRun(t.Context(), h.Items[0].RunID)
	if err != nil || run.Input != "Summarize yesterday's deploys.\n\nfocus on the API" || run.UserID != "key:local" {
		t.Errorf("triggered run = %+v, %v", run, err)
	}

	out, err = cli(t, srv, "routines", "history", "daily-digest")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "manual") || !strings.Contains(out, run.ID) || !strings.Contains(out, "queued") {
		t.Errorf("history output:\n%s", out)
	}

	if out, err = cli(t, srv, "routines", "enable", "daily-digest"); err != nil || !strings.Contains(out, "routine daily-digest is enabled; next run 20") {
		t.Errorf("enable: %v\n%s", err, out)
	}
	if out, err = cli(t, srv, "routines", "disable", "heartbeat"); err != nil || !strings.Contains(out, "routine heartbeat is disabled") {
		t.Errorf("disable: %v\n%s", err, out)
	}
	if _, err := db.SetRoutineEnabled(t.Context(), "daily-digest", core.RoutineToggle{Reason: "disabled after 5 consecutive failed runs"}); err != nil {
		t.Fatal(err)
	}
	if out, _ = cli(t, srv, "routines", "list"); !strings.Contains(out, "daily-digest: disabled after 5 consecutive failed runs (agentgate routines enable daily-digest)") {
		t.Errorf("list does not say why a routine disabled itself:\n%s", out)
	}
	if out, _ = cli(t, srv, "routines", "history", "heartbeat"); !strings.Contains(out, "no history yet") {
		t.Errorf("empty history:\n%s", out)
	}
}

func TestRoutinesCLICreateDelete(t *testing.T) {
	srv, db := routinesAPI(t)
	out, err := cli(t, srv, "routines", "create", "--id", "cost-check", "--agent", "ops", "--schedule", "@every 2h",
		"--input", "Check the costs.", "--timezone", "Europe/Berlin", "--deliver-to", "webhook:https://example.com/h",
		"--missed", "once", "--disabled")
	if err != nil || !strings.Contains(out, "routine cost-check created, disabled (agentgate routines enable cost-check)") {
		t.Fatalf("create: %v\n%s", err, out)
	}
	r, err := db.GetRoutine(t.Context(), "cost-check")
	if err != nil || r.Source != core.SourceAPI || r.Enabled || r.Schedule != "@every 2h" || r.Timezone != "Europe/Berlin" ||
		r.Input != "Check the costs." || r.DeliverTo != "webhook:https://example.com/h" || r.Missed != core.MissedOnce || r.MaxFailures != 5 {
		t.Fatalf("created routine = %+v, %v", r, err)
	}
	if out, err = cli(t, srv, "routines", "create", "--id", "ping", "--agent", "ops", "--schedule", "@hourly", "--input", "ping"); err != nil ||
		!strings.Contains(out, "routine ping created; next run 20") {
		t.Errorf("create enabled: %v\n%s", err, out)
	}
	if out, _ = cli(t, srv, "routines", "list"); !strings.Contains(out, "SOURCE") || !strings.Contains(out, "api") || !strings.Contains(out, "config") {
		t.Errorf("list does not show the sources:\n%s", out)
	}

	var ae *apiError
	_, err = cli(t, srv, "routines", "create", "--id", "heartbeat", "--agent", "ops", "--schedule", "@hourly", "--input", "x")
	if !errors.As(err, &ae) || ae.Status != 409 || !strings.Contains(err.Error(), "defined in the config file") {
		t.Errorf("create of a config routine's id: %v, want a 409 saying to edit the file", err)
	}
	_, err = cli(t, srv, "routines", "create", "--id", "bad", "--agent", "nope", "--schedule", "@hourly")
	if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(err.Error(), `agent: unknown agent "nope" (defined agents: ops)`) ||
		!strings.Contains(err.Error(), "input: required") {
		t.Errorf("create with problems: %v, want a 400 naming the fields", err)
	}
	_, err = cli(t, srv, "routines", "delete", "heartbeat")
	if !errors.As(err, &ae) || ae.Status != 409 || !strings.Contains(err.Error(), "remove heartbeat from the file") {
		t.Errorf("delete of a config routine: %v, want a 409", err)
	}

	if out, err = cli(t, srv, "routines", "delete", "cost-check"); err != nil || !strings.Contains(out, "routine cost-check deleted") {
		t.Errorf("delete: %v\n%s", err, out)
	}
	if _, err := db.GetRoutine(t.Context(), "cost-check"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("routine after delete: %v, want ErrNotFound", err)
	}
	var ue *usageError
	for _, args := range [][]string{{"routines", "create", "x"}, {"routines", "delete"}} {
		if _, err := cli(t, srv, args...); !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

func TestRoutinesCLIErrors(t *testing.T) {
	srv, _ := routinesAPI(t)
	var ae *apiError
	if _, err := cli(t, srv, "routines", "run", "nope"); !errors.As(err, &ae) || ae.Status != 404 {
		t.Errorf("run of an unknown routine: %v, want a 404", err)
	}
	var ue *usageError
	for _, args := range [][]string{
		{"routines"},
		{"routines", "enable"},
		{"routines", "history", "a", "b"},
		{"routines", "explode", "x"},
	} {
		if _, err := cli(t, srv, args...); !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}
