package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/routine"
	"github.com/agentgate/agentgate/interfaces/api"
	"github.com/agentgate/agentgate/store/sqlite"
)

// fuzzAPI is the API as newEnv and startRoutineAPI serve it (open, so
// every caller is key:local, an admin; a real SQLite store, engine, demo
// agent with the deploy tool, approvals and the routines of routineDefs),
// with a run paused on a pending approval. ids replaces RUN_ID, SESSION_ID
// and APPROVAL_ID in seeds with that run's.
type fuzzAPI struct {
	h   http.Handler
	ids *strings.Replacer
}

func newFuzzAPI(f *testing.F) *fuzzAPI {
	f.Helper()
	log := slog.New(slog.DiscardHandler)
	db, err := sqlite.Open(f.Context(), filepath.Join(f.TempDir(), "db.sqlite"), sqlite.Options{Logger: log, PollInterval: 20 * time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	rt, err := routine.New(routine.Config{Store: db, Runs: db, Logger: log, Agents: []string{"demo"}})
	if err != nil {
		f.Fatal(err)
	}
	if err := rt.Sync(f.Context(), append([]core.RoutineDef(nil), routineDefs...)); err != nil {
		f.Fatal(err)
	}
	agents := demoAgents()
	hub := &core.Hub{}
	eng, err := core.NewEngine(core.EngineConfig{Store: db, Queue: db, Agents: agents, Hub: hub, Logger: log,
		OnFinish: rt.OnFinish, Handlers: rt.Handlers()})
	if err != nil {
		f.Fatal(err)
	}
	aps := approval.New(approval.Config{Store: db, Hub: hub, Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Start(ctx) }()
	f.Cleanup(func() {
		cancel()
		<-done
		db.Close()
	})
	a := &fuzzAPI{h: api.New(api.Config{Engine: eng, Store: db, Approvals: aps, Logger: log, Routines: rt, Jobs: db,
		MaxWait: 2 * time.Second, PollInterval: 20 * time.Millisecond})}
	w := a.serve(f.Context(), "POST", "/api/v1/agents/demo/runs", "wait=true", []byte(`{"input":"deploy web to staging"}`))
	var paused api.RunView
	if err := json.Unmarshal(w.Body.Bytes(), &paused); err != nil || paused.Status != core.RunPaused || len(paused.PendingApprovals) != 1 {
		f.Fatalf("paused run: %d %s (%v)", w.Code, w.Body, err)
	}
	a.ids = strings.NewReplacer("RUN_ID", paused.ID, "SESSION_ID", paused.SessionID, "APPROVAL_ID", paused.PendingApprovals[0].ID)
	return a
}

// serve sends one request to the handler (not over HTTP: a panic reaches
// the fuzzer instead of net/http's recovery).
func (a *fuzzAPI) serve(ctx context.Context, method, path, query string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequestWithContext(ctx, method, "/", bytes.NewReader(body))
	req.URL.Path, req.URL.RawQuery = path, query
	req.Host, req.RemoteAddr = "127.0.0.1:8080", "127.0.0.1:50000" // a local client of the open API
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, req)
	return w
}

// checkAnswer asserts what every API answer keeps: no 5xx; a 4xx is a JSON
// error with a code and a message; a 2xx other than 204 is JSON.
func checkAnswer(t *testing.T, what string, w *httptest.ResponseRecorder) {
	t.Helper()
	body := w.Body.Bytes()
	switch {
	case w.Code >= 500:
		t.Fatalf("%s: %d %s", what, w.Code, body)
	case w.Code >= 400:
		var er struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") || json.Unmarshal(body, &er) != nil ||
			er.Error.Code == "" || strings.TrimSpace(er.Error.Message) == "" {
			t.Fatalf("%s: %d %q (%s): not a JSON error with a code and a message", what, w.Code, body, w.Header().Get("Content-Type"))
		}
	case w.Code < 200 || w.Code > 299 || w.Code == http.StatusNoContent:
		// ServeMux redirects a path with . or .. to its clean form (307).
	case !json.Valid(body):
		t.Fatalf("%s: %d %q: not JSON", what, w.Code, body)
	}
}

// bodyRoutes are the routes that take a JSON body.
var bodyRoutes = []struct{ method, path string }{
	{"POST", "/api/v1/agents/demo/runs"},
	{"POST", "/api/v1/approvals/APPROVAL_ID/decision"},
	{"POST", "/api/v1/runs/RUN_ID/cancel"},
	{"POST", "/api/v1/routines"},
	{"PATCH", "/api/v1/routines/daily-digest"},
	{"POST", "/api/v1/routines/heartbeat/trigger"},
}

// FuzzAPIBodies sends fuzzed JSON bodies to every route that reads one:
// start a run, decide an approval, cancel a run, create, edit and trigger a
// routine. Whatever the body, the answer is never a 5xx or a panic, and a
// refusal is a JSON error that says what is wrong (checkAnswer).
func FuzzAPIBodies(f *testing.F) {
	seeds := [][]string{
		{`{"input":"hello there","user_id":"ana"}`, `{"input":"deploy web to staging","session_id":"SESSION_ID"}`, `{}`, `{"input":`, ``,
			`{"input":"x","inptu":"y"}`, `{"input":"x","session_id":"has space"}`, `{"input":"x","session_id":"ses:` + strings.Repeat("a", 124) + `"}`,
			`{"input":" \u0000 "}`, `{"input":"a"} {"input":"b"}`, `[{"input":"x"}]`, `{"input":1e999}`, `null`},
		{`{"decision":"approve","decided_by":"bob"}`, `{"decision":"deny","reason":"not on Friday"}`, `{"decision":"yes"}`,
			`{"decision":"approve","args_sha256":"0000"}`, `{"decision":"approve","via":"slack","decided_by":"U1"}`, `{"decision":null}`},
		{`{"reason":"wrong service"}`, ``, `{"by":"someone"}`, `{"reason":7}`},
		{`{"id":"nightly","agent":"demo","schedule":"0 2 * * *","timezone":"UTC","input":"Report.","deliver_to":"webhook:https://example.com/hook"}`,
			`{"id":"x","agent":"demo","schedule":"@every 1s","input":"x","deliver_to":"slack:C0123"}`,
			`{"id":"bad id!","agent":"nobody","schedule":"61 * * * *","timezone":"Mars/Base","deliver_to":"pager:x"}`,
			`{"id":"daily-digest","agent":"demo","schedule":"@hourly","input":"dup"}`, `{"missed":"sometimes","max_failures":-1}`},
		{`{"schedule":"@every 30m"}`, `{"enabled":true}`, `{"timezone":"Europe/Berlin","deliver_to":"none"}`, `{"schedule":""}`,
			`{"deliver_to":"webhook:ftp://x"}`, `{"input":""}`},
		{`{"input":"only prod"}`, ``, `{"user_id":"eve"}`, `{"input":["x"]}`},
	}
	for i, bodies := range seeds {
		for _, b := range bodies {
			f.Add(uint8(i), []byte(b))
		}
	}
	a := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := bodyRoutes[int(route)%len(bodyRoutes)]
		path := a.ids.Replace(r.path)
		body = []byte(a.ids.Replace(string(body)))
		stop := time.AfterFunc(20*time.Second, func() { panic(fmt.Sprintf("%s %s still running after 20s on %q", r.method, path, body)) }).Stop
		defer stop()
		w := a.serve(t.Context(), r.method, path, "", body)
		checkAnswer(t, fmt.Sprintf("%s %s %q", r.method, path, body), w)
	})
}

