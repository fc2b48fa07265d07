// Package mcptest is a small inventory MCP server for agentgate's end-to-end
// tests: a test binary runs it on stdin and stdout (Main) when agentgate
// starts the binary as an MCP server's command.
//
// Its tools: list_items (read-only) and delete_item (destructive). Every
// delete_item call appends "call <id> <key>" to the file named by
// MCPTEST_LOG, with the idempotency key agentgate sends in _meta; the
// deletion itself is applied once per key ("applied <id> <key>"), as a
// server that honours the key would. With MCPTEST_HOLD set, the first call
// of all (the log holds no call yet) never returns: the test kills the
// gateway while it is in flight.
package mcptest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Env is the variable that makes a test binary serve MCP (see Main).
const Env = "MCPTEST_SERVE"

// KeyField is where agentgate puts a call's idempotency key in _meta.
const KeyField = "agentgate/idempotency_key"

// Main serves MCP on stdin and stdout and exits when stdin closes, when the
// process was started with Env set; otherwise it returns at once. Call it
// first in TestMain.
func Main() {
	if os.Getenv(Env) == "" {
		return
	}
	if err := server.ServeStdio(New(os.Getenv("MCPTEST_LOG"), os.Getenv("MCPTEST_HOLD") != "")); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// New returns the inventory server, logging delete_item calls to logPath.
func New(logPath string, holdFirst bool) *server.MCPServer {
	s := server.NewMCPServer("inventory", "1.0.0", server.WithToolCapabilities(true))
	var mu sync.Mutex
	s.AddTool(mcp.NewTool("list_items", mcp.WithDescription("List the items in the inventory."),
		mcp.WithReadOnlyHintAnnotation(true)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("item 42: blue widget\nitem 43: red widget"), nil
		})
	s.AddTool(mcp.NewTool("delete_item", mcp.WithDescription("Delete an item from the inventory, for good."),
		mcp.WithString("id", mcp.Required(), mcp.Description("the item's id")),
		mcp.WithDestructiveHintAnnotation(true)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			id := req.GetString("id", "")
			key := ""
			if m := req.Params.Meta; m != nil {
				key, _ = m.AdditionalFields[KeyField].(string)
			}
			mu.Lock()
			prior, _ := os.ReadFile(logPath)
			first := !strings.Contains(string(prior), "call ")
			appendLine(logPath, fmt.Sprintf("call %s %s", id, key))
			mu.Unlock()
			if holdFirst && first {
				<-ctx.Done() // in flight until the gateway dies
				return nil, ctx.Err()
			}
			mu.Lock()
			defer mu.Unlock()
			prior, _ = os.ReadFile(logPath)
			if key != "" && strings.Contains(string(prior), fmt.Sprintf("applied %s %s\n", id, key)) {
				return mcp.NewToolResultText(fmt.Sprintf("item %s was already deleted by this request", id)), nil
			}
			appendLine(logPath, fmt.Sprintf("applied %s %s", id, key))
			return mcp.NewToolResultText(fmt.Sprintf("deleted item %s", id)), nil
		})
	return s
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}
