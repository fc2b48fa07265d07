package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core/config"
)

const demoAgent = "agents:\n  a:\n    model: {provider: demo}\n"

// problems parses yaml and returns its problems, one line each.
func problems(t *testing.T, yaml string, vars map[string]string) []string {
	t.Helper()
	_, err := config.Parse([]byte(yaml), env(vars))
	var ce *config.Error
	if err != nil && !errors.As(err, &ce) {
		t.Fatalf("Parse = %v, want a *config.Error", err)
	}
	if ce == nil {
		return nil
	}
	return ce.Lines()
}

func TestBadFilesSayWhereAndWhat(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"word for a number", "server:\n  workers: lots\n" + demoAgent,
			[]string{`line 2: server.workers: want a whole number, got "lots"`}},
		{"too many workers", "server:\n  workers: 5000\n" + demoAgent,
			[]string{"line 2: server.workers: must be from 1 to 1024, got 5000 (leave it out for the default 8)"}},
		{"negative workers", "server: {workers: -1}\n" + demoAgent,
			[]string{"line 1: server.workers: must be from 1 to 1024, got -1 (leave it out for the default 8)"}},
		{"zero workers written out", "server:\n  workers: 0\n" + demoAgent,
			[]string{"line 2: server.workers: must be from 1 to 1024, got 0 (leave it out for the default 8)"}},
		{"negative stream cap", "server:\n  max_streams_per_key: -5\n" + demoAgent,
			[]string{"line 2: server.max_streams_per_key: must be a positive number, got -5 (leave it out for the default)"}},
		{"metrics address without a port", "server: {metrics_addr: localhost}\n" + demoAgent,
			[]string{`line 1: server.metrics_addr: must be host:port (127.0.0.1:9090), got "localhost"`}},
		{"workers from an unset variable", "server:\n  workers: ${WORKERS}\n" + demoAgent,
			[]string{"line 2: server.workers: ${WORKERS} is not set (set it, or write ${WORKERS:-default})"}},
		{"unset token", demoAgent + "    description: ${DESC}\ninterfaces:\n  slack:\n    default_agent: ${SLACK_AGENT}\n",
			[]string{
				"line 4: agents.a.description: ${DESC} is not set (set it, or write ${DESC:-default})",
				"line 7: interfaces.slack.default_agent: ${SLACK_AGENT} is not set (set it, or write ${SLACK_AGENT:-default})",
			}},
		{"bad reference", demoAgent + "    description: \"${ not closed\"\n",
			[]string{"line 4: agents.a.description: ${ not closed has no closing }: write ${NAME} or ${NAME:-default}, or $${ for a literal ${"}},
		{"unknown field", "agents:\n  a:\n    model: {provider: demo}\n    tool: [x]\n",
			[]string{"line 4: agents.a.tool: field tool not found (the fields here are description, instructions, model, tools, history_runs, max_steps, mcp_servers, large_result_chars)"}},
		{"unknown top-level field", demoAgent + "agent: {}\n",
			[]string{"line 4: agent: field agent not found (the fields here are server, agents, tools, routines, interfaces, people…"}},
		{"unknown api key field", demoAgent + "server:\n  api_keys:\n    - {name: ci, key: x, rol: admin}\n",
			[]string{"line 6: server.api_keys[0].rol: field rol not found (the fields here are name, key, key_env, role, agents)"}},
		{"word for a bool", demoAgent + "interfaces:\n  slack: {default_agent: a, ignore_bots: sometimes}\n",
			[]string{`line 5: interfaces.slack.ignore_bots: want true or false, got "sometimes"`}},
		{"word for a list", demoAgent + "    tools: deploy\n",
			[]string{`line 4: agents.a.tools: want a list like [a, b], got "deploy"`}},
		{"word for a section", "agents:\n  a: demo\n",
			[]string{`line 2: agents.a: want a mapping with the fields description, instructions, model, tools, history_runs, max_steps, mcp_servers, large_result_chars, got "demo"`}},
		{"list for a text", demoAgent + "    description: [a, b]\n",
			[]string{"line 4: agents.a.description: want a text value, got a list"}},
		{"mapping for an id", demoAgent + "people:\n  ana: {telegram: {id: 5}}\n",
			[]string{"line 5: people.ana.telegram: expected an id or a list of ids, got a mapping"}},
		{"bad duration", demoAgent + "tools:\n  t:\n    builtin: clock\n    approval: {required: true, timeout: soon}\n",
			[]string{`line 7: tools.t.approval.timeout: want a duration like 30s, 15m or 2h, got "soon"`}},
		{"unquoted reference in braces", "server: {}\nagents: {a: {model: {provider: demo, name: ${X:-}}}}\n",
			[]string{`line 2: did not find expected ',' or '}' (inside { } or [ ], quote a ${VAR} value: "${VAR}")`}},
		{"validation problems get lines", demoAgent + "    tools: [deploy]\ntools:\n  deploy:\n    http: {url: /deploy}\n",
			[]string{
				`line 7: tools.deploy.http.url: must be an absolute http(s) URL, got "/deploy"`,
			}},
		{"a missing field points at its section", demoAgent + "interfaces:\n  slack: {channels: {C0123OPS: a}}\n",
			[]string{"line 5: interfaces.slack.default_agent: required: the agent that answers in Slack"}},
		{"keys are not expanded", "agents:\n  ${X}:\n    model: {provider: demo}\n",
			[]string{"line 2: agents.${X}: agent names use lowercase letters, digits, _ and - (at most 64)"}},
		{"key twice", demoAgent + "    description: x\n    description: y\n",
			[]string{`line 5: mapping key "description" already defined at line 4`}},
		{"bad indentation", demoAgent + "   description: x\n",
			[]string{"line 2: did not find expected key"}}, // yaml.v3 names the line where the mapping began
		{"no agents", "server: {}\n",
			[]string{"agents: define at least one agent"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := problems(t, tc.yaml, map[string]string{"X": "a"})
			same := len(got) == len(tc.want)
			for i := 0; same && i < len(got); i++ {
				// A want ending in … needs only to start the line.
				same = got[i] == tc.want[i] || strings.HasSuffix(tc.want[i], "…") && strings.HasPrefix(got[i], strings.TrimSuffix(tc.want[i], "…"))
			}
			if !same {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

func TestValuesArriveVerbatim(t *testing.T) {
	t.Parallel()
	token := "s3cr#t: {x} 'q' \"d\"\nline two ${NOT_AGAIN} $$"
	vars := map[string]string{"TOKEN": token, "WORKERS": "16", "SLACK": "null", "EMPTY": ""}
	c, err := config.Parse([]byte(`server:
  workers: ${WORKERS}
  api_keys:
    - name: ci
      key: ${TOKEN}
agents:
  a:
    description: ${TOKEN}
    instructions: "cost: $${PRICE} # not a comment"
    model:
      provider: demo
      name: ${SLACK}
      base_url: ${EMPTY:-}
    history_runs: ${UNSET:-3}
`), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Agents["a"]
	for _, f := range []struct{ name, got, want string }{
		{"api key", c.Server.APIKeys[0].Key, token},
		{"description", a.Description, token},
		{"instructions", a.Instructions, "cost: ${PRICE} # not a comment"},
		{"model name", a.Model.Name, "null"},
		{"base url", a.Model.BaseURL, ""},
	} {
		if f.got != f.want {
			t.Errorf("%s = %q, want %q", f.name, f.got, f.want)
		}
	}
	if c.Server.Workers != 16 || a.HistoryRuns != 3 {
		t.Errorf("workers = %d, history_runs = %d; want 16 and 3", c.Server.Workers, a.HistoryRuns)
	}
}

func TestLoadNamesTheFileAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentgate.yaml")
	yaml := "server:\n  workers: lots\n" + strings.Replace(demoAgent, "model: {provider: demo}", `model: {provider: demo, api_key: "${AGENTGATE_TEST_UNSET_KEY}"}`, 1)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(path)
	want := "config: 2 problems:\n" +
		"  " + path + `:2: server.workers: want a whole number, got "lots"` + "\n" +
		"  " + path + ":5: agents.a.model.api_key: ${AGENTGATE_TEST_UNSET_KEY} is not set (set it, or write ${AGENTGATE_TEST_UNSET_KEY:-default})"
	if err == nil || err.Error() != want {
		t.Fatalf("Load = %v\nwant %s", err, want)
	}
}
