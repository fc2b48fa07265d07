package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core/model/fakeopenai"
)

// deleteScript calls the MCP server's delete_item for "delete item N" and
// answers with the tool's result once it is in the conversation.
func deleteScript(req fakeopenai.Request) fakeopenai.Reply {
	if last := req.LastMessage(); last.Role == "tool" {
		return fakeopenai.Reply{Text: "done: " + last.Content}
	}
	f := strings.Fields(req.LastUserText())
	return fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{Name: "delete_item", Arguments: fmt.Sprintf(`{"id":%q}`, f[len(f)-1])}}}
}

// TestE2EMCPToolApprovedAcrossACrash: an agent's MCP server (this test
// binary, serving internal/mcptest on stdio) has a destructive delete_item.
// Its call waits for approval; approved, the call is in flight when the
// gateway is killed -9; after the restart it is called again with the same
// idempotency key, and the server applies it once.
func TestE2EMCPToolApprovedAcrossACrash(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "inventory.log")
	model, modelURL := startModel(t, deleteScript)
	cfg := writeFile(t, "mcp.yaml", fmt.Sprintf(`agents:
  ops:
    model:
      provider: openai
      name: gpt-4o-mini
      base_url: ${OPENAI_BASE_URL}
    mcp_servers: [inventory]
mcp_servers:
  inventory:
    command: %q
    env: {MCPTEST_SERVE: "1", MCPTEST_LOG: %q, MCPTEST_HOLD: "1"}
`, self, logPath))
	g := startGateway(t, gatewayOptions{config: cfg, env: []string{"OPENAI_BASE_URL=" + modelURL}})

	run := g.submit("ops", map[string]string{"input": "delete item 42"})
	apr := onlyPending(t, run) // destructive, not read-only: it waits for a person
	if apr.Tool != "delete_item" || apr.Origin != "mcp:inventory" {
		t.Fatalf("approval for %q of %q, want delete_item of mcp:inventory", apr.Tool, apr.Origin)
	}
	var offered []string
	for _, tool := range model.Requests()[0].Tools {
		offered = append(offered, tool.Name)
	}
	if slices.Sort(offered); strings.Join(offered, ",") != "delete_item,list_items" {
		t.Fatalf("tools offered to the model = %v, want the server's delete_item and list_items", offered)
	}
	if data, _ := os.ReadFile(logPath); len(data) != 0 {
		t.Fatalf("delete_item ran before its approval: %s", data)
	}

	if status, body := g.decide(apr.ID, "approve", ""); status != http.StatusOK {
		t.Fatalf("approve: status %d: %s", status, body)
	}
	key := run.ID + ":" + apr.ToolCallID
	eventually(t, "the approved call to reach the MCP server", func() (bool, string) {
		data, _ := os.ReadFile(logPath)
		return strings.Contains(string(data), "call 42 "+key), string(data)
	})
	g.kill() // kill -9 with the call in flight

	g.start()
	run = g.waitRun(run.ID, "completed")
	if run.Output != "done: deleted item 42" {
		t.Errorf("output = %q", run.Output)
	}
	data, _ := os.ReadFile(logPath)
	if want := fmt.Sprintf("call 42 %s\ncall 42 %s\napplied 42 %s\n", key, key, key); string(data) != want {
		t.Errorf("inventory log:\n%s\nwant the call before and after the crash with one key, applied once:\n%s", data, want)
	}
}
