// Package config reads agentgate's YAML configuration: agents, their models
// and tools, and server settings. `${VAR}` (or `${VAR:-default}`) in a value
// expands from the environment after parsing (see Expand). Errors name the
// line, the field path and what to fix.
package config

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentgate/agentgate/core/tool/schema"
)

// Config is the whole file.
type Config struct {
	Server Server           `yaml:"server"`
	Agents map[string]Agent `yaml:"agents"`
	Tools  map[string]Tool  `yaml:"tools"`
	// Routines are scheduled agent runs, by id (see routines.go).
	Routines map[string]Routine `yaml:"routines"`
	// Interfaces configures the chat platforms (see interfaces.go).
	Interfaces Interfaces `yaml:"interfaces"`
	// People links each person's platform ids and API keys (see people.go).
	People map[string]Person `yaml:"people"`
	// Egress limits where destinations sent through the API may connect
	// (see egress.go).
	Egress Egress `yaml:"egress"`
	// MCPServers are MCP servers whose tools agents may call, by name
	// (see mcp.go).
	MCPServers map[string]MCPServer `yaml:"mcp_servers"`
	// Retention says how long finished work is kept (see retention.go).
	Retention Retention `yaml:"retention"`
}

// Server holds settings that may also come from flags and the environment;
// flags win over the environment, which wins over the file.
type Server struct {
	// APIKeys are bearer keys for the REST API, MCP and the CLI, with
	// names and roles; added to AGENTGATE_API_KEYS (admin keys).
	APIKeys []APIKey `yaml:"api_keys"`
	// Workers is how many runs advance in parallel, 1 to MaxWorkers.
	// Default 8.
	Workers int `yaml:"workers"`
	// AllowedHosts are Host names the REST API and /mcp answer besides the
	// loopback names. Empty: with API keys any Host, without keys loopback
	// names only (a web page cannot reach the API through DNS rebinding).
	AllowedHosts []string `yaml:"allowed_hosts"`
	// TrustedOrigins are web origins (https://ops.example.com) whose pages
	// may change state through the API from a browser.
	TrustedOrigins []string `yaml:"trusted_origins"`
	// MetricsAddr, when set, is a second listen address (127.0.0.1:9090)
	// serving /metrics, /readyz and /healthz without a key; /metrics then
	// leaves the main address.
	MetricsAddr string `yaml:"metrics_addr"`
	// MaxConnections caps the connections open at once on the main
	// address; one more is answered 503 and closed. 0 = DefaultMaxConnections.
	MaxConnections int `yaml:"max_connections"`
	// MaxStreams caps the event streams (SSE) open at once, and
	// MaxStreamsPerKey those of one API key. 0 = the defaults.
	MaxStreams       int `yaml:"max_streams"`
	MaxStreamsPerKey int `yaml:"max_streams_per_key"`
}

// Defaults of the server limits that 0 leaves to the gateway.
const (
	DefaultMaxConnections   = 4096
	DefaultMaxStreams       = 1000
	DefaultMaxStreamsPerKey = 100
)

// Agent configures one agent.
type Agent struct {
	Description  string `yaml:"description"`
	Instructions string `yaml:"instructions"`
	Model        Model  `yaml:"model"`
	// Tools names entries of the top-level tools map.
	Tools []string `yaml:"tools"`
	// HistoryRuns is how many earlier runs of the session the model sees.
	// Default 10; -1 = none.
	HistoryRuns int `yaml:"history_runs"`
	// MaxSteps caps the model calls of one run. Default 25.
	MaxSteps int `yaml:"max_steps"`
	// MCPServers names entries of the top-level mcp_servers map: their
	// tools are the agent's too.
	MCPServers []string `yaml:"mcp_servers"`
	// LargeResultChars is the longest tool result the model sees whole; a
	// longer one is kept whole in the journal and shown as its beginning
	// and a handle that the built-in tools read_result and search_result
	// read. Default 16000; -1 = no limit.
	LargeResultChars int `yaml:"large_result_chars"`
}

