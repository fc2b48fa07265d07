package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// socketPath is where the fake's Socket Mode websocket listens
// (apps.connections.open answers its ws:// URL).
const socketPath = "/socket"

// DefaultAppID is the app the fake's Socket Mode hello names.
const DefaultAppID = "A0AGENTGATE"

// socketPingInterval is how often the fake pings an open connection, as
// Slack does; clients take a connection that stays silent for long as dead.
const socketPingInterval = 10 * time.Second

// SocketAck is an acknowledgement the app sent over Socket Mode.
type SocketAck struct {
	EnvelopeID string
	Payload    json.RawMessage // nil when the ack carried none
}

// socketEnvelope is a Socket Mode envelope as Slack sends it.
type socketEnvelope struct {
	Type                   string          `json:"type"`
	EnvelopeID             string          `json:"envelope_id"`
	Payload                json.RawMessage `json:"payload"`
	AcceptsResponsePayload bool            `json:"accepts_response_payload"`
	RetryAttempt           int             `json:"retry_attempt"`
	RetryReason            string          `json:"retry_reason"`
}

// socketHub is the fake's Socket Mode state. The zero value is ready.
type socketHub struct {
	mu      sync.Mutex
	live    *socketConn // the newest open connection; envelopes go there
	open    int         // connections open now
	opened  int         // connections accepted so far
	seq     int
	sent    map[string]socketEnvelope
	queued  []socketEnvelope // sent while no connection was open
	acks    []SocketAck
	changed chan struct{} // closed on every change, for waiters
}

type socketConn struct {
	ws *websocket.Conn
	mu sync.Mutex // one writer at a time
}

func (c *socketConn) write(v any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteJSON(v)
}

// The app dials with Origin: https://api.slack.com, as Slack's SDKs do.
var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// serveSocket is the Socket Mode websocket endpoint: it says hello, sends the
// envelopes queued while no connection was open, pings, and records acks.
func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade answered the client
	}
	h := &s.socket
	c := &socketConn{ws: ws}
	h.mu.Lock()
	h.open++
	h.opened++
	hello := response{"type": "hello", "num_connections": h.open,
		"debug_info":      response{"host": "applink-slacktest", "build_number": 1, "approximate_connection_time": 18060},
		"connection_info": response{"app_id": DefaultAppID}}
	h.mu.Unlock()

	done := make(chan struct{})
	defer func() {
		close(done)
		_ = ws.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		h.open--
		if h.live == c {
			h.live = nil
		}
		h.notify()
	}()
	if c.write(hello) != nil {
		return
	}
	h.mu.Lock()
	h.live = c
	queued := h.queued
	h.queued = nil
	h.notify()
	h.mu.Unlock()
	for _, env := range queued {
		h.deliver(env)
	}
	go func() {
		t := time.NewTicker(socketPingInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(5*time.Second))
			}
		}
	}()
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var wire struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(data, &wire) != nil || wire.EnvelopeID == "" {
			continue
		}
		ack := SocketAck{EnvelopeID: wire.EnvelopeID}
		if string(wire.Payload) != "null" {
			ack.Payload = wire.Payload
		}
		h.mu.Lock()
		h.acks = append(h.acks, ack)
		h.notify()
		h.mu.Unlock()
	}
}

// notify wakes the waiters. The caller holds h.mu.
func (h *socketHub) notify() {
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
}

// wait waits until done (called with h.mu held) is true or timeout passes.
func (h *socketHub) wait(timeout time.Duration, done func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		if done() {
			h.mu.Unlock()
			return true
		}
		if h.changed == nil {
			h.changed = make(chan struct{})
		}
		changed := h.changed
		h.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// deliver writes env to the open connection, or queues it until one opens.
func (h *socketHub) deliver(env socketEnvelope) {
	h.mu.Lock()
	c := h.live
	if c == nil {
		h.queued = append(h.queued, env)
	}
	h.mu.Unlock()
	if c != nil && c.write(env) != nil {
		h.mu.Lock()
		h.queued = append(h.queued, env)
		h.mu.Unlock()
	}
}

// send records env under a fresh envelope id and delivers it.
func (h *socketHub) send(env socketEnvelope) string {
	h.mu.Lock()
	h.seq++
	env.EnvelopeID = fmt.Sprintf("%08x-5c4d-4e3f-9a8b-%012x", h.seq, h.seq)
	if h.sent == nil {
		h.sent = map[string]socketEnvelope{}
	}
	h.sent[env.EnvelopeID] = env
	h.mu.Unlock()
	h.deliver(env)
	return env.EnvelopeID
}

// SocketSend sends a Socket Mode envelope of envelopeType ("events_api",
// "interactive", "slash_commands") carrying payload (JSON-encoded; pass a
// json.RawMessage to send bytes as they are) and returns its envelope_id.
// With no connection open, it goes out when the next one opens.
func (s *Server) SocketSend(envelopeType string, payload any) string {
	raw, err := json.Marshal(payload)
	if err != nil {
		panic(fmt.Sprintf("slacktest: SocketSend payload: %v", err))
	}
	return s.socket.send(socketEnvelope{Type: envelopeType, Payload: raw,
		AcceptsResponsePayload: envelopeType != "events_api"})
}

// SocketRetry sends the envelope envelopeID again, as Slack does when it got
// no ack in time: the same payload under a new envelope_id, with
// retry_attempt one higher and retry_reason "timeout". It returns the new id.
func (s *Server) SocketRetry(envelopeID string) string {
	s.socket.mu.Lock()
	env, ok := s.socket.sent[envelopeID]
	s.socket.mu.Unlock()
	if !ok {
		panic("slacktest: SocketRetry: no envelope " + envelopeID)
	}
	env.RetryAttempt++
	env.RetryReason = "timeout"
	return s.socket.send(env)
}

// SocketAck waits up to timeout for the app to acknowledge envelopeID and
// returns the ack's payload (nil when it carried none).
func (s *Server) SocketAck(envelopeID string, timeout time.Duration) (json.RawMessage, bool) {
	var ack SocketAck
	ok := s.socket.wait(timeout, func() bool {
		i := slices.IndexFunc(s.socket.acks, func(a SocketAck) bool { return a.EnvelopeID == envelopeID })
		if i >= 0 {
			ack = s.socket.acks[i]
		}
		return i >= 0
	})
	return ack.Payload, ok
}

// SocketAcks returns the acks received so far, oldest first.
func (s *Server) SocketAcks() []SocketAck {
	s.socket.mu.Lock()
	defer s.socket.mu.Unlock()
	return slices.Clone(s.socket.acks)
}

// SocketConnected waits up to timeout until the n-th Socket Mode connection
// (counting from 1 since the fake started) has been greeted with hello and is
// the one envelopes go to, and reports whether it was.
func (s *Server) SocketConnected(n int, timeout time.Duration) bool {
	return s.socket.wait(timeout, func() bool { return s.socket.opened >= n && s.socket.live != nil })
}

// SocketDisconnect tells the open connection to go away, as Slack does before
// it refreshes a connection (a "disconnect" envelope with reason
// "refresh_requested"), then closes it. Envelopes sent until the app
// reconnects are queued for the new connection.
func (s *Server) SocketDisconnect() {
	h := &s.socket
	h.mu.Lock()
	c := h.live
	h.live = nil
	h.mu.Unlock()
	if c == nil {
		return
	}
	_ = c.write(response{"type": "disconnect", "reason": "refresh_requested",
		"debug_info": response{"host": "applink-slacktest"}})
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.ws.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(websocket.CloseNormalClosure, "refresh_requested"), time.Now().Add(5*time.Second))
	_ = c.ws.Close()
}
