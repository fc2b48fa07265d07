package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/lease/leasetest"
	"github.com/agentgate/agentgate/core/model/demo"
	"github.com/agentgate/agentgate/core/routine"
	"github.com/agentgate/agentgate/core/tool/builtin"
	"github.com/agentgate/agentgate/interfaces/api"
	"github.com/agentgate/agentgate/interfaces/mcp"
	"github.com/agentgate/agentgate/store/sqlite"
)

const testKey = "test-key-0123456789abcdef"

// billingKey is a viewer key limited to the billing agent (not demo).
const billingKey = "billing-key-0123456789abcdef"

// viewerKey is a viewer key of every agent; billingOpsKey an operator key
// limited to the billing agent.
const (
	viewerKey     = "viewer-key-0123456789abcdef"
	billingOpsKey = "billing-ops-0123456789abcdef"
)

// keyName is how decisions made with testKey are recorded.
var keyName = "key:" + api.KeyName(testKey)

// gateway is the REST API with /mcp behind one API key, over a real SQLite
// store, engine, approval service, routine scheduler and the demo agent.
type gateway struct {
	t     *testing.T
	srv   *httptest.Server
	db    *sqlite.DB
	aps   *approval.Service
	eng   *core.Engine
	clock *leasetest.Clock
}

func newGateway(t *testing.T) *gateway {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	clk := leasetest.NewClock()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{Logger: log, Clock: clk, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	agents := demoAgents()
	rt, err := routine.New(routine.Config{Store: db, Runs: db, Logger: log, Clock: clk, Agents: []string{"demo"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Sync(t.Context(), []core.RoutineDef{{ID: "digest", AgentID: "demo", Schedule: "0 9 * * *", Timezone: "UTC",
		Input: "Summarize the deploys.", DeliverTo: digestWebhook, Enabled: true, Missed: core.MissedSkip, MaxFailures: 5}}); err != nil {
		t.Fatal(err)
	}
	hub := &core.Hub{}
	eng, err := core.NewEngine(core.EngineConfig{Store: db, Queue: db, Agents: agents, Hub: hub, Clock: clk, Logger: log,
		OnFinish: rt.OnFinish, Handlers: rt.Handlers()})
	if err != nil {
		t.Fatal(err)
	}
	aps := approval.New(approval.Config{Store: db, Hub: hub, Clock: clk, Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Start(ctx) }()
	h := mcp.Handler(mcp.Config{Engine: eng, Store: db, Approvals: aps, Routines: rt, Logger: log, Version: "test",
		Authenticated: true, PollInterval: 20 * time.Millisecond, KeepAlive: 50 * time.Millisecond})
	srv := httptest.NewServer(api.New(api.Config{Engine: eng, Store: db, Approvals: aps, Routines: rt, Keys: []api.Key{
		{Name: api.KeyName(testKey), Secret: testKey, Role: approval.RoleAdmin},
		{Name: "billing-ci", Secret: billingKey, Role: approval.RoleViewer, Agents: []string{"billing"}},
		{Name: "dashboard", Secret: viewerKey, Role: approval.RoleViewer},
		{Name: "billing-ops", Secret: billingOpsKey, Role: approval.RoleOperator, Agents: []string{"billing"}},
	},
		Logger: log, PollInterval: 20 * time.Millisecond, Protected: map[string]http.Handler{"/mcp": h}}))
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		db.Close()
	})
	return &gateway{t: t, srv: srv, db: db, aps: aps, eng: eng, clock: clk}
}

// rest calls the REST API with the key and decodes the JSON answer into out.
func (g *gateway) rest(method, path, body string, out any) int {
	g.t.Helper()
	req, err := http.NewRequestWithContext(g.t.Context(), method, g.srv.URL+path, strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			g.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// until polls f until it holds; it fails the test after 20s.
func until(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !f() {
		select {
		case <-deadline:
			t.Fatalf("gave up waiting for %s", what)
		case <-tick.C:
		}
	}
}

// pending waits for exactly one pending approval and returns it.
func (g *gateway) pending() core.Approval {
	g.t.Helper()
	var list core.Page[core.Approval]
	until(g.t, "a pending approval", func() bool {
		g.rest("GET", "/api/v1/approvals?status=pending", "", &list)
		return len(list.Items) == 1
	})
	return list.Items[0]
}

type clientOpts struct {
	legacy  bool                      // stay on the 2025 protocol (initialize handshake)
	elicit  client.ElicitationHandler // nil: the client cannot elicit
	onEvent func(mcpgo.JSONRPCNotification)
	key     string // testKey when empty
}

// connect starts an mcp-go client on t over tr.
func connect(t *testing.T, tr transport.Interface, o clientOpts) *client.Client {
	t.Helper()
	var opts []client.ClientOption
	if o.legacy {
		opts = append(opts, client.WithLegacyProtocolOnly())
	}
	if o.elicit != nil {
		opts = append(opts, client.WithElicitationHandler(o.elicit))
	}
	c := client.NewClient(tr, opts...)
	if o.onEvent != nil {
		c.OnNotification(o.onEvent)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	init := mcpgo.InitializeRequest{}
	init.Params.ClientInfo = mcpgo.Implementation{Name: "Claude Code", Version: "1.0"}
	init.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// httpClient connects an mcp-go client to the gateway's /mcp with the key.
func (g *gateway) httpClient(o clientOpts) *client.Client {
	g.t.Helper()
	key := testKey
	if o.key != "" {
		key = o.key
	}
	tr, err := transport.NewStreamableHTTP(g.srv.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))
	if err != nil {
		g.t.Fatal(err)
	}
	return connect(g.t, tr, o)
}

// call calls a tool and returns its result; a protocol error fails the test.
func call(t *testing.T, c *client.Client, name string, args map[string]any) *mcpgo.CallToolResult {
	t.Helper()
	req := mcpgo.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(t.Context(), req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(t *testing.T, res *mcpgo.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatalf("result has no content: %+v", res)
	}
	tc, ok := res.Content[0].(mcpgo.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

// structured decodes a result's structured content into out.
func structured(t *testing.T, res *mcpgo.CallToolResult, out any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", text(t, res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// A client without elicitation runs the demo agent, sees the pending
// approval, approves it with decide_approval and reads the completed run.
func TestRunApproveAndReadRun(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "2026", true: "2025"}[legacy], func(t *testing.T) {
			g := newGateway(t)
			c := g.httpClient(clientOpts{legacy: legacy})

			var agents core.Page[api.AgentView]
			structured(t, call(t, c, "list_agents", nil), &agents)
			if len(agents.Items) != 1 || agents.Items[0].ID != "demo" {
				t.Fatalf("agents = %+v", agents)
			}

			res := call(t, c, "run_agent", map[string]any{"agent": "demo", "input": "deploy web to staging"})
			var paused api.RunView
			structured(t, res, &paused)
			if paused.Status != core.RunPaused || paused.Type != core.RunTypeMCP || paused.UserID != keyName || len(paused.PendingApprovals) != 1 {
				t.Fatalf("run = %+v", paused)
			}
			a := paused.PendingApprovals[0]
			if !strings.Contains(text(t, res), a.ID) || !strings.Contains(text(t, res), "decide_approval") {
				t.Fatalf("text does not tell what to decide: %s", text(t, res))
			}

			var list core.Page[core.Approval]
			structured(t, call(t, c, "list_approvals", nil), &list)
			if len(list.Items) != 1 || list.Items[0].ID != a.ID || list.Items[0].Tool != "deploy" {
				t.Fatalf("pending approvals = %+v", list)
			}

			var decided core.Approval
			structured(t, call(t, c, "decide_approval", map[string]any{"approval_id": a.ID, "decision": "approve", "reason": "go"}), &decided)
			if decided.Status != core.ApprovalApproved || decided.DecidedBy != keyName || decided.DecidedVia != "mcp" || decided.Reason != "go" {
				t.Fatalf("decided = %+v", decided)
			}
			again := call(t, c, "decide_approval", map[string]any{"approval_id": a.ID, "decision": "deny"})
			if !again.IsError || !strings.Contains(text(t, again), "already approved") {
				t.Fatalf("second decision = %+v", again)
			}

			var run api.RunView
			until(t, "the run to complete", func() bool {
				structured(t, call(t, c, "get_run", map[string]any{"run_id": paused.ID}), &run)
				return run.Status.Terminal()
			})
			if run.Status != core.RunCompleted || !strings.Contains(run.Output, "The deploy tool returned") {
				t.Fatalf("run = %+v", run)
			}
		})
	}
}

// A client that can elicit is asked inline; its answer decides the
// approval and the run continues to its answer, in both protocol eras.
func TestRunAgentAsksTheUser(t *testing.T) {
	for _, tc := range []struct {
		name   string
		legacy bool
		answer mcpgo.ElicitationResult
		status core.ApprovalStatus
		output string
		reason string
	}{
		{"approve", false, accept("approve", ""), core.ApprovalApproved, "The deploy tool returned", ""},
		{"deny-2025", true, accept("deny", "freeze week"), core.ApprovalDenied, "did not go through", "freeze week"},
		{"decline", false, mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{Action: mcpgo.ElicitationResponseActionDecline}},
			core.ApprovalDenied, "did not go through", "declined in the MCP client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t)
			asked := &elicitor{answer: tc.answer}
			c := g.httpClient(clientOpts{legacy: tc.legacy, elicit: asked})
			var run api.RunView
			structured(t, call(t, c, "run_agent", map[string]any{"agent": "demo", "input": "deploy web to production"}), &run)
			if run.Status != core.RunCompleted || !strings.Contains(run.Output, tc.output) {
				t.Fatalf("run = %+v", run)
			}
			msgs := asked.messages()
			if len(msgs) != 1 || !strings.Contains(msgs[0], "deploy") || !strings.Contains(msgs[0], `"env":"production"`) {
				t.Fatalf("elicitations = %q", msgs)
			}
			var list core.Page[core.Approval]
			g.rest("GET", "/api/v1/approvals?run_id="+run.ID, "", &list)
			if len(list.Items) != 1 {
				t.Fatalf("approvals = %+v", list)
			}
			a := list.Items[0]
			if a.Status != tc.status || a.DecidedBy != keyName || a.DecidedVia != "mcp" || a.Reason != tc.reason {
				t.Fatalf("approval = %+v", a)
			}
		})
	}
}

func accept(decision, reason string) mcpgo.ElicitationResult {
	content := map[string]any{"decision": decision}
	if reason != "" {
		content["reason"] = reason
	}
	return mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{Action: mcpgo.ElicitationResponseActionAccept, Content: content}}
}

// elicitor answers every elicitation with answer and records its messages.
type elicitor struct {
	mu     sync.Mutex
	answer mcpgo.ElicitationResult
	asked  []string
}

func (e *elicitor) Elicit(ctx context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.asked = append(e.asked, req.Params.Message)
	a := e.answer
	return &a, nil
}

func (e *elicitor) messages() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.asked...)
}

// A user who cancels the question leaves the approval pending; run_agent
// answers with it instead of asking again.
func TestRunAgentCancelledQuestionLeavesApprovalPending(t *testing.T) {
	g := newGateway(t)
	asked := &elicitor{answer: mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{Action: mcpgo.ElicitationResponseActionCancel}}}
	c := g.httpClient(clientOpts{elicit: asked})
	res := call(t, c, "run_agent", map[string]any{"agent": "demo", "input": "deploy api to staging"})
	var run api.RunView
	structured(t, res, &run)
	if run.Status != core.RunPaused || len(run.PendingApprovals) != 1 || len(asked.messages()) != 1 {
		t.Fatalf("run = %+v, asked %d times", run, len(asked.messages()))
	}
	if !strings.Contains(text(t, res), "left pending") {
		t.Fatalf("text = %s", text(t, res))
	}
}

// run_agent reports the run's steps as progress notifications when the
// client sends a progress token.
func TestRunAgentProgress(t *testing.T) {
	g := newGateway(t)
	var mu sync.Mutex
	got := map[string][]string{} // progress messages by token
	c := g.httpClient(clientOpts{legacy: true, onEvent: func(n mcpgo.JSONRPCNotification) {
		if n.Method != string(mcpgo.MethodNotificationProgress) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		tok, _ := n.Params.AdditionalFields["progressToken"].(string)
		msg, _ := n.Params.AdditionalFields["message"].(string)
		got[tok] = append(got[tok], msg)
	}})
	// The client hands notifications to their handler on its own time and
	// may drop those still queued when the call answers (progress is best
	// effort; on a loaded machine the whole run to its pause can fit in that
	// window). So each try is a new run with its own token, and the test
	// wants one of them to show every step before the pause.
	complete := func(tok string) bool {
		mu.Lock()
		defer mu.Unlock()
		joined := strings.Join(got[tok], "|")
		for _, want := range []string{"run running", "deploy.", "model calls deploy"} {
			if !strings.Contains(joined, want) {
				return false
			}
		}
		return true
	}
	for try := range 5 {
		tok := fmt.Sprintf("tok-%d", try)
		req := mcpgo.CallToolRequest{}
		req.Params.Name = "run_agent"
		req.Params.Arguments = map[string]any{"agent": "demo", "input": "deploy web to staging"}
		req.Params.Meta = &mcpgo.Meta{ProgressToken: tok}
		if _, err := c.CallTool(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for !complete(tok) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if complete(tok) {
			return
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Fatalf("no run_agent call of 5 reported every step before its pause; progress by token: %q", got)
}

// digestWebhook is a deliver_to whose URL lets anyone who reads it post.
const digestWebhook = "webhook:http://127.0.0.1:9/hooks/s3cretPath?token=s3cretQuery"

func TestRoutinesAndSessions(t *testing.T) {
	g := newGateway(t)
	c := g.httpClient(clientOpts{})
	var routines core.Page[core.Routine]
	structured(t, call(t, c, "list_routines", nil), &routines)
	if len(routines.Items) != 1 || routines.Items[0].ID != "digest" || routines.Items[0].DeliverTo != digestWebhook {
		t.Fatalf("routines = %+v", routines)
	}
	// A webhook's URL is an admin's to read: a viewer sees its host.
	structured(t, call(t, g.httpClient(clientOpts{key: viewerKey}), "list_routines", nil), &routines)
	if len(routines.Items) != 1 || routines.Items[0].DeliverTo != "webhook:http://127.0.0.1:9/…" {
		t.Fatalf("routines as a viewer = %+v, want the webhook cut to its host", routines)
	}
	var fired core.Run
	structured(t, call(t, c, "trigger_routine", map[string]any{"routine_id": "digest", "input": "only prod"}), &fired)
	if fired.Type != core.RunTypeRoutine || fired.RoutineID != "digest" || !strings.Contains(fired.Input, "only prod") {
		t.Fatalf("fired run = %+v", fired)
	}
	if res := call(t, c, "trigger_routine", map[string]any{"routine_id": "nope"}); !res.IsError {
		t.Fatalf("unknown routine: %+v", res)
	}

	var first api.RunView
	structured(t, call(t, c, "run_agent", map[string]any{"agent": "demo", "input": "hello"}), &first)
	var second api.RunView
	structured(t, call(t, c, "run_agent", map[string]any{"agent": "demo", "input": "and again", "session_id": first.SessionID}), &second)
	if second.SessionID != first.SessionID || second.Status != core.RunCompleted {
		t.Fatalf("second run = %+v", second)
	}
	var sessions core.Page[core.Session]
	structured(t, call(t, c, "list_sessions", map[string]any{"user_id": keyName}), &sessions)
	if len(sessions.Items) != 1 || sessions.Items[0].ID != first.SessionID {
		t.Fatalf("sessions = %+v", sessions)
	}
	var msgs struct {
		Items []struct {
			Role  string `json:"role"`
			Text  string `json:"text"`
			RunID string `json:"run_id"`
		} `json:"items"`
	}
	structured(t, call(t, c, "get_session_messages", map[string]any{"session_id": first.SessionID}), &msgs)
	if len(msgs.Items) != 4 || msgs.Items[0].Text != "hello" || msgs.Items[1].Role != "assistant" || msgs.Items[1].Text != first.Output ||
		msgs.Items[2].Text != "and again" || msgs.Items[3].RunID != second.ID {
		t.Fatalf("messages = %+v", msgs.Items)
	}
	if res := call(t, c, "get_session_messages", map[string]any{"session_id": "nope"}); !res.IsError {
		t.Fatalf("unknown session: %+v", res)
	}
}

// A key limited to another agent sees none of demo's approvals, sessions,
// routines or messages through MCP.
func TestKeyLimitedToAnotherAgent(t *testing.T) {
	g := newGateway(t)
	admin := g.httpClient(clientOpts{})
	var run api.RunView
	structured(t, call(t, admin, "run_agent", map[string]any{"agent": "demo", "input": "deploy web to staging"}), &run)
	g.pending()
	c := g.httpClient(clientOpts{key: billingKey})
	for _, tool := range []string{"list_approvals", "list_sessions", "list_routines"} {
		var p core.Page[json.RawMessage]
		structured(t, call(t, c, tool, map[string]any{"limit": 1}), &p)
		if len(p.Items) != 0 || p.NextCursor != "" {
			t.Errorf("%s as the billing key: %+v, want nothing", tool, p)
		}
	}
	for tool, args := range map[string]map[string]any{
		"get_session_messages": {"session_id": run.SessionID},
		"get_run":              {"run_id": run.ID},
	} {
		if res := call(t, c, tool, args); !res.IsError || !strings.Contains(text(t, res), "limited to other agents") {
			t.Errorf("%s as the billing key: %+v, want a refusal", tool, res)
		}
	}
	// The run as a resource, and run_agent's requestState (it comes back
	// from the client) name the run directly: the same check applies.
	res, err := c.ReadResource(t.Context(), mcpgo.ReadResourceRequest{Params: mcpgo.ReadResourceParams{URI: "agentgate://runs/" + run.ID}})
	if err == nil || !strings.Contains(err.Error(), "limited to other agents") {
		t.Errorf("resource %s as the billing key: %+v, %v; want a refusal", run.ID, res, err)
	}
	// mcp-go's client sends only the state the server handed it: the
	// forged one goes through the transport.
	tr, err := transport.NewStreamableHTTP(g.srv.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + billingOpsKey}))
	if err != nil {
		t.Fatal(err)
	}
	ops := connect(t, tr, clientOpts{legacy: true})
	resp, err := tr.SendRequest(t.Context(), transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcpgo.NewRequestId(int64(99)), Method: "tools/call",
		Params: map[string]any{"name": "run_agent", "arguments": map[string]any{}, "requestState": `{"run_id":"` + run.ID + `"}`}})
	if err != nil || resp.Error != nil || !strings.Contains(string(resp.Result), "limited to other agents") || strings.Contains(string(resp.Result), "deploy web") {
		t.Errorf("run_agent with another agent's run in requestState: %+v, %v; want a refusal", resp, err)
	}
	// approval_prompt asks as the agent the client names (claude-code);
	// let in, it would wait for a decision.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	preq := mcpgo.CallToolRequest{}
	preq.Params.Name, preq.Params.Arguments = "approval_prompt", map[string]any{"tool_name": "Bash", "input": map[string]any{"command": "ls"}}
	if res, err := ops.CallTool(ctx, preq); err != nil || !res.IsError || !strings.Contains(text(t, res), "limited to other agents than claude-code") {
		t.Errorf("approval_prompt as a key limited to billing: %+v, %v; want a refusal", res, err)
	}
}

// run_agent never continues a chat conversation's session: the run's
// approvals would be posted to the chat and decided by its members.
func TestRunAgentRefusesAChatSession(t *testing.T) {
	g := newGateway(t)
	chatRun, err := g.eng.Submit(t.Context(), core.SubmitRequest{AgentID: "demo", Input: "hello", UserID: "U1", Type: core.RunTypeChat,
		Binding: core.Binding{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "1700000000.000100"}})
	if err != nil {
		t.Fatal(err)
	}
	c := g.httpClient(clientOpts{})
	res := call(t, c, "run_agent", map[string]any{"agent": "demo", "input": "deploy web to production", "session_id": chatRun.SessionID})
	if !res.IsError || !strings.Contains(text(t, res), "is a slack conversation") {
		t.Fatalf("run_agent in a Slack conversation's session: %+v, want a refusal", res)
	}
	var list core.Page[core.Approval]
	if g.rest("GET", "/api/v1/approvals?status=pending", "", &list); len(list.Items) != 0 {
		t.Fatalf("pending approvals: %+v, want none", list.Items)
	}
	// Nor does it create one before the chat does.
	res = call(t, c, "run_agent", map[string]any{"agent": "demo", "input": "hello", "session_id": "demo:telegram::123456789:"})
	if !res.IsError || !strings.Contains(text(t, res), "chat conversation's or a routine's session") {
		t.Fatalf("run_agent in a new session named as a Telegram chat's: %+v, want a refusal", res)
	}
}

// A session belongs to the API key that opened it: another key that
// learned its id (a log, a proxy) can neither answer its question about an
// approval (the decision would be recorded as the first key's) nor listen
// on it nor end it.
func TestSessionBelongsToItsKey(t *testing.T) {
	g := newGateway(t)
	seen := &sessionHeader{}
	held := &heldElicitor{asked: make(chan struct{}, 1), release: make(chan struct{})}
	tr, err := transport.NewStreamableHTTP(g.srv.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + testKey}),
		transport.WithHTTPBasicClient(&http.Client{Transport: seen}))
	if err != nil {
		t.Fatal(err)
	}
	c := connect(t, tr, clientOpts{legacy: true, elicit: held})
	var once sync.Once
	release := func() { once.Do(func() { close(held.release) }) }
	t.Cleanup(release) // before the client closes, should the test fail
	done := make(chan error, 1)
	go func() {
		req := mcpgo.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "run_agent", map[string]any{"agent": "demo", "input": "deploy web to production"}
		_, err := c.CallTool(t.Context(), req)
		done <- err
	}()
	<-held.asked
	sid := seen.get()
	if sid == "" {
		t.Fatal("the client's session has no id")
	}
	for _, key := range []string{viewerKey, billingOpsKey} {
		for id := 1; id <= 5; id++ {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"action":"accept","content":{"decision":"approve"}}}`, id)
			if code := g.raw(key, "POST", sid, body); code != http.StatusNotFound {
				t.Fatalf("an answer to session %s's question id %d with another key: %d, want 404", sid, id, code)
			}
		}
		for _, method := range []string{"GET", "DELETE"} {
			if code := g.raw(key, method, sid, ""); code != http.StatusNotFound {
				t.Fatalf("%s on session %s with another key: %d, want 404", method, sid, code)
			}
		}
	}
	if a := g.pending(); a.Status != core.ApprovalPending {
		t.Fatalf("approval after the other keys' answers: %+v", a)
	}
	// The session still works for its own key: the person answers.
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var list core.Page[core.Approval]
	g.rest("GET", "/api/v1/approvals?status=approved", "", &list)
	if len(list.Items) != 1 || list.Items[0].DecidedBy != keyName {
		t.Fatalf("approved = %+v, want one decided by %s", list.Items, keyName)
	}
}

// raw sends one request to /mcp with key and session id sid and returns
// the status.
func (g *gateway) raw(key, method, sid, body string) int {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(g.t.Context(), 10*time.Second)
	defer cancel() // a GET that was let in streams until then
	req, err := http.NewRequestWithContext(ctx, method, g.srv.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// sessionHeader records the Mcp-Session-Id the server hands out.
type sessionHeader struct {
	mu sync.Mutex
	id string
}

func (s *sessionHeader) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && resp.Header.Get("Mcp-Session-Id") != "" {
		s.mu.Lock()
		s.id = resp.Header.Get("Mcp-Session-Id")
		s.mu.Unlock()
	}
	return resp, err
}

func (s *sessionHeader) get() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// heldElicitor approves once released.
type heldElicitor struct {
	asked, release chan struct{}
}

func (e *heldElicitor) Elicit(ctx context.Context, _ mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
	e.asked <- struct{}{}
	select {
	case <-e.release:
		r := accept("approve", "")
		return &r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// approval_prompt blocks until the approval is decided through the REST API
// (or expires), then answers as Claude Code's permission prompt tool expects.
func TestApprovalPrompt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		decide func(g *gateway, a core.Approval)
		want   string
	}{
		{"allow", func(g *gateway, a core.Approval) {
			g.rest("POST", "/api/v1/approvals/"+a.ID+"/decision", `{"decision":"approve","decided_by":"bob"}`, nil)
		}, `{"behavior":"allow","updatedInput":{"command":"rm -rf build","description":"clean"}}`},
		{"deny", func(g *gateway, a core.Approval) {
			g.rest("POST", "/api/v1/approvals/"+a.ID+"/decision", `{"decision":"deny","decided_by":"bob","reason":"not on Friday"}`, nil)
		}, `{"behavior":"deny","message":"agentgate: denied by ` + api.KeyName(testKey) + ` (API key) via api: not on Friday"}`},
		{"expire", func(g *gateway, a core.Approval) {
			g.clock.Advance(16 * time.Minute)
			if n, err := g.aps.ExpireDue(g.t.Context()); err != nil || n != 1 {
				g.t.Fatalf("ExpireDue = %d, %v", n, err)
			}
		}, `{"behavior":"deny","message":"agentgate: expired: nobody decided within 15m0s"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t)
			c := g.httpClient(clientOpts{legacy: true})
			answer := make(chan *mcpgo.CallToolResult, 1)
			go func() {
				req := mcpgo.CallToolRequest{}
				req.Params.Name = "approval_prompt"
				req.Params.Arguments = map[string]any{"tool_name": "Bash", "tool_use_id": "toolu_01",
					"input": map[string]any{"command": "rm -rf build", "description": "clean"}}
				res, err := c.CallTool(t.Context(), req)
				if err != nil {
					t.Error(err)
				}
				answer <- res
			}()
			a := g.pending()
			if a.Tool != "Bash" || string(a.Arguments) != `{"command":"rm -rf build","description":"clean"}` || a.RequestedBy != keyName || a.ToolCallID != "toolu_01" {
				t.Fatalf("approval = %+v", a)
			}
			var run core.Run
			g.rest("GET", "/api/v1/runs/"+a.RunID, "", &run)
			if run.Type != core.RunTypeExternal || run.AgentID != "claude-code" || !strings.HasPrefix(run.SessionID, "mcp-") {
				t.Fatalf("run = %+v", run)
			}
			select {
			case res := <-answer:
				t.Fatalf("approval_prompt answered before the decision: %+v", res)
			default:
			}
			tc.decide(g, a)
			res := <-answer
			if res == nil {
				t.FailNow()
			}
			if got := text(t, res); got != tc.want {
				t.Fatalf("answer = %s\nwant     %s", got, tc.want)
			}
		})
	}
}