// Model selects a model provider.
type Model struct {
	// Provider: "openai" (any OpenAI-compatible Chat Completions API: OpenAI,
	// Ollama, vLLM, OpenRouter, LM Studio), "anthropic" (the Messages API)
	// or "demo" (offline, built in).
	Provider string `yaml:"provider"`
	// Name of the model, e.g. gpt-4o-mini or claude-sonnet-4-5. Required
	// for openai and anthropic.
	Name string `yaml:"name"`
	// BaseURL of the API; empty = the provider's default (for anthropic,
	// ANTHROPIC_BASE_URL when set).
	BaseURL string `yaml:"base_url"`
	// APIKey for the provider. Required for OpenAI's own API and for
	// anthropic (default ANTHROPIC_API_KEY); a local server given in
	// base_url may need none.
	APIKey string `yaml:"api_key"`
	// Timeout of one model call. Default 120s.
	Timeout time.Duration `yaml:"timeout"`
	// Images: whether the model takes images. Attached images are then
	// given to it as images; otherwise every attachment is described by
	// name, type and size. Default true for openai, false for demo.
	Images *bool `yaml:"images"`
	// Fallback lists models tried in order when this one is down
	// (unreachable, overloaded, rate limited or failing after its
	// retries) before it has streamed any text. A fallback has no
	// fallback of its own.
	Fallback []Model `yaml:"fallback"`
}

// TakesImages reports whether the model takes images (Images, or the
// provider's default).
func (m Model) TakesImages() bool {
	if m.Images != nil {
		return *m.Images
	}
	return m.Provider == "openai" || m.Provider == "anthropic"
}

// WithEnv returns m with the provider's environment defaults filled in
// from lookup: for anthropic, ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL
// when api_key and base_url are empty.
func (m Model) WithEnv(lookup func(string) (string, bool)) Model {
	if m.Provider == "anthropic" {
		if m.APIKey == "" {
			m.APIKey, _ = lookup("ANTHROPIC_API_KEY")
		}
		if m.BaseURL == "" {
			m.BaseURL, _ = lookup("ANTHROPIC_BASE_URL")
		}
	}
	return m
}

// Tool configures one tool: exactly one of HTTP or Builtin.
type Tool struct {
	Description string    `yaml:"description"`
	HTTP        *HTTPTool `yaml:"http"`
	// Builtin names a tool compiled into agentgate (see Builtins).
	Builtin string `yaml:"builtin"`
	// Parameters is the JSON Schema of the arguments; default: any object.
	Parameters map[string]any `yaml:"parameters"`
	Approval   Approval       `yaml:"approval"`
}

// HTTPTool calls a URL with the JSON arguments as the body.
type HTTPTool struct {
	URL string `yaml:"url"`
	// Method: POST (default), PUT or PATCH.
	Method string `yaml:"method"`
	// Timeout of one call. Default 30s.
	Timeout time.Duration     `yaml:"timeout"`
	Headers map[string]string `yaml:"headers"`
}

// Approval makes a tool wait for a human decision.
type Approval struct {
	Required bool `yaml:"required"`
	// Timeout after which a pending approval expires. Default 15m.
	Timeout time.Duration `yaml:"timeout"`
	// Approvers who may decide (user ids, group ids, or "requester");
	// empty = anyone who can reach the approval.
	Approvers []string `yaml:"approvers"`
	// ExcludeRequester demands a second person.
	ExcludeRequester bool `yaml:"exclude_requester"`
}

// validateApproval checks a tool's approval settings at path.
func validateApproval(add func(path, format string, args ...any), path string, a Approval) {
	if a.Timeout < 0 {
		add(path+".timeout", "must be positive, like 15m")
	}
	if !a.Required && (a.Timeout != 0 || len(a.Approvers) > 0 || a.ExcludeRequester) {
		add(path+".required", "approval settings are given but required is false; set required: true")
	}
	for i, who := range a.Approvers {
		if strings.TrimSpace(who) == "" {
			add(fmt.Sprintf("%s.approvers[%d]", path, i), "is empty (an environment variable set to \"\"?): name a person, a platform id, key:<name>, role:<role>, a group or requester")
		}
	}
}

// validateModel checks one model at path; a missing key is found here, at
// start, not at the first run.
func validateModel(add func(path, format string, args ...any), path string, m Model, lookup func(string) (string, bool)) {
	m = m.WithEnv(lookup)
	switch m.Provider {
	case "openai":
		if m.Name == "" {
			add(path+".name", "required for provider openai (e.g. gpt-4o-mini)")
		}
		if m.BaseURL == "" && m.APIKey == "" {
			add(path+".api_key", "required for OpenAI's API: set api_key: ${OPENAI_API_KEY} (a local server given in base_url may need none)")
		}
	case "anthropic":
		if m.Name == "" {
			add(path+".name", "required for provider anthropic (e.g. claude-sonnet-4-5)")
		}
		if m.APIKey == "" {
			add(path+".api_key", "required for provider anthropic: set ANTHROPIC_API_KEY or api_key")
		}
	case "demo":
	case "":
		add(path+".provider", "required: one of %s", strings.Join(Providers, ", "))
	default:
		add(path+".provider", "unknown provider %q (known: %s)", m.Provider, strings.Join(Providers, ", "))
	}
	if m.BaseURL != "" {
		u, err := url.Parse(m.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add(path+".base_url", "must be an absolute http(s) URL or empty, got %q", m.BaseURL)
		}
	}
	if m.Timeout < 0 {
		add(path+".timeout", "must be positive, like 60s")
	}
}

