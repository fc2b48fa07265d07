package main

// End-to-end tests: they build the real agentgate binary, run `agentgate
// serve` as a subprocess against a fake OpenAI server and a recording tool
// server, and drive it over HTTP (and through the CLI) as a user would.
// Crash tests kill the process with SIGKILL and restart it on the same data
// directory.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core/model/fakeopenai"
	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/test/testbin"
)

func TestMain(m *testing.M) {
	mcptest.Main() // the binary is also the MCP server of the MCP tests
	testbin.Main(m)
}

// binary returns the agentgate binary, built once with the go command that
// runs this test; it skips in -short mode.
func binary(t *testing.T) string { return testbin.Binary(t) }

// Polling: every check of "has X happened yet" polls with this bound.
const (
	pollEvery   = 20 * time.Millisecond
	pollTimeout = 30 * time.Second
)

// eventually polls cond until it holds, failing with its last state after
// pollTimeout.
func eventually(t *testing.T, what string, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last state: %s", pollTimeout, what, state)
		}
		<-tick.C
	}
}

// cleanEnv is the test's environment without any agentgate or provider
// settings, plus extra.
func cleanEnv(extra ...string) []string { return testbin.CleanEnv(extra...) }

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// gateway is one `agentgate serve` process (and its restarts).
type gateway struct {
	t       *testing.T
	bin     string
	base    string // http://127.0.0.1:port, for clients; set by each start
	dataDir string
	env     []string        // the process's whole environment, also for cli
	out     *testbin.Buffer // stdout and stderr of every start
	proc    *testbin.Process
}

type gatewayOptions struct {
	config string   // --config; empty = none (the built-in demo agent)
	listen string   // --addr; empty = a loopback port the system picks
	env    []string // extra environment, KEY=VALUE
}

// startGateway starts `agentgate serve` on a fresh data dir and waits until
// it is ready. The process is killed when the test ends.
func startGateway(t *testing.T, o gatewayOptions) *gateway {
	t.Helper()
	g := &gateway{t: t, bin: binary(t), dataDir: t.TempDir(), env: cleanEnv(o.env...)}
	args := []string{"--data-dir", g.dataDir}
	if o.config != "" {
		args = append(args, "--config", o.config)
	}
	g.proc = testbin.New(t, testbin.Options{Bin: g.bin, Addr: o.listen, Args: args, Env: g.env,
		ReadyTimeout: pollTimeout})
	g.out = g.proc.Out
	t.Cleanup(func() {
		g.kill()
		if t.Failed() {
			t.Logf("agentgate output:\n%s", g.out.String())
		}
	})
	g.start()
	return g
}

// start runs the binary (again, on the same data dir and address) and waits
// for GET /readyz to answer 200.
func (g *gateway) start() {
	g.t.Helper()
	if err := g.proc.Start(); err != nil {
		g.t.Fatal(err)
	}
	g.base = g.proc.Base()
}

// kill sends SIGKILL (a crash) and waits for the process to be gone.
func (g *gateway) kill() { g.proc.Kill() }

var httpClient = &http.Client{Timeout: 90 * time.Second} // > the API's 60s ?wait=true cap

// do sends a JSON request and returns the status and the body.
func (g *gateway) do(method, path string, body any) (int, []byte) {
	g.t.Helper()
	return doHTTP(g.t, method, g.base+path, body, nil)
}

func doHTTP(t *testing.T, method, url string, body any, header http.Header) (int, []byte) {
	t.Helper()
	status, b, err := tryHTTP(method, url, body, header)
	if err != nil {
		t.Fatal(err)
	}
	return status, b
}

// tryHTTP is doHTTP for goroutines other than the test's.
func tryHTTP(method, url string, body any, header http.Header) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: read body: %w", method, url, err)
	}
	return resp.StatusCode, b, nil
}

