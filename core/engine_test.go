package core_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/sqlite"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// scriptModel answers with Func and records every request.
type scriptModel struct {
	mu    sync.Mutex
	reqs  []core.ModelRequest
	Func  func(n int, req core.ModelRequest) (core.ModelResponse, error)
	block chan struct{} // when set, each call waits for a value
}

func (m *scriptModel) Generate(ctx context.Context, req core.ModelRequest, onDelta func(string)) (core.ModelResponse, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	n := len(m.reqs)
	m.mu.Unlock()
	if m.block != nil {
		select {
		case <-m.block:
		case <-ctx.Done():
			return core.ModelResponse{}, ctx.Err()
		}
	}
	return m.Func(n, req)
}

// waitCalls waits until the model was called n times: those steps are in
// flight (a run's status is running from the moment a worker is promised
// to it, before it calls the model).
func (m *scriptModel) waitCalls(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for len(m.requests()) < n {
		select {
		case <-deadline:
			t.Fatalf("model called %d times, want %d", len(m.requests()), n)
		case <-tick.C:
		}
	}
}

func (m *scriptModel) requests() []core.ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]core.ModelRequest(nil), m.reqs...)
}

// recTool records calls; Func decides the answer.
type recTool struct {
	mu    sync.Mutex
	calls []toolCall
	Func  func(n int, args json.RawMessage) (string, error)
}

type toolCall struct {
	args json.RawMessage
	key  string
}

func (t *recTool) Call(ctx context.Context, args json.RawMessage, key string) (string, error) {
	t.mu.Lock()
	t.calls = append(t.calls, toolCall{args: args, key: key})
	n := len(t.calls)
	t.mu.Unlock()
	if t.Func == nil {
		return `{"ok":true}`, nil
	}
	return t.Func(n, args)
}

func (t *recTool) Calls() []toolCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]toolCall(nil), t.calls...)
}

type harness struct {
	t      testing.TB
	db     *sqlite.DB
	path   string
	clock  *fakeClock
	hub    *core.Hub
	eng    *core.Engine
	aps    *approval.Service
	agents map[string]*core.Agent
	stop   func()
	// progress, when set before start, is the engine's Progress hook.
	progress func(core.Run) core.ProgressSink
	// blobs, when set before start, holds attachments' bytes.
	blobs core.Blobs
	// queue, when set before start, wraps the store's queue.
	queue func(core.Queue) core.Queue
	// claimTTL, when set before start, is the engine's ClaimTTL.
	claimTTL time.Duration
	// store, when set before start, wraps the store the engine uses.
	store func(core.Store) core.Store
	// janitor, when set before start, is the engine's JanitorInterval.
	janitor time.Duration
	// drain, when set before start, is the engine's DrainTimeout.
	drain time.Duration
}

func newHarness(t testing.TB, agents map[string]*core.Agent, opts sqlite.Options, with ...func(*harness)) *harness {
	t.Helper()
	h := &harness{t: t, path: filepath.Join(t.TempDir(), "agentgate.db"), agents: agents,
		clock: &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, hub: &core.Hub{}}
	for id, a := range agents {
		a.ID = id
	}
	for _, f := range with {
		f(h)
	}
	h.start(opts)
	return h
}

// start opens the store and runs an engine on it until stopped.
func (h *harness) start(opts sqlite.Options) {
	h.t.Helper()
	opts.Clock = h.clock
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 20 * time.Millisecond
	}
	db, err := sqlite.Open(h.t.Context(), h.path, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	var q core.Queue = db
	if h.queue != nil {
		q = h.queue(db)
	}
	var st core.Store = db
	if h.store != nil {
		st = h.store(db)
	}
	eng, err := core.NewEngine(core.EngineConfig{Store: st, Queue: q, Agents: h.agents, Hub: h.hub, Clock: h.clock, Workers: 4, Logger: opts.Logger,
		Progress: h.progress, Blobs: h.blobs, ClaimTTL: h.claimTTL,
		JanitorInterval: h.janitor, DrainTimeout: h.drain})
	if err != nil {
		h.t.Fatal(err)
	}
	h.db, h.eng = db, eng
	h.aps = approval.New(approval.Config{Store: db, Hub: h.hub, Clock: h.clock})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := eng.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
			h.t.Error(err)
		}
	}()
	h.stop = func() {
		cancel()
		<-done
		db.Close()
	}
	h.t.Cleanup(func() {
		if h.stop != nil {
			h.stop()
			h.stop = nil
		}
	})
}

