package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/metrics"
	"github.com/agentgate/agentgate/core/model/demo"
	"github.com/agentgate/agentgate/core/tool/builtin"
	"github.com/agentgate/agentgate/interfaces/api"
	"github.com/agentgate/agentgate/store/sqlite"
)

type env struct {
	t   *testing.T
	srv *httptest.Server
	key string
}

// newEnv serves the API over a real SQLite store, engine and the demo agent.
func newEnv(t *testing.T, keys ...string) *env {
	t.Helper()
	return newEnvWith(t, nil, keys...)
}

// newEnvWith is newEnv with edit applied to the API's config.
func newEnvWith(t *testing.T, edit func(*api.Config), keys ...string) *env {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{Logger: log, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	agents := demoAgents()
	hub := &core.Hub{}
	m := metrics.New(db, db, log)
	eng, err := core.NewEngine(core.EngineConfig{Store: db, Queue: db, Agents: agents, Hub: hub, Logger: log, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	aps := approval.New(approval.Config{Store: db, Hub: hub, Logger: log, Observer: m})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Start(ctx) }()
	var ks []api.Key
	for i, k := range keys {
		role := approval.RoleAdmin
		if i > 0 { // newEnv(t, admin, viewer, operator, approver)
			role = approval.Role(i)
		}
		ks = append(ks, api.Key{Name: fmt.Sprintf("k%d", i), Secret: k, Role: role})
	}
	cfg := api.Config{Engine: eng, Store: db, Approvals: aps, Keys: ks, Logger: log,
		Metrics: m.Handler(), PollInterval: 50 * time.Millisecond}
	if edit != nil {
		edit(&cfg)
	}
	srv := httptest.NewServer(api.New(cfg))
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		db.Close()
	})
	e := &env{t: t, srv: srv}
	if len(keys) > 0 {
		e.key = keys[0]
	}
	return e
}

// call sends a request and decodes the JSON answer into out (if not nil).
func (e *env) call(method, path, body string, out any) int {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if e.key != "" {
		req.Header.Set("Authorization", "Bearer "+e.key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// postIdempotent POSTs body to path with e's key and an Idempotency-Key.
func (e *env) postIdempotent(path, idem, body string) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), "POST", e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idem)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

type runResp struct {
	core.Run
	PendingApprovals []core.Approval `json:"pending_approvals"`
}

type errResp struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Status string `json:"status"`
}

func TestDemoChatAndApproval(t *testing.T) {
	e := newEnv(t)
	var run runResp
	if code := e.call("POST", "/api/v1/agents/demo/runs?wait=true", `{"input":"hello there","user_id":"ana"}`, &run); code != 200 {
		t.Fatalf("status %d", code)
	}
	if run.Status != core.RunCompleted || !strings.Contains(run.Output, "demo agent") || run.UserID != "ana" {
		t.Fatalf("run = %+v", run)
	}

	var paused runResp
	body := `{"input":"deploy web to staging","session_id":"` + run.SessionID + `","user_id":"ana"}`
	if code := e.call("POST", "/api/v1/agents/demo/runs?wait=true", body, &paused); code != 200 {
		t.Fatalf("status %d", code)
	}
	if paused.Status != core.RunPaused || len(paused.PendingApprovals) != 1 {
		t.Fatalf("run = %+v", paused)
	}
	a := paused.PendingApprovals[0]
	if a.Tool != "deploy" || string(a.Arguments) != `{"env":"staging","service":"web"}` || a.Status != core.ApprovalPending {
		t.Fatalf("approval = %+v", a)
	}

	var list core.Page[core.Approval]
	e.call("GET", "/api/v1/approvals?status=pending", "", &list)
	if len(list.Items) != 1 || list.Items[0].ID != a.ID {
		t.Fatalf("pending list = %+v", list)
	}

	var decided core.Approval
	if code := e.call("POST", "/api/v1/approvals/"+a.ID+"/decision", `{"decision":"approve","decided_by":"bob"}`, &decided); code != 200 {
		t.Fatalf("decision status %d", code)
	}
	if decided.Status != core.ApprovalApproved || decided.DecidedBy != "key:local" || decided.DecidedVia != "api" { // the body's decided_by is ignored
		t.Fatalf("decided = %+v", decided)
	}
	var again errResp
	if code := e.call("POST", "/api/v1/approvals/"+a.ID+"/decision", `{"decision":"deny"}`, &again); code != 409 {
		t.Fatalf("second decision status %d", code)
	}
	if again.Error.Code != "approval_not_pending" || again.Status != "approved" {
		t.Fatalf("second decision = %+v", again)
	}
	for _, q := range []string{"?status=all", ""} { // every status, as the CLI's --status all
		if e.call("GET", "/api/v1/approvals"+q, "", &list); len(list.Items) != 1 || list.Items[0].Status != core.ApprovalApproved {
			t.Errorf("GET /api/v1/approvals%s = %+v, want the approved one", q, list.Items)
		}
	}

	done := e.waitRun(paused.ID)
	if done.Status != core.RunCompleted || !strings.Contains(done.Output, "deployed") {
		t.Fatalf("run after approval = %+v", done)
	}
	var runs core.Page[core.Run]
	e.call("GET", "/api/v1/sessions/"+run.SessionID+"/runs", "", &runs)
	if len(runs.Items) != 2 || runs.Items[0].ID != run.ID || runs.Items[1].ID != paused.ID {
		t.Fatalf("session runs = %+v", runs.Items)
	}
	var sessions core.Page[core.Session]
	e.call("GET", "/api/v1/sessions?user_id=ana", "", &sessions)
	if len(sessions.Items) != 1 || sessions.Items[0].ID != run.SessionID {
		t.Fatalf("sessions of ana = %+v", sessions.Items)
	}
}