// json sends a request, checks the status and decodes the answer into out.
func (g *gateway) json(method, path string, body any, want int, out any) {
	g.t.Helper()
	status, b := g.do(method, path, body)
	if status != want {
		g.t.Fatalf("%s %s: status %d, want %d; body: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			g.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

// The API's JSON as a client sees it (field names are part of the contract).

type runJSON struct {
	ID               string         `json:"id"`
	SessionID        string         `json:"session_id"`
	AgentID          string         `json:"agent_id"`
	Status           string         `json:"status"`
	Input            string         `json:"input"`
	Output           string         `json:"output"`
	Error            string         `json:"error"`
	PendingApprovals []approvalJSON `json:"pending_approvals"`
}

type approvalJSON struct {
	ID         string          `json:"id"`
	RunID      string          `json:"run_id"`
	ToolCallID string          `json:"tool_call_id"`
	Tool       string          `json:"tool"`
	Origin     string          `json:"origin"`
	Arguments  json.RawMessage `json:"arguments"`
	Status     string          `json:"status"`
	DecidedBy  string          `json:"decided_by"`
	DecidedVia string          `json:"decided_via"`
	Reason     string          `json:"reason"`
}

type pageJSON[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}

type errorJSON struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Status string `json:"status"`
}

// submit starts a run and waits (?wait=true) until it is settled.
func (g *gateway) submit(agent string, body map[string]string) runJSON {
	g.t.Helper()
	var run runJSON
	g.json("POST", "/api/v1/agents/"+agent+"/runs?wait=true", body, http.StatusOK, &run)
	return run
}

func (g *gateway) run(id string) runJSON {
	g.t.Helper()
	var run runJSON
	g.json("GET", "/api/v1/runs/"+id, nil, http.StatusOK, &run)
	return run
}

func (g *gateway) approval(id string) approvalJSON {
	g.t.Helper()
	var a approvalJSON
	g.json("GET", "/api/v1/approvals/"+id, nil, http.StatusOK, &a)
	return a
}

// waitRun polls the run until it has status want; a run that settles in
// another terminal status fails at once.
func (g *gateway) waitRun(id, want string) runJSON {
	g.t.Helper()
	var run runJSON
	eventually(g.t, fmt.Sprintf("run %s to be %s", id, want), func() (bool, string) {
		run = g.run(id)
		if run.Status != want && (run.Status == "completed" || run.Status == "failed" || run.Status == "cancelled") {
			g.t.Fatalf("run %s is %s, want %s: %s", id, run.Status, want, asJSON(run))
		}
		return run.Status == want, asJSON(run)
	})
	return run
}

// decide posts a decision and returns the status and the body.
func (g *gateway) decide(id, decision, reason string) (int, []byte) {
	g.t.Helper()
	return g.do("POST", "/api/v1/approvals/"+id+"/decision", map[string]string{"decision": decision, "reason": reason})
}

// onlyPending returns the run's single pending approval.
func onlyPending(t *testing.T, run runJSON) approvalJSON {
	t.Helper()
	if run.Status != "paused" || len(run.PendingApprovals) != 1 {
		t.Fatalf("run %s: want paused with exactly one pending approval, got %s with %d: %s",
			run.ID, run.Status, len(run.PendingApprovals), asJSON(run))
	}
	return run.PendingApprovals[0]
}

// asJSON shows v in failure messages.
func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("not JSON: %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("not JSON: %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// toolRequest is one call the tool server received.
type toolRequest struct {
	Method string
	Path   string
	Key    string // Idempotency-Key
	Body   []byte
}

// toolServer is the deploy endpoint: it records every request and answers
// with toolResponse, except those hold picks, which it keeps open until the
// client goes away or the test ends.
type toolServer struct {
	URL string

	mu       sync.Mutex
	requests []toolRequest
	hold     func(toolRequest) bool
	held     chan toolRequest
	release  chan struct{}
}

// toolResponse is what the deploy endpoint answers.
const toolResponse = `{"deployment":"dep-42","status":"deployed"}`

func newToolServer(t *testing.T) *toolServer {
	ts := &toolServer{held: make(chan toolRequest, 16), release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := toolRequest{Method: r.Method, Path: r.URL.Path, Key: r.Header.Get("Idempotency-Key"), Body: body}
		ts.mu.Lock()
		ts.requests = append(ts.requests, req)
		hold := ts.hold != nil && ts.hold(req)
		ts.mu.Unlock()
		if hold {
			ts.held <- req
			select {
			case <-r.Context().Done():
			case <-ts.release:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, toolResponse)
	}))
	ts.URL = srv.URL + "/deploy"
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(ts.release) }) // runs before srv.Close
	return ts
}

func (r toolRequest) String() string {
	return fmt.Sprintf("%s %s Idempotency-Key=%q %s", r.Method, r.Path, r.Key, r.Body)
}

