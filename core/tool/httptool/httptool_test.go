package httptool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/tool/httptool"
	"github.com/agentgate/agentgate/test/testnet"
)

// recorded is what the fake endpoint saw.
type recorded struct {
	Method string
	Header http.Header
	Body   []byte
}

// endpoint is an httptest server that records every request and answers
// with respond.
type endpoint struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
}

func newEndpoint(t *testing.T, respond http.HandlerFunc) *endpoint {
	t.Helper()
	e := &endpoint{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("endpoint: read body: %v", err)
		}
		e.mu.Lock()
		e.requests = append(e.requests, recorded{Method: r.Method, Header: r.Header.Clone(), Body: body})
		e.mu.Unlock()
		respond(w, r)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *endpoint) only(t *testing.T) recorded {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.requests) != 1 {
		t.Fatalf("endpoint got %d requests, want 1", len(e.requests))
	}
	return e.requests[0]
}

func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func mustNew(t *testing.T, cfg httptool.Config) *httptool.Tool {
	t.Helper()
	tool, err := httptool.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tool
}

func TestCallSendsRequest(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"", "POST", "put", "PATCH"} {
		t.Run("method="+method, func(t *testing.T) {
			t.Parallel()
			ep := newEndpoint(t, reply(http.StatusOK, `{"deployed":true}`))
			tool := mustNew(t, httptool.Config{
				URL:     ep.URL + "/deploy?team=ops",
				Method:  method,
				Headers: map[string]string{"Authorization": "Bearer s3cret", "x-team": "ops"},
			})
			args := json.RawMessage(`{"service":"api", "env":"staging"}`)
			got, err := tool.Call(t.Context(), args, "run_1:call_1")
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if got != `{"deployed":true}` {
				t.Errorf("content = %q, want the response body", got)
			}
			req := ep.only(t)
			wantMethod := strings.ToUpper(method)
			if wantMethod == "" {
				wantMethod = http.MethodPost
			}
			if req.Method != wantMethod {
				t.Errorf("method = %s, want %s", req.Method, wantMethod)
			}
			if !bytes.Equal(req.Body, args) {
				t.Errorf("body = %s, want the arguments %s", req.Body, args)
			}
			for name, want := range map[string]string{
				"Content-Type":    "application/json",
				"Idempotency-Key": "run_1:call_1",
				"Authorization":   "Bearer s3cret",
				"X-Team":          "ops",
			} {
				if got := req.Header.Get(name); got != want {
					t.Errorf("header %s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestCallSameKeyOnRetry(t *testing.T) {
	t.Parallel()
	ep := newEndpoint(t, reply(http.StatusOK, "ok"))
	tool := mustNew(t, httptool.Config{URL: ep.URL})
	for range 2 {
		if _, err := tool.Call(t.Context(), json.RawMessage(`{}`), "run_9:call_3"); err != nil {
			t.Fatalf("Call: %v", err)
		}
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	for i, r := range ep.requests {
		if got := r.Header.Get("Idempotency-Key"); got != "run_9:call_3" {
			t.Errorf("request %d Idempotency-Key = %q", i, got)
		}
	}
}

func TestCallContentTypeOverride(t *testing.T) {
	t.Parallel()
	ep := newEndpoint(t, reply(http.StatusOK, "ok"))
	tool := mustNew(t, httptool.Config{URL: ep.URL, Headers: map[string]string{"Content-Type": "application/vnd.deploy+json"}})
	if _, err := tool.Call(t.Context(), json.RawMessage(`{}`), "k"); err != nil {
		t.Fatalf("Call: %v", err)
	}
	if got := ep.only(t).Header.Get("Content-Type"); got != "application/vnd.deploy+json" {
		t.Errorf("Content-Type = %q, want the configured one", got)
	}
}

func TestCallResponses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		respond     http.HandlerFunc
		wantContent string
		wantToolErr string // exact ToolError message; "" means success
	}{
		{name: "200 body", respond: reply(200, "deployed api to staging"), wantContent: "deployed api to staging"},
		{name: "201 json", respond: reply(201, `{"id":7}`), wantContent: `{"id":7}`},
		{name: "204 empty", respond: reply(204, ""), wantContent: `{"status":204}`},
		{name: "200 empty", respond: reply(200, ""), wantContent: `{"status":200}`},
		{name: "503", respond: reply(503, "deploys are frozen\n"), wantToolErr: "HTTP 503: deploys are frozen"},
		{name: "400 json", respond: reply(400, `{"error":"env must be staging"}`), wantToolErr: `HTTP 400: {"error":"env must be staging"}`},
		{name: "404 empty body", respond: reply(404, ""), wantToolErr: "HTTP 404: Not Found"},
		{name: "redirect not followed", respond: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://elsewhere.example/", http.StatusFound)
		}, wantToolErr: "HTTP 302: Found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ep := newEndpoint(t, tt.respond)
			tool := mustNew(t, httptool.Config{URL: ep.URL})
			got, err := tool.Call(t.Context(), json.RawMessage(`{"a":1}`), "k")
			if tt.wantToolErr == "" {
				if err != nil {
					t.Fatalf("Call: %v", err)
				}
				if got != tt.wantContent {
					t.Errorf("content = %q, want %q", got, tt.wantContent)
				}
				return
			}
			var te *core.ToolError
			if !errors.As(err, &te) {
				t.Fatalf("Call error = %v (%T), want *core.ToolError", err, err)
			}
			if te.Message != tt.wantToolErr {
				t.Errorf("ToolError = %q, want %q", te.Message, tt.wantToolErr)
			}
		})
	}
}

func TestCallTruncates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		status     int
		size       int
		chunked    bool // no Content-Length
		limit      int
		wantMarker string
	}{
		{name: "content at limit kept", status: 200, size: httptool.MaxContent, limit: httptool.MaxContent},
		{name: "content over limit", status: 200, size: 100_000, limit: httptool.MaxContent, wantMarker: "…[truncated " + strconv.Itoa(100_000-(httptool.MaxContent-64)) + " bytes]"},
		{name: "content over limit chunked", status: 200, size: 100_000, chunked: true, limit: httptool.MaxContent, wantMarker: "…[truncated " + strconv.Itoa(100_000-(httptool.MaxContent-64)) + " bytes]"},
		{name: "content far over limit chunked", status: 200, size: 3 << 20, chunked: true, limit: httptool.MaxContent, wantMarker: "…[truncated at least "},
		{name: "error body over 2 KiB", status: 500, size: 10_000, limit: httptool.MaxErrorBody, wantMarker: "…[truncated " + strconv.Itoa(10_000-(httptool.MaxErrorBody-64)) + " bytes]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := strings.Repeat("é", tt.size/2) // 2-byte runes: a cut must not split one
			ep := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
				if !tt.chunked {
					w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				}
				w.WriteHeader(tt.status)
				if tt.chunked {
					w.(http.Flusher).Flush()
				}
				io.WriteString(w, body)
			})
			tool := mustNew(t, httptool.Config{URL: ep.URL})
			got, err := tool.Call(t.Context(), json.RawMessage(`{}`), "k")
			if tt.status != 200 {
				var te *core.ToolError
				if !errors.As(err, &te) {
					t.Fatalf("Call error = %v, want *core.ToolError", err)
				}
				got = strings.TrimPrefix(te.Message, "HTTP 500: ")
			} else if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if len(got) > tt.limit {
				t.Errorf("len = %d, want at most %d", len(got), tt.limit)
			}
			if !utf8.ValidString(got) {
				t.Errorf("truncated content is not valid UTF-8")
			}
			if tt.wantMarker == "" {
				if got != body {
					t.Errorf("content of %d bytes changed (len %d)", len(body), len(got))
				}
				return
			}
			if !strings.Contains(got, tt.wantMarker) {
				t.Errorf("content ends %q, want marker %q", got[max(0, len(got)-60):], tt.wantMarker)
			}
			if !strings.HasPrefix(body, strings.SplitN(got, "…[truncated", 2)[0]) {
				t.Errorf("kept part is not a prefix of the body")
			}
		})
	}
}