// restart stops the engine and opens a new one on the same database.
func (h *harness) restart(opts sqlite.Options) {
	h.t.Helper()
	h.stop()
	h.stop = nil
	h.start(opts)
}

func (h *harness) submit(agent, session, input string) core.Run {
	h.t.Helper()
	run, err := h.eng.Submit(h.t.Context(), core.SubmitRequest{AgentID: agent, SessionID: session, Input: input, UserID: "ana"})
	if err != nil {
		h.t.Fatal(err)
	}
	return run
}

// wait returns the run once ok(run) holds; it fails the test after 20s.
func (h *harness) wait(id string, what string, ok func(core.Run) bool) core.Run {
	h.t.Helper()
	updates, unsub := h.hub.Subscribe(id)
	defer unsub()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		run, err := h.db.GetRun(h.t.Context(), id)
		if err != nil {
			h.t.Fatal(err)
		}
		if ok(run) {
			return run
		}
		select {
		case <-updates:
		case <-tick.C:
		case <-deadline:
			h.t.Fatalf("run %s never became %s; it is %s (error %q)", id, what, run.Status, run.Error)
		}
	}
}

func (h *harness) waitStatus(id string, st core.RunStatus) core.Run {
	h.t.Helper()
	return h.wait(id, string(st), func(r core.Run) bool { return r.Status == st })
}

func (h *harness) events(id string) []core.Event {
	h.t.Helper()
	evs, err := h.db.Events(h.t.Context(), id, 0, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

func (h *harness) pending(runID string) []core.Approval {
	h.t.Helper()
	p, err := h.db.ListApprovals(h.t.Context(), core.ApprovalFilter{RunID: runID, Status: core.ApprovalPending})
	if err != nil {
		h.t.Fatal(err)
	}
	return p.Items
}

func eventTypes(evs []core.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, string(e.Type))
	}
	return strings.Join(s, ",")
}

var deploySchema = json.RawMessage(`{"type":"object","properties":{"service":{"type":"string"},"env":{"type":"string","enum":["staging","production"]}},"required":["service","env"]}`)

// deployAgent calls deploy with args on the first model call and answers
// with text quoting the last tool message afterwards.
func deployAgent(args string, tool *recTool, rule core.ApprovalRule) (*core.Agent, *scriptModel) {
	m := &scriptModel{Func: func(n int, req core.ModelRequest) (core.ModelResponse, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == core.RoleTool {
			return core.ModelResponse{Text: "tool said: " + last.Content}, nil
		}
		return core.ModelResponse{ToolCalls: []core.ToolCall{{ID: "call_1", Name: "deploy", Arguments: json.RawMessage(args)}}}, nil
	}}
	a := &core.Agent{Model: m, Tools: []core.AgentTool{{
		Spec:     core.ToolSpec{Name: "deploy", Description: "deploy", Parameters: deploySchema},
		Tool:     tool,
		Validate: validateDeploy,
		Approval: rule,
	}}}
	return a, m
}

// validateDeploy stands in for the JSON Schema check: env must be staging or production.
func validateDeploy(args json.RawMessage) error {
	var a struct{ Service, Env string }
	if err := json.Unmarshal(args, &a); err != nil {
		return err
	}
	if a.Env != "staging" && a.Env != "production" {
		return fmt.Errorf("arguments invalid: /env: value must be one of \"staging\", \"production\"")
	}
	return nil
}

func TestTextRunCompletes(t *testing.T) {
	t.Parallel()
	m := &scriptModel{Func: func(int, core.ModelRequest) (core.ModelResponse, error) {
		return core.ModelResponse{Text: "hello there"}, nil
	}}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m, Instructions: "be kind"}}, sqlite.Options{})
	run := h.submit("a", "", "hi")
	done := h.waitStatus(run.ID, core.RunCompleted)
	if done.Output != "hello there" || done.StartedAt == nil || done.FinishedAt == nil {
		t.Fatalf("run = %+v", done)
	}
	if got := eventTypes(h.events(run.ID)); got != "user_message,status,model_response,status" {
		t.Fatalf("journal = %s", got)
	}
	reqs := m.requests()
	if len(reqs) != 1 || reqs[0].Instructions != "be kind" || reqs[0].Messages[0].Content != "hi" {
		t.Fatalf("model requests = %+v", reqs)
	}
}

