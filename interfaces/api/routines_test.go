package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/model/demo"
	"github.com/agentgate/agentgate/core/routine"
	"github.com/agentgate/agentgate/interfaces/api"
	"github.com/agentgate/agentgate/store/sqlite"
)

var routineDefs = []core.RoutineDef{
	{ID: "daily-digest", AgentID: "demo", Schedule: "0 9 * * 1-5", Timezone: "Europe/Berlin",
		Input: "Summarize yesterday's deploys.", DeliverTo: webhookWithSecret, Enabled: false, Missed: core.MissedSkip, MaxFailures: 5},
	{ID: "heartbeat", AgentID: "demo", Schedule: "@every 30m", Timezone: "UTC",
		Input: "Are you there?", DeliverTo: "none", Enabled: true, Missed: core.MissedOnce, MaxFailures: 5},
}

// startRoutineAPI serves the API with routines over the SQLite file at path,
// as a gateway start does (sync the file's routines, run the engine), and
// returns the env and a func that stops it all (a gateway stop).
func startRoutineAPI(t *testing.T, path string, keys ...api.Key) (*env, func()) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	db, err := sqlite.Open(t.Context(), path, sqlite.Options{Logger: log, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := routine.New(routine.Config{Store: db, Runs: db, Logger: log, Agents: []string{"demo"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Sync(t.Context(), append([]core.RoutineDef(nil), routineDefs...)); err != nil {
		t.Fatal(err)
	}
	agents := map[string]*core.Agent{"demo": {ID: "demo", Provider: "demo", ModelName: "demo", Model: demo.Model{}}}
	hub := &core.Hub{}
	eng, err := core.NewEngine(core.EngineConfig{Store: db, Queue: db, Agents: agents, Hub: hub, Logger: log,
		OnFinish: rt.OnFinish, Handlers: rt.Handlers()})
	if err != nil {
		t.Fatal(err)
	}
	aps := approval.New(approval.Config{Store: db, Hub: hub, Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Start(ctx) }()
	srv := httptest.NewServer(api.New(api.Config{Engine: eng, Store: db, Approvals: aps, Logger: log,
		Routines: rt, PollInterval: 50 * time.Millisecond, Keys: keys}))
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		srv.Close()
		cancel()
		<-done
		db.Close()
	}
	t.Cleanup(stop)
	return &env{t: t, srv: srv}, stop
}

// follow reads the run's event stream until the final `run` event, which
// the API sends once the run is settled.
func (e *env) follow(id string) string {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.t.Context(), "GET", e.srv.URL+"/api/v1/runs/"+id+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	final := false
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == "event: run":
			final = true
		case final && strings.HasPrefix(line, "data: "):
			return strings.TrimPrefix(line, "data: ")
		}
	}
	e.t.Fatalf("stream of %s ended without a run event: %v", id, sc.Err())
	return ""
}

func TestRoutineRoutes(t *testing.T) {
	e, _ := startRoutineAPI(t, filepath.Join(t.TempDir(), "db.sqlite"))

	var list core.Page[core.Routine]
	if code := e.call("GET", "/api/v1/routines", "", &list); code != 200 || len(list.Items) != 2 {
		t.Fatalf("list: %d %+v", code, list)
	}
	if r := list.Items[0]; r.ID != "daily-digest" || r.Enabled || r.NextFireAt != nil || r.Timezone != "Europe/Berlin" {
		t.Errorf("daily-digest = %+v, want it disabled as the file says", r)
	}
	if r := list.Items[1]; r.ID != "heartbeat" || !r.Enabled || r.NextFireAt == nil {
		t.Errorf("heartbeat = %+v, want it enabled with a next fire time", r)
	}
	var page core.Page[core.Routine]
	e.call("GET", "/api/v1/routines?limit=1", "", &page)
	if len(page.Items) != 1 || page.NextCursor != "daily-digest" {
		t.Errorf("page of 1 = %+v", page)
	}

	// Trigger: 202 and the run, which starts at once and shows in the history.
	var run runResp
	if code := e.call("POST", "/api/v1/routines/daily-digest/trigger", `{"input":"only the API","user_id":"ana"}`, &run); code != 202 {
		t.Fatalf("trigger: %d", code)
	}
	if run.Type != core.RunTypeRoutine || run.RoutineID != "daily-digest" || run.StartedBy != "key:local" ||
		run.Input != "Summarize yesterday's deploys.\n\nonly the API" || run.PendingApprovals == nil {
		t.Fatalf("triggered run = %+v", run)
	}
	if final := e.follow(run.ID); !strings.Contains(final, `"status":"completed"`) {
		t.Fatalf("triggered run ended as %s", final)
	}
	var hist core.Page[core.RoutineEntry]
	if code := e.call("GET", "/api/v1/routines/daily-digest/runs", "", &hist); code != 200 {
		t.Fatalf("history: %d", code)
	}
	if len(hist.Items) != 1 || hist.Items[0].RunID != run.ID || hist.Items[0].Kind != core.FireManual || hist.Items[0].RunStatus != core.RunCompleted {
		t.Fatalf("history = %+v, want the manual run, completed", hist.Items)
	}
	// An empty body is fine.
	if code := e.call("POST", "/api/v1/routines/heartbeat/trigger", "", &run); code != 202 || run.Input != "Are you there?" {
		t.Errorf("trigger without a body: %d %+v", code, run)
	}

	var r core.Routine
	if code := e.call("POST", "/api/v1/routines/daily-digest/enable", "", &r); code != 200 || !r.Enabled || r.NextFireAt == nil {
		t.Errorf("enable: %d %+v", code, r)
	}
	if code := e.call("POST", "/api/v1/routines/heartbeat/disable", "", &r); code != 200 || r.Enabled || r.NextFireAt != nil {
		t.Errorf("disable: %d %+v", code, r)
	}
	if code := e.call("GET", "/api/v1/routines/heartbeat", "", &r); code != 200 || r.Enabled {
		t.Errorf("get after disable: %d %+v", code, r)
	}

	for _, c := range []struct {
		method, path, body string
		code               int
		errCode            string
	}{
		{"GET", "/api/v1/routines/nope", "", 404, "not_found"},
		{"GET", "/api/v1/routines/nope/runs", "", 404, "not_found"},
		{"POST", "/api/v1/routines/nope/trigger", `{}`, 404, "not_found"},
		{"POST", "/api/v1/routines/nope/enable", "", 404, "not_found"},
		{"POST", "/api/v1/routines/heartbeat/trigger", `{"inptu":"x"}`, 400, "bad_request"},
		{"GET", "/api/v1/routines?limit=0", "", 400, "bad_request"},
		{"GET", "/api/v1/routines/heartbeat/runs?cursor=junk", "", 400, "bad_request"},
	} {
		var er errResp
		if code := e.call(c.method, c.path, c.body, &er); code != c.code || er.Error.Code != c.errCode || er.Error.Message == "" {
			t.Errorf("%s %s: %d %+v, want %d %s", c.method, c.path, code, er, c.code, c.errCode)
		}
	}
}

func TestRoutineToggleSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	e, stop := startRoutineAPI(t, path)
	var r core.Routine
	if code := e.call("POST", "/api/v1/routines/daily-digest/enable", "", &r); code != 200 || !r.Enabled {
		t.Fatalf("enable: %d %+v", code, r)
	}
	stop()
	e, _ = startRoutineAPI(t, path) // the same file is synced again at start
	if code := e.call("GET", "/api/v1/routines/daily-digest", "", &r); code != 200 || !r.Enabled || r.ConfigEnabled {
		t.Fatalf("after a restart: %d enabled=%t config_enabled=%t; want the API's enable kept", code, r.Enabled, r.ConfigEnabled)
	}
}

// webhookWithSecret is a deliver_to whose URL lets anyone who reads it post.
const webhookWithSecret = "webhook:https://hooks.example.com/services/T0/B0/s3cretPath?token=s3cretQuery"

// A webhook's URL is an admin's to read: keys below admin see its scheme
// and host (MCP: TestRoutinesAndSessions).
func TestRoutineWebhookSecretsAreAdminsOnly(t *testing.T) {
	const viewerKey, operatorKey = "viewer-key-0123456789abcdef", "operator-key-0123456789abcdef"
	e, _ := startRoutineAPI(t, filepath.Join(t.TempDir(), "db.sqlite"),
		api.Key{Name: "root", Secret: adminKey, Role: approval.RoleAdmin},
		api.Key{Name: "ops", Secret: operatorKey, Role: approval.RoleOperator},
		api.Key{Name: "watch", Secret: viewerKey, Role: approval.RoleViewer})
	for _, c := range []struct{ key, want string }{
		{viewerKey, "webhook:https://hooks.example.com/…"},
		{operatorKey, "webhook:https://hooks.example.com/…"},
		{adminKey, webhookWithSecret},
	} {
		e.key = c.key
		var one core.Routine
		var page core.Page[core.Routine]
		if code := e.call("GET", "/api/v1/routines/daily-digest", "", &one); code != 200 || one.DeliverTo != c.want {
			t.Errorf("GET the routine: %d, deliver_to %q, want %q", code, one.DeliverTo, c.want)
		}
		if code := e.call("GET", "/api/v1/routines", "", &page); code != 200 || len(page.Items) == 0 || page.Items[0].DeliverTo != c.want {
			t.Errorf("GET the list: %d, %+v, want deliver_to %q", code, page.Items, c.want)
		}
	}
}

// An admin key limited to some agents changes only their routines: it
// neither edits, toggles nor deletes another agent's, nor creates one for
// it; what it tried changed nothing.
func TestRoutineRoutesKeepToTheKeysAgents(t *testing.T) {
	const billingAdmin = "billing-admin-key-0123456789"
	e, _ := startRoutineAPI(t, filepath.Join(t.TempDir(), "db.sqlite"),
		api.Key{Name: "root", Secret: adminKey, Role: approval.RoleAdmin},
		api.Key{Name: "billing-admin", Secret: billingAdmin, Role: approval.RoleAdmin, Agents: []string{"billing"}})
	e.key = adminKey
	if code := e.call("POST", "/api/v1/routines", `{"id":"nightly","agent":"demo","schedule":"@every 1h","input":"Check costs."}`, nil); code != 201 {
		t.Fatalf("create as the unlimited admin: %d", code)
	}
	e.key = billingAdmin
	for _, c := range []struct{ method, path, body string }{
		{"PATCH", "/api/v1/routines/heartbeat", `{"input":"deploy everything to production"}`},
		{"PATCH", "/api/v1/routines/nightly", `{"input":"deploy everything to production"}`},
		{"POST", "/api/v1/routines/heartbeat/disable", ""},
		{"POST", "/api/v1/routines/daily-digest/enable", ""},
		{"DELETE", "/api/v1/routines/nightly", ""},
		{"POST", "/api/v1/routines", `{"id":"evil","agent":"demo","schedule":"@every 1m","input":"deploy everything"}`},
	} {
		var er errResp
		if code := e.call(c.method, c.path, c.body, &er); code != 403 || er.Error.Code != "forbidden" {
			t.Errorf("%s %s as a key limited to billing: %d %+v, want 403 forbidden", c.method, c.path, code, er)
		}
	}
	e.key = adminKey
	var r core.Routine
	if e.call("GET", "/api/v1/routines/heartbeat", "", &r); r.Input != "Are you there?" || !r.Enabled {
		t.Errorf("heartbeat after the refusals: %+v", r)
	}
	if e.call("GET", "/api/v1/routines/daily-digest", "", &r); r.Enabled {
		t.Errorf("daily-digest after the refusals: %+v", r)
	}
	if code := e.call("GET", "/api/v1/routines/nightly", "", &r); code != 200 || r.Input != "Check costs." {
		t.Errorf("nightly after the refusals: %d %+v", code, r)
	}
	if code := e.call("GET", "/api/v1/routines/evil", "", nil); code != 404 {
		t.Errorf("evil after the refusals: %d, want 404", code)
	}
}

func TestRoutineCreateEditDelete(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	e, stop := startRoutineAPI(t, path)
	start := time.Now()

	var r core.Routine
	code := e.call("POST", "/api/v1/routines", `{"id":"nightly","agent":"demo","schedule":"@every 1h","input":"Check costs.","missed":"once"}`, &r)
	if code != 201 || r.ID != "nightly" || r.Source != core.SourceAPI || !r.Enabled || r.Timezone != "UTC" ||
		r.DeliverTo != "none" || r.Missed != core.MissedOnce || r.MaxFailures != 5 || r.NextFireAt == nil ||
		r.NextFireAt.Sub(start) < 59*time.Minute || r.NextFireAt.Sub(start) > 61*time.Minute {
		t.Fatalf("create: %d %+v, want the routine with the file's defaults, next fire in 1h", code, r)
	}
	if code := e.call("GET", "/api/v1/routines/heartbeat", "", &r); code != 200 || r.Source != core.SourceConfig {
		t.Errorf("config routine: %d source %q, want config", code, r.Source)
	}

	// PATCH: a new schedule takes a new due time; enabled toggles.
	code = e.call("PATCH", "/api/v1/routines/nightly", `{"schedule":"@every 3h","input":"Check costs and quotas."}`, &r)
	if code != 200 || r.Schedule != "@every 3h" || r.Input != "Check costs and quotas." || r.Missed != core.MissedOnce ||
		r.NextFireAt == nil || r.NextFireAt.Sub(start) < 179*time.Minute {
		t.Fatalf("patch schedule: %d %+v", code, r)
	}
	if code := e.call("PATCH", "/api/v1/routines/nightly", `{"enabled":false}`, &r); code != 200 || r.Enabled || r.NextFireAt != nil {
		t.Errorf("patch enabled=false: %d %+v", code, r)
	}
	// A config routine edited through the API keeps the edit across a
	// restart while the file's definition of it does not change.
	if code := e.call("PATCH", "/api/v1/routines/heartbeat", `{"input":"Still there?","max_failures":-1}`, &r); code != 200 ||
		r.Input != "Still there?" || r.MaxFailures != 0 || r.Source != core.SourceConfig {
		t.Errorf("patch a config routine: %d %+v", code, r)
	}
	stop()
	e, _ = startRoutineAPI(t, path)
	if code := e.call("GET", "/api/v1/routines/nightly", "", &r); code != 200 || r.Source != core.SourceAPI || r.Enabled || r.Schedule != "@every 3h" {
		t.Errorf("API routine after a restart: %d %+v, want it kept as edited", code, r)
	}
	if code := e.call("GET", "/api/v1/routines/heartbeat", "", &r); code != 200 || r.Input != "Still there?" {
		t.Errorf("edited config routine after a restart with the same file: %d input %q, want the edit kept", code, r.Input)
	}

	for _, c := range []struct {
		method, path, body string
		code               int
		errCode            string
		want               []string
	}{
		{"POST", "/api/v1/routines", `{"id":"nightly","agent":"demo","schedule":"@daily","input":"x"}`, 409, "routine_exists",
			[]string{"PATCH /api/v1/routines/nightly"}},
		{"POST", "/api/v1/routines", `{"id":"heartbeat","agent":"demo","schedule":"@daily","input":"x"}`, 409, "routine_exists",
			[]string{"defined in the config file", "PATCH /api/v1/routines/heartbeat"}},
		{"POST", "/api/v1/routines", `{"id":"Bad","agent":"x","schedule":"61 * * * *","deliver_to":"email:a","missed":"all","max_failures":-2}`, 400, "bad_request",
			[]string{"id: routine names use lowercase", `agent: unknown agent "x" (defined agents: demo)`, `schedule: "61 * * * *": `,
				"input: required", "deliver_to: must be slack:<channel>", `missed: must be skip or once, got "all"`, "max_failures: must be -1"}},
		{"POST", "/api/v1/routines", `{"id":"x","agent":"demo","schedule":"@daily","input":"x","timezone":"Mars/Olympus","deliver_to":"webhook:/hook"}`, 400, "bad_request",
			[]string{`timezone: unknown IANA zone "Mars/Olympus"`, "deliver_to: webhook: must be an absolute http(s) URL"}},
		{"POST", "/api/v1/routines", `{"id":"x","agent":"demo","cron":"@daily"}`, 400, "bad_request", []string{"unknown field"}},
		{"POST", "/api/v1/routines", `{"id":"x","agent":"demo","schedule":"@daily","input":"x","deliver_to":"webhook:http://169.254.169.254/latest"}`, 400, "bad_request",
			[]string{"deliver_to: 169.254.169.254 is an internal or reserved address", "egress.allow"}},
		{"PATCH", "/api/v1/routines/nightly", `{"deliver_to":"webhook:http://127.0.0.1:6379/"}`, 400, "bad_request",
			[]string{"deliver_to: 127.0.0.1:6379 is an internal", "egress.allow"}},
		{"PATCH", "/api/v1/routines/nightly", `{"schedule":"@every 10ms"}`, 400, "bad_request",
			[]string{`schedule: "@every 10ms": @every needs a duration of at least 1s`}},
		{"PATCH", "/api/v1/routines/nightly", `{"agent":"nope"}`, 400, "bad_request", []string{`agent: unknown agent "nope"`}},
		{"PATCH", "/api/v1/routines/nope", `{"input":"x"}`, 404, "not_found", nil},
		{"DELETE", "/api/v1/routines/heartbeat", "", 409, "routine_in_config", []string{"remove heartbeat from the file"}},
		{"DELETE", "/api/v1/routines/nope", "", 404, "not_found", nil},
	} {
		var er errResp
		code := e.call(c.method, c.path, c.body, &er)
		if code != c.code || er.Error.Code != c.errCode || er.Error.Message == "" {
			t.Errorf("%s %s %s: %d %+v, want %d %s", c.method, c.path, c.body, code, er, c.code, c.errCode)
		}
		for _, w := range c.want {
			if !strings.Contains(er.Error.Message, w) {
				t.Errorf("%s %s %s: message %q lacks %q", c.method, c.path, c.body, er.Error.Message, w)
			}
		}
	}
	if code := e.call("GET", "/api/v1/routines/nightly", "", &r); code != 200 || r.Schedule != "@every 3h" {
		t.Errorf("a refused patch changed the routine: %+v", r)
	}

	// callers: only the keys (people, channels) named may trigger it. The
	// open gateway's caller is key:local.
	if code := e.call("PATCH", "/api/v1/routines/nightly", `{"callers":["key:ci","channel:slack:C_OPS"]}`, &r); code != 200 ||
		len(r.Callers) != 2 || r.Callers[0] != "key:ci" {
		t.Fatalf("patch callers: %d %+v", code, r.Callers)
	}
	var refused errResp
	if code := e.call("POST", "/api/v1/routines/nightly/trigger", `{}`, &refused); code != 403 ||
		!strings.Contains(refused.Error.Message, "not among the routine's callers") {
		t.Errorf("trigger by a non-caller: %d %+v, want 403", code, refused)
	}
	if code := e.call("PATCH", "/api/v1/routines/nightly", `{"callers":["bad caller"]}`, &refused); code != 400 ||
		!strings.Contains(refused.Error.Message, "callers[0]") {
		t.Errorf("patch a caller with a space: %d %+v, want 400 naming callers[0]", code, refused)
	}
	if code := e.call("PATCH", "/api/v1/routines/nightly", `{"callers":["role:admin"]}`, &r); code != 200 {
		t.Fatalf("patch callers to role:admin: %d", code)
	}
	var run core.Run
	if code := e.call("POST", "/api/v1/routines/nightly/trigger", `{}`, &run); code != 202 || run.StartedBy != "key:local" {
		t.Errorf("trigger by a caller: %d %+v, want 202 started by key:local", code, run)
	}
	var audit core.Page[core.AuditEntry]
	e.call("GET", "/api/v1/audit?action=routine.trigger&target=nightly", "", &audit)
	if len(audit.Items) != 2 || audit.Items[0].Outcome != core.AuditOK || audit.Items[1].Outcome != core.AuditDenied {
		t.Errorf("trigger audit = %+v, want the trigger after the refusal", audit.Items)
	}

	if code := e.call("DELETE", "/api/v1/routines/nightly", "", nil); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	var er errResp
	if code := e.call("GET", "/api/v1/routines/nightly", "", &er); code != 404 {
		t.Errorf("get after delete: %d", code)
	}
}

func TestRoutineRoutesNeedTheService(t *testing.T) {
	e := newEnv(t)
	var er errResp
	if code := e.call("GET", "/api/v1/routines", "", &er); code != 404 || er.Error.Code != "not_found" {
		t.Errorf("without routines: %d %+v", code, er)
	}
}

// A trigger retried with its Idempotency-Key answers with the run the
// first one started: the routine fires once.
func TestRoutineTriggerIdempotencyKey(t *testing.T) {
	e, _ := startRoutineAPI(t, filepath.Join(t.TempDir(), "db.sqlite"), api.Key{Name: "root", Secret: adminKey, Role: approval.RoleAdmin})
	e.key = adminKey
	trigger := func(idem string, replayed bool) core.Run {
		t.Helper()
		code, h, b := e.postIdempotent("/api/v1/routines/heartbeat/trigger", idem, `{"input":"only prod"}`)
		var run core.Run
		if err := json.Unmarshal(b, &run); err != nil || code != http.StatusAccepted {
			t.Fatalf("trigger: %d %s, %v", code, b, err)
		}
		if got := h.Get("Idempotent-Replayed") == "true"; got != replayed {
			t.Errorf("trigger with key %s: Idempotent-Replayed %q, want it %v", idem, h.Get("Idempotent-Replayed"), replayed)
		}
		return run
	}
	first, again, other := trigger("nightly-retry-1", false), trigger("nightly-retry-1", true), trigger("nightly-retry-2", false)
	if again.ID != first.ID || other.ID == first.ID {
		t.Errorf("runs %s, %s, %s; want the retry to answer with the first, another key to start its own", first.ID, again.ID, other.ID)
	}
	// The same key for another extra input, or none, is refused: it was
	// used for another request.
	for _, body := range []string{`{"input":"only staging"}`, `{"input":"prod"}`, ``} {
		code, _, b := e.postIdempotent("/api/v1/routines/heartbeat/trigger", "nightly-retry-1", body)
		var er errResp
		if json.Unmarshal(b, &er); code != http.StatusUnprocessableEntity || er.Error.Code != "idempotency_key_reused" || !strings.Contains(er.Error.Message, first.ID) {
			t.Errorf("the key again with %q: %d %s, want 422 idempotency_key_reused naming %s", body, code, b, first.ID)
		}
	}
	// Without extra input, a retry is answered with the first run too.
	var plain [2]core.Run
	for i := range plain {
		code, _, b := e.postIdempotent("/api/v1/routines/heartbeat/trigger", "plain-1", "")
		if json.Unmarshal(b, &plain[i]); code != http.StatusAccepted {
			t.Fatalf("trigger without input: %d %s", code, b)
		}
	}
	if plain[1].ID != plain[0].ID {
		t.Errorf("trigger without input twice with one key: runs %s and %s, want the same", plain[0].ID, plain[1].ID)
	}
	var h core.Page[core.RoutineEntry]
	if e.call("GET", "/api/v1/routines/heartbeat/runs", "", &h); len(h.Items) != 3 {
		t.Errorf("history has %d fires, want 3", len(h.Items))
	}
}