func TestCallTimeoutIsTransportError(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	ep := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	tool := mustNew(t, httptool.Config{URL: ep.URL + "/slow?token=hunter2", Timeout: 50 * time.Millisecond})
	_, err := tool.Call(t.Context(), json.RawMessage(`{}`), "k")
	if err == nil {
		t.Fatal("Call = nil error, want a timeout")
	}
	var te *core.ToolError
	if errors.As(err, &te) {
		t.Fatalf("timeout is a ToolError %q; want a transport error so the engine retries", te.Message)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q is not context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "timed out after 50ms") {
		t.Errorf("error %q does not say it timed out", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %q leaks the query string", err)
	}
}

func TestCallConnectionRefusedIsTransportError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tool := mustNew(t, httptool.Config{URL: "http://" + addr + "/x"})
	_, err = tool.Call(t.Context(), json.RawMessage(`{}`), "k")
	var te *core.ToolError
	if err == nil || errors.As(err, &te) {
		t.Fatalf("Call error = %v, want a non-ToolError transport error", err)
	}
}

// TestTransportErrorHidesPath: a transport error names the endpoint by
// scheme://host:port only. The path of a Slack or Discord incoming-webhook
// URL is its secret, and the error reaches logs, run.error, the job's
// last_error and the chat.
func TestTransportErrorHidesPath(t *testing.T) {
	t.Parallel()
	refused := "http://" + testnet.RefusingAddr(t)
	release := make(chan struct{})
	slow := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // before slow closes: cleanups run last first
	cut := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "only part")
	})
	const secret = "/services/T000/B000/XXXXSECRETXXXX"
	tests := []struct {
		name, base string
	}{
		{"connection refused", refused},
		{"timeout", slow.URL},
		{"body cut short", cut.URL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tool := mustNew(t, httptool.Config{URL: tt.base + secret + "?token=hunter2#frag", Timeout: 200 * time.Millisecond})
			_, err := tool.Call(t.Context(), json.RawMessage(`{}`), "k")
			if err == nil {
				t.Fatal("Call = nil error, want a transport error")
			}
			if msg := err.Error(); strings.Contains(msg, "SECRET") || strings.Contains(msg, "/services") || strings.Contains(msg, "hunter2") || !strings.Contains(msg, "POST "+tt.base+":") {
				t.Errorf("error %q: want the endpoint as %s, without its path or query", msg, tt.base)
			}
		})
	}
}

