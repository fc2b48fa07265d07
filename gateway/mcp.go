package gateway

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/routine"
	"github.com/agentgate/agentgate/interfaces/api"
	imcp "github.com/agentgate/agentgate/interfaces/mcp"
)

// mcpSettings are the MCP server's settings, from the environment.
type mcpSettings struct {
	// approval is the rule of approval_prompt's approvals.
	approval core.ApprovalRule
	// approvalsTo is the chat conversation those approvals are posted in.
	approvalsTo core.Binding
}

func mcpFromEnv() (mcpSettings, error) {
	var ms mcpSettings
	if v := os.Getenv("AGENTGATE_MCP_APPROVAL_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return ms, &UsageError{fmt.Sprintf("AGENTGATE_MCP_APPROVAL_TIMEOUT: must be a positive duration like 15m, got %q", v)}
		}
		ms.approval.Timeout = d
	}
	if v := os.Getenv("AGENTGATE_MCP_APPROVALS_CHANNEL"); v != "" {
		t, err := routine.ParseTarget(v)
		if err == nil && !t.Chat() {
			err = fmt.Errorf("must be a chat conversation, got %q", v)
		}
		if err != nil {
			return ms, &UsageError{"AGENTGATE_MCP_APPROVALS_CHANNEL: " + err.Error() + " (e.g. slack:C0123ABC)"}
		}
		ms.approvalsTo = core.Binding{Platform: t.Kind, Channel: t.Dest}
	}
	return ms, nil
}

// mcpHandler is the gateway's /mcp endpoint; MCP clients see version as
// the server's.
func mcpHandler(ms mcpSettings, eng *core.Engine, db core.Store, aps *approval.Service, rt api.Routines, keys []api.Key, version string, log *slog.Logger) http.Handler {
	return imcp.Handler(imcp.Config{Engine: eng, Store: db, Approvals: aps, Routines: rt, Logger: log, Version: version,
		Authenticated: len(keys) > 0, ApprovalsTo: ms.approvalsTo})
}