func TestApprovedToolRunsOnceWithApprovedArguments(t *testing.T) {
	t.Parallel()
	tool := &recTool{}
	agent, m := deployAgent(`{"service":"web","env":"staging"}`, tool, core.ApprovalRule{Required: true})
	h := newHarness(t, map[string]*core.Agent{"ops": agent}, sqlite.Options{})
	run := h.submit("ops", "", "deploy web")
	h.waitStatus(run.ID, core.RunPaused)

	aps := h.pending(run.ID)
	if len(aps) != 1 {
		t.Fatalf("pending approvals = %d, want 1", len(aps))
	}
	a := aps[0]
	if a.Tool != "deploy" || string(a.Arguments) != `{"env":"staging","service":"web"}` || a.RequestedBy != "ana" {
		t.Fatalf("approval = %+v", a)
	}
	if len(tool.Calls()) != 0 {
		t.Fatal("the tool ran before approval")
	}
	if _, err := h.aps.Decide(t.Context(), a.ID, approval.Request{Approve: true, Principal: keyP("bob")}); err != nil {
		t.Fatal(err)
	}
	done := h.waitStatus(run.ID, core.RunCompleted)
	calls := tool.Calls()
	if len(calls) != 1 || string(calls[0].args) != `{"env":"staging","service":"web"}` || calls[0].key != run.ID+":call_1" {
		t.Fatalf("tool calls = %+v", calls)
	}
	if done.Output != `tool said: {"ok":true}` {
		t.Fatalf("output = %q", done.Output)
	}
	reqs := m.requests()
	if len(reqs) != 2 {
		t.Fatalf("model called %d times, want 2 (no replay of the journaled step)", len(reqs))
	}
	last := reqs[1].Messages
	if n := len(last); n != 3 || last[1].ToolCalls[0].ID != "call_1" || last[2].Role != core.RoleTool || last[2].ToolCallID != "call_1" {
		t.Fatalf("second request messages = %+v", last)
	}
	// A second decision changes nothing.
	_, err := h.aps.Decide(t.Context(), a.ID, approval.Request{Approve: false, Principal: keyP("eve")})
	var np *core.NotPendingError
	if !errors.As(err, &np) || np.Status != core.ApprovalApproved {
		t.Fatalf("second decision err = %v, want not pending (approved)", err)
	}
	got, _ := h.db.GetApproval(t.Context(), a.ID)
	if got.DecidedBy != "key:bob" || got.DecidedVia != "api" {
		t.Fatalf("approval after second decision = %+v", got)
	}
}

func TestDeniedToolNeverRuns(t *testing.T) {
	t.Parallel()
	tool := &recTool{}
	agent, m := deployAgent(`{"service":"web","env":"production"}`, tool, core.ApprovalRule{Required: true})
	h := newHarness(t, map[string]*core.Agent{"ops": agent}, sqlite.Options{})
	run := h.submit("ops", "", "deploy web to prod")
	h.waitStatus(run.ID, core.RunPaused)
	a := h.pending(run.ID)[0]
	if _, err := h.aps.Decide(t.Context(), a.ID, approval.Request{Approve: false, Principal: keyP("bob"), Reason: "freeze week"}); err != nil {
		t.Fatal(err)
	}
	done := h.waitStatus(run.ID, core.RunCompleted)
	if n := len(tool.Calls()); n != 0 {
		t.Fatalf("tool called %d times after deny", n)
	}
	if !strings.Contains(done.Output, "denied by bob (API key): freeze week") {
		t.Fatalf("the model was not told who denied and why: %q", done.Output)
	}
	if len(m.requests()) != 2 {
		t.Fatalf("model calls = %d", len(m.requests()))
	}
}

func TestExpiredApprovalNeverRuns(t *testing.T) {
	t.Parallel()
	tool := &recTool{}
	agent, _ := deployAgent(`{"service":"web","env":"staging"}`, tool, core.ApprovalRule{Required: true, Timeout: 2 * time.Second})
	h := newHarness(t, map[string]*core.Agent{"ops": agent}, sqlite.Options{})
	run := h.submit("ops", "", "deploy")
	h.waitStatus(run.ID, core.RunPaused)
	a := h.pending(run.ID)[0]
	if want := h.clock.Now().Add(2 * time.Second); !a.ExpiresAt.Equal(want) {
		t.Fatalf("expires_at = %s, want %s", a.ExpiresAt, want)
	}
	if n, err := h.aps.ExpireDue(t.Context()); err != nil || n != 0 {
		t.Fatalf("expired %d before the timeout (err %v)", n, err)
	}
	h.clock.Advance(2 * time.Second)
	if n, err := h.aps.ExpireDue(t.Context()); err != nil || n != 1 {
		t.Fatalf("ExpireDue = %d, %v; want 1", n, err)
	}
	done := h.waitStatus(run.ID, core.RunCompleted)
	if len(tool.Calls()) != 0 || !strings.Contains(done.Output, "expired") {
		t.Fatalf("tool calls %d, output %q", len(tool.Calls()), done.Output)
	}
	_, err := h.aps.Decide(t.Context(), a.ID, approval.Request{Approve: true, Principal: keyP("bob")})
	var np *core.NotPendingError
	if !errors.As(err, &np) || np.Status != core.ApprovalExpired {
		t.Fatalf("decision after expiry: %v", err)
	}
}