// waitRun polls GET /runs/{id} until the run is completed, failed or cancelled.
func (e *env) waitRun(id string) runResp {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var r runResp
		e.call("GET", "/api/v1/runs/"+id, "", &r)
		if r.Status.Terminal() || time.Now().After(deadline) {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStreamingRun(t *testing.T) {
	e := newEnv(t)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", e.srv.URL+"/api/v1/agents/demo/runs", strings.NewReader(`{"input":"hi"}`))
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var events []string
	var last string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			if ev != "delta" || len(events) == 0 || events[len(events)-1] != "delta" {
				events = append(events, ev)
			}
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			last = d
		}
	}
	got := strings.Join(events, ",")
	// Deltas may arrive before or after the journal entries that frame them,
	// but they do arrive, and the journal and the run come in order.
	framing := strings.Join(slices.DeleteFunc(slices.Clone(events), func(e string) bool { return e == "delta" }), ",")
	if framing != "user_message,status,model_response,status,run" || !strings.Contains(got, "delta") {
		t.Fatalf("events = %s", got)
	}
	var run runResp
	if err := json.Unmarshal([]byte(last), &run); err != nil || run.Status != core.RunCompleted {
		t.Fatalf("final event = %s (%v)", last, err)
	}
}

func TestBadRequestsSayWhatToFix(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		method, path, body string
		status             int
		code, msg          string
	}{
		{"POST", "/api/v1/agents/demo/runs", `{}`, 400, "bad_request", "input: required"},
		{"POST", "/api/v1/agents/demo/runs", `{"input":`, 400, "bad_request", "must be a JSON object"},
		{"POST", "/api/v1/agents/demo/runs", ``, 400, "bad_request", "body: required"},
		{"POST", "/api/v1/agents/demo/runs", `{"input":"x","inptu":"y"}`, 400, "bad_request", "unknown field"},
		{"POST", "/api/v1/agents/demo/runs", `{"input":"x","session_id":"has space"}`, 400, "bad_request", "session_id"},
		{"POST", "/api/v1/agents/demo/runs?wait=perhaps", `{"input":"x"}`, 400, "bad_request", "wait: must be true or false"},
		{"POST", "/api/v1/agents/nobody/runs", `{"input":"x"}`, 404, "not_found", "GET /api/v1/agents lists them"},
		{"GET", "/api/v1/runs/run_nope", ``, 404, "not_found", ""},
		{"GET", "/api/v1/approvals/apr_nope", ``, 404, "not_found", ""},
		{"POST", "/api/v1/approvals/apr_nope/decision", `{"decision":"approve"}`, 404, "not_found", ""},
		{"POST", "/api/v1/approvals/apr_nope/decision", `{"decision":"yes"}`, 400, "bad_request", `"approve" or "deny"`},
		{"GET", "/api/v1/approvals?status=maybe", ``, 400, "bad_request", "status: must be one of"},
		{"GET", "/api/v1/sessions?limit=0", ``, 400, "bad_request", "limit"},
		{"GET", "/api/v1/sessions?cursor=abc", ``, 400, "bad_request", "pass next_cursor"},
		{"GET", "/api/v1/nothing", ``, 404, "not_found", "no route"},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path+" "+tc.body, func(t *testing.T) {
			var er errResp
			if code := e.call(tc.method, tc.path, tc.body, &er); code != tc.status {
				t.Fatalf("status %d, want %d (%+v)", code, tc.status, er)
			}
			if er.Error.Code != tc.code || !strings.Contains(er.Error.Message, tc.msg) {
				t.Fatalf("error = %+v, want code %s containing %q", er.Error, tc.code, tc.msg)
			}
		})
	}
}

