package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core/model/fakeopenai"
)

const checkGoodConfig = `agents:
  ops:
    model: {provider: openai, name: gpt-4o-mini, api_key: "${CHECK_TEST_KEY}", base_url: "${CHECK_TEST_URL}"}
    tools: [clock]
  helper:
    model: {provider: demo}
tools:
  clock: {builtin: clock}
routines:
  daily: {agent: ops, schedule: "@daily", input: Summarize.}
interfaces:
  slack: {default_agent: ops}
  telegram: {default_agent: helper}
`

const checkBadConfig = `server:
  workers: lots
agents:
  ops:
    model: {provider: openai, name: gpt-4o-mini, api_key: "${CHECK_TEST_UNSET}"}
tools:
  deploy:
    http: {url: /deploy}
`

func TestConfigCheck(t *testing.T) {
	for _, k := range []string{"AGENTGATE_CONFIG", "AGENTGATE_API_KEYS", "AGENTGATE_ADDR"} {
		t.Setenv(k, "")
	}
	t.Setenv("CHECK_TEST_KEY", "sk-test")
	model, modelURL := startModel(t, fakeopenai.DefaultScript)
	model.APIKey = "sk-test"
	t.Setenv("CHECK_TEST_URL", modelURL)
	good := writeFile(t, "good.yaml", checkGoodConfig)
	bad := writeFile(t, "bad.yaml", checkBadConfig)
	refused := writeFile(t, "refused.yaml", strings.Replace(checkGoodConfig, "${CHECK_TEST_KEY}", "sk-wrong", 1))
	down := writeFile(t, "down.yaml", strings.Replace(checkGoodConfig, "${CHECK_TEST_URL}", "http://127.0.0.1:1/v1", 1))
	cases := []struct {
		name    string
		args    []string
		env     string // AGENTGATE_CONFIG
		wantOut string
		wantErr string
	}{
		{name: "good", args: []string{"--config", good},
			wantOut: "config ok: " + good + ": 2 agents, 1 tool, 1 routine, platforms: slack, telegram\n"},
		{name: "from AGENTGATE_CONFIG", env: good,
			wantOut: "config ok: " + good + ": 2 agents, 1 tool, 1 routine, platforms: slack, telegram\n"},
		{name: "key refused", args: []string{"--config", refused},
			wantOut: "agents.ops.model: openai/gpt-4o-mini: the API key was refused: openai gpt-4o-mini: OpenAI API error: 401 Unauthorized: Incorrect API key provided.\n",
			wantErr: "config check: 1 problem in " + refused},
		{name: "provider down", args: []string{"--config", down},
			wantOut: "warning: agents.ops.model: openai/gpt-4o-mini: could not check the model now (runs will retry): openai gpt-4o-mini: " +
				"Get \"http://127.0.0.1:1/v1/models/gpt-4o-mini\": dial tcp 127.0.0.1:1: connect: connection refused\n" +
				"config ok: " + down + ": 2 agents, 1 tool, 1 routine, platforms: slack, telegram\n"},
		{name: "offline", args: []string{"--config", down, "--offline"},
			wantOut: "config ok: " + down + ": 2 agents, 1 tool, 1 routine, platforms: slack, telegram\n"},
		{name: "built-in demo",
			wantOut: "config ok: the built-in demo config: 1 agent, 2 tools, 0 routines, platforms: none\n"},
		{name: "bad", args: []string{"--config", bad},
			wantOut: bad + `:2: server.workers: want a whole number, got "lots"` + "\n" +
				bad + ":5: agents.ops.model.api_key: ${CHECK_TEST_UNSET} is not set (set it, or write ${CHECK_TEST_UNSET:-default})\n",
			wantErr: "config check: 2 problems in " + bad},
		{name: "missing file", args: []string{"--config", bad + ".nope"},
			wantOut: "config: open " + bad + ".nope: no such file or directory\n",
			wantErr: "config check: 1 problem in " + bad + ".nope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AGENTGATE_CONFIG", tc.env)
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append([]string{"config", "check"}, tc.args...), strings.NewReader(""), &stdout, &stderr)
			if got := stdout.String(); got != tc.wantOut {
				t.Errorf("stdout:\n%s\nwant:\n%s", got, tc.wantOut)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr || exitCode(err) != 1):
				t.Errorf("err = %v, want %q with exit code 1", err, tc.wantErr)
			}
		})
	}
}

func TestConfigCheckValidatesAfterLoading(t *testing.T) {
	for _, k := range []string{"AGENTGATE_CONFIG", "AGENTGATE_API_KEYS", "AGENTGATE_ADDR"} {
		t.Setenv(k, "")
	}
	cfg := writeFile(t, "agentgate.yaml", "agents:\n  ops:\n    model: {provider: openai, name: m, api_key: k}\n    tools: [deploy]\ntools:\n  deploy:\n    http: {url: /deploy}\n")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"config", "check", "--config", cfg, "--addr", "0.0.0.0:8080"}, strings.NewReader(""), &stdout, &stderr)
	want := cfg + `:7: tools.deploy.http.url: must be an absolute http(s) URL, got "/deploy"` + "\n"
	if err == nil || stdout.String() != want {
		t.Errorf("err = %v, stdout:\n%s\nwant:\n%s", err, stdout.String(), want)
	}

	cfg = writeFile(t, "agentgate.yaml", "agents:\n  ops:\n    model: {provider: demo}\n")
	stdout.Reset()
	err = run(t.Context(), []string{"config", "check", "--config", cfg, "--addr", "0.0.0.0:8080"}, strings.NewReader(""), &stdout, &stderr)
	if err == nil || !strings.Contains(stdout.String(), "no API keys are set") {
		t.Errorf("err = %v, stdout = %q; want the open --addr refused as serve refuses it", err, stdout.String())
	}
}
