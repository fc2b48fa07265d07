package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	approval "github.com/agentgate/agentgate/approvals"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/sqlite"
)

// requestChars is how many characters a model request sends: instructions,
// every message and every tool spec.
func requestChars(req core.ModelRequest) int {
	b, _ := json.Marshal(req)
	return len(b)
}

// bigReport is 100,000 characters: numbered lines, with "NEEDLE-7" once, at
// a known offset.
func bigReport() (report string, needleAt int) {
	var b strings.Builder
	for i := 0; b.Len() < 100_000; i++ {
		if i == 1200 {
			needleAt = b.Len()
			b.WriteString("NEEDLE-7 ")
		}
		fmt.Fprintf(&b, "line %05d of the report\n", i)
	}
	return b.String()[:100_000], needleAt
}

func toolReturning(name, content string) core.AgentTool {
	return core.AgentTool{
		Spec: core.ToolSpec{Name: name, Description: name, Parameters: json.RawMessage(`{"type":"object"}`)},
		Tool: &recTool{Func: func(int, json.RawMessage) (string, error) { return content, nil }},
	}
}

func TestLargeResultIsReadByRangeAndSearched(t *testing.T) {
	t.Parallel()
	report, needleAt := bigReport()
	var results []string // what read_result and search_result answered
	m := &scriptModel{Func: func(n int, req core.ModelRequest) (core.ModelResponse, error) {
		last := req.Messages[len(req.Messages)-1]
		if n > 2 {
			results = append(results, last.Content)
		}
		switch n {
		case 1:
			return core.ModelResponse{ToolCalls: []core.ToolCall{{ID: "c1", Name: "report", Arguments: json.RawMessage(`{}`)}}}, nil
		case 2:
			return core.ModelResponse{ToolCalls: []core.ToolCall{{ID: "c2", Name: "read_result", Arguments: json.RawMessage(`{"handle":"c1","offset":50000,"length":100}`)}}}, nil
		case 3:
			return core.ModelResponse{ToolCalls: []core.ToolCall{{ID: "c3", Name: "search_result", Arguments: json.RawMessage(`{"handle":"c1","query":"needle-7"}`)}}}, nil
		case 4:
			return core.ModelResponse{ToolCalls: []core.ToolCall{{ID: "c4", Name: "read_result", Arguments: json.RawMessage(`{"handle":"nope"}`)}}}, nil
		}
		return core.ModelResponse{Text: "read it"}, nil
	}}
	a := &core.Agent{Model: m, Tools: []core.AgentTool{toolReturning("report", report)}}
	h := newHarness(t, map[string]*core.Agent{"a": a}, sqlite.Options{})
	run := h.waitStatus(h.submit("a", "", "summarise the report").ID, core.RunCompleted)

	reqs := m.requests()
	if len(reqs) != 5 {
		t.Fatalf("model called %d times, want 5", len(reqs))
	}
	if n := requestChars(reqs[1]); n >= 20_000 {
		t.Fatalf("the request after a 100,000-character result has %d characters, want < 20,000", n)
	} else {
		t.Logf("the request after a 100,000-character result has %d characters", n)
	}
	var offered []string
	for _, s := range reqs[1].Tools {
		offered = append(offered, s.Name)
	}
	if got := strings.Join(offered, ","); got != "report,read_result,search_result" {
		t.Fatalf("tools offered after a large result = %s", got)
	}
	if got := strings.Join(toolNamesOf(reqs[0]), ","); got != "report" {
		t.Fatalf("tools offered before any large result = %s", got)
	}
	shown := reqs[1].Messages[len(reqs[1].Messages)-1].Content
	if !strings.Contains(shown, `"c1"`) || !strings.Contains(shown, "100000 characters") || !strings.HasSuffix(shown, report[:1000]) {
		t.Fatalf("shortened result = %.300q…", shown)
	}
	if want := "[characters 50000 to 50100 of 100000]\n" + report[50000:50100]; results[0] != want {
		t.Fatalf("read_result = %q, want %q", results[0], want)
	}
	if !strings.HasPrefix(results[1], "1 matches for \"needle-7\"") || !strings.Contains(results[1], fmt.Sprintf("[offset %d]", needleAt)) {
		t.Fatalf("search_result = %q (needle at %d)", results[1], needleAt)
	}
	if !strings.Contains(results[2], `no result with handle "nope"`) {
		t.Fatalf("read_result of an unknown handle = %q", results[2])
	}
	// The journal keeps the whole result.
	for _, ev := range h.events(run.ID) {
		var r core.ToolResult
		if ev.Type == core.EventToolResult && json.Unmarshal(ev.Data, &r) == nil && r.ToolCallID == "c1" && r.Content != report {
			t.Fatalf("journaled result has %d characters, want the whole report", len(r.Content))
		}
	}
}