// A repeated approval_prompt for the same tool_use_id waits on the same
// approval, which outlives a caller that stops waiting; the last caller to
// stop waiting cancels it.
func TestApprovalPromptRetryAndCancel(t *testing.T) {
	g := newGateway(t)
	args := map[string]any{"tool_name": "Edit", "tool_use_id": "toolu_02", "input": map[string]any{"file": "main.go"}}
	prompt := func(c *client.Client, ctx context.Context, progress string) (*mcpgo.CallToolResult, error) {
		req := mcpgo.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "approval_prompt", args
		if progress != "" {
			req.Params.Meta = &mcpgo.Meta{ProgressToken: progress}
		}
		return c.CallTool(ctx, req)
	}
	firstCtx, stopFirst := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() {
		_, err := prompt(g.httpClient(clientOpts{}), firstCtx, "")
		first <- err
	}()
	a := g.pending()

	waiting := make(chan struct{})
	var once sync.Once
	c2 := g.httpClient(clientOpts{legacy: true, onEvent: func(n mcpgo.JSONRPCNotification) {
		if n.Method == string(mcpgo.MethodNotificationProgress) {
			once.Do(func() { close(waiting) }) // the second call waits too
		}
	}})
	second := make(chan *mcpgo.CallToolResult, 1)
	go func() {
		res, err := prompt(c2, t.Context(), "p2")
		if err != nil {
			t.Error(err)
		}
		second <- res
	}()
	<-waiting
	stopFirst()
	if err := <-first; err == nil {
		t.Fatal("the cancelled call answered")
	}
	g.rest("POST", "/api/v1/approvals/"+a.ID+"/decision", `{"decision":"approve"}`, nil)
	if res := <-second; res == nil || text(t, res) != `{"behavior":"allow","updatedInput":{"file":"main.go"}}` {
		t.Fatalf("second call = %+v", res)
	}

	args["tool_use_id"] = "toolu_03"
	lastCtx, stopLast := context.WithCancel(t.Context())
	last := make(chan error, 1)
	go func() {
		_, err := prompt(g.httpClient(clientOpts{}), lastCtx, "")
		last <- err
	}()
	b := g.pending()
	stopLast()
	<-last
	until(t, "the approval to be cancelled", func() bool {
		var got core.Approval
		g.rest("GET", "/api/v1/approvals/"+b.ID, "", &got)
		return got.Status == core.ApprovalCancelled
	})
}