func TestDecisionAfterDeadlineExpiresInsteadOfApproving(t *testing.T) {
	t.Parallel()
	tool := &recTool{}
	agent, _ := deployAgent(`{"service":"web","env":"staging"}`, tool, core.ApprovalRule{Required: true, Timeout: time.Minute})
	h := newHarness(t, map[string]*core.Agent{"ops": agent}, sqlite.Options{})
	run := h.submit("ops", "", "deploy")
	h.waitStatus(run.ID, core.RunPaused)
	a := h.pending(run.ID)[0]
	h.clock.Advance(time.Minute) // the sweeper has not run yet
	_, err := h.aps.Decide(t.Context(), a.ID, approval.Request{Approve: true, Principal: keyP("bob")})
	var np *core.NotPendingError
	if !errors.As(err, &np) || np.Status != core.ApprovalExpired {
		t.Fatalf("late decision: %v, want not pending (expired)", err)
	}
	h.waitStatus(run.ID, core.RunCompleted)
	if len(tool.Calls()) != 0 {
		t.Fatal("tool ran after its approval expired")
	}
}

func TestInvalidArgumentsGoBackToTheModel(t *testing.T) {
	t.Parallel()
	tool := &recTool{}
	agent, m := deployAgent(`{"service":"web","env":"moon"}`, tool, core.ApprovalRule{Required: true})
	h := newHarness(t, map[string]*core.Agent{"ops": agent}, sqlite.Options{})
	run := h.submit("ops", "", "deploy to the moon")
	done := h.waitStatus(run.ID, core.RunCompleted)
	if len(tool.Calls()) != 0 || len(h.pending(run.ID)) != 0 {
		t.Fatal("invalid arguments reached the tool or an approval")
	}
	if !strings.Contains(done.Output, `/env: value must be one of`) {
		t.Fatalf("model was not shown the schema error: %q", done.Output)
	}
	if len(m.requests()) != 2 {
		t.Fatalf("model calls = %d", len(m.requests()))
	}
}

func TestUnknownToolIsReportedToTheModel(t *testing.T) {
	t.Parallel()
	m := &scriptModel{Func: func(n int, req core.ModelRequest) (core.ModelResponse, error) {
		if n == 1 {
			return core.ModelResponse{ToolCalls: []core.ToolCall{{ID: "c", Name: "rm_rf", Arguments: json.RawMessage(`{}`)}}}, nil
		}
		return core.ModelResponse{Text: req.Messages[len(req.Messages)-1].Content}, nil
	}}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{})
	done := h.waitStatus(h.submit("a", "", "x").ID, core.RunCompleted)
	if !strings.Contains(done.Output, `no tool named "rm_rf"`) {
		t.Fatalf("output = %q", done.Output)
	}
}

func TestOneSessionRunsInOrderAndSeesHistory(t *testing.T) {
	t.Parallel()
	m := &scriptModel{block: make(chan struct{})}
	m.Func = func(n int, req core.ModelRequest) (core.ModelResponse, error) {
		return core.ModelResponse{Text: fmt.Sprintf("answer %d", n)}, nil
	}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{})
	var first, second core.Run
	var wg sync.WaitGroup
	wg.Go(func() { first = h.submit("a", "ses_one", "first question") })
	wg.Wait()
	wg.Go(func() { second = h.submit("a", "ses_one", "second question") })
	wg.Wait()
	m.waitCalls(t, 1)
	if r, _ := h.db.GetRun(t.Context(), second.ID); r.Status != core.RunQueued {
		t.Fatalf("second run is %s while the first runs; want queued", r.Status)
	}
	m.block <- struct{}{}
	h.waitStatus(first.ID, core.RunCompleted)
	m.block <- struct{}{}
	h.waitStatus(second.ID, core.RunCompleted)
	reqs := m.requests()
	if len(reqs) != 2 {
		t.Fatalf("model calls = %d", len(reqs))
	}
	hist := reqs[1].Messages
	if len(hist) != 3 || hist[0].Content != "first question" || hist[1].Content != "answer 1" || hist[2].Content != "second question" {
		t.Fatalf("second run's conversation = %+v", hist)
	}
}