func TestCancelRun(t *testing.T) {
	e := newEnv(t)
	var paused runResp
	e.call("POST", "/api/v1/agents/demo/runs?wait=true", `{"input":"deploy api to production"}`, &paused)
	if paused.Status != core.RunPaused {
		t.Fatalf("run = %+v", paused)
	}
	var cancelled runResp
	if code := e.call("POST", "/api/v1/runs/"+paused.ID+"/cancel", `{"reason":"wrong service"}`, &cancelled); code != 200 || cancelled.Status != core.RunCancelled {
		t.Fatalf("cancel: %d %+v", code, cancelled)
	}
	var a core.Approval
	e.call("GET", "/api/v1/approvals/"+paused.PendingApprovals[0].ID, "", &a)
	if a.Status != core.ApprovalCancelled {
		t.Fatalf("approval after cancel = %s", a.Status)
	}
	var er errResp
	if code := e.call("POST", "/api/v1/runs/"+paused.ID+"/cancel", ``, &er); code != 409 || er.Error.Code != "run_finished" {
		t.Fatalf("second cancel: %d %+v", code, er)
	}
	var dec errResp
	if code := e.call("POST", "/api/v1/approvals/"+a.ID+"/decision", `{"decision":"approve"}`, &dec); code != 409 || dec.Status != "cancelled" {
		t.Fatalf("decision on cancelled approval: %d %+v", code, dec)
	}
}

