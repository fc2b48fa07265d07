package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/api"
	"github.com/agentgate/agentgate/interfaces/mcp"
)

// stdio starts a Bridge to the gateway with key and returns the transport a
// client that launched it would use: the bridge's stdin and stdout.
func (g *gateway) stdio(key string) transport.Interface {
	g.t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		b := &mcp.Bridge{URL: g.srv.URL + "/mcp", APIKey: key}
		done <- b.Serve(context.Background(), inR, outW)
		outW.Close()
	}()
	g.t.Cleanup(func() {
		inW.Close() // the client went away: the bridge ends
		if err := <-done; err != nil {
			g.t.Errorf("bridge: %v", err)
		}
	})
	return transport.NewIO(outR, inW, io.NopCloser(strings.NewReader("")))
}

// Over stdio, the bridge relays calls, the server's questions to the user
// (elicitation) and their answers, in both protocol eras.
func TestBridgeRelaysRunAndElicitation(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "2026", true: "2025"}[legacy], func(t *testing.T) {
			g := newGateway(t)
			asked := &elicitor{answer: accept("approve", "")}
			c := connect(t, g.stdio(testKey), clientOpts{legacy: legacy, elicit: asked})
			var run api.RunView
			structured(t, call(t, c, "run_agent", map[string]any{"agent": "demo", "input": "deploy web to staging"}), &run)
			if run.Status != core.RunCompleted || !strings.Contains(run.Output, "The deploy tool returned") || len(asked.messages()) != 1 {
				t.Fatalf("run = %+v, asked %q", run, asked.messages())
			}
			answer := make(chan string, 1)
			go func() {
				answer <- text(t, call(t, c, "approval_prompt", map[string]any{"tool_name": "Bash", "input": map[string]any{"command": "make"}}))
			}()
			a := g.pending()
			g.rest("POST", "/api/v1/approvals/"+a.ID+"/decision", `{"decision":"approve"}`, nil)
			if got := <-answer; got != `{"behavior":"allow","updatedInput":{"command":"make"}}` {
				t.Fatalf("approval_prompt = %s", got)
			}
		})
	}
}

// A bridge with a wrong key tells the client why it cannot connect.
func TestBridgeWrongKey(t *testing.T) {
	g := newGateway(t)
	c := client.NewClient(g.stdio("wrong-key-0123456789abcdef"), client.WithLegacyProtocolOnly())
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	init := mcpgo.InitializeRequest{}
	init.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcpgo.Implementation{Name: "test", Version: "1"}
	_, err := c.Initialize(t.Context(), init)
	if err == nil || !strings.Contains(err.Error(), "refused the API key (401)") {
		t.Fatalf("initialize: err = %v, want the 401 explained", err)
	}
	c.Close()
}

