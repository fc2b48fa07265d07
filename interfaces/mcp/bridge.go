package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentgate/agentgate/interfaces/api"
)

// Bridge serves MCP over stdio for clients that launch a command (Claude
// Desktop, Cursor, Claude Code): it relays each newline-delimited JSON-RPC
// message read from the client to a gateway's streamable HTTP endpoint, and
// writes back everything the endpoint answers — responses, progress
// notifications and its own requests to the client (elicitation), whose
// answers travel the same way. Messages are relayed concurrently, so a
// long call (run_agent, approval_prompt) does not hold up the others.
type Bridge struct {
	// URL is the gateway's MCP endpoint, e.g. http://127.0.0.1:8080/mcp.
	URL string
	// APIKey is sent as the bearer token; empty for an open gateway.
	APIKey string
	// HTTP is the client for the endpoint. Default: one without timeouts
	// (an approval may take minutes).
	HTTP   *http.Client
	Logger *slog.Logger

	mu      sync.Mutex // guards out and the session
	out     io.Writer
	session string // Mcp-Session-Id the endpoint handed out
	version string // the protocol version initialize settled on
}

// jsonrpc is the part of a JSON-RPC message the bridge looks at.
type jsonrpc struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params struct {
		Meta struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"_meta"`
	} `json:"params"`
	Result struct {
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"result"`
}

func (m jsonrpc) isRequest() bool { return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" }

// Serve relays messages until in ends and every relayed call has been
// answered, or ctx ends. It then ends the MCP session at the endpoint.
func (b *Bridge) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	if b.HTTP == nil {
		b.HTTP = &http.Client{CheckRedirect: RefuseRedirect}
	}
	if b.Logger == nil {
		b.Logger = slog.Default()
	}
	if w := PlainKeyWarning(b.URL, b.APIKey); w != "" {
		b.Logger.Warn("mcp bridge: " + w)
	}
	b.out = out
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxMessage)
	var wg sync.WaitGroup
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		msg := bytes.Clone(line)
		var m jsonrpc
		if err := json.Unmarshal(msg, &m); err != nil {
			b.write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: each line must be one JSON-RPC message"}}`))
			continue
		}
		if m.Method == "initialize" {
			b.relay(ctx, msg, m) // later messages need its session
			continue
		}
		wg.Go(func() { b.relay(ctx, msg, m) })
	}
	wg.Wait()
	b.endSession()
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	return ctx.Err()
}

// relay posts one message and writes what the endpoint answers.
func (b *Bridge) relay(ctx context.Context, msg []byte, m jsonrpc) {
	resp, err := b.post(ctx, msg, m)
	if err != nil {
		b.fail(m, err.Error())
		return
	}
	defer resp.Body.Close()
	b.mu.Lock()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		b.session = sid
	}
	b.mu.Unlock()
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode == http.StatusAccepted:
	case ct == "text/event-stream":
		b.relaySSE(resp.Body, m)
	case ct == "application/json":
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxMessage+1))
		if err != nil {
			b.fail(m, "read the gateway's answer: "+err.Error())
			return
		}
		if len(body) > maxMessage {
			b.tooLarge(m)
			return
		}
		if !b.answer(body, m) {
			b.unanswered(m)
		}
	default:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		b.fail(m, fmt.Sprintf("the gateway at %s answered %s: %s", b.URL, resp.Status, strings.TrimSpace(string(body))))
	}
}

func (b *Bridge) post(ctx context.Context, msg []byte, m jsonrpc) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.URL, bytes.NewReader(msg))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	b.mu.Lock()
	session, version := b.session, b.version
	b.mu.Unlock()
	if v := m.Params.Meta.ProtocolVersion; v != "" {
		version = v // 2026-07-28 and later state it in every request, header and body alike
	} else if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if version != "" && m.Method != "initialize" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	if b.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.APIKey)
	}
	resp, err := b.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the gateway at %s (is `agentgate serve` running?): %v", b.URL, err)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		resp.Body.Close()
		return nil, fmt.Errorf("the gateway at %s refused the API key (401): set --api-key or AGENTGATE_API_KEY to one of its keys", b.URL)
	}
	return resp, nil
}

