package config_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core/config"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestExampleFileLoadsAsShipped(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1234/v1")
	t.Setenv("OPENAI_API_KEY", "sk-test")
	c, err := config.Load(filepath.Join("..", "..", "examples", "agentgate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ops := c.Agents["ops"]
	if ops.Model.BaseURL != "http://127.0.0.1:1234/v1" || ops.Model.APIKey != "sk-test" || ops.Model.Name != "gpt-4o-mini" {
		t.Fatalf("model = %+v", ops.Model)
	}
	d := c.Tools["deploy"]
	if d.HTTP.URL != "http://127.0.0.1:9999/deploy" || d.HTTP.Timeout != 10*time.Second || !d.Approval.Required || d.Approval.Timeout != 15*time.Minute {
		t.Fatalf("deploy = %+v", d)
	}
	if got := string(d.ParametersJSON()); !strings.Contains(got, `"enum":["staging","production"]`) {
		t.Fatalf("parameters = %s", got)
	}
}

func TestEmptyDefaultLeavesTheProviderDefault(t *testing.T) {
	c, err := config.Parse([]byte("agents:\n  ops:\n    model: {provider: openai, name: m, base_url: \"${OPENAI_BASE_URL:-}\", api_key: \"${OPENAI_API_KEY:-sk-default}\"}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if m := c.Agents["ops"].Model; m.BaseURL != "" || m.APIKey != "sk-default" {
		t.Fatalf("model = %+v, want base_url empty and the default key", m)
	}
}

func TestExpand(t *testing.T) {
	vars := env(map[string]string{"A": "x", "EMPTY": "", "ODD": "a # b: 'c\"\n${A}"})
	cases := []struct {
		in, want, err string
	}{
		{in: "${A}", want: "x"},
		{in: "pre-${A}-post", want: "pre-x-post"},
		{in: "${B:-dflt}", want: "dflt"},
		{in: "${A:-dflt}", want: "x"},
		{in: "${EMPTY}", want: ""},
		{in: "${EMPTY:-dflt}", want: "dflt"},
		{in: "${B:-}", want: ""},
		{in: "${ODD}", want: "a # b: 'c\"\n${A}"}, // verbatim, not expanded again
		{in: "$NOT $$ a$b", want: "$NOT $$ a$b"},
		{in: "$${A}", want: "${A}"},
		{in: "$$${A}", want: "$${A}"},
		{in: "${C}", err: "${C} is not set (set it, or write ${C:-default})"},
		{in: "${C}${D}", err: "${C} is not set (set it, or write ${C:-default}); ${D} is not set"},
		{in: "${A", err: "${A has no closing }"},
		{in: "${1A}", err: "${1A} is not a variable reference"},
		{in: "${A:?x}", err: "${A:?x} is not a variable reference"},
		{in: "${B:-${A}}", err: "a default cannot hold another ${...}"},
	}
	for _, tc := range cases {
		got, err := config.Expand(tc.in, vars)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Expand(%q) error = %v, want it to contain %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("Expand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestErrorsNameTheFieldAndTheFix(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"relative url", `
agents: {a: {model: {provider: demo}, tools: [deploy]}}
tools: {deploy: {http: {url: /deploy}}}`, "tools.deploy.http.url: must be an absolute http(s) URL"},
		{"unknown tool", `
agents: {a: {model: {provider: demo}, tools: [nope]}}`, `agents.a.tools[0]: unknown tool "nope"`},
		{"no provider", `
agents: {a: {model: {name: x}}}`, "agents.a.model.provider: required: one of openai, anthropic, demo"},
		{"openai without name", `
agents: {a: {model: {provider: openai}}}`, "agents.a.model.name: required for provider openai"},
		{"bad provider", `
agents: {a: {model: {provider: gpt}}}`, `agents.a.model.provider: unknown provider "gpt"`},
		{"no agents", `tools: {}`, "agents: define at least one agent"},
		{"unknown field", `
agents: {a: {model: {provider: demo}, tool: [x]}}`, "line 2: agents.a.tool: field tool not found (the fields here are description, instructions, model, tools, history_runs, max_steps, mcp_servers, large_result_chars)"},
		{"bad duration", `
agents: {a: {model: {provider: demo, timeout: soon}}}`, `line 2: agents.a.model.timeout: want a duration like 30s, 15m or 2h, got "soon"`},
		{"tool without kind", `
agents: {a: {model: {provider: demo}}}
tools: {t: {description: x}}`, "tools.t: set http (a URL to call) or builtin"},
		{"bad schema", `
agents: {a: {model: {provider: demo}}}
tools: {t: {builtin: clock, parameters: {type: objekt}}}`, "tools.t.parameters:"},
		{"approval settings without required", `
agents: {a: {model: {provider: demo}}}
tools: {t: {builtin: clock, approval: {timeout: 1m}}}`, "tools.t.approval.required:"},
		{"bad method", `
agents: {a: {model: {provider: demo}}}
tools: {t: {http: {url: "http://x/y", method: GET}}}`, "tools.t.http.method: must be POST, PUT or PATCH"},
		{"bad base url", `
agents: {a: {model: {provider: openai, name: m, base_url: "localhost:11434"}}}`, "agents.a.model.base_url: must be an absolute http(s) URL"},
		{"openai without a key", `
agents: {a: {model: {provider: openai, name: gpt-4o-mini}}}`, "agents.a.model.api_key: required for OpenAI's API: set api_key: ${OPENAI_API_KEY}"},
		{"anthropic without a key", `
agents: {a: {model: {provider: anthropic, name: claude-sonnet-4-5}}}`, "agents.a.model.api_key: required for provider anthropic: set ANTHROPIC_API_KEY or api_key"},
		{"anthropic without a name", `
agents: {a: {model: {provider: anthropic, api_key: k}}}`, "agents.a.model.name: required for provider anthropic"},
		{"fallback without a key", `
agents: {a: {model: {provider: demo, fallback: [{provider: anthropic, name: m}]}}}`, "agents.a.model.fallback[0].api_key: required for provider anthropic"},
		{"nested fallback", `
agents: {a: {model: {provider: demo, fallback: [{provider: demo, fallback: [{provider: demo}]}]}}}`, "agents.a.model.fallback[0].fallback: a fallback has no fallback of its own"},
		{"unknown mcp server", `
agents: {a: {model: {provider: demo}, mcp_servers: [github]}}`, `agents.a.mcp_servers[0]: unknown MCP server "github"`},
		{"mcp server without command or url", `
agents: {a: {model: {provider: demo}}}
mcp_servers: {fs: {args: [x]}}`, "mcp_servers.fs: set command (a program speaking MCP on stdio) or url"},
		{"mcp server with both", `
agents: {a: {model: {provider: demo}}}
mcp_servers: {fs: {command: x, url: "http://127.0.0.1/mcp"}}`, "mcp_servers.fs: set only one of command and url"},
		{"mcp url not http", `
agents: {a: {model: {provider: demo}}}
mcp_servers: {fs: {url: "ws://127.0.0.1/mcp"}}`, `mcp_servers.fs.url: must be an absolute http(s) URL, got "ws://127.0.0.1/mcp"`},
		{"mcp bad glob", `
agents: {a: {model: {provider: demo}}}
mcp_servers: {fs: {command: x, deny: ["delete_["]}}`, `mcp_servers.fs.deny[0]: "delete_[" is not a tool name or glob`},
		{"mcp tool approval by a bad glob", `
agents: {a: {model: {provider: demo}}}
mcp_servers: {fs: {command: x, tools: {"delete_[": {approval: {required: true}}}}}`, `mcp_servers.fs.tools.delete_[: "delete_[" is not a tool name or glob`},
		{"mcp tool approval without required", `
agents: {a: {model: {provider: demo}}}
mcp_servers: {fs: {command: x, tools: {delete_item: {approval: {approvers: [U1]}}}}}`, "mcp_servers.fs.tools.delete_item.approval.required: approval settings are given but required is false"},
		{"bad large result limit", `
agents: {a: {model: {provider: demo}, large_result_chars: -5}}`, "agents.a.large_result_chars: must be -1 (no limit), 0 (default 16000) or more"},
		{"short api key", `
server: {api_keys: [short]}
agents: {a: {model: {provider: demo}}}`, "server.api_keys[0]: must be at least 16 characters"},
		{"an empty key (a variable set to nothing)", `
server: {api_keys: [""]}
agents: {a: {model: {provider: demo}}}`, "server.api_keys[0]: must be at least 16 characters"},
		{"the documentation's placeholder key", `
server: {api_keys: [agentgate-dev-key-change-me]}
agents: {a: {model: {provider: demo}}}`, "server.api_keys[0]: is the placeholder from the documentation"},
		{"a key's bare name as an approver", `
server: {api_keys: [{name: bob, key: bob-key-0123456789abcdef, role: approver}]}
agents: {a: {model: {provider: demo}}}
tools: {t: {builtin: clock, approval: {required: true, approvers: [U123, bob]}}}`,
			`tools.t.approval.approvers[1]: "bob" is the name of an API key; write key:bob to name the key`},
		{"an empty approver", `
agents: {a: {model: {provider: demo}}}
tools: {t: {builtin: clock, approval: {required: true, approvers: [U123, ""]}}}`,
			`tools.t.approval.approvers[1]: is empty (an environment variable set to ""?)`},
		{"a key's bare name as a caller", `
server: {api_keys: [{name: ci, key: ci-key-0123456789abcdef, role: operator}]}
agents: {a: {model: {provider: demo}}}
routines: {r: {agent: a, input: hi, callers: [ci]}}`,
			`routines.r.callers[0]: "ci" is the name of an API key; write key:ci to name the key`},
		{"slack without default agent", `
agents: {a: {model: {provider: demo}}}
interfaces: {slack: {channels: {C0123OPS: a}}}`, "interfaces.slack.default_agent: required"},
		{"slack channel name instead of id", `
agents: {a: {model: {provider: demo}}}
interfaces: {slack: {default_agent: a, channels: {"#ops": a}}}`, "interfaces.slack.channels.#ops: must be a Slack channel id"},
		{"slash in slack command", `
agents: {a: {model: {provider: demo}}}
interfaces: {slack: {default_agent: a, command: /agentgate}}`, "interfaces.slack.command: must be a slash command name without the slash"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml), env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestEveryProblemIsListed(t *testing.T) {
	_, err := config.Parse([]byte(`
agents: {a: {model: {provider: nope}, tools: [x]}}
tools: {t: {http: {url: ftp://x}}}`), env(nil))
	for _, want := range []string{"agents.a.model.provider", "agents.a.tools[0]", "tools.t.http.url"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want it to mention %s", err, want)
		}
	}
}

func TestDefaultIsValid(t *testing.T) {
	if err := config.Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("agents: {a: {model: {provider: demo}}}"))
	f.Add([]byte("tools: {t: {http: {url: \"${X}\"}}}"))
	f.Add([]byte("server: {workers: ${N:-8}}\nagents: {a: {model: {provider: demo, name: \"$${X}\"}}}"))
	f.Add([]byte("a: &x {b: *x}\nagents: {<<: *x}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := config.Parse(b, env(map[string]string{"X": "http://h/", "N": "3"}))
		if err == nil && c == nil {
			t.Fatal("nil config without error")
		}
	})
}

// FuzzExpand checks that a value is never read twice: an environment value
// arrives verbatim, $${ escapes round-trip, and text without ${ is kept.
func FuzzExpand(f *testing.F) {
	f.Add("${X}", "a # b: c")
	f.Add("$${X} $$ $X", "'\"\n")
	f.Fuzz(func(t *testing.T, s, v string) {
		if got, err := config.Expand("${X}", env(map[string]string{"X": v})); err != nil || got != v {
			t.Fatalf("Expand(${X}) with X=%q = %q, %v", v, got, err)
		}
		escaped := strings.ReplaceAll(s, "${", "$${")
		if got, err := config.Expand(escaped, env(nil)); err != nil || got != s {
			t.Fatalf("Expand(%q) = %q, %v; want %q", escaped, got, err, s)
		}
		if !strings.Contains(s, "${") {
			if got, err := config.Expand(s, env(nil)); err != nil || got != s {
				t.Fatalf("Expand(%q) = %q, %v; want it unchanged", s, got, err)
			}
		}
	})
}

func TestAnthropicKeyFromTheEnvironment(t *testing.T) {
	c, err := config.Parse([]byte("agents:\n  a:\n    model: {provider: anthropic, name: claude-sonnet-4-5}\n"),
		env(map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/"}))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Agents["a"].Model.WithEnv(env(map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/"}))
	if m.APIKey != "sk-ant-test" || m.BaseURL != "http://127.0.0.1:9/" || !m.TakesImages() {
		t.Fatalf("model = %+v", m)
	}
}

func TestMCPToolApproval(t *testing.T) {
	c, err := config.Parse([]byte(`
agents: {a: {model: {provider: demo}, mcp_servers: [inv, open]}}
mcp_servers:
  inv:
    command: inventory-mcp
    tools: {delete_item: {approval: {required: true, approvers: [U1]}}}
  open:
    url: "http://127.0.0.1:8931/mcp"
    approval: {required: false}
    tools:
      "delete_*": {approval: {required: true}}
      "*_repo": {approval: {required: false}}
      get_repo: {approval: {required: false}}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	inv, open := c.MCPServers["inv"], c.MCPServers["open"]
	for _, tc := range []struct {
		what     string
		got      config.Approval
		required bool
	}{
		{"a listed tool", inv.ToolApproval("delete_item", true), true},
		{"an unlisted read-only tool", inv.ToolApproval("list_items", true), false},
		{"an unlisted tool not marked read-only", inv.ToolApproval("update_item", false), true},
		{"a server whose default is no approval", open.ToolApproval("drop_table", false), false},
		// delete_* asks; a glob that does not wins over it; a name wins.
		{"a tool a glob names", open.ToolApproval("delete_repository", true), true},
		{"a tool two globs name", open.ToolApproval("delete_repo", false), true},
		{"a tool named and globbed", open.ToolApproval("get_repo", false), false},
	} {
		if tc.got.Required != tc.required {
			t.Errorf("%s: required = %v, want %v", tc.what, tc.got.Required, tc.required)
		}
	}
}

// Of several globs that ask for approval, a broad one does not undo what a
// narrower one asks: the most specific names the approvers, any one's
// exclude_requester and the shortest timeout hold. A tool name holding '/'
// is matched by '*' like any other.
func TestMCPToolApprovalGlobsMerge(t *testing.T) {
	c, err := config.Parse([]byte(`
agents: {a: {model: {provider: demo}, mcp_servers: [gh]}}
mcp_servers:
  gh:
    url: "http://127.0.0.1:8931/mcp"
    approval: {required: false}
    tools:
      "*": {approval: {required: true, timeout: 5m}}
      "delete_*": {approval: {required: true, approvers: [U0ALICE], exclude_requester: true}}
      "*delete*": {approval: {required: true, timeout: 30m}}
      "delete_prod_*": {approval: {required: true, approvers: [U0BOB]}}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	gh := c.MCPServers["gh"]
	for _, tc := range []struct {
		name      string
		approvers []string
		exclude   bool
		timeout   time.Duration
	}{
		{"delete_repo", []string{"U0ALICE"}, true, 5 * time.Minute},
		{"delete_prod_db", []string{"U0BOB"}, true, 5 * time.Minute},
		{"list_repos", nil, false, 5 * time.Minute},
		{"github/delete_repo", nil, false, 5 * time.Minute}, // "*" and "*delete*"
	} {
		got := gh.ToolApproval(tc.name, true)
		if !got.Required || !slices.Equal(got.Approvers, tc.approvers) || got.ExcludeRequester != tc.exclude || got.Timeout != tc.timeout {
			t.Errorf("%s: %+v, want required, approvers %v, exclude_requester %v, timeout %s", tc.name, got, tc.approvers, tc.exclude, tc.timeout)
		}
	}
	// Without the "*" rule, the name with '/' is still caught by "*delete*".
	delete(gh.Tools, "*")
	if got := gh.ToolApproval("github/delete_repo", true); !got.Required || got.Timeout != 30*time.Minute {
		t.Errorf("github/delete_repo: %+v, want required by *delete*", got)
	}
}
