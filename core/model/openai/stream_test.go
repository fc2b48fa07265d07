package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/model/fakeopenai"
)

// memoryTransport answers every request with 200 and body as an event
// stream, without a network. A split above 0 is the most one Read returns,
// as a body arrives in pieces.
type memoryTransport struct {
	body  []byte
	split int
}

func (t memoryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	var body io.Reader = bytes.NewReader(t.body)
	if t.split > 0 {
		body = &pieces{rest: t.body, n: t.split}
	}
	return &http.Response{
		StatusCode: http.StatusOK,
		Status:     "200 OK",
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    io.NopCloser(body),
		Request: req,
	}, nil
}

// pieces reads rest at most n bytes at a time.
type pieces struct {
	rest []byte
	n    int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(b[:min(len(b), p.n)], p.rest)
	p.rest = p.rest[n:]
	return n, nil
}

// serveWrites starts a server that answers with ctype and writes each of
// writes separately, flushing after each, and returns a Model pointed at it.
func serveWrites(t *testing.T, ctype string, writes ...string) *Model {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for _, s := range writes {
			if _, err := io.WriteString(w, s); err != nil {
				return
			}
			_ = rc.Flush()
		}
	}))
	t.Cleanup(ts.Close)
	m, err := New(Config{Model: "m", BaseURL: ts.URL, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// failed fails t unless err contains wantErr (or, for an empty wantErr, is
// nil), and reports whether Generate failed as wanted.
func failed(t *testing.T, err error, wantErr string) bool {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Fatal(err)
	case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
		t.Fatalf("error = %v, want one containing %q", err, wantErr)
	}
	return err != nil
}

// TestGenerateEventStream covers the framing of the event stream: the parts
// of SSE that servers use, and bodies that arrive in odd pieces.
func TestGenerateEventStream(t *testing.T) {
	t.Parallel()
	const (
		hello = `{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"}}]}`
		world = `{"choices":[{"index":0,"delta":{"content":", world"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2}}`
	)
	helloWorld := core.ModelResponse{Text: "Hello, world", Usage: core.Usage{InputTokens: 5, OutputTokens: 2}, StopReason: "stop"}
	long := strings.Repeat("0123456789", 10_000) // longer than the reader's buffer
	tests := []struct {
		name    string
		ctype   string
		writes  []string
		want    core.ModelResponse
		wantErr string
	}{
		{
			name:   "one write per event",
			writes: []string{"data: " + hello + "\n\n", "data: " + world + "\n\n", "data: [DONE]\n\n"},
			want:   helloWorld,
		},
		{
			name: "data over several lines is joined",
			writes: []string{
				"data: {\"choices\":[{\"index\":0,\n" + "data: \"delta\":{\"content\":\"Hello\"}}]}\n\n",
				"data: " + world + "\n\n",
			},
			want: helloWorld,
		},
		{
			name:   "CRLF line endings",
			writes: []string{"data: " + hello + "\r\n\r\n" + "data: " + world + "\r\n\r\n" + "data: [DONE]\r\n\r\n"},
			want:   helloWorld,
		},
		{
			name: "comments and other fields are ignored",
			writes: []string{
				": OPENROUTER PROCESSING\n\n",
				"event: message\nid: 1\nretry: 3000\nx-vendor: y\ndata: " + hello + "\n\n",
				":\n" + "data: " + world + "\n\n",
			},
			want: helloWorld,
		},
		{
			name:   "no space after the colon",
			writes: []string{"data:" + hello + "\n\n" + "data:" + world + "\n\n"},
			want:   helloWorld,
		},
		{
			name:   "blank lines between events",
			writes: []string{"\n\n" + "data: " + hello + "\n\n\n\n" + "data: " + world + "\n\n"},
			want:   helloWorld,
		},
		{
			name: "events split across writes",
			writes: []string{
				"da", "ta: " + hello[:20], hello[20:] + "\r", "\n", "\r\n",
				"data: " + world[:len(world)-1], world[len(world)-1:] + "\n", "\n", "data: [DO", "NE]\n\n",
			},
			want: helloWorld,
		},
		{
			name:   "a line longer than the read buffer",
			writes: []string{"data: " + `{"choices":[{"index":0,"delta":{"content":"` + long[:5000], long[5000:] + `"},"finish_reason":"stop"}]}` + "\n\n"},
			want:   core.ModelResponse{Text: long, StopReason: "stop"},
		},
		{
			name:   "nothing after [DONE] is read",
			writes: []string{"data: " + hello + "\n\n", "data: " + world + "\n\n", "data: [DONE]\n\n", "data: {not json\n\n"},
			want:   helloWorld,
		},
		{
			name:    "an event the body ends in is dropped",
			writes:  []string{"data: " + hello + "\n\n", "data: " + world + "\n"},
			wantErr: "ended before the model finished",
		},
		{
			name:    "a chunk that is not JSON",
			writes:  []string{"data: " + hello + "\n\n", "data: {\"choices\":[\n\n"},
			wantErr: `stream: chunk is not JSON: "{\"choices\":[\n"`,
		},
		{
			name:    "a completion that is not streamed",
			ctype:   "application/json",
			writes:  []string{`{"id":"c9","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"not streamed"},"finish_reason":"stop"}]}`},
			wantErr: "ended before the model finished",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctype := tt.ctype
			if ctype == "" {
				ctype = "text/event-stream"
			}
			m := serveWrites(t, ctype, tt.writes...)
			var deltas []string
			resp, err := m.Generate(t.Context(), userSays("hi"), collect(&deltas))
			if failed(t, err, tt.wantErr) {
				return
			}
			if !reflect.DeepEqual(resp, tt.want) {
				t.Errorf("response:\n got %s\nwant %s", jsonString(resp), jsonString(tt.want))
			}
			if got := strings.Join(deltas, ""); got != tt.want.Text {
				t.Errorf("deltas join to %q, want %q", got, tt.want.Text)
			}
		})
	}
}

