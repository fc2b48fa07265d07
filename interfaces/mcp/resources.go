package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentgate/agentgate/interfaces/api"
)

// registerResources offers each agent as a resource (agentgate://agents/ID,
// its description, model and tools), runs as a resource template
// (agentgate://runs/ID) and the review_approvals prompt.
func (h *handlers) registerResources(s *server.MCPServer) {
	for _, v := range api.ViewAgents(h.cfg.Engine.Agents()) {
		desc := v.Description
		if desc == "" {
			desc = "agent " + v.ID
		}
		s.AddResource(mcpgo.NewResource("agentgate://agents/"+v.ID, v.ID,
			mcpgo.WithResourceDescription(desc), mcpgo.WithMIMEType("application/json")),
			func(ctx context.Context, req mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
				return jsonContents(req.Params.URI, v)
			})
	}
	s.AddResourceTemplate(mcpgo.NewResourceTemplate("agentgate://runs/{id}", "run",
		mcpgo.WithTemplateDescription("a run with its status, output and pending approvals"), mcpgo.WithTemplateMIMEType("application/json")),
		func(ctx context.Context, req mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
			run, err := h.cfg.Store.GetRun(ctx, strings.TrimPrefix(req.Params.URI, "agentgate://runs/"))
			if err == nil && !caller(ctx).MayUseAgent(run.AgentID) {
				err = fmt.Errorf("run %s: the key is limited to other agents than %s", run.ID, run.AgentID)
			}
			if err != nil {
				return nil, err
			}
			v, err := api.ViewRun(ctx, h.cfg.Store, run)
			if err != nil {
				return nil, err
			}
			return jsonContents(req.Params.URI, v)
		})
	s.AddPrompt(mcpgo.NewPrompt("review_approvals",
		mcpgo.WithPromptDescription("Go through the approvals waiting for a decision and decide each one with me."),
	), func(ctx context.Context, req mcpgo.GetPromptRequest) (*mcpgo.GetPromptResult, error) {
		return mcpgo.NewGetPromptResult("Review pending approvals", []mcpgo.PromptMessage{
			mcpgo.NewPromptMessage(mcpgo.RoleUser, mcpgo.NewTextContent(
				"List the approvals waiting for a decision (list_approvals). For each, tell me which agent wants to call which tool "+
					"with which arguments, and what it would do; then ask me whether to approve or deny it, and record my answer with decide_approval.")),
		}), nil
	})
}

func jsonContents(uri string, v any) ([]mcpgo.ResourceContents, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return []mcpgo.ResourceContents{mcpgo.TextResourceContents{URI: uri, MIMEType: "application/json", Text: string(b)}}, nil
}