// Builtins are the tool names usable as `builtin:`.
var Builtins = []string{"demo_deploy", "clock"}

// Providers are the accepted model providers.
var Providers = []string{"openai", "anthropic", "demo"}

// Error lists every problem found in a file.
type Error struct {
	File     string
	Problems []Problem
}

// Problem is one mistake in a file: where it is and what to do about it.
type Problem struct {
	// Line in the file, from 1; 0 when unknown (e.g. a missing section).
	Line int
	// Path of the field, like agents.ops.model.name; empty for the file.
	Path string
	Msg  string
}

// Lines returns one line per problem, like
// "agentgate.yaml:12: agents.ops.model.name: required for provider openai".
func (e *Error) Lines() []string {
	lines := make([]string, 0, len(e.Problems))
	for _, p := range e.Problems {
		var parts []string
		switch {
		case e.File != "" && p.Line > 0:
			parts = append(parts, fmt.Sprintf("%s:%d", e.File, p.Line))
		case e.File != "":
			parts = append(parts, e.File)
		case p.Line > 0:
			parts = append(parts, fmt.Sprintf("line %d", p.Line))
		}
		if p.Path != "" {
			parts = append(parts, p.Path)
		}
		lines = append(lines, strings.Join(append(parts, p.Msg), ": "))
	}
	return lines
}

func (e *Error) Error() string {
	lines := e.Lines()
	if len(lines) == 1 {
		return "config: " + lines[0]
	}
	return fmt.Sprintf("config: %d problems:\n  %s", len(lines), strings.Join(lines, "\n  "))
}

// problems splits validation messages, "path: what to do", into Problems.
func problems(msgs []string) []Problem {
	p := make([]Problem, 0, len(msgs))
	for _, m := range msgs {
		path, msg, ok := strings.Cut(m, ": ")
		if !ok {
			path, msg = "", m
		}
		p = append(p, Problem{Path: path, Msg: msg})
	}
	return p
}

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Validate checks the configuration and returns an *Error listing every
// problem, each prefixed with its field path.
func (c *Config) Validate() error { return c.validate(os.LookupEnv) }

