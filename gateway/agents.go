package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
	"github.com/agentgate/agentgate/core/model/anthropic"
	"github.com/agentgate/agentgate/core/model/demo"
	"github.com/agentgate/agentgate/core/model/fallback"
	"github.com/agentgate/agentgate/core/model/openai"
	"github.com/agentgate/agentgate/core/tool/builtin"
	"github.com/agentgate/agentgate/core/tool/httptool"
	"github.com/agentgate/agentgate/core/tool/mcptool"
	"github.com/agentgate/agentgate/core/tool/schema"
)

// builtAgents are the engine's agents and what they hold open.
type builtAgents struct {
	agents map[string]*core.Agent
	// checks are the models to check at start, each once.
	checks []modelCheck
	// mcp are the MCP servers agents use (started lazily), closed at stop.
	mcp []*mcptool.Server
}

// modelCheck is one model the gateway asks its provider about at start.
type modelCheck struct {
	path  string // agents.ops.model or agents.ops.model.fallback[0]
	name  string // openai/gpt-4o-mini
	model core.ModelChecker
}

// close stops the MCP servers that were started.
func (b *builtAgents) close() {
	for _, s := range b.mcp {
		_ = s.Close()
	}
}

// buildAgents turns a validated config into engine agents. Nothing is
// started or dialled.
func buildAgents(cfg *config.Config, clock core.Clock, log *slog.Logger) (*builtAgents, error) {
	tools := map[string]core.AgentTool{}
	for name, t := range cfg.Tools {
		at, err := buildTool(name, t, clock)
		if err != nil {
			return nil, err
		}
		tools[name] = at
	}
	b := &builtAgents{agents: map[string]*core.Agent{}}
	sets := map[string]core.ToolSet{}
	for _, name := range sortedNames(cfg.MCPServers) {
		set, srv, err := buildMCP(name, cfg.MCPServers[name], log)
		if err != nil {
			b.close()
			return nil, err
		}
		sets[name] = set
		b.mcp = append(b.mcp, srv)
	}
	for _, id := range sortedNames(cfg.Agents) {
		a := cfg.Agents[id]
		model, err := b.buildModels("agents."+id+".model", a.Model, log)
		if err != nil {
			b.close()
			return nil, fmt.Errorf("config: agents.%s.model: %w", id, err)
		}
		ag := &core.Agent{
			ID: id, Description: a.Description, Instructions: a.Instructions,
			Provider: a.Model.Provider, ModelName: a.Model.Name, Model: model,
			HistoryRuns: a.HistoryRuns, MaxSteps: a.MaxSteps, Images: a.Model.TakesImages(),
			LargeResultChars: a.LargeResultChars,
		}
		if ag.ModelName == "" {
			ag.ModelName = a.Model.Provider
		}
		for _, tn := range a.Tools {
			ag.Tools = append(ag.Tools, tools[tn])
		}
		for _, sn := range a.MCPServers {
			ag.ToolSets = append(ag.ToolSets, sets[sn])
		}
		b.agents[id] = ag
	}
	return b, nil
}

// buildModels builds m and its fallbacks, noting each for the start check.
func (b *builtAgents) buildModels(path string, m config.Model, log *slog.Logger) (core.Model, error) {
	primary, err := b.buildModel(path, m)
	if err != nil || len(m.Fallback) == 0 {
		return primary, err
	}
	chain := &fallback.Model{Logger: log, Models: []fallback.Named{{Name: modelName(m), Model: primary}}}
	for i, f := range m.Fallback {
		fm, err := b.buildModel(fmt.Sprintf("%s.fallback[%d]", path, i), f)
		if err != nil {
			return nil, fmt.Errorf("fallback[%d]: %w", i, err)
		}
		chain.Models = append(chain.Models, fallback.Named{Name: modelName(f), Model: fm})
	}
	return chain, nil
}

func modelName(m config.Model) string {
	if m.Name == "" {
		return m.Provider
	}
	return m.Provider + "/" + m.Name
}