// A gateway URL that redirects does not get the bridge's key or the
// client's messages sent on (Go would follow it to another port or scheme
// with the Authorization header); the client is told where it pointed.
func TestBridgeDoesNotFollowRedirects(t *testing.T) {
	hits := make(chan string, 10)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	defer other.Close()
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer gw.Close()
	var out bytes.Buffer
	b := &mcp.Bridge{URL: gw.URL + "/mcp", APIKey: "SECRET-KEY-0123456789", Logger: slog.New(slog.DiscardHandler)}
	if err := b.Serve(t.Context(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "redirect to "+other.URL) || !strings.Contains(out.String(), `"error"`) {
		t.Errorf("the client got %q, want an error naming the redirect", out.String())
	}
	select {
	case auth := <-hits:
		t.Errorf("the redirect's target got the message (Authorization %q)", auth)
	default:
	}
}

// A gateway whose stream ends before it answers (it was restarted while an
// approval_prompt waited) leaves the client an error for that call, not
// a wait for ever; its notifications still reach the client.
func TestBridgeAnswersACallWhoseStreamEnded(t *testing.T) {
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":7,\"progress\":1}}\n\n")
	}))
	defer gw.Close()
	var out bytes.Buffer
	b := &mcp.Bridge{URL: gw.URL + "/mcp", APIKey: "SECRET-KEY-0123456789", Logger: slog.New(slog.DiscardHandler)}
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"approval_prompt","arguments":{}}}`
	if err := b.Serve(t.Context(), strings.NewReader(call+"\n"), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "notifications/progress") ||
		!strings.Contains(lines[1], `"id":7`) || !strings.Contains(lines[1], "without a result") {
		t.Errorf("the client got %q, want the notification, then an error for call 7", lines)
	}
}

// Whatever the client sends and the endpoint answers, the bridge writes
// only whole JSON messages, one a line, to the client.
func FuzzBridgeWritesOnlyJSONLines(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "text/event-stream", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
	f.Add(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"_meta":{"protocolVersion":"2026-07-28"}}}`, "application/json", "{\n \"jsonrpc\": \"2.0\", \"id\": \"a\", \"result\": {}\n}")
	f.Add("not json\n\n{}", "text/plain", "oops")
	f.Add(`{"id":2,"method":"x"}`, "text/event-stream", "data: {\"a\":\ndata: 1}\n\ndata: [\n")
	f.Fuzz(func(t *testing.T, in, contentType, body string) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			io.WriteString(w, body)
		}))
		defer srv.Close()
		var out bytes.Buffer
		b := &mcp.Bridge{URL: srv.URL, Logger: slog.New(slog.DiscardHandler)}
		if err := b.Serve(t.Context(), strings.NewReader(in), &out); err != nil && !strings.Contains(err.Error(), "token too long") {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Fatalf("wrote a line that is not JSON: %q", line)
			}
		}
	})
}

// An endpoint that answers without end (as JSON, as one event's data, or
// as one long line) gets the client an error, not a bridge that reads it
// all into memory.
func TestBridgeRefusesAnswersWithoutEnd(t *testing.T) {
	for _, tc := range []struct{ name, contentType, head, chunk string }{
		{"json", "application/json", `{"jsonrpc":"2.0","id":7,"result":{"content":[`, `{"type":"text","text":"x"},`},
		{"event data lines", "text/event-stream", "event: message\n", "data: 0123456789abcdef\n"},
		{"one line", "text/event-stream", "event: message\ndata: ", "0123456789abcdef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				_, _ = io.WriteString(w, tc.head)
				chunk := []byte(strings.Repeat(tc.chunk, 4096))
				for r.Context().Err() == nil {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			}))
			defer gw.Close()
			var out bytes.Buffer
			b := &mcp.Bridge{URL: gw.URL + "/mcp", Logger: slog.New(slog.DiscardHandler)}
			call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_run","arguments":{}}}`
			if err := b.Serve(t.Context(), strings.NewReader(call+"\n"), &out); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(out.String()); !strings.Contains(got, `"id":7`) || !strings.Contains(got, "over 16 MiB; not read") {
				t.Errorf("the client got %.300q, want an error for call 7", got)
			}
		})
	}
}

// A key sent over plain http to another machine is warned about; https,
// this machine's names and no key are not.
func TestPlainKeyWarning(t *testing.T) {
	for _, tc := range []struct {
		url, key string
		warn     bool
	}{
		{"http://10.0.0.5:8080", "KEY-0123456789abcdef", true},
		{"http://gateway.example.com/", "KEY-0123456789abcdef", true},
		{"https://gateway.example.com", "KEY-0123456789abcdef", false},
		{"http://gateway.example.com", "", false},
		{"http://127.0.0.1:8080", "KEY-0123456789abcdef", false},
		{"http://[::1]:8080", "KEY-0123456789abcdef", false},
		{"http://localhost:8080", "KEY-0123456789abcdef", false},
		{"http://agentgate.localhost:8080", "KEY-0123456789abcdef", false},
	} {
		if got := mcp.PlainKeyWarning(tc.url, tc.key); (got != "") != tc.warn {
			t.Errorf("PlainKeyWarning(%s, key %q) = %q, want a warning: %v", tc.url, tc.key, got, tc.warn)
		}
	}
}