func (c *Config) validate(lookup func(string) (string, bool)) error {
	var p []string
	add := func(path, format string, args ...any) {
		p = append(p, path+": "+fmt.Sprintf(format, args...))
	}
	if w := c.Server.Workers; w < 0 || w > MaxWorkers {
		add("server.workers", "%s", workersRange(w))
	}
	for _, l := range []struct {
		path string
		n    int
	}{{"server.max_connections", c.Server.MaxConnections}, {"server.max_streams", c.Server.MaxStreams},
		{"server.max_streams_per_key", c.Server.MaxStreamsPerKey}} {
		if l.n < 0 {
			add(l.path, "must be a positive number, got %d (leave it out for the default)", l.n)
		}
	}
	if a := c.Server.MetricsAddr; a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			add("server.metrics_addr", "must be host:port (127.0.0.1:9090), got %q", a)
		}
	}
	if len(c.Agents) == 0 {
		add("agents", "define at least one agent")
	}
	for _, name := range sortedKeys(c.Tools) {
		t := c.Tools[name]
		path := "tools." + name
		if !idPattern.MatchString(name) {
			add(path, "tool names use lowercase letters, digits, _ and - (at most 64)")
		}
		switch {
		case t.HTTP == nil && t.Builtin == "":
			add(path, "set http (a URL to call) or builtin (one of %s)", strings.Join(Builtins, ", "))
		case t.HTTP != nil && t.Builtin != "":
			add(path, "set only one of http and builtin")
		case t.HTTP != nil:
			u, err := url.Parse(t.HTTP.URL)
			if t.HTTP.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				add(path+".http.url", "must be an absolute http(s) URL, got %q", t.HTTP.URL)
			}
			if m := strings.ToUpper(t.HTTP.Method); m != "" && m != "POST" && m != "PUT" && m != "PATCH" {
				add(path+".http.method", "must be POST, PUT or PATCH, got %q", t.HTTP.Method)
			}
			if t.HTTP.Timeout < 0 {
				add(path+".http.timeout", "must be positive, like 10s")
			}
		default:
			if !slices.Contains(Builtins, t.Builtin) {
				add(path+".builtin", "unknown builtin %q (known: %s)", t.Builtin, strings.Join(Builtins, ", "))
			}
		}
		if t.Parameters != nil {
			if _, err := schema.Compile(name, t.ParametersJSON()); err != nil {
				add(path+".parameters", "%v", err)
			}
		}
		validateApproval(add, path+".approval", t.Approval)
	}
	for _, name := range sortedKeys(c.Agents) {
		a := c.Agents[name]
		path := "agents." + name
		if !idPattern.MatchString(name) {
			add(path, "agent names use lowercase letters, digits, _ and - (at most 64)")
		}
		validateModel(add, path+".model", a.Model, lookup)
		for i, f := range a.Model.Fallback {
			fp := fmt.Sprintf("%s.model.fallback[%d]", path, i)
			validateModel(add, fp, f, lookup)
			if len(f.Fallback) > 0 {
				add(fp+".fallback", "a fallback has no fallback of its own; list every model under the first one")
			}
		}
		if a.LargeResultChars < -1 {
			add(path+".large_result_chars", "must be -1 (no limit), 0 (default 16000) or more")
		}
		for i, sn := range a.MCPServers {
			if _, ok := c.MCPServers[sn]; !ok {
				add(fmt.Sprintf("%s.mcp_servers[%d]", path, i), "unknown MCP server %q (defined: %s)", sn, strings.Join(sortedKeys(c.MCPServers), ", "))
			}
		}
		if a.HistoryRuns < -1 {
			add(path+".history_runs", "must be -1 (none), 0 (default 10) or more")
		}
		if a.MaxSteps < 0 {
			add(path+".max_steps", "must be 0 (default 25) or more")
		}
		seen := map[string]bool{}
		for i, tn := range a.Tools {
			tp := fmt.Sprintf("%s.tools[%d]", path, i)
			if _, ok := c.Tools[tn]; !ok {
				add(tp, "unknown tool %q (defined tools: %s)", tn, strings.Join(sortedKeys(c.Tools), ", "))
			}
			if seen[tn] {
				add(tp, "tool %q is listed twice", tn)
			}
			seen[tn] = true
		}
	}
	p = append(p, c.validateMCP()...)
	p = append(p, c.validateKeys(lookup)...)
	p = append(p, c.validateRoutines()...)
	p = append(p, c.validateInterfaces()...)
	p = append(p, c.validateTelegram()...)
	p = append(p, c.validateDiscord()...)
	p = append(p, c.validateEgress()...)
	p = append(p, c.validateRetention()...)
	if len(p) > 0 {
		return &Error{Problems: problems(p)}
	}
	return nil
}

// ParametersJSON returns the tool's JSON Schema as JSON (an object schema
// accepting anything when none is set).
func (t Tool) ParametersJSON() json.RawMessage {
	if t.Parameters == nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	b, err := json.Marshal(t.Parameters)
	if err != nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return b
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Default is the configuration used when no file is given: the offline demo
// agent with a deploy tool that needs approval.
func Default() *Config {
	return &Config{
		Agents: map[string]Agent{
			"demo": {
				Description:  "Offline demo agent: answers without an API key, calls a deploy tool that waits for approval.",
				Instructions: "You are the agentgate demo agent.",
				Model:        Model{Provider: "demo"},
				Tools:        []string{"deploy", "clock"},
			},
		},
		Tools: map[string]Tool{
			"deploy": {
				Description: "Deploy a service to an environment (demo: nothing is deployed).",
				Builtin:     "demo_deploy",
				Parameters: map[string]any{
					"type": "object",
					"properties": map[string]any{
						"service": map[string]any{"type": "string"},
						"env":     map[string]any{"type": "string", "enum": []any{"staging", "production"}},
					},
					"required": []any{"service", "env"},
				},
				Approval: Approval{Required: true, Timeout: 15 * time.Minute},
			},
			"clock": {
				Description: "Tell the current time in UTC.",
				Builtin:     "clock",
				Parameters:  map[string]any{"type": "object"},
			},
		},
	}
}
