package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/api"
)

// stdioMCP launches `agentgate mcp args…` as an MCP client does and
// initializes a session with it.
func stdioMCP(t *testing.T, env []string, opts []mcpclient.ClientOption, args ...string) *mcpclient.Client {
	t.Helper()
	c, _ := stdioMCPStderr(t, env, opts, args...)
	return c
}

// stdioMCPStderr is stdioMCP that also gives the process's stderr.
func stdioMCPStderr(t *testing.T, env []string, opts []mcpclient.ClientOption, args ...string) (*mcpclient.Client, io.Reader) {
	t.Helper()
	tr := transport.NewStdio(binary(t), env, append([]string{"mcp"}, args...)...)
	c := mcpclient.NewClient(tr, opts...)
	if err := c.Start(context.WithoutCancel(t.Context())); err != nil { // the process lives as long as ctx
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), pollTimeout)
	defer cancel()
	init := mcpgo.InitializeRequest{}
	init.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcpgo.Implementation{Name: "e2e", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize agentgate mcp %s: %v", strings.Join(args, " "), err)
	}
	return c, tr.Stderr()
}

// tool calls a tool and decodes its structured content into out.
func tool(t *testing.T, c *mcpclient.Client, name string, args map[string]any, out any) {
	t.Helper()
	req := mcpgo.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(t.Context(), req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error %+v", name, res.Content)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %s: %v", name, b, err)
	}
}

// `agentgate mcp --server` relays stdio to a running gateway's /mcp: the
// demo agent's run pauses, decide_approval approves it as the key's name,
// and the completed run can be read. /mcp itself wants the key.
func TestE2EMCPStdioToGateway(t *testing.T) {
	t.Parallel()
	const key = "e2e-mcp-key-0123456789"
	g := startGateway(t, gatewayOptions{env: []string{"AGENTGATE_API_KEYS=" + key}})

	status, _ := doHTTP(t, "POST", g.base+"/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"}, nil)
	if status != http.StatusUnauthorized {
		t.Fatalf("POST /mcp without a key: status %d, want 401", status)
	}

	c := stdioMCP(t, cleanEnv(), nil, "--server", g.base, "--api-key", key)
	var paused api.RunView
	tool(t, c, "run_agent", map[string]any{"agent": "demo", "input": "deploy web to staging"}, &paused)
	if paused.Status != core.RunPaused || len(paused.PendingApprovals) != 1 {
		t.Fatalf("run = %+v, want paused on one approval", paused)
	}
	var decided core.Approval
	tool(t, c, "decide_approval", map[string]any{"approval_id": paused.PendingApprovals[0].ID, "decision": "approve"}, &decided)
	if decided.Status != core.ApprovalApproved || decided.DecidedVia != "mcp" || decided.DecidedBy != "key:"+api.KeyName(key) {
		t.Fatalf("decision = %+v, want approved via mcp by %s", decided, api.KeyName(key))
	}
	var run api.RunView
	eventually(t, "the run to complete", func() (bool, string) {
		tool(t, c, "get_run", map[string]any{"run_id": paused.ID}, &run)
		return run.Status == core.RunCompleted, string(run.Status)
	})
	if !strings.Contains(run.Output, "deployed") {
		t.Fatalf("output = %q", run.Output)
	}
}

// approver approves every question.
type approver struct{}

func (approver) Elicit(ctx context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
	return &mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{
		Action: mcpgo.ElicitationResponseActionAccept, Content: map[string]any{"decision": "approve"}}}, nil
}

// Without --server, `agentgate mcp` runs a gateway in its own process; a
// client that can elicit approves inline and gets the answer in one call.
func TestE2EMCPEmbedded(t *testing.T) {
	t.Parallel()
	c, stderr := stdioMCPStderr(t, cleanEnv(), []mcpclient.ClientOption{mcpclient.WithElicitationHandler(approver{})}, "--data-dir", t.TempDir())
	var run api.RunView
	tool(t, c, "run_agent", map[string]any{"agent": "demo", "input": "deploy web to production"}, &run)
	if run.Status != core.RunCompleted || !strings.Contains(run.Output, "deployed") || run.UserID != "key:local" {
		t.Fatalf("run = %+v, want completed after the inline approval", run)
	}

	// The gateway in the process answers that process alone: another
	// local process (or user) that finds its port gets 401, not an admin's
	// API on which to approve the runs.
	var base string
	sc := bufio.NewScanner(stderr)
	for base == "" && sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "agentgate listening on "); ok {
			base = u
		}
	}
	if base == "" {
		t.Fatalf("no listening line on stderr (%v)", sc.Err())
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	for _, key := range []string{"", "a-key-this-process-made-up-0123456789"} {
		for _, path := range []string{"/api/v1/runs/" + run.ID, "/mcp"} {
			req, err := http.NewRequest(http.MethodGet, base+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s with key %q: %d, want 401", path, key, resp.StatusCode)
			}
		}
	}
}