func TestCallBodyCutShortIsTransportError(t *testing.T) {
	t.Parallel()
	ep := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "only part")
		// Returning early with a short body makes the server close the
		// connection.
	})
	tool := mustNew(t, httptool.Config{URL: ep.URL})
	_, err := tool.Call(t.Context(), json.RawMessage(`{}`), "k")
	var te *core.ToolError
	if err == nil || errors.As(err, &te) {
		t.Fatalf("Call error = %v, want a non-ToolError transport error", err)
	}
}

func TestCallParentContextCancelled(t *testing.T) {
	t.Parallel()
	ep := newEndpoint(t, reply(200, "ok"))
	tool := mustNew(t, httptool.Config{URL: ep.URL})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := tool.Call(ctx, json.RawMessage(`{}`), "k")
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "timed out") {
		t.Fatalf("Call error = %v, want a cancellation that is not reported as a timeout", err)
	}
}

func TestCallCustomClient(t *testing.T) {
	t.Parallel()
	var used bool
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used = true
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("from custom")), ContentLength: -1, Header: http.Header{}}, nil
	})}
	tool := mustNew(t, httptool.Config{URL: "https://tools.example/deploy", Client: client})
	got, err := tool.Call(t.Context(), json.RawMessage(`{}`), "k")
	if err != nil || got != "from custom" || !used {
		t.Fatalf("Call = %q, %v (custom client used: %v)", got, err, used)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  httptool.Config
		want string // exact error; "" means valid
	}{
		{name: "minimal", cfg: httptool.Config{URL: "https://tools.example/deploy"}},
		{name: "http", cfg: httptool.Config{URL: "http://127.0.0.1:9000/x", Method: "patch", Timeout: time.Second}},
		{name: "empty url", cfg: httptool.Config{}, want: "url: must be an absolute http(s) URL"},
		{name: "relative url", cfg: httptool.Config{URL: "/deploy"}, want: "url: must be an absolute http(s) URL"},
		{name: "no host", cfg: httptool.Config{URL: "https:///deploy"}, want: "url: must be an absolute http(s) URL"},
		{name: "other scheme", cfg: httptool.Config{URL: "ftp://tools.example/x"}, want: "url: must be an absolute http(s) URL"},
		{name: "unparsable", cfg: httptool.Config{URL: "http://[::1"}, want: "url: must be an absolute http(s) URL"},
		{name: "GET", cfg: httptool.Config{URL: "https://t.example", Method: "GET"}, want: `method: must be POST, PUT or PATCH, got "GET"`},
		{name: "DELETE", cfg: httptool.Config{URL: "https://t.example", Method: "DELETE"}, want: `method: must be POST, PUT or PATCH, got "DELETE"`},
		{name: "negative timeout", cfg: httptool.Config{URL: "https://t.example", Timeout: -time.Second}, want: "timeout: must not be negative (0 means 30s)"},
		{name: "idempotency header", cfg: httptool.Config{URL: "https://t.example", Headers: map[string]string{"idempotency-key": "x"}}, want: "headers: Idempotency-Key is set on every call from the run and tool call ids; remove it"},
		{name: "host header", cfg: httptool.Config{URL: "https://t.example", Headers: map[string]string{"Host": "x"}}, want: "headers: Host is managed by the HTTP client; remove it"},
		{name: "bad header name", cfg: httptool.Config{URL: "https://t.example", Headers: map[string]string{"X Token": "x"}}, want: `headers: "X Token" is not a valid header name`},
		{name: "header value with newline", cfg: httptool.Config{URL: "https://t.example", Headers: map[string]string{"Authorization": "Bearer s3cret\r\nX-Evil: 1"}}, want: "headers: value of Authorization contains a line break or NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := httptool.New(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("New: %v", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("New error = %v, want %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q leaks a header value", err)
			}
		})
	}
}

