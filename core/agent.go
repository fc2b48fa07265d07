package core

import (
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
	// HistoryRuns is how many earlier completed runs of the session (their
	// input and output) the model sees. Default 10; negative = none.
	HistoryRuns int
	// MaxSteps caps the model calls in one run. Default 25.
	MaxSteps int
	// Images: the model takes images; attached images are given to it as
	// images, not described.
	Images bool
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
}

// Tool returns the agent's tool called name.
func (a *Agent) Tool(name string) (*AgentTool, bool) {
	for i := range a.Tools {
		if a.Tools[i].Spec.Name == name {
			return &a.Tools[i], true
		}
	}
	return nil, false
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