func toolNamesOf(req core.ModelRequest) []string {
	var names []string
	for _, s := range req.Tools {
		names = append(names, s.Name)
	}
	return names
}

func TestLargeResultsOff(t *testing.T) {
	t.Parallel()
	report, _ := bigReport()
	m := &scriptModel{Func: func(n int, req core.ModelRequest) (core.ModelResponse, error) {
		if n == 1 {
			return core.ModelResponse{ToolCalls: []core.ToolCall{{ID: "c1", Name: "report", Arguments: json.RawMessage(`{}`)}}}, nil
		}
		return core.ModelResponse{Text: "ok"}, nil
	}}
	a := &core.Agent{Model: m, LargeResultChars: -1, Tools: []core.AgentTool{toolReturning("report", report)}}
	h := newHarness(t, map[string]*core.Agent{"a": a}, sqlite.Options{})
	h.waitStatus(h.submit("a", "", "x").ID, core.RunCompleted)
	req := m.requests()[1]
	if got := req.Messages[len(req.Messages)-1].Content; got != report {
		t.Fatalf("with no limit the model sees %d characters, want the whole report", len(got))
	}
	if names := toolNamesOf(req); len(names) != 1 {
		t.Fatalf("tools = %v, want only report", names)
	}
}

// listedTools is a ToolSet that fails its first listing, as a server that
// is not up yet.
type listedTools struct {
	mu    sync.Mutex
	tools []core.AgentTool
	asked int
}

func (l *listedTools) Tools(context.Context) ([]core.AgentTool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked++
	if l.asked == 1 {
		return nil, errors.New("server not up yet")
	}
	return l.tools, nil
}

func TestToolSetToolsNeedApprovalLikeOthers(t *testing.T) {
	t.Parallel()
	del := &recTool{}
	set := &listedTools{tools: []core.AgentTool{
		{Spec: core.ToolSpec{Name: "delete_item", Parameters: json.RawMessage(`{"type":"object"}`)}, Tool: del, Approval: core.ApprovalRule{Required: true}},
		toolReturning("echo", "from the set: shadowed"),
	}}
	m := &scriptModel{Func: func(n int, req core.ModelRequest) (core.ModelResponse, error) {
		if n == 1 {
			return core.ModelResponse{ToolCalls: []core.ToolCall{{ID: "d", Name: "delete_item", Arguments: json.RawMessage(`{"id":"42"}`)}}}, nil
		}
		return core.ModelResponse{Text: "deleted"}, nil
	}}
	a := &core.Agent{Model: m, ToolSets: []core.ToolSet{set}, Tools: []core.AgentTool{toolReturning("echo", "configured")}}
	// The first listing fails: the step is retried (at once here), nothing is lost.
	h := newHarness(t, map[string]*core.Agent{"a": a}, sqlite.Options{Backoff: func(int) time.Duration { return 0 }})
	run := h.submit("a", "", "delete item 42")
	h.waitStatus(run.ID, core.RunPaused)
	if len(m.requests()) != 1 {
		t.Fatalf("model called %d times, want once (the failed listing comes before it)", len(m.requests()))
	}
	if got := strings.Join(toolNamesOf(m.requests()[0]), ","); got != "echo,delete_item" {
		t.Fatalf("tools offered = %s, want the configured echo then the set's delete_item", got)
	}
	if len(del.Calls()) != 0 {
		t.Fatal("the set's tool ran before its approval")
	}
	pend := h.pending(run.ID)
	if len(pend) != 1 {
		t.Fatalf("pending approvals = %d", len(pend))
	}
	if _, err := h.aps.Decide(t.Context(), pend[0].ID, approval.Request{Approve: true, Principal: keyP("ana")}); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(run.ID, core.RunCompleted)
	calls := del.Calls()
	if len(calls) != 1 || calls[0].key != run.ID+":d" || string(calls[0].args) != `{"id":"42"}` {
		t.Fatalf("delete_item calls = %+v", calls)
	}
}

