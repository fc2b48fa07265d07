package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/model/fakeopenai"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// start serves srv for the test and returns a Model pointed at it.
func start(t *testing.T, srv *fakeopenai.Server, cfg Config) *Model {
	t.Helper()
	cfg.BaseURL = srv.Start()
	t.Cleanup(srv.Close)
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func userSays(text string) core.ModelRequest {
	return core.ModelRequest{Messages: []core.Message{{Role: core.RoleUser, Content: text}}}
}

// collect returns an onDelta that records every fragment.
func collect(deltas *[]string) func(string) {
	return func(s string) { *deltas = append(*deltas, s) }
}

func mustJSONEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: want: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{{}, {Model: " "}, {Model: "m", Timeout: -1}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error", cfg)
		}
	}
}

func TestGenerateStreamsText(t *testing.T) {
	t.Parallel()
	srv := fakeopenai.New()
	srv.Script(func(fakeopenai.Request) fakeopenai.Reply {
		return fakeopenai.Reply{Text: "The quick brown fox jumps over the lazy dog."}
	})
	m := start(t, srv, Config{})

	var deltas []string
	resp, err := m.Generate(t.Context(), userSays("tell me"), collect(&deltas))
	if err != nil {
		t.Fatal(err)
	}
	if want := "The quick brown fox jumps over the lazy dog."; resp.Text != want {
		t.Errorf("Text = %q, want %q", resp.Text, want)
	}
	if len(deltas) < 2 {
		t.Errorf("onDelta called %d times, want several: %q", len(deltas), deltas)
	}
	if got := strings.Join(deltas, ""); got != resp.Text {
		t.Errorf("deltas join to %q, Text is %q", got, resp.Text)
	}
	if len(resp.ToolCalls) != 0 {
		t.Errorf("ToolCalls = %+v, want none", resp.ToolCalls)
	}

	// A nil onDelta is allowed.
	if _, err := m.Generate(t.Context(), userSays("again"), nil); err != nil {
		t.Fatal(err)
	}
}