func TestConfigLogValueRedactsHeaders(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	cfg := httptool.Config{
		URL:     "https://user:pw@tools.example/deploy?token=hunter2",
		Headers: map[string]string{"Authorization": "Bearer s3cret"},
	}
	logger.Info("tool configured", "tool", cfg)
	out := buf.String()
	for _, secret := range []string{"s3cret", "hunter2", "pw@"} {
		if strings.Contains(out, secret) {
			t.Errorf("log line leaks %q: %s", secret, out)
		}
	}
	if !strings.Contains(out, "Authorization") || !strings.Contains(out, "url=https://tools.example ") || strings.Contains(out, "/deploy") {
		t.Errorf("log line lacks the header name or the URL's host, or shows its path: %s", out)
	}
}

func ExampleNew() {
	_, err := httptool.New(httptool.Config{URL: "tools.example/deploy"})
	fmt.Println(err)
	// Output: url: must be an absolute http(s) URL
}

// TestFileResponses: a response that is not text is a file for the
// conversation, named by its Content-Disposition; one over MaxFileBytes is
// the tool's failure, not a truncated file.
func TestFileResponses(t *testing.T) {
	t.Parallel()
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 3000)...)
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chart":
			w.Header().Set("Content-Type", "image/png")
			w.Header().Set("Content-Disposition", `attachment; filename="../../latency.png"`)
			_, _ = w.Write(png)
		case "/huge":
			w.Header().Set("Content-Type", "application/pdf")
			_, _ = w.Write(make([]byte, httptool.MaxFileBytes+1))
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	}))
	t.Cleanup(ep.Close)
	content, files, err := mustNew(t, httptool.Config{URL: ep.URL + "/chart"}).CallFiles(t.Context(), json.RawMessage(`{}`), "k1")
	if err != nil || content != "" || len(files) != 1 {
		t.Fatalf("chart: %q, %d files, %v", content, len(files), err)
	}
	if f := files[0]; f.Name != "latency.png" || f.MIME != "image/png" || f.Size != int64(len(png)) || !bytes.Equal(f.Data, png) {
		t.Errorf("file = %s %s %d bytes, want latency.png image/png %d", f.Name, f.MIME, f.Size, len(png))
	}
	if _, _, err := mustNew(t, httptool.Config{URL: ep.URL + "/huge"}).CallFiles(t.Context(), json.RawMessage(`{}`), "k2"); !errors.As(err, new(*core.ToolError)) {
		t.Errorf("a file over the limit: %v, want a tool error", err)
	}
	if content, files, err := mustNew(t, httptool.Config{URL: ep.URL + "/json"}).CallFiles(t.Context(), json.RawMessage(`{}`), "k3"); err != nil || len(files) != 0 || content != `{"ok":true}` {
		t.Errorf("+json is text: %q, %d files, %v", content, len(files), err)
	}
}
