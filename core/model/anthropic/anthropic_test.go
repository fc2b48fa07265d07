package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/model/fakeanthropic"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// start serves srv for the test and returns a Model pointed at it.
func start(t *testing.T, srv *fakeanthropic.Server, cfg Config) *Model {
	t.Helper()
	cfg.BaseURL = srv.Start()
	t.Cleanup(srv.Close)
	if cfg.Model == "" {
		cfg.Model = "claude-test"
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

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{{}, {Model: " "}, {Model: "m", Timeout: -1}, {Model: "m", MaxTokens: -1}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error", cfg)
		}
	}
}

// pngHeader stands in for an image: the API takes any bytes of an image type.
var pngHeader = []byte("\x89PNG\r\n\x1a\n")

// conversation has every kind of message, two tools and an image.
func conversation() core.ModelRequest {
	return core.ModelRequest{
		Instructions: "You are a helpful assistant. Use tools when needed.",
		Messages: []core.Message{
			// An earlier run that failed left an empty answer.
			{Role: core.RoleUser, Content: "Hello?"},
			{Role: core.RoleAssistant},
			{Role: core.RoleUser, Content: "What's the weather where this photo was taken?", Files: []core.File{
				{Attachment: core.Attachment{ID: "sha256-1", Name: "paris.png", MIME: "image/png", Size: 8}, Data: pngHeader},
				{Attachment: core.Attachment{ID: "sha256-2", Name: "notes.pdf", MIME: "application/pdf", Size: 4}, Data: []byte("%PDF")},
			}},
			{Role: core.RoleAssistant, Content: "That is Paris. Checking.", ToolCalls: []core.ToolCall{
				{ID: "toolu_w1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","days":2}`)},
				{ID: "toolu_t1", Name: "clock", Arguments: nil},
			}},
			{Role: core.RoleTool, ToolCallID: "toolu_w1", Name: "get_weather", Content: `{"temp_c":18,"sky":"clear"}`},
			{Role: core.RoleTool, ToolCallID: "toolu_t1", Name: "clock", Content: "14:05"},
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
	srv := fakeanthropic.New()
	m := start(t, srv, Config{Model: "claude-golden"})
	resp, err := m.Generate(t.Context(), conversation(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "done: 14:05"; resp.Text != want { // the default script answers tool results
		t.Errorf("Text = %q, want %q", resp.Text, want)
	}
	got := srv.Requests()[0]
	if got.Model != "claude-golden" || got.MaxTokens != DefaultMaxTokens || !got.Stream ||
		got.System != "You are a helpful assistant. Use tools when needed." {
		t.Errorf("request model %q max_tokens %d stream %v system %q", got.Model, got.MaxTokens, got.Stream, got.System)
	}
	// Messages of one role in a row are one message; the PDF is not an image.
	wantMessages := []fakeanthropic.Message{
		{Role: "user", Content: []fakeanthropic.Block{
			{Type: "text", Text: "Hello?"},
			{Type: "text", Text: "What's the weather where this photo was taken?"},
			{Type: "image", MediaType: "image/png", Data: pngHeader},
		}},
		{Role: "assistant", Content: []fakeanthropic.Block{
			{Type: "text", Text: "That is Paris. Checking."},
			{Type: "tool_use", ID: "toolu_w1", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris","days":2}`)},
			{Type: "tool_use", ID: "toolu_t1", Name: "clock", Input: json.RawMessage(`{}`)},
		}},
		{Role: "user", Content: []fakeanthropic.Block{
			{Type: "tool_result", ToolUseID: "toolu_w1", Text: `{"temp_c":18,"sky":"clear"}`},
			{Type: "tool_result", ToolUseID: "toolu_t1", Text: "14:05"},
		}},
	}
	if !reflect.DeepEqual(got.Messages, wantMessages) {
		t.Errorf("messages:\n got %s\nwant %s", jsonString(got.Messages), jsonString(wantMessages))
	}
}

