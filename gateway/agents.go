package gateway

import (
	"fmt"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
	"github.com/agentgate/agentgate/core/model/demo"
	"github.com/agentgate/agentgate/core/model/openai"
	"github.com/agentgate/agentgate/core/tool/builtin"
	"github.com/agentgate/agentgate/core/tool/httptool"
	"github.com/agentgate/agentgate/core/tool/schema"
)

// buildAgents turns a validated config into engine agents.
func buildAgents(cfg *config.Config, clock core.Clock) (map[string]*core.Agent, error) {
	tools := map[string]core.AgentTool{}
	for name, t := range cfg.Tools {
		at, err := buildTool(name, t, clock)
		if err != nil {
			return nil, err
		}
		tools[name] = at
	}
	agents := map[string]*core.Agent{}
	for id, a := range cfg.Agents {
		model, err := buildModel(a.Model)
		if err != nil {
			return nil, fmt.Errorf("config: agents.%s.model: %w", id, err)
		}
		ag := &core.Agent{
			ID: id, Description: a.Description, Instructions: a.Instructions,
			Provider: a.Model.Provider, ModelName: a.Model.Name, Model: model,
			HistoryRuns: a.HistoryRuns, MaxSteps: a.MaxSteps, Images: a.Model.TakesImages(),
		}
		if ag.ModelName == "" {
			ag.ModelName = a.Model.Provider
		}
		for _, tn := range a.Tools {
			ag.Tools = append(ag.Tools, tools[tn])
		}
		agents[id] = ag
	}
	return agents, nil
}

func buildModel(m config.Model) (core.Model, error) {
	switch m.Provider {
	case "demo":
		return demo.Model{}, nil
	case "openai":
		return openai.New(openai.Config{Model: m.Name, BaseURL: m.BaseURL, APIKey: m.APIKey, Timeout: m.Timeout})
	}
	return nil, fmt.Errorf("unknown provider %q", m.Provider)
}

func buildTool(name string, t config.Tool, clock core.Clock) (core.AgentTool, error) {
	params := t.ParametersJSON()
	sch, err := schema.Compile(name, params)
	if err != nil {
		return core.AgentTool{}, fmt.Errorf("config: tools.%s.parameters: %w", name, err)
	}
	at := core.AgentTool{
		Spec:     core.ToolSpec{Name: name, Description: t.Description, Parameters: params},
		Validate: sch.Validate,
		Approval: core.ApprovalRule{
			Required: t.Approval.Required, Timeout: t.Approval.Timeout,
			Policy: core.ApprovalPolicy{Approvers: t.Approval.Approvers, ExcludeRequester: t.Approval.ExcludeRequester},
		},
	}
	if t.HTTP != nil {
		at.Tool, err = httptool.New(httptool.Config{URL: t.HTTP.URL, Method: t.HTTP.Method, Timeout: t.HTTP.Timeout, Headers: t.HTTP.Headers})
	} else {
		at.Tool, err = builtin.New(t.Builtin, clock)
	}
	if err != nil {
		return core.AgentTool{}, fmt.Errorf("config: tools.%s: %w", name, err)
	}
	return at, nil
}