func TestSessionsRunInParallel(t *testing.T) {
	t.Parallel()
	m := &scriptModel{block: make(chan struct{})}
	m.Func = func(n int, req core.ModelRequest) (core.ModelResponse, error) {
		return core.ModelResponse{Text: "ok"}, nil
	}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{})
	r1 := h.submit("a", "", "one")
	r2 := h.submit("a", "", "two")
	m.waitCalls(t, 2) // both in flight at once
	m.block <- struct{}{}
	m.block <- struct{}{}
	h.waitStatus(r1.ID, core.RunCompleted)
	h.waitStatus(r2.ID, core.RunCompleted)
}

func TestCancelPausedRunCancelsApprovalAndFreesSession(t *testing.T) {
	t.Parallel()
	tool := &recTool{}
	agent, _ := deployAgent(`{"service":"web","env":"staging"}`, tool, core.ApprovalRule{Required: true})
	h := newHarness(t, map[string]*core.Agent{"ops": agent}, sqlite.Options{})
	run := h.submit("ops", "s1", "deploy")
	next := h.submit("ops", "s1", "hello")
	h.waitStatus(run.ID, core.RunPaused)
	if r, _ := h.db.GetRun(t.Context(), next.ID); r.Status != core.RunQueued {
		t.Fatalf("next run is %s while the first is paused", r.Status)
	}
	a := h.pending(run.ID)[0]
	if _, err := h.eng.Cancel(t.Context(), run.ID, core.Cancel{By: "ana", Reason: "changed my mind"}); err != nil {
		t.Fatal(err)
	}
	got, _ := h.db.GetApproval(t.Context(), a.ID)
	if got.Status != core.ApprovalCancelled {
		t.Fatalf("approval after cancel = %s", got.Status)
	}
	if _, err := h.eng.Cancel(t.Context(), run.ID, core.Cancel{By: "ana", Reason: ""}); !errors.Is(err, core.ErrRunFinished) {
		t.Fatalf("second cancel err = %v", err)
	}
	h.waitStatus(next.ID, core.RunPaused) // the next run of the session went ahead (and asks for its own approval)
	if len(tool.Calls()) != 0 {
		t.Fatal("cancelled tool call ran")
	}
}

func TestTransientToolFailureRetriesWithSameKey(t *testing.T) {
	t.Parallel()
	tool := &recTool{Func: func(n int, _ json.RawMessage) (string, error) {
		if n == 1 {
			return "", errors.New("connection reset")
		}
		return `{"deployed":true}`, nil
	}}
	agent, m := deployAgent(`{"service":"web","env":"staging"}`, tool, core.ApprovalRule{})
	h := newHarness(t, map[string]*core.Agent{"ops": agent}, sqlite.Options{Backoff: func(int) time.Duration { return 0 }})
	run := h.submit("ops", "", "deploy")
	done := h.waitStatus(run.ID, core.RunCompleted)
	calls := tool.Calls()
	if len(calls) != 2 || calls[0].key != calls[1].key || calls[0].key != run.ID+":call_1" {
		t.Fatalf("tool calls = %+v; want 2 with the same key", calls)
	}
	results := 0
	for _, ev := range h.events(run.ID) {
		if ev.Type == core.EventToolResult {
			results++
		}
	}
	if results != 1 || done.Output != `tool said: {"deployed":true}` || len(m.requests()) != 2 {
		t.Fatalf("results journaled %d, output %q, model calls %d", results, done.Output, len(m.requests()))
	}
}

func TestToolErrorIsShownToTheModel(t *testing.T) {
	t.Parallel()
	tool := &recTool{Func: func(int, json.RawMessage) (string, error) {
		return "", &core.ToolError{Message: "HTTP 503: maintenance"}
	}}
	agent, _ := deployAgent(`{"service":"web","env":"staging"}`, tool, core.ApprovalRule{})
	h := newHarness(t, map[string]*core.Agent{"ops": agent}, sqlite.Options{})
	done := h.waitStatus(h.submit("ops", "", "deploy").ID, core.RunCompleted)
	if done.Output != "tool said: error: HTTP 503: maintenance" || len(tool.Calls()) != 1 {
		t.Fatalf("output %q after %d calls", done.Output, len(tool.Calls()))
	}
}