func (b *builtAgents) buildModel(path string, m config.Model) (core.Model, error) {
	m = m.WithEnv(os.LookupEnv)
	var model core.Model
	var err error
	switch m.Provider {
	case "demo":
		return demo.Model{}, nil
	case "openai":
		model, err = openai.New(openai.Config{Model: m.Name, BaseURL: m.BaseURL, APIKey: m.APIKey, Timeout: m.Timeout})
	case "anthropic":
		model, err = anthropic.New(anthropic.Config{Model: m.Name, BaseURL: m.BaseURL, APIKey: m.APIKey, Timeout: m.Timeout})
	default:
		return nil, fmt.Errorf("unknown provider %q", m.Provider)
	}
	if err != nil {
		return nil, err
	}
	if c, ok := model.(core.ModelChecker); ok {
		b.checks = append(b.checks, modelCheck{path: path, name: modelName(m), model: c})
	}
	return model, nil
}

// checkTimeout bounds the start check of each model.
const checkTimeout = 5 * time.Second

// checkModels asks each model's provider, at once and in parallel, whether
// it accepts the key and knows the model. It returns one problem per
// refusal ("agents.ops.model: openai/gpt-4o-mini: refused: the API key was
// refused: …") and one warning per provider it could not ask.
func (b *builtAgents) checkModels(ctx context.Context) (problems, warnings []string) {
	for i, err := range b.askProviders(ctx) {
		c := b.checks[i]
		switch {
		case err == nil:
		case errors.Is(err, core.ErrModelRefused):
			problems = append(problems, fmt.Sprintf("%s: %s: %v", c.path, c.name, err))
		default:
			warnings = append(warnings, fmt.Sprintf("%s: %s: could not check the model now (runs will retry): %v", c.path, c.name, err))
		}
	}
	return problems, warnings
}

// askProviders checks every model at once, for at most checkTimeout;
// errs[i] is b.checks[i]'s answer.
func (b *builtAgents) askProviders(ctx context.Context) []error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	errs := make([]error, len(b.checks))
	var wg sync.WaitGroup
	for i, c := range b.checks {
		wg.Go(func() { errs[i] = c.model.Check(ctx) })
	}
	wg.Wait()
	return errs
}

// buildMCP returns the tool set of one configured MCP server: its tools
// with the approval the config gives each.
func buildMCP(name string, s config.MCPServer, log *slog.Logger) (core.ToolSet, *mcptool.Server, error) {
	srv, err := mcptool.New(mcptool.Config{
		Name: name, Command: s.Command, Args: s.Args, Env: s.Env, Dir: s.Dir,
		URL: s.URL, Headers: s.Headers, Allow: s.Allow, Deny: s.Deny, Timeout: s.Timeout,
		Logger: log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("config: mcp_servers.%s: %w", name, err)
	}
	return &mcpTools{srv: srv, cfg: s, name: name}, srv, nil
}

// mcpTools is an MCP server's tools as agent tools.
type mcpTools struct {
	srv  *mcptool.Server
	cfg  config.MCPServer
	name string // in the config's mcp_servers
}

var _ core.ToolSet = (*mcpTools)(nil)

// Tools lists the server's allowed tools (from its cache), each with its
// schema check and approval rule.
func (m *mcpTools) Tools(ctx context.Context) ([]core.AgentTool, error) {
	infos, err := m.srv.Tools(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]core.AgentTool, 0, len(infos))
	for _, t := range infos {
		at := core.AgentTool{
			Spec:     core.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters},
			Tool:     m.srv.Tool(t.Name),
			Approval: approvalRule(m.cfg.ToolApproval(t.Name, t.ReadOnly)),
			Origin:   "mcp:" + m.name,
		}
		if sch, err := schema.Compile(t.Name, t.Parameters); err == nil {
			at.Validate = sch.Validate
		} // a schema we cannot compile is the server's to enforce
		out = append(out, at)
	}
	return out, nil
}

func approvalRule(a config.Approval) core.ApprovalRule {
	return core.ApprovalRule{
		Required: a.Required, Timeout: a.Timeout,
		Policy: core.ApprovalPolicy{Approvers: a.Approvers, ExcludeRequester: a.ExcludeRequester},
	}
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
		Approval: approvalRule(t.Approval),
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

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// joinLines indents problems under a heading, one per line.
func joinLines(lines []string) string { return strings.Join(lines, "\n  ") }