func TestMCPNeedsAValidKey(t *testing.T) {
	g := newGateway(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for name, auth := range map[string]string{"no key": "", "wrong key": "Bearer wrong-key-0123456789abcdef"} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", g.srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", name, resp.StatusCode)
		}
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what the server sends (go test -update rewrites it):\n%s", path, got)
	}
}

// What clients see: the tools with their JSON Schemas, the resources and
// the prompt.
func TestListsGolden(t *testing.T) {
	g := newGateway(t)
	c := g.httpClient(clientOpts{legacy: true})
	tools, err := c.ListTools(t.Context(), mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.ListResources(t.Context(), mcpgo.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := c.ListResourceTemplates(t.Context(), mcpgo.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	prompts, err := c.ListPrompts(t.Context(), mcpgo.ListPromptsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(map[string]any{"tools": tools.Tools, "resources": res.Resources,
		"resourceTemplates": tpl.ResourceTemplates, "prompts": prompts.Prompts}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "lists.golden", append(b, '\n'))

	read, err := c.ReadResource(t.Context(), mcpgo.ReadResourceRequest{Params: mcpgo.ReadResourceParams{URI: "agentgate://agents/demo"}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := read.Contents[0].(mcpgo.TextResourceContents); !ok || !strings.Contains(tc.Text, `"approval_required": true`) {
		t.Fatalf("agent resource = %+v", read.Contents)
	}
}

// An approval covers one tool and one input: the same tool_use_id with
// another input asks again (a new pending approval), and the answer allows
// exactly the input that was approved. While it waits, the call keeps the
// client informed (keep-alive progress).
func TestApprovalPromptBindsToolAndInput(t *testing.T) {
	g := newGateway(t)
	stillWaiting := make(chan struct{})
	var once sync.Once
	c := g.httpClient(clientOpts{legacy: true, onEvent: func(n mcpgo.JSONRPCNotification) {
		if n.Method == string(mcpgo.MethodNotificationProgress) && strings.Contains(fmt.Sprint(n.Params.AdditionalFields["message"]), "still waiting") {
			once.Do(func() { close(stillWaiting) })
		}
	}})
	prompt := func(command string) chan string {
		out := make(chan string, 1)
		go func() {
			req := mcpgo.CallToolRequest{}
			req.Params.Name = "approval_prompt"
			req.Params.Arguments = map[string]any{"tool_name": "Bash", "tool_use_id": "toolu_09", "input": map[string]any{"command": command}}
			req.Params.Meta = &mcpgo.Meta{ProgressToken: "p-" + command}
			res, err := c.CallTool(t.Context(), req)
			if err != nil || res == nil {
				t.Error(err)
				out <- ""
				return
			}
			out <- text(t, res)
		}()
		return out
	}
	first := prompt("ls")
	a := g.pending()
	<-stillWaiting
	g.rest("POST", "/api/v1/approvals/"+a.ID+"/decision", `{"decision":"approve"}`, nil)
	if got := <-first; got != `{"behavior":"allow","updatedInput":{"command":"ls"}}` {
		t.Fatalf("first answer = %s", got)
	}
	second := prompt("rm -rf /important")
	b := g.pending()
	if b.ID == a.ID || string(b.Arguments) != `{"command":"rm -rf /important"}` {
		t.Fatalf("the reused tool_use_id got approval %+v, want a new one for the new input", b)
	}
	select {
	case got := <-second:
		t.Fatalf("answered before anyone decided the new input: %s", got)
	default:
	}
	g.rest("POST", "/api/v1/approvals/"+b.ID+"/decision", `{"decision":"deny","reason":"no"}`, nil)
	if got := <-second; !strings.Contains(got, `"behavior":"deny"`) {
		t.Fatalf("second answer = %s, want deny", got)
	}
}

// demoAgents is the demo agent with a deploy tool that needs approval.
func demoAgents() map[string]*core.Agent {
	return map[string]*core.Agent{"demo": {
		ID: "demo", Description: "the offline demo agent", Provider: "demo", ModelName: "demo", Model: demo.Model{},
		Tools: []core.AgentTool{{
			Spec: core.ToolSpec{Name: "deploy", Description: "Deploy a service", Parameters: json.RawMessage(
				`{"type":"object","properties":{"service":{"type":"string"},"env":{"type":"string","enum":["staging","production"]}},"required":["service","env"]}`)},
			Tool:     builtin.DemoDeploy{},
			Approval: core.ApprovalRule{Required: true},
		}},
	}}
}

// A call retried with its idempotency_key (a client that lost the answer)
// answers with the run the first one started; the same key for another
// input is refused.
func TestIdempotencyKeyOnMCP(t *testing.T) {
	g := newGateway(t)
	c := g.httpClient(clientOpts{})
	var first, again core.Run
	args := map[string]any{"agent": "demo", "input": "hello", "idempotency_key": "call-7f3a"}
	structured(t, call(t, c, "run_agent", args), &first)
	structured(t, call(t, c, "run_agent", args), &again)
	if first.ID == "" || again.ID != first.ID {
		t.Errorf("run_agent twice with one key: runs %q and %q, want the same", first.ID, again.ID)
	}
	if res := call(t, c, "run_agent", map[string]any{"agent": "demo", "input": "deploy web", "idempotency_key": "call-7f3a"}); !res.IsError {
		t.Errorf("the key for another input: %+v, want an error", res.Content)
	}
	var fired, refired core.Run
	targs := map[string]any{"routine_id": "digest", "idempotency_key": "nightly-1"}
	structured(t, call(t, c, "trigger_routine", targs), &fired)
	structured(t, call(t, c, "trigger_routine", targs), &refired)
	if fired.ID == "" || refired.ID != fired.ID {
		t.Errorf("trigger_routine twice with one key: runs %q and %q, want the same", fired.ID, refired.ID)
	}
	targs["input"] = "only prod"
	if res := call(t, c, "trigger_routine", targs); !res.IsError || !strings.Contains(fmt.Sprint(res.Content), fired.ID) {
		t.Errorf("the trigger's key with extra input: %+v, want an error naming run %s", res.Content, fired.ID)
	}
}