func (ts *toolServer) Requests() []toolRequest {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]toolRequest(nil), ts.requests...)
}

// exampleConfig writes examples/agentgate.yaml with the deploy tool pointed
// at toolURL and, when set, another approval timeout.
func exampleConfig(t *testing.T, toolURL, approvalTimeout string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "agentgate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	replace := func(old, new string) {
		if !strings.Contains(cfg, old) {
			t.Fatalf("examples/agentgate.yaml no longer contains %q; update this test", old)
		}
		cfg = strings.Replace(cfg, old, new, 1)
	}
	replace("http://127.0.0.1:9999/deploy", toolURL)
	if approvalTimeout != "" {
		replace("timeout: 15m", "timeout: "+approvalTimeout)
	}
	return writeFile(t, "agentgate.yaml", cfg)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startModel starts a fake OpenAI server with script.
func startModel(t *testing.T, script func(fakeopenai.Request) fakeopenai.Reply) (*fakeopenai.Server, string) {
	t.Helper()
	m := fakeopenai.New()
	m.Script(script)
	base := m.Start()
	t.Cleanup(m.Close)
	return m, base
}

// deployArgs are the arguments the fake model sends for "deploy SVC to ENV".
func deployArgs(userText string) string {
	f := strings.Fields(userText)
	svc, env := "web", "production"
	if len(f) >= 4 {
		svc, env = f[1], f[3]
	}
	return fmt.Sprintf(`{"service":%q,"env":%q}`, svc, env)
}

// deployScript calls deploy for "deploy SVC to ENV" until a tool message is
// in the conversation, then answers "Deployed SVC to ENV." (or, when the
// tool did not run, "Not deployed: <tool message>").
func deployScript(req fakeopenai.Request) fakeopenai.Reply {
	user := req.LastUserText()
	for _, m := range req.Messages {
		if m.Role == "tool" {
			if strings.Contains(m.Content, "did not run") {
				return fakeopenai.Reply{Text: "Not deployed: " + m.Content}
			}
			f := strings.Fields(user)
			if len(f) >= 4 {
				return fakeopenai.Reply{Text: fmt.Sprintf("Deployed %s to %s.", f[1], f[3])}
			}
			return fakeopenai.Reply{Text: "Deployed."}
		}
	}
	return fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{Name: "deploy", Arguments: deployArgs(user)}}}
}

// toolMessage returns the request's tool message, failing unless there is
// exactly one.
func toolMessage(t *testing.T, req fakeopenai.Request) fakeopenai.Message {
	t.Helper()
	var out []fakeopenai.Message
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out = append(out, m)
		}
	}
	if len(out) != 1 {
		t.Fatalf("model request has %d tool messages, want 1: %s", len(out), asJSON(req.Messages))
	}
	return out[0]
}

// deployGateway starts the example config against a new fake model and tool
// server.
func deployGateway(t *testing.T, approvalTimeout string) (*gateway, *fakeopenai.Server, *toolServer) {
	t.Helper()
	tools := newToolServer(t)
	model, modelURL := startModel(t, deployScript)
	g := startGateway(t, gatewayOptions{
		config: exampleConfig(t, tools.URL, approvalTimeout),
		env:    []string{"OPENAI_BASE_URL=" + modelURL, "OPENAI_API_KEY=sk-test"},
	})
	return g, model, tools
}