// TestGenerateSplitReads reads one stream arriving 1 to 8 bytes at a time.
func TestGenerateSplitReads(t *testing.T) {
	t.Parallel()
	body := benchStream()
	for split := 1; split <= 8; split++ {
		m, err := New(Config{Model: "m", BaseURL: "http://model.invalid/v1", HTTPClient: &http.Client{Transport: memoryTransport{body: body, split: split}}})
		if err != nil {
			t.Fatal(err)
		}
		var deltas []string
		resp, err := m.Generate(t.Context(), userSays("hi"), collect(&deltas))
		if err != nil {
			t.Fatalf("split %d: %v", split, err)
		}
		if resp.Text != benchAnswer || len(deltas) != 35 || resp.Usage != (core.Usage{InputTokens: 412, OutputTokens: 38}) {
			t.Errorf("split %d: response %s after %d deltas", split, jsonString(resp), len(deltas))
		}
	}
}

func TestEventReaderLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		wantErr string
	}{
		{name: "at the limit", body: "data: " + strings.Repeat("x", 63) + "\n\n"},
		{name: "event over the limit", body: "data: " + strings.Repeat("x", 40) + "\ndata: " + strings.Repeat("x", 40) + "\n\n", wantErr: "stream: event larger than 64 bytes"},
		{name: "line over the limit", body: ": " + strings.Repeat("x", 5000) + "\n\n", wantErr: "stream: line longer than 64 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEventReader(&pieces{rest: []byte(tt.body), n: 7}, 64)
			_, err := e.next()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestGenerateChunkBounds covers the indexes a chunk may carry: those the
// client's accumulator accepted, and the bounds it kept on the rest.
func TestGenerateChunkBounds(t *testing.T) {
	t.Parallel()
	ev := func(s string) string { return "data: " + s + "\n\n" }
	calls := func(s string) string { return ev(`{"choices":[{"index":0,"delta":{"tool_calls":[` + s + `]}}]}`) }
	stop := ev(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
	tests := []struct {
		name    string
		body    string
		want    []core.ToolCall
		wantErr string
	}{
		{
			name: "index -1 is 0",
			body: calls(`{"index":-1,"id":"call_b","function":{"name":"now","arguments":"{}"}}`) + stop,
			want: []core.ToolCall{{ID: "call_b", Name: "now", Arguments: json.RawMessage(`{}`)}},
		},
		{
			name: "a skipped index leaves no call",
			body: calls(`{"index":0,"id":"call_0","function":{"name":"a"}}`) + calls(`{"index":2,"id":"call_2","function":{"name":"b"}}`) + stop,
			want: []core.ToolCall{{ID: "call_0", Name: "a", Arguments: json.RawMessage(`{}`)}, {ID: "call_2", Name: "b", Arguments: json.RawMessage(`{}`)}},
		},
		{
			name: "a later id replaces an earlier one",
			body: calls(`{"index":0,"id":"call_x","function":{"name":"a"}}`) + calls(`{"index":0,"id":"call_y","function":{"arguments":"{\"k\":1}"}}`) + stop,
			want: []core.ToolCall{{ID: "call_y", Name: "a", Arguments: json.RawMessage(`{"k":1}`)}},
		},
		{
			name: "other choices do not count",
			body: ev(`{"choices":[{"index":1,"delta":{"content":"other","tool_calls":[{"index":0,"id":"c1","function":{"name":"x"}}]}}]}`) + stop,
		},
		{name: "choice index past 127", body: ev(`{"choices":[{"index":128,"delta":{"content":"x"}}]}`) + stop, wantErr: "stream: chunk does not fit the response so far: choice index 128"},
		{name: "negative choice index", body: ev(`{"choices":[{"index":-1,"delta":{"content":"x"}}]}`) + stop, wantErr: "choice index -1"},
		{name: "tool-call index below -1", body: calls(`{"index":-2}`) + stop, wantErr: "tool-call index -2"},
		{name: "tool-call index 128 past the calls so far", body: calls(`{"index":128}`) + stop, wantErr: "tool-call index 128"},
		{name: "indexes that skip too many together", body: calls(`{"index":100},{"index":200}`) + stop, wantErr: "tool-call index 200 skips too many"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := serveWrites(t, "text/event-stream", tt.body)
			resp, err := m.Generate(t.Context(), userSays("hi"), nil)
			if failed(t, err, tt.wantErr) {
				return
			}
			if !reflect.DeepEqual(resp.ToolCalls, tt.want) {
				t.Errorf("tool calls:\n got %s\nwant %s", jsonString(resp.ToolCalls), jsonString(tt.want))
			}
		})
	}
}

func TestGenerateStreamError(t *testing.T) {
	t.Parallel()
	m := serveWrites(t, "text/event-stream",
		"data: "+`{"choices":[{"index":0,"delta":{"content":"x"}}]}`+"\n\n",
		"event: error\ndata: "+`{"error":{"message":"upstream overloaded","type":"server_error"}}`+"\n\n")
	_, err := m.Generate(t.Context(), userSays("hi"), nil)
	var streamErr *ssestream.StreamError
	if !errors.As(err, &streamErr) {
		t.Fatalf("error %v is not an *ssestream.StreamError", err)
	}
	if want := `openai m: received error while streaming: {"message":"upstream overloaded","type":"server_error"}`; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

// TestGenerateCanceled cancels the context while the server holds the
// stream open.
func TestGenerateCanceled(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "data: "+`{"choices":[{"index":0,"delta":{"content":"Hel"}}]}`+"\n\n")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(ts.Close)
	m, err := New(Config{Model: "m", BaseURL: ts.URL, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err = m.Generate(ctx, userSays("hi"), func(string) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}

// TestGenerateAdminKey pins the request to the chat endpoint's auth: the
// client's generic Post would send OPENAI_ADMIN_KEY when no API key is set.
func TestGenerateAdminKey(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv("OPENAI_ADMIN_KEY", "sk-admin-from-environment")
	srv := fakeopenai.New()
	for _, tt := range []struct{ key, wantAuth string }{
		{key: "", wantAuth: ""},
		{key: "sk-test", wantAuth: "Bearer sk-test"},
	} {
		m := start(t, srv, Config{APIKey: tt.key})
		if _, err := m.Generate(t.Context(), userSays("hi"), nil); err != nil {
			t.Fatalf("key %q: %v", tt.key, err)
		}
		reqs := srv.Requests()
		if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != tt.wantAuth {
			t.Errorf("key %q: Authorization = %q, want %q", tt.key, got, tt.wantAuth)
		}
	}
}

// TestGenerateReusesConnection streams turns whose end arrives in its own
// write after [DONE]: reading it lets the transport keep the connection.
func TestGenerateReusesConnection(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, ev := range []string{
			`{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`,
			"[DONE]",
		} {
			_, _ = io.WriteString(w, "data: "+ev+"\n\n")
			_ = rc.Flush()
		}
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	m, err := New(Config{Model: "m", BaseURL: ts.URL, HTTPClient: ts.Client()})
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

// TestGenerateDoesNotWaitAfterDone holds the response open after [DONE].
func TestGenerateDoesNotWaitAfterDone(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: "+`{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) })
	const timeout = 20 * time.Second
	m, err := New(Config{Model: "m", BaseURL: ts.URL, MaxRetries: -1, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	// The server ends the response only after the test: a Generate that
	// waited for its end would run into its timeout and fail.
	resp, err := m.Generate(t.Context(), userSays("hi"), nil)
	if err != nil || resp.Text != "hi" {
		t.Fatalf("Generate = %+v, %v (it waited for the response to end?)", resp, err)
	}
}