func TestModelFailingEveryAttemptFailsTheRun(t *testing.T) {
	t.Parallel()
	m := &scriptModel{Func: func(int, core.ModelRequest) (core.ModelResponse, error) {
		return core.ModelResponse{}, errors.New("401 invalid api key")
	}}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{MaxAttempts: 3, Backoff: func(int) time.Duration { return 0 }})
	run := h.submit("a", "", "hi")
	done := h.waitStatus(run.ID, core.RunFailed)
	if !strings.Contains(done.Error, "gave up after 3 attempts") || !strings.Contains(done.Error, "401 invalid api key") {
		t.Fatalf("error = %q", done.Error)
	}
	// 3 per job; the engine's start-up sweep (RequeueActive) may have given
	// the run, created while the engine started, a second job, which stops
	// once the first one's failure finished the run.
	if n := len(m.requests()); n < 3 || n > 6 {
		t.Fatalf("model calls = %d, want 3 (at most 6 with a second job from the start-up sweep)", n)
	}
}

func TestMaxStepsStopsALoopingModel(t *testing.T) {
	t.Parallel()
	tool := &recTool{}
	m := &scriptModel{Func: func(n int, req core.ModelRequest) (core.ModelResponse, error) {
		return core.ModelResponse{ToolCalls: []core.ToolCall{{ID: fmt.Sprintf("c%d", n), Name: "deploy", Arguments: json.RawMessage(`{"service":"a","env":"staging"}`)}}}, nil
	}}
	agent := &core.Agent{Model: m, MaxSteps: 3, Tools: []core.AgentTool{{Spec: core.ToolSpec{Name: "deploy"}, Tool: tool}}}
	h := newHarness(t, map[string]*core.Agent{"a": agent}, sqlite.Options{})
	done := h.waitStatus(h.submit("a", "", "loop").ID, core.RunFailed)
	if !strings.Contains(done.Error, "max_steps") || len(tool.Calls()) != 3 {
		t.Fatalf("error %q, tool calls %d", done.Error, len(tool.Calls()))
	}
}

func TestRestartResumesFromTheJournal(t *testing.T) {
	t.Parallel()
	inTool := make(chan struct{}, 1)
	release := make(chan struct{})
	tool := &recTool{}
	tool.Func = func(n int, _ json.RawMessage) (string, error) {
		if n == 1 {
			inTool <- struct{}{}
			<-release // the first process "dies" while the call is in flight
			return "", errors.New("process died")
		}
		return `{"deployed":true}`, nil
	}
	agent, m := deployAgent(`{"service":"web","env":"staging"}`, tool, core.ApprovalRule{})
	pausing, _ := deployAgent(`{"service":"api","env":"staging"}`, &recTool{}, core.ApprovalRule{Required: true})
	h := newHarness(t, map[string]*core.Agent{"ops": agent, "gated": pausing}, sqlite.Options{})
	run := h.submit("ops", "", "deploy")
	paused := h.submit("gated", "", "deploy")
	h.waitStatus(paused.ID, core.RunPaused)
	<-inTool
	close(release)
	h.restart(sqlite.Options{})

	done := h.waitStatus(run.ID, core.RunCompleted)
	calls := tool.Calls()
	if len(calls) != 2 || calls[0].key != calls[1].key {
		t.Fatalf("tool calls across restart = %+v; want the same key twice", calls)
	}
	if n := len(m.requests()); n != 2 {
		t.Fatalf("model calls = %d; the journaled step was replayed", n)
	}
	if done.Output != `tool said: {"deployed":true}` {
		t.Fatalf("output %q", done.Output)
	}
	a := h.pending(paused.ID)
	if len(a) != 1 {
		t.Fatalf("pending approvals after restart = %d", len(a))
	}
	if _, err := h.aps.Decide(t.Context(), a[0].ID, approval.Request{Approve: true, Principal: keyP("bob")}); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(paused.ID, core.RunCompleted)
}

func TestApproverPolicy(t *testing.T) {
	t.Parallel()
	tool := &recTool{}
	agent, _ := deployAgent(`{"service":"web","env":"staging"}`, tool, core.ApprovalRule{Required: true,
		Policy: core.ApprovalPolicy{Approvers: []string{"key:bob", "requester"}, ExcludeRequester: true}})
	h := newHarness(t, map[string]*core.Agent{"ops": agent}, sqlite.Options{})
	run := h.submit("ops", "", "deploy")
	h.waitStatus(run.ID, core.RunPaused)
	a := h.pending(run.ID)[0]
	for _, who := range []string{"ana", "eve", ""} { // ana is the requester
		_, err := h.aps.Decide(t.Context(), a.ID, approval.Request{Approve: true, Principal: keyP(who)})
		var na *approval.NotAllowedError
		if !errors.As(err, &na) {
			t.Fatalf("%q deciding: err = %v, want not allowed", who, err)
		}
	}
	if _, err := h.aps.Decide(t.Context(), a.ID, approval.Request{Approve: true, Principal: keyP("bob"), ArgsSHA256: "stale"}); !errors.Is(err, core.ErrArgsMismatch) {
		t.Fatalf("stale args hash: err = %v", err)
	}
	if _, err := h.aps.Decide(t.Context(), a.ID, approval.Request{Approve: true, Principal: keyP("bob"), ArgsSHA256: a.ArgsSHA256}); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(run.ID, core.RunCompleted)
}