func TestE2EApprove(t *testing.T) {
	t.Parallel()
	g, model, tools := deployGateway(t, "")
	const args = `{"service":"web","env":"production"}`

	run := g.submit("ops", map[string]string{"input": "deploy web to production"})
	a := onlyPending(t, run)
	if a.Tool != "deploy" || a.Status != "pending" || a.RunID != run.ID || !sameJSON(t, a.Arguments, []byte(args)) {
		t.Fatalf("pending approval = %s, want deploy %s for run %s", asJSON(a), args, run.ID)
	}
	if n := len(model.Requests()); n != 1 {
		t.Fatalf("model called %d times before the decision, want 1", n)
	}
	if n := len(tools.Requests()); n != 0 {
		t.Fatalf("tool called %d times before the decision, want 0", n)
	}

	status, body := g.decide(a.ID, "approve", "")
	if status != http.StatusOK {
		t.Fatalf("approve: status %d: %s", status, body)
	}
	run = g.waitRun(run.ID, "completed")
	if run.Output != "Deployed web to production." {
		t.Errorf("output = %q, want the model's text", run.Output)
	}

	calls := tools.Requests()
	if len(calls) != 1 {
		t.Fatalf("tool got %d requests, want 1: %s", len(calls), calls)
	}
	if c := calls[0]; c.Method != "POST" || !sameJSON(t, c.Body, []byte(args)) || c.Key != run.ID+":"+a.ToolCallID {
		t.Errorf("tool request = %s %s key %q, want POST %s key %q", c.Method, c.Body, c.Key, args, run.ID+":"+a.ToolCallID)
	}

	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model called %d times, want 2", len(reqs))
	}
	tm := toolMessage(t, reqs[1])
	if tm.Content != toolResponse || tm.ToolCallID != a.ToolCallID {
		t.Errorf("second model request's tool message = %s, want content %s for call %s", asJSON(tm), toolResponse, a.ToolCallID)
	}

	status, body = g.decide(a.ID, "deny", "too late")
	var e errorJSON
	if err := json.Unmarshal(body, &e); err != nil || status != http.StatusConflict || e.Error.Code != "approval_not_pending" || e.Status != "approved" {
		t.Errorf("second decision: %d %s, want 409 approval_not_pending (status approved)", status, body)
	}
	if got := g.approval(a.ID); got.Status != "approved" {
		t.Errorf("approval after a second decision = %s, want approved", got.Status)
	}
}

func TestE2EDeny(t *testing.T) {
	t.Parallel()
	g, model, tools := deployGateway(t, "")

	run := g.submit("ops", map[string]string{"input": "deploy web to production"})
	a := onlyPending(t, run)
	status, body := g.decide(a.ID, "deny", "change freeze until Monday")
	if status != http.StatusOK {
		t.Fatalf("deny: status %d: %s", status, body)
	}
	var d approvalJSON
	if err := json.Unmarshal(body, &d); err != nil || d.Status != "denied" || d.Reason != "change freeze until Monday" {
		t.Errorf("deny answer = %s, want the denied approval with its reason", body)
	}
	run = g.waitRun(run.ID, "completed")
	if n := len(tools.Requests()); n != 0 {
		t.Errorf("tool called %d times after a denial, want 0", n)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model called %d times, want 2", len(reqs))
	}
	tm := toolMessage(t, reqs[1])
	if !strings.Contains(tm.Content, "denied") || !strings.Contains(tm.Content, "change freeze until Monday") || tm.ToolCallID != a.ToolCallID {
		t.Errorf("tool message after deny = %s, want it to say denied with the reason", asJSON(tm))
	}
	if !strings.HasPrefix(run.Output, "Not deployed:") {
		t.Errorf("output = %q, want the model's answer to the denial", run.Output)
	}
}

func TestE2EApprovalExpires(t *testing.T) {
	t.Parallel()
	g, model, tools := deployGateway(t, "2s")

	run := g.submit("ops", map[string]string{"input": "deploy web to production"})
	a := onlyPending(t, run)
	eventually(t, "the approval to expire", func() (bool, string) {
		got := g.approval(a.ID)
		return got.Status == "expired", asJSON(got)
	})
	run = g.waitRun(run.ID, "completed")
	if n := len(tools.Requests()); n != 0 {
		t.Errorf("tool called %d times after expiry, want 0", n)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model called %d times, want 2", len(reqs))
	}
	if tm := toolMessage(t, reqs[1]); !strings.Contains(tm.Content, "expired") {
		t.Errorf("tool message after expiry = %q, want it to say expired", tm.Content)
	}

	status, body := g.decide(a.ID, "approve", "")
	var e errorJSON
	if err := json.Unmarshal(body, &e); err != nil || status != http.StatusConflict || e.Error.Code != "approval_not_pending" || e.Status != "expired" {
		t.Errorf("decision after expiry: %d %s, want 409 approval_not_pending (status expired)", status, body)
	}
	if n := len(tools.Requests()); n != 0 {
		t.Errorf("tool called %d times after a late approval, want 0", n)
	}
}