// relaySSE writes each event's data, one message per line. A stream that
// ends before the request's answer (the gateway restarted) gets the client
// an error, so that it does not wait for ever.
func (b *Bridge) relaySSE(body io.Reader, m jsonrpc) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxMessage)
	var data bytes.Buffer
	answered := false
	for sc.Scan() {
		line := sc.Bytes()
		if data.Len()+len(line) > maxMessage {
			if !answered {
				b.tooLarge(m)
			}
			return
		}
		switch {
		case len(line) == 0:
			if data.Len() > 0 {
				answered = b.answer(data.Bytes(), m) || answered
				data.Reset()
			}
		case bytes.HasPrefix(line, []byte("data:")):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.Write(bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" ")))
		}
	}
	if data.Len() > 0 {
		answered = b.answer(data.Bytes(), m) || answered
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		if !answered {
			b.tooLarge(m)
		}
		return
	} else if err != nil && m.isRequest() {
		b.Logger.Warn("mcp bridge: the gateway's stream broke off", "method", m.Method, "err", err)
	}
	if !answered {
		b.unanswered(m)
	}
}

// maxMessage is the largest message the bridge reads, from the client or
// from the gateway: a larger one (an endpoint that is not a gateway, or
// one that streams without end) is refused rather than held in memory.
const maxMessage = 16 << 20

// tooLarge tells the client that the answer to request m was not read.
func (b *Bridge) tooLarge(m jsonrpc) {
	b.fail(m, fmt.Sprintf("the gateway at %s answered %s with a message over %d MiB; not read", b.URL, m.Method, maxMessage>>20))
}

// unanswered tells the client that request m got no answer.
func (b *Bridge) unanswered(m jsonrpc) {
	b.fail(m, fmt.Sprintf("the gateway at %s ended its answer to %s without a result (was it restarted?): call again", b.URL, m.Method))
}

// answer writes one message from the endpoint, and learns the protocol
// version from the answer to initialize. It reports whether the message
// answered m (a result or an error with m's id).
func (b *Bridge) answer(raw []byte, m jsonrpc) bool {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		b.Logger.Warn("mcp bridge: the gateway sent a message that is not JSON; dropped", "err", err)
		return false
	}
	var a jsonrpc
	parsed := json.Unmarshal(buf.Bytes(), &a) == nil
	isAnswer := parsed && a.Method == "" && bytes.Equal(a.ID, m.ID)
	if m.Method == "initialize" {
		if isAnswer && a.Result.ProtocolVersion != "" {
			b.mu.Lock()
			b.version = a.Result.ProtocolVersion
			b.mu.Unlock()
		}
	}
	b.write(buf.Bytes())
	return isAnswer
}

// fail answers a request the endpoint could not answer with a JSON-RPC
// error; a failed notification or response is only logged.
func (b *Bridge) fail(m jsonrpc, msg string) {
	if !m.isRequest() {
		b.Logger.Warn("mcp bridge: message not delivered", "method", m.Method, "err", msg)
		return
	}
	out, _ := json.Marshal(map[string]any{ // plain values always marshal
		"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32603, "message": msg},
	})
	b.write(out)
}

func (b *Bridge) write(line []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.out.Write(append(line, '\n')); err != nil {
		b.Logger.Warn("mcp bridge: write to the client", "err", err)
	}
}

// endSession tells the endpoint the client is gone (best effort).
func (b *Bridge) endSession() {
	b.mu.Lock()
	session, version := b.session, b.version
	b.mu.Unlock()
	if session == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, b.URL, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", session)
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	if b.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.APIKey)
	}
	if resp, err := b.HTTP.Do(req); err == nil {
		resp.Body.Close()
	} else if !errors.Is(err, context.Canceled) {
		b.Logger.Debug("mcp bridge: end session", "err", err)
	}
}

// RefuseRedirect is the CheckRedirect of a client that carries an API key:
// a redirect is not followed (Go would send the key on to another port or
// scheme of the host, and the request's body to any host); the error says
// where it pointed.
func RefuseRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("the gateway answered with a redirect to %s, not followed (the API key is not sent on): point the client at the gateway's own URL", req.URL.Redacted())
}

// PlainKeyWarning says why sending key to the gateway at rawURL exposes it,
// "" when it does not: over plain http to a host other than this machine,
// anyone on the path reads the key (and may approve with it).
func PlainKeyWarning(rawURL, key string) string {
	u, err := url.Parse(rawURL)
	if err != nil || key == "" || u.Scheme != "http" {
		return ""
	}
	if api.LoopbackName(u.Hostname()) {
		return ""
	}
	return fmt.Sprintf("the API key goes to %s over plain http: anyone on the way can read it and act with it; use https", u.Hostname())
}