func TestDuplicateKeysNeverReachAnApproval(t *testing.T) {
	t.Parallel()
	tool := &recTool{}
	// An approver could be shown one "service" and the tool act on the other.
	agent, _ := deployAgent(`{"service":"web","service":"db","env":"staging"}`, tool, core.ApprovalRule{Required: true})
	h := newHarness(t, map[string]*core.Agent{"ops": agent}, sqlite.Options{})
	run := h.submit("ops", "", "deploy")
	done := h.waitStatus(run.ID, core.RunCompleted)
	if len(tool.Calls()) != 0 || len(h.pending(run.ID)) != 0 || !strings.Contains(done.Output, "duplicate") {
		t.Fatalf("tool calls %d, output %q", len(tool.Calls()), done.Output)
	}
}

func TestShutdownLetsInFlightStepsFinish(t *testing.T) {
	t.Parallel()
	m := &scriptModel{block: make(chan struct{})}
	m.Func = func(int, core.ModelRequest) (core.ModelResponse, error) {
		return core.ModelResponse{Text: "made it"}, nil
	}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{})
	run := h.submit("a", "", "hi")
	m.waitCalls(t, 1)
	stopped := make(chan struct{})
	stop := h.stop
	h.stop = nil
	go func() { stop(); close(stopped) }()
	m.block <- struct{}{} // the model answers after shutdown began
	<-stopped
	db, err := sqlite.Open(t.Context(), h.path, sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.GetRun(t.Context(), run.ID)
	if err != nil || got.Status != core.RunCompleted || got.Output != "made it" {
		t.Fatalf("after shutdown: %+v, %v", got, err)
	}
}