// staticTools is a tool set that always lists the same tools.
type staticTools []core.AgentTool

func (s staticTools) Tools(context.Context) ([]core.AgentTool, error) { return s, nil }

// Two MCP servers listing the same tool name: the model is offered one
// tool of that name, the first server's, and the call goes to it.
func TestToolSetsShareNoName(t *testing.T) {
	t.Parallel()
	staging, prod := &recTool{}, &recTool{}
	sql := func(tool core.Tool, origin string) core.AgentTool {
		return core.AgentTool{Spec: core.ToolSpec{Name: "run_sql", Parameters: json.RawMessage(`{"type":"object"}`)}, Tool: tool, Origin: origin}
	}
	m := &scriptModel{Func: func(n int, req core.ModelRequest) (core.ModelResponse, error) {
		if n == 1 {
			return core.ModelResponse{ToolCalls: []core.ToolCall{{ID: "q", Name: "run_sql", Arguments: json.RawMessage(`{"query":"select 1"}`)}}}, nil
		}
		return core.ModelResponse{Text: "done"}, nil
	}}
	a := &core.Agent{Model: m, ToolSets: []core.ToolSet{staticTools{sql(staging, "mcp:staging")}, staticTools{sql(prod, "mcp:prod")}}}
	h := newHarness(t, map[string]*core.Agent{"a": a}, sqlite.Options{})
	run := h.submit("a", "", "count the rows")
	h.waitStatus(run.ID, core.RunCompleted)
	if got := strings.Join(toolNamesOf(m.requests()[0]), ","); got != "run_sql" {
		t.Fatalf("tools offered = %s, want run_sql once", got)
	}
	if len(staging.Calls()) != 1 || len(prod.Calls()) != 0 {
		t.Fatalf("calls: staging %d, prod %d; want the first server's tool only", len(staging.Calls()), len(prod.Calls()))
	}
}

// failures records the retry delay the engine asks for with each Fail.
type failures struct {
	core.Queue
	mu     sync.Mutex
	delays []time.Duration
}

func (f *failures) Fail(ctx context.Context, j core.Job, reason string, retryAfter time.Duration) (bool, error) {
	dead, err := f.Queue.Fail(ctx, j, reason, retryAfter)
	f.mu.Lock() // recorded once the retry is scheduled: the test moves the clock then
	f.delays = append(f.delays, retryAfter)
	f.mu.Unlock()
	return dead, err
}

func TestProviderRetryAfterDelaysTheStep(t *testing.T) {
	t.Parallel()
	m := &scriptModel{Func: func(n int, req core.ModelRequest) (core.ModelResponse, error) {
		switch n {
		case 1:
			return core.ModelResponse{}, core.WithRetryAfter(errors.New("429 rate limited"), 40*time.Second)
		case 2:
			return core.ModelResponse{}, errors.New("connection reset") // says nothing: the queue's backoff
		}
		return core.ModelResponse{Text: "ok"}, nil
	}}
	f := &failures{}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{}, func(h *harness) {
		h.queue = func(q core.Queue) core.Queue { f.Queue = q; return f }
	})
	run := h.submit("a", "", "hi")
	f.wait(t, 1)
	h.clock.Advance(40 * time.Second)
	f.wait(t, 2)
	h.clock.Advance(time.Hour)
	h.waitStatus(run.ID, core.RunCompleted)
	if d := f.asked(); len(d) != 2 || d[0] != 40*time.Second || d[1] != 0 {
		t.Fatalf("retry delays asked = %v, want [40s 0s]", d)
	}
}

func (f *failures) asked() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.delays...)
}

// wait waits until n steps have failed.
func (f *failures) wait(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(f.asked()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d failed steps, want %d", len(f.asked()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