func TestGenerateToolCalls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply fakeopenai.Reply
		want  core.ModelResponse
	}{
		{
			name: "one call, arguments over many chunks",
			reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{
				{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Zürich","units":"metric","days":3,"hourly":true}`},
			}},
			want: core.ModelResponse{ToolCalls: []core.ToolCall{
				{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Zürich","units":"metric","days":3,"hourly":true}`)},
			}, StopReason: "tool_calls"},
		},
		{
			name: "text and several calls",
			reply: fakeopenai.Reply{Text: "Let me look both up.", ToolCalls: []fakeopenai.ToolCall{
				{ID: "call_a", Name: "search", Arguments: `{"query":"durable execution engines"}`},
				{ID: "call_b", Name: "fetch", Arguments: `{"url":"https://example.com/a?b=c&d=e"}`},
				{ID: "call_c", Name: "now", Arguments: `{}`},
			}},
			want: core.ModelResponse{Text: "Let me look both up.", ToolCalls: []core.ToolCall{
				{ID: "call_a", Name: "search", Arguments: json.RawMessage(`{"query":"durable execution engines"}`)},
				{ID: "call_b", Name: "fetch", Arguments: json.RawMessage(`{"url":"https://example.com/a?b=c&d=e"}`)},
				{ID: "call_c", Name: "now", Arguments: json.RawMessage(`{}`)},
			}, StopReason: "tool_calls"},
		},
		{
			name: "empty arguments become {}",
			reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{
				{ID: "call_x", Name: "now", Arguments: ""},
			}},
			want: core.ModelResponse{ToolCalls: []core.ToolCall{
				{ID: "call_x", Name: "now", Arguments: json.RawMessage(`{}`)},
			}, StopReason: "tool_calls"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeopenai.New()
			srv.Script(func(fakeopenai.Request) fakeopenai.Reply { return tt.reply })
			m := start(t, srv, Config{})

			resp, err := m.Generate(t.Context(), userSays("go"), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Usage = core.Usage{}
			if !reflect.DeepEqual(resp, tt.want) {
				t.Errorf("response:\n got %s\nwant %s", jsonString(resp), jsonString(tt.want))
			}
		})
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// conversation has every kind of message and a tool.
func conversation() core.ModelRequest {
	return core.ModelRequest{
		Instructions: "You are a helpful assistant. Use tools when needed.",
		Messages: []core.Message{
			{Role: core.RoleUser, Content: "What's the weather in Paris?"},
			{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{
				{ID: "call_w1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
			}},
			{Role: core.RoleTool, ToolCallID: "call_w1", Name: "get_weather", Content: `{"temp_c":18,"sky":"clear"}`},
			{Role: core.RoleAssistant, Content: "It is 18°C and clear in Paris."},
			{Role: core.RoleUser, Content: "And the time there?"},
			{Role: core.RoleAssistant, Content: "Checking.", ToolCalls: []core.ToolCall{
				{ID: "call_t1", Name: "clock", Arguments: nil},
			}},
			{Role: core.RoleTool, ToolCallID: "call_t1", Name: "clock", Content: "14:05"},
		},
		Tools: []core.ToolSpec{
			{
				Name:        "get_weather",
				Description: "Current weather for a city.",
				Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":14}},"required":["city"],"additionalProperties":false}`),
			},
			{Name: "clock"},
		},
	}
}

func TestGenerateSendsConversation(t *testing.T) {
	t.Parallel()
	srv := fakeopenai.New()
	m := start(t, srv, Config{Model: "gpt-test"})

	resp, err := m.Generate(t.Context(), conversation(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "done: 14:05"; resp.Text != want { // the default script answers tool results
		t.Errorf("Text = %q, want %q", resp.Text, want)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if got.Path != "/v1/chat/completions" || got.Model != "gpt-test" || !got.Stream || !got.IncludeUsage {
		t.Errorf("request path %s model %q stream %v include_usage %v", got.Path, got.Model, got.Stream, got.IncludeUsage)
	}
	wantMessages := []fakeopenai.Message{
		{Role: "system", Content: "You are a helpful assistant. Use tools when needed."},
		{Role: "user", Content: "What's the weather in Paris?"},
		{Role: "assistant", ToolCalls: []fakeopenai.ToolCall{{ID: "call_w1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{Role: "tool", ToolCallID: "call_w1", Content: `{"temp_c":18,"sky":"clear"}`},
		{Role: "assistant", Content: "It is 18°C and clear in Paris."},
		{Role: "user", Content: "And the time there?"},
		{Role: "assistant", Content: "Checking.", ToolCalls: []fakeopenai.ToolCall{{ID: "call_t1", Name: "clock", Arguments: `{}`}}},
		{Role: "tool", ToolCallID: "call_t1", Content: "14:05"},
	}
	if !reflect.DeepEqual(got.Messages, wantMessages) {
		t.Errorf("messages:\n got %+v\nwant %+v", got.Messages, wantMessages)
	}
	if len(got.Tools) != 2 {
		t.Fatalf("tools = %+v, want 2", got.Tools)
	}
	if got.Tools[0].Name != "get_weather" || got.Tools[0].Description != "Current weather for a city." {
		t.Errorf("tools[0] = %+v", got.Tools[0])
	}
	mustJSONEqual(t, "tools[0].parameters", got.Tools[0].Parameters, conversation().Tools[0].Parameters)
	if got.Tools[1].Name != "clock" || got.Tools[1].Description != "" {
		t.Errorf("tools[1] = %+v", got.Tools[1])
	}
	mustJSONEqual(t, "tools[1].parameters", got.Tools[1].Parameters, []byte(`{"type":"object","properties":{}}`))
}

func TestGenerateRequestGolden(t *testing.T) {
	t.Parallel()
	srv := fakeopenai.New()
	m := start(t, srv, Config{Model: "gpt-test"})
	if _, err := m.Generate(t.Context(), conversation(), nil); err != nil {
		t.Fatal(err)
	}
	body := srv.Requests()[0].Body
	// The body is deterministic (object keys are sorted); indent it so that
	// a diff of the golden file reads well.
	var got bytes.Buffer
	if err := json.Indent(&got, body, "", "  "); err != nil {
		t.Fatalf("request body is not JSON: %v: %s", err, body)
	}
	got.WriteByte('\n')

	path := filepath.Join("testdata", "request_with_tools.golden")
	if *update {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("request body differs from %s (go test -update rewrites it):\n%s", path, got.Bytes())
	}
}

func TestGenerateUsage(t *testing.T) {
	t.Parallel()
	t.Run("recorded", func(t *testing.T) {
		t.Parallel()
		srv := fakeopenai.New()
		srv.Script(func(fakeopenai.Request) fakeopenai.Reply {
			return fakeopenai.Reply{Text: "hi", Usage: fakeopenai.Usage{PromptTokens: 120, CompletionTokens: 7}}
		})
		m := start(t, srv, Config{})
		resp, err := m.Generate(t.Context(), userSays("hello"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := (core.Usage{InputTokens: 120, OutputTokens: 7}); resp.Usage != want {
			t.Errorf("Usage = %+v, want %+v", resp.Usage, want)
		}
	})
	t.Run("server sends none", func(t *testing.T) {
		t.Parallel()
		srv := fakeopenai.New()
		srv.Quirks.NoUsage = true
		m := start(t, srv, Config{})
		resp, err := m.Generate(t.Context(), userSays("hello"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Text != "echo: hello" || resp.Usage != (core.Usage{}) {
			t.Errorf("response = %+v, want echo and zero usage", resp)
		}
	})
}

func TestGenerateUnstableChunkIDs(t *testing.T) {
	t.Parallel()
	srv := fakeopenai.New()
	srv.Quirks.UnstableChunkIDs = true
	srv.Script(func(fakeopenai.Request) fakeopenai.Reply {
		return fakeopenai.Reply{Text: "several words of text", ToolCalls: []fakeopenai.ToolCall{
			{ID: "call_1", Name: "search", Arguments: `{"query":"long enough to split"}`},
		}}
	})
	m := start(t, srv, Config{})
	resp, err := m.Generate(t.Context(), userSays("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "several words of text" || len(resp.ToolCalls) != 1 ||
		string(resp.ToolCalls[0].Arguments) != `{"query":"long enough to split"}` {
		t.Errorf("response = %s", jsonString(resp))
	}
}

func TestGenerateAPIError(t *testing.T) {
	t.Parallel()
	srv := fakeopenai.New()
	srv.Script(func(fakeopenai.Request) fakeopenai.Reply {
		return fakeopenai.Reply{Status: http.StatusBadRequest, Text: "This model's maximum context length is 8192 tokens."}
	})
	m := start(t, srv, Config{Model: "small"})
	_, err := m.Generate(t.Context(), userSays("a very long prompt"), nil)
	if err == nil {
		t.Fatal("Generate succeeded, want an error")
	}
	for _, want := range []string{"openai small:", "400", "maximum context length is 8192 tokens"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Errorf("error %v is not an *openai.Error with status 400", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("server got %d requests, want 1 (a 400 is not retried)", n)
	}
}

func TestGenerateRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		maxRetries   int
		failures     int
		wantErr      bool
		wantRequests int
	}{
		{name: "default retries twice", maxRetries: 0, failures: 2, wantRequests: 3},
		{name: "gives up after max retries", maxRetries: 1, failures: 2, wantErr: true, wantRequests: 2},
		{name: "negative disables retries", maxRetries: -1, failures: 1, wantErr: true, wantRequests: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			srv := fakeopenai.New()
			srv.Script(func(req fakeopenai.Request) fakeopenai.Reply {
				if int(calls.Add(1)) <= tt.failures {
					// Retry-After-Ms: 0 skips the client's backoff.
					return fakeopenai.Reply{Status: http.StatusInternalServerError, Text: "The server had an error.",
						Header: http.Header{"Retry-After-Ms": {"0"}}}
				}
				return fakeopenai.DefaultScript(req)
			})
			m := start(t, srv, Config{MaxRetries: tt.maxRetries})

			resp, err := m.Generate(t.Context(), userSays("hi"), nil)
			switch {
			case tt.wantErr && err == nil:
				t.Errorf("Generate = %+v, want an error", resp)
			case tt.wantErr && !strings.Contains(err.Error(), "The server had an error."):
				t.Errorf("error %q lacks the server's message", err)
			case !tt.wantErr && err != nil:
				t.Errorf("Generate: %v", err)
			case !tt.wantErr && resp.Text != "echo: hi":
				t.Errorf("Text = %q, want %q", resp.Text, "echo: hi")
			}
			if n := len(srv.Requests()); n != tt.wantRequests {
				t.Errorf("server got %d requests, want %d", n, tt.wantRequests)
			}
		})
	}
}

func TestGenerateAPIKey(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv("OPENAI_API_KEY", "sk-from-environment")

	srv := fakeopenai.New()
	srv.APIKey = "sk-test-123"
	base := srv.Start()
	t.Cleanup(srv.Close)

	tests := []struct {
		key       string
		wantAuth  string
		wantError string
	}{
		{key: "sk-test-123", wantAuth: "Bearer sk-test-123"},
		{key: "sk-wrong", wantAuth: "Bearer sk-wrong", wantError: "Incorrect API key provided"},
		{key: "", wantAuth: "", wantError: "401"}, // the environment's key is not used
	}
	for i, tt := range tests {
		m, err := New(Config{Model: "m", BaseURL: base, APIKey: tt.key})
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Generate(t.Context(), userSays("hi"), nil)
		switch {
		case tt.wantError == "" && err != nil:
			t.Errorf("key %q: %v", tt.key, err)
		case tt.wantError != "" && (err == nil || !strings.Contains(err.Error(), tt.wantError)):
			t.Errorf("key %q: error %v, want one containing %q", tt.key, err, tt.wantError)
		}
		reqs := srv.Requests()
		if len(reqs) != i+1 {
			t.Fatalf("server got %d requests, want %d", len(reqs), i+1)
		}
		if got := reqs[i].Header.Get("Authorization"); got != tt.wantAuth {
			t.Errorf("key %q: Authorization = %q, want %q", tt.key, got, tt.wantAuth)
		}
	}
}

// TestGenerateWire feeds raw responses that the fake server does not produce:
// deviations seen from OpenAI-compatible servers.
func TestGenerateWire(t *testing.T) {
	t.Parallel()
	chunk := func(s string) string { return "data: " + s + "\n\n" }
	const done = "data: [DONE]\n\n"
	tests := []struct {
		name    string
		status  int
		ctype   string
		body    string
		want    core.ModelResponse
		wantErr string
	}{
		{
			name: "usage repeated as a running total",
			body: chunk(`{"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":"a"}}],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}`) +
				chunk(`{"id":"c1","choices":[{"index":0,"delta":{"content":"b"}}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`) +
				chunk(`{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`) + done,
			want: core.ModelResponse{Text: "ab", Usage: core.Usage{InputTokens: 10, OutputTokens: 2}, StopReason: "stop"},
		},
		{
			name: "missing tool-call id and arguments that are not JSON",
			body: chunk(`{"id":"c2","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"type":"function","function":{"name":"search","arguments":"{\"q\": "}}]}}]}`) +
				chunk(`{"id":"c2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"oops"}}]}}]}`) +
				chunk(`{"id":"c2","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`) + done,
			want: core.ModelResponse{ToolCalls: []core.ToolCall{{ID: "<generated>", Name: "search", Arguments: json.RawMessage(`"{\"q\": oops"`)}}, StopReason: "tool_calls"},
		},
		{
			name:    "stream cut before the finish reason",
			body:    chunk(`{"id":"c3","choices":[{"index":0,"delta":{"role":"assistant","content":"Half a sen"}}]}`),
			wantErr: "ended before the model finished",
		},
		{
			name:    "error event in the stream",
			body:    chunk(`{"id":"c4","choices":[{"index":0,"delta":{"content":"x"}}]}`) + chunk(`{"error":{"message":"upstream overloaded","type":"server_error"}}`),
			wantErr: "upstream overloaded",
		},
		{name: `{"error": string}`, status: 404, ctype: "application/json", body: `{"error":"model \"llama9\" not found, try pulling it first"}`, wantErr: `404 Not Found: model "llama9" not found, try pulling it first`},
		{name: `{"message": string}`, status: 400, ctype: "application/json", body: `{"object":"error","message":"max_tokens is too large","type":"BadRequestError","code":400}`, wantErr: "400 Bad Request: max_tokens is too large"},
		{name: `{"detail": string}`, status: 422, ctype: "application/json", body: `{"detail":"Field required"}`, wantErr: "422 Unprocessable Entity: Field required"},
		{name: "plain text", status: 404, ctype: "text/plain", body: "404 page not found\n", wantErr: "404 Not Found: 404 page not found"},
		{name: "html", status: 502, ctype: "text/html", body: "<html><body>Bad Gateway</body></html>", wantErr: "502 Bad Gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctype, status := tt.ctype, tt.status
				if ctype == "" {
					ctype = "text/event-stream"
				}
				if status == 0 {
					status = http.StatusOK
				}
				w.Header().Set("Content-Type", ctype)
				w.WriteHeader(status)
				fmt.Fprint(w, tt.body)
			}))
			t.Cleanup(ts.Close)
			m, err := New(Config{Model: "m", BaseURL: ts.URL, MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}

			resp, err := m.Generate(t.Context(), userSays("hi"), nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, tc := range resp.ToolCalls {
				if tt.want.ToolCalls[i].ID == "<generated>" && core.ValidID(tc.ID) {
					resp.ToolCalls[i].ID = "<generated>"
				}
			}
			if !reflect.DeepEqual(resp, tt.want) {
				t.Errorf("response:\n got %s\nwant %s", jsonString(resp), jsonString(tt.want))
			}
		})
	}
}

func TestGenerateRejectsBadRequest(t *testing.T) {
	t.Parallel()
	srv := fakeopenai.New()
	m := start(t, srv, Config{})
	for name, req := range map[string]core.ModelRequest{
		"unknown role":   {Messages: []core.Message{{Role: "system", Content: "x"}}},
		"invalid schema": {Messages: []core.Message{{Role: core.RoleUser, Content: "x"}}, Tools: []core.ToolSpec{{Name: "t", Parameters: json.RawMessage(`[1]`)}}},
	} {
		if _, err := m.Generate(t.Context(), req, nil); err == nil {
			t.Errorf("%s: Generate succeeded, want an error", name)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("server got %d requests, want none", n)
	}
}

// A 429 still limited after the client's retries tells the engine how long
// to wait before the step is retried: the server's Retry-After.
func TestGenerateRetryAfterReachesTheStep(t *testing.T) {
	t.Parallel()
	srv := fakeopenai.New()
	srv.Script(func(fakeopenai.Request) fakeopenai.Reply {
		return fakeopenai.Reply{Status: http.StatusTooManyRequests, Text: "Rate limit reached.", Header: http.Header{"Retry-After": {"90"}}}
	})
	m := start(t, srv, Config{MaxRetries: -1})
	_, err := m.Generate(t.Context(), userSays("hi"), nil)
	if got := core.RetryAfter(err); got != 90*time.Second {
		t.Fatalf("RetryAfter(%v) = %s, want 90s", err, got)
	}
}
