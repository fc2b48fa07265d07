package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/routine"
	"github.com/agentgate/agentgate/interfaces/api"
	"github.com/agentgate/agentgate/interfaces/mcp"
	"github.com/agentgate/agentgate/store/sqlite"
)

// fuzzTools starts what newGateway starts (SQLite store, engine with the
// demo agent, approvals, routines) for a fuzz target, with a run paused on
// a pending approval, and returns the MCP server's tools by name and the
// ids of that run, its session and its approval.
func fuzzTools(f *testing.F) (tools map[string]server.ServerTool, ids *strings.Replacer) {
	f.Helper()
	log := slog.New(slog.DiscardHandler)
	db, err := sqlite.Open(f.Context(), filepath.Join(f.TempDir(), "db.sqlite"), sqlite.Options{Logger: log, PollInterval: 10 * time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	agents := demoAgents()
	rt, err := routine.New(routine.Config{Store: db, Runs: db, Logger: log, Agents: []string{"demo"}})
	if err != nil {
		f.Fatal(err)
	}
	if err := rt.Sync(f.Context(), []core.RoutineDef{{ID: "digest", AgentID: "demo", Schedule: "0 9 * * *", Timezone: "UTC",
		Input: "Summarize the deploys.", DeliverTo: "none", Enabled: true, Missed: core.MissedSkip, MaxFailures: 5}}); err != nil {
		f.Fatal(err)
	}
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
	// A run paused on a pending approval, for get_run, decide_approval and
	// get_session_messages to find.
	run, err := eng.Submit(f.Context(), core.SubmitRequest{RunID: core.NewID("run"), AgentID: "demo", Input: "deploy web to staging",
		UserID: "key:fuzz", StartedBy: "key:fuzz", Type: core.RunTypeMCP})
	if err != nil {
		f.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for run.Status != core.RunPaused {
		if time.Now().After(deadline) {
			f.Fatalf("run %s is %s, want paused", run.ID, run.Status)
		}
		time.Sleep(10 * time.Millisecond)
		if run, err = db.GetRun(f.Context(), run.ID); err != nil {
			f.Fatal(err)
		}
	}
	pending, err := db.ListApprovals(f.Context(), core.ApprovalFilter{RunID: run.ID, Status: core.ApprovalPending})
	if err != nil || len(pending.Items) != 1 {
		f.Fatalf("pending approvals of %s: %+v, %v", run.ID, pending.Items, err)
	}
	s := mcp.NewServer(mcp.Config{Engine: eng, Store: db, Approvals: aps, Routines: rt, Logger: log, Version: "fuzz",
		Authenticated: true, MaxWait: 200 * time.Millisecond, PollInterval: 20 * time.Millisecond, KeepAlive: 50 * time.Millisecond})
	tools = map[string]server.ServerTool{}
	for name, t := range s.ListTools() {
		tools[name] = *t
	}
	return tools, strings.NewReplacer("RUN_ID", run.ID, "SESSION_ID", run.SessionID, "APPROVAL_ID", pending.Items[0].ID,
		"ARGS_SHA", pending.Items[0].ArgsSHA256)
}

// FuzzToolArguments calls every MCP tool handler, as a client's tools/call
// reaches it, with fuzzed arguments (any JSON: objects of wrong types, huge
// numbers, arrays, null), a fuzzed requestState and a caller of each role.
// A handler answers with a result — a tool error when the arguments are
// wrong or the role may not — and never with a protocol error or a panic;
// only approval_prompt, which waits for a person, may return the
// context's error once the caller stops waiting.
func FuzzToolArguments(f *testing.F) {
	tools, ids := fuzzTools(f)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range tools {
			if !yield(n) {
				return
			}
		}
	})
	seeds := map[string][]string{
		"list_agents":          {`{}`, `null`},
		"run_agent":            {`{"agent":"demo","input":"hello"}`, `{"agent":"demo","input":"deploy web to staging","session_id":"SESSION_ID"}`, `{"agent":"nope","input":" "}`, `{"agent":1,"input":["x"]}`},
		"get_run":              {`{"run_id":"RUN_ID"}`, `{"run_id":"run_missing"}`, `{"run_id":""}`, `[]`},
		"list_approvals":       {`{"status":"all"}`, `{"status":"pending","run_id":"RUN_ID"}`, `{"status":"bogus"}`, `{"cursor":"not-a-cursor"}`, `{"cursor":"MjAyNi0xMi0wMlQxNjowMDowMFp8YXByXzE="}`},
		"decide_approval":      {`{"approval_id":"APPROVAL_ID","decision":"approve","args_sha256":"ARGS_SHA"}`, `{"approval_id":"APPROVAL_ID","decision":"deny","reason":"no"}`, `{"approval_id":"apr_missing","decision":"maybe"}`, `{"approval_id":"APPROVAL_ID","decision":"approve","args_sha256":"0000"}`},
		"list_routines":        {`{}`, `{"cursor":"digest"}`, `{"cursor":7}`},
		"trigger_routine":      {`{"routine_id":"digest","input":"only prod"}`, `{"routine_id":"missing"}`, `{"routine_id":null}`},
		"list_sessions":        {`{}`, `{"agent_id":"demo","user_id":"key:fuzz"}`, `{"cursor":"\u0000"}`},
		"get_session_messages": {`{"session_id":"SESSION_ID"}`, `{"session_id":"SESSION_ID","cursor":"x"}`, `{"session_id":"ses_missing"}`},
		"approval_prompt":      {`{"tool_name":"Bash","input":{"command":"ls"},"tool_use_id":"toolu_01"}`, `{"tool_name":"Bash","input":"ls"}`, `{"tool_name":"Edit","input":{"a":1,"a":2}}`, `{"tool_name":"Bash","input":{"n":1e999999999}}`},
	}
	for i, name := range names {
		for _, args := range append(seeds[name], `{}`) {
			f.Add(uint8(i), []byte(args), "", uint8(approval.RoleAdmin))
		}
	}
	f.Add(uint8(slices.Index(names, "run_agent")), []byte(`{}`), `{"run_id":"RUN_ID","asked":["APPROVAL_ID"]}`, uint8(approval.RoleOperator))
	f.Add(uint8(slices.Index(names, "run_agent")), []byte(`{}`), `not json`, uint8(approval.RoleAdmin))
	f.Add(uint8(slices.Index(names, "decide_approval")), []byte(`{"approval_id":"APPROVAL_ID","decision":"approve"}`), "", uint8(approval.RoleViewer))
	f.Add(uint8(slices.Index(names, "list_agents")), []byte(`{}`), "", uint8(approval.RoleNone))

	f.Fuzz(func(t *testing.T, which uint8, rawArgs []byte, state string, role uint8) {
		name := names[int(which)%len(names)]
		raw := []byte(ids.Replace(string(rawArgs)))
		req := mcpgo.CallToolRequest{}
		req.Params.Name = name
		if len(raw) > 0 {
			if json.Unmarshal(raw, &req.Params.Arguments) != nil {
				return // not JSON: the server refuses the message before any tool
			}
			req.Params.RawArguments = raw
		}
		req.Params.RequestState = ids.Replace(state)
		p := approval.KeyPrincipal("fuzz", approval.Role(int(role)%(int(approval.RoleAdmin)+1)), nil, mcp.Via)
		wait := 5 * time.Second
		if name == "approval_prompt" {
			wait = 100 * time.Millisecond // it waits for a person until the caller stops
		}
		ctx, cancel := context.WithTimeout(api.WithPrincipal(t.Context(), p), wait)
		defer cancel()
		stop := time.AfterFunc(20*time.Second, func() {
			panic(fmt.Sprintf("%s still running after 20s on %s (state %q)", name, raw, state))
		}).Stop
		defer stop()
		res, err := tools[name].Handler(ctx, req)
		switch {
		case err != nil && name == "approval_prompt" && ctx.Err() != nil:
		case err != nil:
			t.Fatalf("%s(%s): protocol error %v, want a result", name, raw, err)
		case res == nil:
			t.Fatalf("%s(%s): no result", name, raw)
		case res.IsError:
			if len(res.Content) == 0 {
				t.Fatalf("%s(%s): tool error without content", name, raw)
			}
			if tc, ok := res.Content[0].(mcpgo.TextContent); !ok || strings.TrimSpace(tc.Text) == "" {
				t.Fatalf("%s(%s): tool error without a message: %+v", name, raw, res.Content)
			}
		}
	})
}