// queryRoutes are the list and read routes; ID is the fuzzed id when it is
// not empty, else the paused run's (session's, approval's).
var queryRoutes = []string{
	"/api/v1/sessions", "/api/v1/approvals", "/api/v1/audit", "/api/v1/routines", "/api/v1/agents",
	"/api/v1/sessions/ID/runs", "/api/v1/runs/ID/events", "/api/v1/routines/ID/runs",
	"/api/v1/runs/ID", "/api/v1/sessions/ID", "/api/v1/approvals/ID", "/api/v1/routines/ID", "/api/v1/jobs",
}

// FuzzAPIQueries sends fuzzed query strings (cursor, limit, status, since,
// after, user_id, …) and path ids to the list and read routes: never a 5xx
// or a panic, and a refusal is a JSON error that says what is wrong.
func FuzzAPIQueries(f *testing.F) {
	for i := range queryRoutes {
		for _, q := range []string{"", "limit=2", "limit=0", "limit=501", "limit=-1", "limit=99999999999999999999", "cursor=abc",
			"cursor=MjAyNi0xMi0wMlQxNjowMDowMFp8c2VzXzE%3D", "cursor=%00", "limit=1&cursor=daily-digest",
			"status=pending", "status=maybe", "status=all", "run_id=RUN_ID&status=approved", "user_id=ana&agent_id=demo",
			"since=2026-12-03T09:00:00Z", "since=yesterday", "principal=key:local&action=cancel&route=api", "after=3", "after=-1",
			"after=9223372036854775807&limit=5000", "limit=1;limit=2", "%zz", "cursor=" + strings.Repeat("x", 600)} {
			f.Add(uint8(i), q, "")
		}
	}
	for i := range queryRoutes {
		for _, id := range []string{".", "nope", "heartbeat", "daily-digest", "%", "a/b", "run_\x00", strings.Repeat("z", 300)} {
			f.Add(uint8(i), "", id)
		}
	}
	a := newFuzzAPI(f)
	real := map[string]string{"sessions": "SESSION_ID", "runs": "RUN_ID", "approvals": "APPROVAL_ID", "routines": "heartbeat"}
	f.Fuzz(func(t *testing.T, route uint8, query, id string) {
		path := queryRoutes[int(route)%len(queryRoutes)]
		if strings.Contains(path, "/ID") {
			if id == "" {
				id = real[strings.Split(path, "/")[3]]
			}
			path = strings.Replace(path, "ID", url.PathEscape(a.ids.Replace(id)), 1)
			if u, err := url.PathUnescape(path); err == nil {
				path = u // as net/http hands the handler r.URL.Path: decoded
			}
		}
		query = a.ids.Replace(query)
		stop := time.AfterFunc(20*time.Second, func() { panic(fmt.Sprintf("GET %s?%s still running after 20s", path, query)) }).Stop
		defer stop()
		w := a.serve(t.Context(), "GET", path, query, nil)
		checkAnswer(t, fmt.Sprintf("GET %q?%q", path, query), w)
	})
}