func TestE2ECrashResumes(t *testing.T) {
	t.Parallel()
	g, model, tools := deployGateway(t, "")

	// Run B waits for a decision when the gateway dies.
	runB := g.submit("ops", map[string]string{"input": "deploy web to staging"})
	aprB := onlyPending(t, runB)

	// Run A's approved tool call is in flight when the gateway dies.
	runA := g.submit("ops", map[string]string{"input": "deploy api to production"})
	aprA := onlyPending(t, runA)
	keyA := runA.ID + ":" + aprA.ToolCallID
	argsA := deployArgs(runA.Input)
	held := 0
	tools.mu.Lock()
	tools.hold = func(r toolRequest) bool { // the first call of run A, whatever its key
		if held == 0 && json.Valid(r.Body) && sameJSON(t, r.Body, []byte(argsA)) {
			held++
			return true
		}
		return false
	}
	tools.mu.Unlock()
	if status, body := g.decide(aprA.ID, "approve", ""); status != http.StatusOK {
		t.Fatalf("approve A: status %d: %s", status, body)
	}
	select {
	case <-tools.held:
	case <-time.After(pollTimeout):
		t.Fatalf("run A's tool call never arrived; run: %s", asJSON(g.run(runA.ID)))
	}
	g.kill() // kill -9 with A's tool call in flight and B paused

	g.start()
	runA = g.waitRun(runA.ID, "completed")
	if runA.Output != "Deployed api to production." {
		t.Errorf("run A output = %q", runA.Output)
	}

	var aprs pageJSON[approvalJSON]
	g.json("GET", "/api/v1/approvals?run_id="+runA.ID, nil, http.StatusOK, &aprs)
	if len(aprs.Items) != 1 || aprs.Items[0].ID != aprA.ID || aprs.Items[0].Status != "approved" {
		t.Errorf("run A's approvals after restart = %s, want only %s, approved", asJSON(aprs.Items), aprA.ID)
	}

	// B survived the crash: still paused on the same, still pending approval.
	if got := g.run(runB.ID); got.Status != "paused" || len(got.PendingApprovals) != 1 || got.PendingApprovals[0].ID != aprB.ID {
		t.Fatalf("run B after restart = %s, want paused on approval %s", asJSON(got), aprB.ID)
	}
	var all pageJSON[approvalJSON]
	g.json("GET", "/api/v1/approvals?run_id="+runB.ID, nil, http.StatusOK, &all)
	if len(all.Items) != 1 || all.Items[0].Status != "pending" {
		t.Fatalf("run B's approvals after restart = %s, want just the one pending", asJSON(all.Items))
	}
	if status, body := g.decide(aprB.ID, "approve", ""); status != http.StatusOK {
		t.Fatalf("approve B: status %d: %s", status, body)
	}
	runB = g.waitRun(runB.ID, "completed")
	if runB.Output != "Deployed web to staging." {
		t.Errorf("run B output = %q", runB.Output)
	}

	// Tools: A was called again with the same key after the crash, B once;
	// each call id arrived with one key only.
	keyB := runB.ID + ":" + aprB.ToolCallID
	want := map[string]string{deployArgs("deploy api to production"): keyA, deployArgs("deploy web to staging"): keyB}
	count := map[string]int{}
	for _, r := range tools.Requests() {
		matched := false
		for args, key := range want {
			if sameJSON(t, r.Body, []byte(args)) {
				matched = true
				count[key]++
				if r.Key != key {
					t.Errorf("tool request %s arrived with key %q, want %q", r.Body, r.Key, key)
				}
			}
		}
		if !matched {
			t.Errorf("unexpected tool request %s (key %q)", r.Body, r.Key)
		}
	}
	if count[keyA] != 2 || count[keyB] != 1 {
		t.Errorf("tool requests per key = %v, want %s twice (before and after the crash) and %s once", count, keyA, keyB)
	}

	// The model answered each step once: no prompt replay after the crash.
	perRun := map[string][]fakeopenai.Request{}
	for _, r := range model.Requests() {
		perRun[r.LastUserText()] = append(perRun[r.LastUserText()], r)
	}
	for _, in := range []string{runA.Input, runB.Input} {
		reqs := perRun[in]
		if len(reqs) != 2 {
			t.Errorf("model called %d times for %q, want 2 (one tool call, one answer)", len(reqs), in)
			continue
		}
		for i, r := range reqs {
			tools := 0
			for _, m := range r.Messages {
				if m.Role == "tool" {
					tools++
				}
			}
			if tools != i {
				t.Errorf("model request %d for %q has %d tool messages, want %d", i+1, in, tools, i)
			}
		}
	}
	if len(perRun) != 2 {
		t.Errorf("model requests for %d different inputs, want 2", len(perRun))
	}
}

