package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core/model/fakeanthropic"
	"github.com/agentgate/agentgate/core/model/fakeopenai"
	"github.com/agentgate/agentgate/gateway"
)

// provider is one model provider and its fake, scripted alike: call deploy
// until the conversation holds its result, then answer "deployed: <result>".
type provider struct {
	name  string
	start func(t *testing.T, key string) (url string, requests func() int)
}

var providers = []provider{
	{"openai", func(t *testing.T, key string) (string, func() int) {
		srv := fakeopenai.New()
		srv.APIKey = key
		srv.Script(func(r fakeopenai.Request) fakeopenai.Reply {
			if last := r.LastMessage(); last.Role == "tool" {
				return fakeopenai.Reply{Text: "deployed: " + last.Content}
			}
			return fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{Name: "deploy", Arguments: `{"service":"web","env":"staging"}`}}}
		})
		url := srv.Start()
		t.Cleanup(srv.Close)
		return url, func() int { return len(srv.Requests()) }
	}},
	{"anthropic", func(t *testing.T, key string) (string, func() int) {
		srv := fakeanthropic.New()
		srv.APIKey = key
		srv.Script(func(r fakeanthropic.Request) fakeanthropic.Reply {
			if res := r.LastMessage().Blocks("tool_result"); len(res) > 0 {
				return fakeanthropic.Reply{Text: "deployed: " + res[0].Text}
			}
			return fakeanthropic.Reply{ToolCalls: []fakeanthropic.ToolCall{{Name: "deploy", Input: `{"service":"web","env":"staging"}`}}}
		})
		url := srv.Start()
		t.Cleanup(srv.Close)
		return url, func() int { return len(srv.Requests()) }
	}},
}

// providerSettings configures agent ops on p's fake, with key, and a deploy
// tool that waits for approval.
func providerSettings(t *testing.T, p provider, url, key string) gateway.Settings {
	t.Helper()
	s := settings(t)
	cfg := fmt.Sprintf(`agents:
  ops:
    model: {provider: %s, name: test-model, base_url: %q, api_key: %q}
    tools: [deploy]
tools:
  deploy:
    builtin: demo_deploy
    parameters: {type: object, properties: {service: {type: string}, env: {type: string}}}
    approval: {required: true}
`, p.name, url, key)
	if err := os.WriteFile(s.ConfigPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// api sends a JSON request to the gateway at addr and decodes the answer.
func api(t *testing.T, addr, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: status %d: %s", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

// The same flow on every provider: the run streams from the model, pauses
// on a tool call that needs approval, resumes when approved, and the
// answer's usage and stop reason are journaled.
func TestProvidersApproveAndResume(t *testing.T) {
	t.Parallel()
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			url, requests := p.start(t, "sk-right")
			g, err := gateway.New(t.Context(), providerSettings(t, p, url, "sk-right"), testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			served := make(chan error, 1)
			go func() { served <- g.Start(ctx) }()
			defer func() { cancel(); <-served }()

			type approval struct{ ID, Tool, Status string }
			var run struct {
				ID, Status, Output string
				Pending            []approval `json:"pending_approvals"`
			}
			api(t, g.Addr(), "POST", "/api/v1/agents/ops/runs?wait=true", `{"input":"deploy web to staging"}`, &run)
			if run.Status != "paused" || len(run.Pending) != 1 || run.Pending[0].Tool != "deploy" {
				t.Fatalf("run = %+v, want paused on one deploy approval", run)
			}
			if st := api(t, g.Addr(), "POST", "/api/v1/approvals/"+run.Pending[0].ID+"/decision", `{"decision":"approve"}`, nil); st != http.StatusOK {
				t.Fatalf("approve: status %d", st)
			}
			deadline := time.Now().Add(30 * time.Second)
			for run.Status != "completed" && time.Now().Before(deadline) {
				api(t, g.Addr(), "GET", "/api/v1/runs/"+run.ID+"?wait=true", "", &run)
			}
			if run.Status != "completed" || !strings.HasPrefix(run.Output, `deployed: {"env":"staging","idempotency_key":"`+run.ID+":") {
				t.Fatalf("run = %+v, want completed with the tool's result", run)
			}
			if n := requests(); n != 2 {
				t.Fatalf("model asked %d times, want 2 (the tool call, the answer)", n)
			}
			var events struct {
				Items []struct {
					Type string
					Data struct {
						StopReason string `json:"stop_reason"`
						Usage      struct {
							Input  int64 `json:"input_tokens"`
							Output int64 `json:"output_tokens"`
						}
					}
				}
			}
			api(t, g.Addr(), "GET", "/api/v1/runs/"+run.ID+"/events", "", &events)
			var stops []string
			for _, ev := range events.Items {
				if ev.Type == "model_response" {
					stops = append(stops, ev.Data.StopReason)
					if ev.Data.Usage.Input == 0 || ev.Data.Usage.Output == 0 {
						t.Errorf("model_response usage = %+v, want both counts", ev.Data.Usage)
					}
				}
			}
			want := map[string]string{"openai": "tool_calls,stop", "anthropic": "tool_use,end_turn"}[p.name]
			if got := strings.Join(stops, ","); got != want {
				t.Errorf("stop reasons journaled = %s, want %s", got, want)
			}
		})
	}
}

// A key the provider refuses stops the start with the agent, the model and
// the provider's words, before any run.
func TestProviderRefusingTheKeyStopsTheStart(t *testing.T) {
	t.Parallel()
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			url, requests := p.start(t, "sk-right")
			_, err := gateway.New(t.Context(), providerSettings(t, p, url, "sk-wrong"), nil)
			var ue *gateway.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "agents.ops.model: "+p.name+"/test-model: the API key was refused") {
				t.Fatalf("New = %v, want a usage error saying the key was refused", err)
			}
			if n := requests(); n != 0 {
				t.Fatalf("the check sent %d model requests", n)
			}
		})
	}
}

// A provider that cannot be reached does not stop the start (it may come
// back); the gateway serves.
func TestProviderDownDoesNotStopTheStart(t *testing.T) {
	t.Parallel()
	s := providerSettings(t, providers[1], "http://127.0.0.1:1", "sk-any")
	g, err := gateway.New(t.Context(), s, nil)
	if err != nil {
		t.Fatalf("New with the provider down = %v, want a gateway", err)
	}
	g.Stop()
}