func TestRunHeldByADeadNodeIsTakenOverAfterItsClaim(t *testing.T) {
	t.Parallel()
	m := &scriptModel{Func: func(int, core.ModelRequest) (core.ModelResponse, error) {
		return core.ModelResponse{Text: "taken over"}, nil
	}}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{})
	h.stop()
	h.stop = nil
	// Another node claimed the run and died; its job is back in the queue.
	db, err := sqlite.Open(t.Context(), h.path, sqlite.Options{Clock: h.clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	now := h.clock.Now()
	run, err := db.CreateRun(t.Context(), core.NewRun{
		Session: core.Session{ID: "s1", AgentID: "a", CreatedAt: now},
		Run:     core.Run{ID: "run_ghost", SessionID: "s1", AgentID: "a", Type: core.RunTypeAPI, Input: "hi", CreatedAt: now},
		Events:  []core.Event{core.NewEvent(core.EventUserMessage, core.UserMessage{Text: "hi"})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ClaimRun(t.Context(), run.ID, "ghost", now, now.Add(30*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	db.Close()
	h.start(sqlite.Options{})
	// The engine finds the run claimed and looks again when the claim is over.
	raw, err := sql.Open("sqlite", h.path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	h.wait(run.ID, "re-scheduled for when the claim runs out", func(core.Run) bool {
		var later int
		err := raw.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM jobs WHERE consumer = '' AND visible_at = ?`,
			now.Add(30*time.Second).UnixNano()).Scan(&later)
		return err == nil && later == 1
	})
	if len(m.requests()) != 0 {
		t.Fatal("the model was called while another node held the run")
	}
	h.clock.Advance(30 * time.Second)
	done := h.waitStatus(run.ID, core.RunCompleted)
	if done.Output != "taken over" {
		t.Fatalf("output %q", done.Output)
	}
}

// keyP is an admin API key's principal named name, deciding over the API.
func keyP(name string) approval.Principal {
	return approval.KeyPrincipal(name, approval.RoleAdmin, nil, approval.RouteAPI)
}

// A job for a run a local worker is advancing holds no other worker while
// that run goes on: the janitor's jobs for one long run (every 30 s on an
// external queue) would otherwise park one worker each, then all of them,
// and nothing else would run until it ended. The long run still completes,
// with its step done once.
func TestJobsOfARunningRunHoldNoWorker(t *testing.T) {
	t.Parallel()
	long := &scriptModel{block: make(chan struct{})}
	long.Func = func(n int, req core.ModelRequest) (core.ModelResponse, error) {
		return core.ModelResponse{Text: "done at last"}, nil
	}
	quick := &scriptModel{Func: func(n int, req core.ModelRequest) (core.ModelResponse, error) {
		return core.ModelResponse{Text: "ok"}, nil
	}}
	h := newHarness(t, map[string]*core.Agent{"long": {Model: long}, "quick": {Model: quick}}, sqlite.Options{})
	a := h.submit("long", "", "a long step")
	long.waitCalls(t, 1)
	for i := range 6 { // more than the harness's 4 workers
		again := core.RunJobFor(a.ID)
		again.Key = fmt.Sprintf("%s:again-%d", again.Key, i)
		if err := h.db.Enqueue(t.Context(), again); err != nil {
			t.Fatal(err)
		}
	}
	b := h.submit("quick", "", "meanwhile")
	h.waitStatus(b.ID, core.RunCompleted)
	close(long.block)
	if run := h.waitStatus(a.ID, core.RunCompleted); run.Output != "done at last" {
		t.Fatalf("long run = %+v", run)
	}
	if n := len(long.requests()); n != 1 {
		t.Fatalf("the long run's model was called %d times, want once", n)
	}
}

// An approved call reaches the tool with the arguments as approved, byte
// for byte: <, > and & are not turned into \u003c escapes on their way
// through the journal (a tool that signs or compares its body would see a
// different request).
func TestApprovedArgumentsKeepTheirBytes(t *testing.T) {
	t.Parallel()
	tool := &recTool{}
	agent, _ := deployAgent(`{"service":"<web> & api","env":"production"}`, tool, core.ApprovalRule{Required: true})
	h := newHarness(t, map[string]*core.Agent{"ops": agent}, sqlite.Options{})
	run := h.submit("ops", "", "deploy web to production")
	h.waitStatus(run.ID, core.RunPaused)
	a := h.pending(run.ID)[0]
	if _, err := h.aps.Decide(t.Context(), a.ID, approval.Request{Approve: true, Principal: keyP("bob")}); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(run.ID, core.RunCompleted)
	var got []string
	for _, c := range tool.Calls() {
		got = append(got, string(c.args))
	}
	if len(got) != 1 || got[0] != `{"env":"production","service":"<web> & api"}` {
		t.Fatalf("tool called with %q, want once with the approved arguments as written", got)
	}
}

// A call asked about follows its decision whatever the tool's rule says
// when the run resumes: the config (restarted with required: false) or an
// MCP server's listing (readOnlyHint) may have relaxed it meanwhile. A
// denied call never runs; an approved one runs once, with the approved
// arguments, and only on the tool of the origin it was approved for.
func TestDecisionOutlivesTheRule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		approve bool
		origin  string // the tool's origin at resume
		calls   int
	}{
		{"denied, rule relaxed", false, "mcp:ops", 0},
		{"approved, rule relaxed", true, "mcp:ops", 1},
		{"approved, the name now another server's", true, "mcp:other", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tool := &recTool{}
			agent, _ := deployAgent(`{"service":"web","env":"production"}`, tool, core.ApprovalRule{Required: true})
			agent.Tools[0].Origin = "mcp:ops"
			h := newHarness(t, map[string]*core.Agent{"ops": agent}, sqlite.Options{})
			run := h.submit("ops", "", "deploy web to production")
			h.waitStatus(run.ID, core.RunPaused)
			a := h.pending(run.ID)[0]
			agent.Tools[0].Approval, agent.Tools[0].Origin = core.ApprovalRule{}, tc.origin
			h.restart(sqlite.Options{})
			if _, err := h.aps.Decide(t.Context(), a.ID, approval.Request{Approve: tc.approve, Principal: keyP("bob"), Reason: "no"}); err != nil {
				t.Fatal(err)
			}
			h.waitStatus(run.ID, core.RunCompleted)
			calls := tool.Calls()
			if len(calls) != tc.calls {
				t.Fatalf("tool called %d times, want %d: %+v", len(calls), tc.calls, calls)
			}
			if tc.calls > 0 && string(calls[0].args) != `{"env":"production","service":"web"}` {
				t.Fatalf("tool called with %s, want the approved arguments", calls[0].args)
			}
		})
	}
}