func TestE2ESessionRunsInOrder(t *testing.T) {
	t.Parallel()
	firstCall := make(chan struct{})
	releaseFirst := make(chan struct{})
	var once sync.Once
	model, modelURL := startModel(t, func(req fakeopenai.Request) fakeopenai.Reply {
		held := false
		once.Do(func() { held = true })
		if held {
			close(firstCall)
			<-releaseFirst
		}
		return fakeopenai.Reply{Text: "answer to " + req.LastUserText()}
	})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(releaseFirst) }) }
	t.Cleanup(release) // before the model server closes
	cfg := writeFile(t, "chat.yaml", `agents:
  chat:
    model:
      provider: openai
      name: gpt-4o-mini
      base_url: ${OPENAI_BASE_URL}
`)
	g := startGateway(t, gatewayOptions{config: cfg, env: []string{"OPENAI_BASE_URL=" + modelURL}})

	const session = "ses-e2e"
	inputs := []string{"what is 1+1", "and what is 2+2"}
	type result struct {
		status int
		body   []byte
		err    error
	}
	results := make(chan result, len(inputs))
	for _, in := range inputs {
		go func() {
			status, body, err := tryHTTP("POST", g.base+"/api/v1/agents/chat/runs?wait=true",
				map[string]string{"input": in, "session_id": session}, nil)
			results <- result{status, body, err}
		}()
	}

	// While the first run's model call is held, the second run waits its turn.
	select {
	case <-firstCall:
	case <-time.After(pollTimeout):
		t.Fatal("no model call")
	}
	var runs pageJSON[runJSON]
	eventually(t, "both runs to be created", func() (bool, string) {
		status, body := g.do("GET", "/api/v1/sessions/"+session+"/runs", nil)
		if status != http.StatusOK {
			return false, fmt.Sprintf("%d %s", status, body)
		}
		runs = pageJSON[runJSON]{}
		if err := json.Unmarshal(body, &runs); err != nil {
			t.Fatal(err)
		}
		return len(runs.Items) == 2, string(body)
	})
	first, second := runs.Items[0], runs.Items[1]
	if first.Status != "running" || second.Status != "queued" {
		t.Errorf("while the first run's model call is in flight: first %s, second %s; want running and queued", first.Status, second.Status)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("model called %d times while the session's first run is in flight, want 1", n)
	}
	release()

	for range inputs {
		r := <-results
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("POST run: %d %s %v", r.status, r.body, r.err)
		}
	}
	for _, id := range []string{first.ID, second.ID} {
		if run := g.run(id); run.Status != "completed" || run.Output != "answer to "+run.Input || run.SessionID != session {
			t.Errorf("run %s = %s, want completed in %s answering its input", id, asJSON(run), session)
		}
	}

	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model called %d times, want 2", len(reqs))
	}
	conv := func(r fakeopenai.Request) []string {
		var out []string
		for _, m := range r.Messages {
			if m.Role == "user" || m.Role == "assistant" {
				out = append(out, m.Role+": "+m.Content)
			}
		}
		return out
	}
	if got, want := conv(reqs[0]), []string{"user: " + first.Input}; !reflect.DeepEqual(got, want) {
		t.Errorf("first model request = %q, want %q", got, want)
	}
	want := []string{"user: " + first.Input, "assistant: answer to " + first.Input, "user: " + second.Input}
	if got := conv(reqs[1]); !reflect.DeepEqual(got, want) {
		t.Errorf("second model request = %q, want %q", got, want)
	}
}

