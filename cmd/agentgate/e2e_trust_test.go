package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

const (
	trustAdminKey    = "admin-key-0123456789abcdef"
	trustViewerKey   = "viewer-key-0123456789abcdef"
	trustOperatorKey = "operator-key-0123456789abcdef"
	trustApproverKey = "approver-key-0123456789abcdef"
)

const trustConfig = `server:
  api_keys:
    - {name: viewer, key_env: VIEWER_KEY, role: viewer}
    - {name: ci, key: "${CI_KEY}", role: operator}
    - {name: bob, key_env: BOB_KEY, role: approver}
agents:
  demo:
    model: {provider: demo}
    tools: [deploy]
tools:
  deploy:
    builtin: demo_deploy
    parameters:
      type: object
      properties:
        service: {type: string}
        env: {type: string, enum: [staging, production]}
    approval: {required: true}
`

// From outside, as an attacker would: a viewer key cannot decide, a body's
// decided_by changes nothing, an MCP approval_prompt with a reused
// tool_use_id and another input asks again, and every attempt is in the
// audit log that `agentgate audit` shows.
func TestE2ETrust(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "agentgate.yaml")
	if err := os.WriteFile(cfg, []byte(trustConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, gatewayOptions{config: cfg, env: []string{"AGENTGATE_API_KEYS=" + trustAdminKey,
		"VIEWER_KEY=" + trustViewerKey, "CI_KEY=" + trustOperatorKey, "BOB_KEY=" + trustApproverKey}})
	as := func(key, method, path string, body any, out any) int {
		t.Helper()
		status, b := doHTTP(t, method, g.base+path, body, http.Header{"Authorization": {"Bearer " + key}})
		if out != nil {
			_ = json.Unmarshal(b, out)
		}
		return status
	}
	var run runJSON
	if status := as(trustOperatorKey, "POST", "/api/v1/agents/demo/runs?wait=true", map[string]string{"input": "deploy web to staging"}, &run); status != 200 || len(run.PendingApprovals) != 1 {
		t.Fatalf("operator's run: %d %+v", status, run)
	}
	id := run.PendingApprovals[0].ID
	if status := as(trustViewerKey, "POST", "/api/v1/approvals/"+id+"/decision", map[string]string{"decision": "approve"}, nil); status != 403 {
		t.Fatalf("viewer's decision: %d, want 403", status)
	}
	if status := as("not-a-key-0123456789", "GET", "/api/v1/approvals", nil, nil); status != 401 {
		t.Fatalf("unknown key: %d, want 401", status)
	}
	var decided approvalJSON
	if status := as(trustApproverKey, "POST", "/api/v1/approvals/"+id+"/decision",
		map[string]string{"decision": "approve", "decided_by": "U_APPROVER", "via": "slack"}, &decided); status != 200 {
		t.Fatalf("approver's decision: %d", status)
	}
	if decided.DecidedBy != "key:bob" || decided.DecidedVia != "api" {
		t.Fatalf("decided by %q via %q, want key:bob via api", decided.DecidedBy, decided.DecidedVia)
	}

	// approval_prompt through `agentgate mcp --server` with the operator key.
	c := stdioMCP(t, cleanEnv(), nil, "--server", g.base, "--api-key", trustOperatorKey)
	prompt := func(command string) chan string {
		out := make(chan string, 1)
		go func() {
			req := mcpgo.CallToolRequest{}
			req.Params.Name = "approval_prompt"
			req.Params.Arguments = map[string]any{"tool_name": "Bash", "tool_use_id": "toolu_1", "input": map[string]any{"command": command}}
			res, err := c.CallTool(t.Context(), req)
			if err != nil || len(res.Content) == 0 {
				t.Errorf("approval_prompt: %v", err)
				out <- ""
				return
			}
			out <- res.Content[0].(mcpgo.TextContent).Text
		}()
		return out
	}
	pendingOne := func() approvalJSON {
		var list struct {
			Items []approvalJSON `json:"items"`
		}
		eventually(t, "one pending approval", func() (bool, string) {
			as(trustViewerKey, "GET", "/api/v1/approvals?status=pending", nil, &list)
			return len(list.Items) == 1, ""
		})
		return list.Items[0]
	}
	first := prompt("ls")
	a := pendingOne()
	as(trustApproverKey, "POST", "/api/v1/approvals/"+a.ID+"/decision", map[string]string{"decision": "approve"}, nil)
	if got := <-first; got != `{"behavior":"allow","updatedInput":{"command":"ls"}}` {
		t.Fatalf("first answer %s", got)
	}
	second := prompt("rm -rf /important")
	b := pendingOne()
	if b.ID == a.ID {
		t.Fatal("a reused tool_use_id with another input was allowed by the earlier approval")
	}
	as(trustApproverKey, "POST", "/api/v1/approvals/"+b.ID+"/decision", map[string]string{"decision": "deny", "reason": "no"}, nil)
	if got := <-second; !strings.Contains(got, `"behavior":"deny"`) {
		t.Fatalf("second answer %s, want deny", got)
	}

	// The audit log, through the CLI.
	cmd := exec.Command(g.bin, "audit", "--server", g.base, "--api-key", trustAdminKey, "--limit", "100")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agentgate audit: %v\n%s", err, out)
	}
	for _, want := range []string{"role.refused", "key:viewer", "key.refused", "approval.approve", "key:bob", "approval.deny"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("agentgate audit lacks %q:\n%s", want, out)
		}
	}
	cmd = exec.Command(g.bin, "audit", "--server", g.base, "--api-key", trustViewerKey)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "403") {
		t.Errorf("a viewer reading the audit log: %v %s, want refused", err, out)
	}
}
