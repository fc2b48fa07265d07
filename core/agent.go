package core

import (
	"context"
	"encoding/json"
	"time"
)

// Agent is a configured agent: instructions, a model and the tools it may call.
type Agent struct {
	ID           string
	Description  string
	Instructions string
	Provider     string // model provider name, for display
	ModelName    string // model name, for display
	Model        Model
	Tools        []AgentTool
	// ToolSets are tools found at run time (an MCP server's), asked for
	// before each model call and tool call. Tools wins over a set's tool
	// of the same name.
	ToolSets []ToolSet
	// HistoryRuns is how many earlier completed runs of the session (their
	// input and output) the model sees. Default 10; negative = none.
	HistoryRuns int
	// MaxSteps caps the model calls in one run. Default 25.
	MaxSteps int
	// Images: the model takes images; attached images are given to it as
	// images, not described.
	Images bool
	// LargeResultChars is the longest tool result the model sees whole;
	// a longer one is shown as a preview and a handle, read with the
	// built-in read_result and search_result tools. Default
	// DefaultLargeResultChars; negative = no limit.
	LargeResultChars int
}

// ToolSet is a group of tools listed at run time, such as an MCP server's.
// Tools is called often: it should answer from a cache. An error is
// transient: the step is retried.
type ToolSet interface {
	Tools(ctx context.Context) ([]AgentTool, error)
}

// ApprovalRule says whether a tool call waits for a human decision.
type ApprovalRule struct {
	Required bool
	// Timeout after which a pending approval expires. Default 15 minutes.
	Timeout time.Duration
	Policy  ApprovalPolicy
}

// AgentTool is a tool as an agent uses it.
type AgentTool struct {
	Spec ToolSpec
	Tool Tool
	// Validate checks the arguments against the tool's JSON Schema; nil
	// accepts any JSON object. Its error message is shown to the model.
	Validate func(args json.RawMessage) error
	Approval ApprovalRule
	// Origin names where the tool comes from ("mcp:<server>" for an MCP
	// server's; "" for the agent's own): an approval is for the tool of
	// that origin only, should another take its name before the call runs.
	Origin string
}

// tools returns the agent's tools and those of its tool sets. A name is
// one tool: the agent's own wins, then the first set's (the order of the
// agent's mcp_servers). A model offered two tools of one name could not
// say which it calls (and some providers refuse the request).
func (a *Agent) tools(ctx context.Context) ([]AgentTool, error) {
	if len(a.ToolSets) == 0 {
		return a.Tools, nil
	}
	all := append([]AgentTool(nil), a.Tools...)
	taken := make(map[string]bool, len(all))
	for _, t := range all {
		taken[t.Spec.Name] = true
	}
	for _, set := range a.ToolSets {
		ts, err := set.Tools(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if !taken[t.Spec.Name] {
				taken[t.Spec.Name] = true
				all = append(all, t)
			}
		}
	}
	return all, nil
}

// Tool returns the agent's configured tool called name (not a tool set's).
func (a *Agent) Tool(name string) (*AgentTool, bool) {
	t := findTool(a.Tools, name)
	return t, t != nil
}

func (a *Agent) historyRuns() int {
	switch {
	case a.HistoryRuns < 0:
		return 0
	case a.HistoryRuns == 0:
		return 10
	}
	return a.HistoryRuns
}

func (a *Agent) maxSteps() int {
	if a.MaxSteps <= 0 {
		return 25
	}
	return a.MaxSteps
}