// cli runs a client command of the binary against g.
func (g *gateway) cli(args ...string) (string, error) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, g.bin, append(args, "--server", g.base)...)
	cmd.Env = g.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestE2EDefaultDemo(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gatewayOptions{})

	hello := g.submit("demo", map[string]string{"input": "hello"})
	if hello.Status != "completed" || hello.Output == "" {
		t.Fatalf("hello run = %s, want completed with an answer", asJSON(hello))
	}

	run := g.submit("demo", map[string]string{"input": "deploy web to staging"})
	a := onlyPending(t, run)
	if a.Tool != "deploy" || !sameJSON(t, a.Arguments, []byte(`{"env":"staging","service":"web"}`)) {
		t.Fatalf("pending approval = %s, want deploy {env:staging, service:web}", asJSON(a))
	}

	out, err := g.cli("approvals", "list")
	if err != nil || !strings.Contains(out, a.ID) || !strings.Contains(out, "pending") || !strings.Contains(out, "deploy") {
		t.Fatalf("agentgate approvals list: %v\n%s\nwant approval %s pending", err, out, a.ID)
	}
	out, err = g.cli("approvals", "approve", a.ID)
	if err != nil {
		t.Fatalf("agentgate approvals approve: %v\n%s", err, out)
	}
	if !strings.Contains(out, "approved") {
		t.Errorf("agentgate approvals approve printed %q, want it to say approved", out)
	}
	if got := g.approval(a.ID); got.Status != "approved" || got.DecidedVia != "cli" {
		t.Errorf("approval after the CLI = %s, want approved via cli", asJSON(got))
	}
	run = g.waitRun(run.ID, "completed")
	if !strings.Contains(run.Output, "deployed") {
		t.Errorf("output = %q, want it to mention deployed", run.Output)
	}

	out, err = g.cli("approvals", "list")
	if err != nil || strings.Contains(out, a.ID) {
		t.Errorf("agentgate approvals list after approving: %v\n%s\nwant no pending approval", err, out)
	}

	out, err = g.cli("runs", "show", run.ID)
	if err != nil {
		t.Fatalf("agentgate runs show: %v\n%s", err, out)
	}
	if !strings.Contains(out, run.ID) || !strings.Contains(out, "completed") || !strings.Contains(out, "journal:") {
		t.Errorf("agentgate runs show printed:\n%s\nwant the run, its status and its journal", out)
	}
	// The journal, in order.
	rest := out[strings.Index(out, "journal:"):]
	for _, ev := range []string{"user_message", "model_response", "approval_requested", "approval_decided", "tool_started", "tool_result", "model_response"} {
		i := strings.Index(rest, ev)
		if i < 0 {
			t.Errorf("agentgate runs show: journal lacks %s (in order):\n%s", ev, out)
			break
		}
		rest = rest[i+len(ev):]
	}
}

func TestE2EPublicAddressNeedsAPIKey(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	public := "0.0.0.0:" + port

	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--addr", public, "--data-dir", t.TempDir())
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || ctx.Err() != nil {
		t.Fatalf("serve --addr %s without API keys: err %v, want a non-zero exit; output:\n%s", public, err, out)
	}
	if !strings.Contains(string(out), "AGENTGATE_API_KEYS") {
		t.Errorf("serve --addr %s without API keys said:\n%s\nwant it to mention AGENTGATE_API_KEYS", public, out)
	}

	const key = "e2e-key-0123456789ab"
	if len(key) != 20 {
		t.Fatalf("key has %d characters", len(key))
	}
	g := startGateway(t, gatewayOptions{listen: public, env: []string{"AGENTGATE_API_KEYS=" + key}})
	for _, c := range []struct {
		name   string
		header http.Header
		want   int
	}{
		{"no key", nil, http.StatusUnauthorized},
		{"wrong key", http.Header{"Authorization": {"Bearer e2e-key-0123456789ac"}}, http.StatusUnauthorized},
		{"key", http.Header{"Authorization": {"Bearer " + key}}, http.StatusOK},
	} {
		status, body := doHTTP(t, "GET", g.base+"/api/v1/agents", nil, c.header)
		if status != c.want {
			t.Errorf("%s: GET /api/v1/agents = %d %s, want %d", c.name, status, body, c.want)
		}
		if c.want == http.StatusOK && !strings.Contains(string(body), `"demo"`) {
			t.Errorf("%s: GET /api/v1/agents = %s, want the demo agent", c.name, body)
		}
	}
	// A decision needs the key too.
	if status, body := doHTTP(t, "POST", g.base+"/api/v1/approvals/apr_x/decision", map[string]string{"decision": "approve"}, nil); status != http.StatusUnauthorized {
		t.Errorf("decision without a key = %d %s, want 401", status, body)
	}
}