func TestGenerateRequestGolden(t *testing.T) {
	t.Parallel()
	srv := fakeanthropic.New()
	m := start(t, srv, Config{Model: "claude-golden"})
	if _, err := m.Generate(t.Context(), conversation(), nil); err != nil {
		t.Fatal(err)
	}
	body := srv.Requests()[0].Body
	var got bytes.Buffer
	if err := json.Indent(&got, body, "", "  "); err != nil {
		t.Fatalf("request body is not JSON: %v: %s", err, body)
	}
	got.WriteByte('\n')

	path := filepath.Join("testdata", "request.golden")
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

func TestGenerateStreamsText(t *testing.T) {
	t.Parallel()
	srv := fakeanthropic.New()
	srv.Script(func(fakeanthropic.Request) fakeanthropic.Reply {
		return fakeanthropic.Reply{Text: "The quick brown fox jumps over the lazy dog."}
	})
	m := start(t, srv, Config{})

	var deltas []string
	resp, err := m.Generate(t.Context(), userSays("tell me"), collect(&deltas))
	if err != nil {
		t.Fatal(err)
	}
	want := core.ModelResponse{Text: "The quick brown fox jumps over the lazy dog.", StopReason: "end_turn"}
	resp.Usage = core.Usage{}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("response:\n got %s\nwant %s", jsonString(resp), jsonString(want))
	}
	if len(deltas) < 2 {
		t.Errorf("onDelta called %d times, want several: %q", len(deltas), deltas)
	}
	if got := strings.Join(deltas, ""); got != resp.Text {
		t.Errorf("deltas join to %q, Text is %q", got, resp.Text)
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
		reply fakeanthropic.Reply
		want  core.ModelResponse
	}{
		{
			name: "one call, input over many deltas",
			reply: fakeanthropic.Reply{ToolCalls: []fakeanthropic.ToolCall{
				{ID: "toolu_1", Name: "get_weather", Input: `{"city":"Zürich","units":"metric","days":3,"hourly":true}`},
			}},
			want: core.ModelResponse{ToolCalls: []core.ToolCall{
				{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Zürich","units":"metric","days":3,"hourly":true}`)},
			}, StopReason: "tool_use"},
		},
		{
			name: "text and two calls",
			reply: fakeanthropic.Reply{Text: "Let me look both up.", ToolCalls: []fakeanthropic.ToolCall{
				{ID: "toolu_a", Name: "search", Input: `{"query":"durable execution engines"}`},
				{ID: "toolu_b", Name: "fetch", Input: `{"url":"https://example.com/a?b=c&d=e"}`},
			}},
			want: core.ModelResponse{Text: "Let me look both up.", ToolCalls: []core.ToolCall{
				{ID: "toolu_a", Name: "search", Arguments: json.RawMessage(`{"query":"durable execution engines"}`)},
				{ID: "toolu_b", Name: "fetch", Arguments: json.RawMessage(`{"url":"https://example.com/a?b=c&d=e"}`)},
			}, StopReason: "tool_use"},
		},
		{
			name:  "empty input becomes {}",
			reply: fakeanthropic.Reply{ToolCalls: []fakeanthropic.ToolCall{{ID: "toolu_x", Name: "now", Input: "{}"}}},
			want: core.ModelResponse{ToolCalls: []core.ToolCall{
				{ID: "toolu_x", Name: "now", Arguments: json.RawMessage(`{}`)},
			}, StopReason: "tool_use"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeanthropic.New()
			srv.Script(func(fakeanthropic.Request) fakeanthropic.Reply { return tt.reply })
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

func TestGenerateUsageAndStopReason(t *testing.T) {
	t.Parallel()
	srv := fakeanthropic.New()
	srv.Script(func(fakeanthropic.Request) fakeanthropic.Reply {
		return fakeanthropic.Reply{Text: "Once upon a", StopReason: "max_tokens", Usage: fakeanthropic.Usage{InputTokens: 120, OutputTokens: 7}}
	})
	m := start(t, srv, Config{MaxTokens: 7})
	resp, err := m.Generate(t.Context(), userSays("a long story"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (core.Usage{InputTokens: 120, OutputTokens: 7}); resp.Usage != want || resp.StopReason != "max_tokens" {
		t.Errorf("usage %+v stop reason %q, want %+v and max_tokens", resp.Usage, resp.StopReason, want)
	}
	if got := srv.Requests()[0].MaxTokens; got != 7 {
		t.Errorf("max_tokens = %d, want 7", got)
	}
}

func TestGenerateAPIError(t *testing.T) {
	t.Parallel()
	srv := fakeanthropic.New()
	srv.APIKey = "sk-ant-right"
	m := start(t, srv, Config{APIKey: "sk-ant-wrong"})
	_, err := m.Generate(t.Context(), userSays("hi"), nil)
	if want := "anthropic claude-test: 401 authentication_error: invalid x-api-key"; err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Errorf("error %v is not an *anthropic.Error with status 401", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("server got %d requests, want 1 (a 401 is not retried)", n)
	}
}

func TestGenerateRetriesOverloaded(t *testing.T) {
	t.Parallel()
	srv := fakeanthropic.New()
	srv.FailNext(1, 529)
	m := start(t, srv, Config{})
	resp, err := m.Generate(t.Context(), userSays("hi"), nil)
	if err != nil || resp.Text != "echo: hi" {
		t.Fatalf("Generate = %+v, %v; want the answer after a retry", resp, err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("server got %d requests, want 2", n)
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
			srv := fakeanthropic.New()
			srv.Script(func(req fakeanthropic.Request) fakeanthropic.Reply {
				if int(calls.Add(1)) <= tt.failures {
					// Retry-After-Ms: 0 skips the client's backoff.
					return fakeanthropic.Reply{Status: 529, Header: http.Header{"Retry-After-Ms": {"0"}}}
				}
				return fakeanthropic.DefaultScript(req)
			})
			m := start(t, srv, Config{MaxRetries: tt.maxRetries})

			resp, err := m.Generate(t.Context(), userSays("hi"), nil)
			switch {
			case tt.wantErr && err == nil:
				t.Errorf("Generate = %+v, want an error", resp)
			case tt.wantErr && !strings.HasSuffix(err.Error(), ": 529 overloaded_error: Overloaded"):
				t.Errorf("error %q does not say the API is overloaded", err)
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

func TestGenerateStreamError(t *testing.T) {
	t.Parallel()
	srv := fakeanthropic.New()
	srv.Script(func(fakeanthropic.Request) fakeanthropic.Reply {
		return fakeanthropic.Reply{Text: "Half an", StreamError: &fakeanthropic.Error{Type: "overloaded_error", Message: "Overloaded"}}
	})
	m := start(t, srv, Config{})
	var deltas []string
	_, err := m.Generate(t.Context(), userSays("hi"), collect(&deltas))
	if want := "anthropic claude-test: stream: overloaded_error: Overloaded"; err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.Type() != "overloaded_error" {
		t.Errorf("error %v is not an *anthropic.Error of type overloaded_error", err)
	}
	if got := strings.Join(deltas, ""); got != "Half an" {
		t.Errorf("deltas before the error = %q", got)
	}
}

func TestGenerateHeaders(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-environment")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-environment")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-From-Environment: yes")

	srv := fakeanthropic.New()
	base := srv.Start()
	t.Cleanup(srv.Close)
	for i, key := range []string{"sk-ant-config", ""} {
		m, err := New(Config{Model: "m", BaseURL: base, APIKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Generate(t.Context(), userSays("hi"), nil); err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		h := srv.Requests()[i].Header
		if got := h.Get("X-Api-Key"); got != key {
			t.Errorf("key %q: x-api-key = %q", key, got)
		}
		if got := h.Get("Authorization"); got != "" {
			t.Errorf("key %q: Authorization = %q, want none", key, got)
		}
		if got := h.Get("X-From-Environment"); got != "" {
			t.Errorf("key %q: the environment's custom header was sent", key)
		}
		if h.Get("Anthropic-Version") == "" {
			t.Errorf("key %q: no anthropic-version header", key)
		}
	}
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// eventStream answers every request with 200 and body as an event stream.
func eventStream(body string) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{
			StatusCode: http.StatusOK,
			Status:     "200 OK",
			Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:  http.Header{"Content-Type": {"text/event-stream"}},
			Body:    io.NopCloser(strings.NewReader(body)),
			Request: req,
		}, nil
	})}
}

func TestGenerateDefaultBaseURL(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv("ANTHROPIC_BASE_URL", "http://environment.invalid")
	var url string
	client := &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		url = req.URL.String()
		return eventStream(textStream).Transport.RoundTrip(req)
	})}
	m, err := New(Config{Model: "m", HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(t.Context(), userSays("hi"), nil); err != nil {
		t.Fatal(err)
	}
	if want := "https://api.anthropic.com/v1/messages"; url != want {
		t.Errorf("request went to %s, want %s", url, want)
	}
}

// TestGenerateReusesConnection streams turns whose response ends only after
// the client has read message_stop: reading that end lets the transport
// keep the connection.
func TestGenerateReusesConnection(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	stopRead := make(chan struct{}, 1) // the client has read message_stop
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, textStream)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-stopRead:
		case <-r.Context().Done():
		}
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	client := ts.Client()
	transport := client.Transport
	client.Transport = roundTripFunc(func(req *http.Request) (*http.Response, error) {
		res, err := transport.RoundTrip(req)
		if err == nil {
			res.Body = &signalingBody{ReadCloser: res.Body, signal: stopRead}
		}
		return res, err
	})
	m, err := New(Config{Model: "m", BaseURL: ts.URL, HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	const turns = 20
	for range turns {
		if _, err := m.Generate(t.Context(), userSays("hi"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d turns opened %d connections, want 1", turns, n)
	}
}

// signalingBody signals once a read returned message_stop.
type signalingBody struct {
	io.ReadCloser
	signal chan<- struct{}
	done   bool
}

func (b *signalingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if !b.done && bytes.Contains(p[:n], []byte("message_stop")) {
		b.done = true
		b.signal <- struct{}{}
	}
	return n, err
}

// ev is one event of a stream.
func ev(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

// textStream is a whole streamed answer "Hi", as the API sends it.
var textStream = ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}}`) +
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
	ev("ping", `{"type": "ping"}`) +
	ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`) +
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`) +
	ev("message_stop", `{"type":"message_stop"}`)

// TestGenerateWire feeds streams the fake server does not produce.
func TestGenerateWire(t *testing.T) {
	t.Parallel()
	start := ev("message_start", `{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":3,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":1}}}`)
	stop := ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}`) + ev("message_stop", `{"type":"message_stop"}`)
	tests := []struct {
		name    string
		body    string
		want    core.ModelResponse
		wantErr string
	}{
		{
			name: "cached input tokens count as input",
			body: start + stop,
			want: core.ModelResponse{Usage: core.Usage{InputTokens: 2103, OutputTokens: 5}, StopReason: "tool_use"},
		},
		{
			name: "input tokens updated by message_delta",
			body: start + ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":4,"cache_read_input_tokens":0,"output_tokens":6}}`) +
				ev("message_stop", `{"type":"message_stop"}`),
			want: core.ModelResponse{Usage: core.Usage{InputTokens: 104, OutputTokens: 6}, StopReason: "end_turn"},
		},
		{
			name: "thinking and server tool blocks are skipped",
			body: start +
				ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`) +
				ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me see."}}`) +
				ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2ln"}}`) +
				ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
				ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}`) +
				ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"x\"}"}}`) +
				ev("content_block_stop", `{"type":"content_block_stop","index":1}`) +
				ev("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_9","name":"deploy","input":{}}}`) +
				ev("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"env\":"}}`) +
				ev("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"staging\"}"}}`) +
				ev("content_block_stop", `{"type":"content_block_stop","index":2}`) + stop,
			want: core.ModelResponse{
				ToolCalls: []core.ToolCall{{ID: "toolu_9", Name: "deploy", Arguments: json.RawMessage(`{"env":"staging"}`)}},
				Usage:     core.Usage{InputTokens: 2103, OutputTokens: 5}, StopReason: "tool_use",
			},
		},
		{
			name: "input cut off at max_tokens becomes a JSON string",
			body: start +
				ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_c","name":"write","input":{}}}`) +
				ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"text\": \"Once"}}`) +
				ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
				ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":5}}`) +
				ev("message_stop", `{"type":"message_stop"}`),
			want: core.ModelResponse{
				ToolCalls: []core.ToolCall{{ID: "toolu_c", Name: "write", Arguments: json.RawMessage(`"{\"text\": \"Once"`)}},
				Usage:     core.Usage{InputTokens: 2103, OutputTokens: 5}, StopReason: "max_tokens",
			},
		},
		{
			name:    "stream cut before message_stop",
			body:    strings.TrimSuffix(textStream, ev("message_stop", `{"type":"message_stop"}`)),
			wantErr: "anthropic m: stream: ended before the model finished its turn",
		},
		{
			name:    "block out of order",
			body:    start + ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`) + stop,
			wantErr: "stream: content block 1 started, want 0",
		},
		{
			name:    "delta for a block that has not started",
			body:    start + ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`) + stop,
			wantErr: "stream: delta for content block 0, which has not started",
		},
		{
			name:    "event that is not JSON",
			body:    start + ev("content_block_start", `{"type":`) + stop,
			wantErr: "anthropic m: ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := New(Config{Model: "m", BaseURL: "http://model.invalid", MaxRetries: -1, HTTPClient: eventStream(tt.body)})
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
			if !reflect.DeepEqual(resp, tt.want) {
				t.Errorf("response:\n got %s\nwant %s", jsonString(resp), jsonString(tt.want))
			}
		})
	}
}

func TestGenerateRejectsBadRequest(t *testing.T) {
	t.Parallel()
	srv := fakeanthropic.New()
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

// An overload still there after the client's retries tells the engine how
// long to wait before the step is retried: the API's retry-after.
func TestGenerateRetryAfterReachesTheStep(t *testing.T) {
	t.Parallel()
	srv := fakeanthropic.New()
	srv.Script(func(fakeanthropic.Request) fakeanthropic.Reply {
		return fakeanthropic.Reply{Status: http.StatusTooManyRequests, Error: fakeanthropic.Error{Type: "rate_limit_error", Message: "Number of request tokens has exceeded your per-minute rate limit"},
			Header: http.Header{"Retry-After": {"45"}}}
	})
	url := srv.Start()
	t.Cleanup(srv.Close)
	m, err := New(Config{Model: "claude-test", BaseURL: url, APIKey: "k", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Generate(t.Context(), core.ModelRequest{Messages: []core.Message{{Role: core.RoleUser, Content: "hi"}}}, nil)
	if got := core.RetryAfter(err); got != 45*time.Second || !strings.Contains(err.Error(), "429 rate_limit_error") {
		t.Fatalf("RetryAfter(%v) = %s, want 45s", err, got)
	}
}