func TestAPIKeys(t *testing.T) {
	e := newEnv(t, "k-0123456789abcdef")
	for _, auth := range []string{"", "Bearer wrong", "k-0123456789abcdef", "Basic k-0123456789abcdef"} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/api/v1/agents", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("Authorization %q: status %d, want 401", auth, resp.StatusCode)
		}
	}
	var agents core.Page[map[string]any]
	if code := e.call("GET", "/api/v1/agents", "", &agents); code != 200 || len(agents.Items) != 1 || agents.Items[0]["id"] != "demo" {
		t.Fatalf("with key: %d %+v", code, agents)
	}
	resp, err := http.Get(e.srv.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz without key: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestPagination(t *testing.T) {
	e := newEnv(t)
	for range 5 {
		e.call("POST", "/api/v1/agents/demo/runs", `{"input":"hi","user_id":"pat"}`, nil)
	}
	seen := map[string]bool{}
	cursor := ""
	pages := 0
	for {
		var p core.Page[core.Session]
		e.call("GET", "/api/v1/sessions?user_id=pat&limit=2&cursor="+cursor, "", &p)
		pages++
		for _, s := range p.Items {
			if seen[s.ID] {
				t.Fatalf("session %s listed twice", s.ID)
			}
			seen[s.ID] = true
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != 5 || pages != 3 {
		t.Fatalf("%d sessions over %d pages, want 5 over 3", len(seen), pages)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	var run runResp
	e.call("POST", "/api/v1/agents/demo/runs?wait=true", `{"input":"hi"}`, &run)
	resp, err := http.Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`agentgate_runs{status="completed"} 1`, `agentgate_queue_depth `, `agentgate_approval_resume_seconds_bucket`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("metrics lack %q", want)
		}
	}
}

// demoAgents is the demo agent with a deploy tool that needs approval.
func demoAgents() map[string]*core.Agent {
	return map[string]*core.Agent{"demo": {
		ID: "demo", Description: "demo agent", Provider: "demo", ModelName: "demo", Model: demo.Model{},
		Tools: []core.AgentTool{{
			Spec: core.ToolSpec{Name: "deploy", Description: "Deploy", Parameters: json.RawMessage(
				`{"type":"object","properties":{"service":{"type":"string"},"env":{"type":"string","enum":["staging","production"]}},"required":["service","env"]}`)},
			Tool:     builtin.DemoDeploy{},
			Approval: core.ApprovalRule{Required: true},
		}},
	}}
}

// getRunCounter counts the API's reads of runs.
type getRunCounter struct {
	core.Store
	n atomic.Int64
}

func (c *getRunCounter) GetRun(ctx context.Context, id string) (core.Run, error) {
	c.n.Add(1)
	return c.Store.GetRun(ctx, id)
}

// ?wait=true answers with the run the engine finished or paused, as the
// engine's update carries it: no read back from the store.
func TestWaitAnswersWithoutReadingTheRunBack(t *testing.T) {
	var reads *getRunCounter
	e := newEnvWith(t, func(c *api.Config) {
		reads = &getRunCounter{Store: c.Store}
		c.Store, c.PollInterval = reads, time.Hour // no poll: only the engine's updates wake the wait
	})
	for _, input := range []string{"hello there", "deploy web to staging"} {
		var run runResp
		if code := e.call("POST", "/api/v1/agents/demo/runs?wait=true", `{"input":"`+input+`"}`, &run); code != 200 ||
			!settledStatus(run.Status) || run.LastSeq == 0 {
			t.Fatalf("%q: %d %+v", input, code, run)
		}
	}
	if n := reads.n.Load(); n != 0 {
		t.Errorf("the API read runs %d times to answer two waits, want 0", n)
	}
}

func settledStatus(s core.RunStatus) bool { return s == core.RunCompleted || s == core.RunPaused }

// An API run never joins a chat conversation's session: its approval would
// be posted to the chat and decided there by the conversation's members,
// and its input would become part of what the chat said.
func TestRunRefusedInAChatSession(t *testing.T) {
	var eng *core.Engine
	e := newEnvWith(t, func(c *api.Config) { eng = c.Engine }, adminKey)
	chatRun, err := eng.Submit(t.Context(), core.SubmitRequest{AgentID: "demo", Input: "hello", UserID: "U1", Type: core.RunTypeChat,
		Binding: core.Binding{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "1700000000.000100"}})
	if err != nil {
		t.Fatal(err)
	}
	var er errResp
	code := e.call("POST", "/api/v1/agents/demo/runs", `{"input":"deploy web to production","session_id":"`+chatRun.SessionID+`"}`, &er)
	if code != 409 || er.Error.Code != "chat_session" || !strings.Contains(er.Error.Message, "omit session_id") {
		t.Fatalf("a run in a Slack conversation's session: %d %+v, want 409 chat_session", code, er)
	}
	var runs core.Page[core.Run]
	if code := e.call("GET", "/api/v1/sessions/"+chatRun.SessionID+"/runs", "", &runs); code != 200 || len(runs.Items) != 1 {
		t.Fatalf("the session's runs: %d %+v, want the chat's one", code, runs)
	}
	var run runResp
	if code := e.call("POST", "/api/v1/agents/demo/runs?wait=true", `{"input":"hello","session_id":"my-own-session"}`, &run); code != 200 || run.SessionID != "my-own-session" {
		t.Fatalf("a run in a new session of the caller's naming: %d %+v", code, run)
	}
}

// Nor does it create a session named as the gateway names a conversation's
// or a routine's, before the chat or the routine does: a session keeps the
// binding it was created with, so the caller's would take the place of a
// Telegram user's private chat (its history, its approvals no longer
// decided from the chat).
func TestRunRefusedInAGatewayNamedSession(t *testing.T) {
	var eng *core.Engine
	e := newEnvWith(t, func(c *api.Config) { eng = c.Engine }, adminKey)
	for _, id := range []string{
		"demo:telegram::123456789:", "demo:slack:T1:D0123:", "demo:discord::42:", "demo:routine:nightly",
		"demo:routine:nightly:slack:C1", "telegram_0123456789abcdef0123456789abcdef",
	} {
		var er errResp
		code := e.call("POST", "/api/v1/agents/demo/runs", `{"input":"deploy web to production","session_id":"`+id+`"}`, &er)
		if code != 409 || er.Error.Code != "chat_session" || !strings.Contains(er.Error.Message, "omit session_id") {
			t.Errorf("a run in new session %s: %d %+v, want 409 chat_session", id, code, er)
		}
		if code := e.call("GET", "/api/v1/sessions/"+id, "", nil); code != 404 {
			t.Errorf("session %s after the refusal: %d, want 404 (not created)", id, code)
		}
	}
	// A routine's session, once its schedule made it, stays the routine's.
	if _, err := eng.Submit(t.Context(), core.SubmitRequest{AgentID: "demo", SessionID: "demo:routine:weekly", Input: "weekly report",
		Type: core.RunTypeRoutine}); err != nil {
		t.Fatal(err)
	}
	var er errResp
	if code := e.call("POST", "/api/v1/agents/demo/runs", `{"input":"hello","session_id":"demo:routine:weekly"}`, &er); code != 409 || er.Error.Code != "chat_session" {
		t.Errorf("a run in a routine's session: %d %+v, want 409 chat_session", code, er)
	}
	for _, id := range []string{"demo:review:42", "slack-thread-42", "routine_nightly"} {
		var run runResp
		if code := e.call("POST", "/api/v1/agents/demo/runs", `{"input":"hello","session_id":"`+id+`"}`, &run); code != 202 || run.SessionID != id {
			t.Errorf("a run in new session %s: %d %+v, want 202", id, code, run)
		}
	}
}

// A POST retried with its Idempotency-Key (a client that timed out, a
// proxy that retried) answers with the run the first one made: nothing
// runs twice. The key is the caller's own: another key's same value starts
// its own run; the same value for another request is refused.
func TestIdempotencyKey(t *testing.T) {
	const admin, operator = "admin-key-0123456789abcdef", "operator-key-0123456789abcdef"
	e := newEnv(t, admin, "viewer-key-0123456789abcdef", operator)
	post := func(key, idem, body string) (int, string, runResp, errResp) {
		t.Helper()
		e.key = key
		code, h, b := e.postIdempotent("/api/v1/agents/demo/runs", idem, body)
		var run runResp
		var er errResp
		_ = json.Unmarshal(b, &run)
		_ = json.Unmarshal(b, &er)
		return code, h.Get("Idempotent-Replayed"), run, er
	}
	deploy := `{"input":"deploy web to production"}`
	code, _, first, _ := post(admin, "deploy-2026-12-07", deploy)
	if code != http.StatusAccepted || first.ID == "" {
		t.Fatalf("first POST: %d %+v", code, first)
	}
	code, replayed, again, _ := post(admin, "deploy-2026-12-07", deploy)
	if code/100 != 2 || again.ID != first.ID || replayed != "true" {
		t.Errorf("retried POST: %d, run %s (replayed %q); want the first run %s", code, again.ID, replayed, first.ID)
	}
	if code, _, _, er := post(admin, "deploy-2026-12-07", `{"input":"deploy api to production"}`); code != http.StatusUnprocessableEntity || er.Error.Code != "idempotency_key_reused" {
		t.Errorf("the key for another request: %d %+v, want 422 idempotency_key_reused", code, er)
	}
	if code, _, other, _ := post(operator, "deploy-2026-12-07", deploy); code != http.StatusAccepted || other.ID == first.ID {
		t.Errorf("another API key's same value: %d, run %s; want a run of its own", code, other.ID)
	}
	if code, _, _, er := post(admin, "two words", deploy); code != http.StatusBadRequest || !strings.Contains(er.Error.Message, "Idempotency-Key") {
		t.Errorf("a key with a space: %d %+v, want 400 naming Idempotency-Key", code, er)
	}
}
