// Package discordtest fakes Discord for tests: the REST API (the endpoints
// agentgate calls, with rate-limit headers and 429s), the Gateway websocket
// (hello, identify, READY, heartbeat ACK, dispatches) and the Ed25519
// signature of interactions sent to an HTTP endpoint.
package discordtest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// IDs the fake uses.
const (
	BotID   = "111111111111111111"
	AppID   = "222222222222222222"
	GuildID = "333333333333333333"
	Token   = "fake-bot-token"
)

// Call is one REST request the fake received.
type Call struct {
	Method, Path string
	Body         map[string]any
	At           time.Time
}

// Message is a message posted or edited through the fake.
type Message struct {
	ID, ChannelID, Content string
	Components             []any
	Edits                  int
	Files                  []File // uploaded with the message (multipart files[n])
}

// Server is the fake Discord.
type Server struct {
	*httptest.Server
	// RetryAfter is the retry_after (seconds) of the 429s Limit causes.
	RetryAfter float64

	mu        sync.Mutex
	calls     []Call
	messages  map[string]*Message // by id
	order     []string
	threads   map[string]string // thread id → parent channel
	limits    map[string]int    // "METHOD /path-prefix" → 429s left
	responses []Call            // interaction callbacks
	followups []Call
	commands  []any
	files     map[string]*attachment // attachment id → file (files.go)
	identify  chan map[string]any
	conns     map[*websocket.Conn]*sync.Mutex
	seq       int64
	nextID    atomic.Int64
	changed   chan struct{}
}

// NewServer starts the fake; Close it after the test.
func NewServer() *Server {
	s := &Server{messages: map[string]*Message{}, threads: map[string]string{}, limits: map[string]int{}, files: map[string]*attachment{},
		identify: make(chan map[string]any, 8), conns: map[*websocket.Conn]*sync.Mutex{}, changed: make(chan struct{}), RetryAfter: 0.05}
	s.nextID.Store(1300000000000000000)
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// APIURL is the REST base to give the client (DISCORD_API_URL).
func (s *Server) APIURL() string { return s.URL + "/api/v10" }

// ID returns a fresh snowflake (time now).
func (s *Server) ID() string {
	ms := time.Now().UnixMilli() - 1420070400000
	return strconv.FormatInt(ms<<22|s.nextID.Add(1)&0x3fffff, 10)
}

// Limit makes the next n requests whose "METHOD path" starts with route
// answer 429 with RetryAfter.
func (s *Server) Limit(route string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits[route] = n
}

// AddThread declares channel thread as a thread of parent.
func (s *Server) AddThread(thread, parent string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.threads[thread] = parent
}

// Calls returns the REST requests received so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Delete removes message id, as a user deleting it would.
func (s *Server) Delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.messages, id)
	s.order = slices.DeleteFunc(s.order, func(o string) bool { return o == id })
}

// Messages returns the messages posted in channel, oldest first, as they are now.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, id := range s.order {
		if m := s.messages[id]; m.ChannelID == channel {
			c := *m
			c.Files = slices.Clone(m.Files)
			out = append(out, c)
		}
	}
	return out
}

// Responses returns the interaction callbacks received over REST.
func (s *Server) Responses() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.responses...)
}

// Followups returns the follow-up messages received.
func (s *Server) Followups() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.followups...)
}

// Commands returns the application commands last registered.
func (s *Server) Commands() []any { s.mu.Lock(); defer s.mu.Unlock(); return s.commands }

// Threads returns the threads opened, thread id → parent channel.
func (s *Server) Threads() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.threads {
		out[k] = v
	}
	return out
}

// Wait returns once cond holds, checked after every request, or after d.
func (s *Server) Wait(d time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return cond()
		}
	}
}

func (s *Server) bump() { close(s.changed); s.changed = make(chan struct{}) }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/gateway" || r.URL.Path == "/gateway/" {
		s.gateway(w, r)
		return
	}
	if strings.HasPrefix(r.URL.Path, attachmentsPath) {
		s.serveAttachment(w, r)
		return
	}
	path, ok := strings.CutPrefix(r.URL.Path, "/api/v10")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bot "+Token && !strings.HasPrefix(path, "/webhooks/") && !strings.HasPrefix(path, "/interactions/") {
		writeJSON(w, 401, map[string]any{"message": "401: Unauthorized", "code": 0})
		return
	}
	var body map[string]any
	raw, _ := io.ReadAll(r.Body)
	files, multi, err := multipartBody(r.Header.Get("Content-Type"), raw, &body)
	if err != nil {
		writeJSON(w, 400, map[string]any{"message": "Invalid Form Body", "code": 50035, "errors": err.Error()})
		return
	}
	if !multi && len(raw) > 0 {
		_ = json.Unmarshal(raw, &body)
	}
	s.mu.Lock()
	defer func() { s.bump(); s.mu.Unlock() }()
	route := r.Method + " " + path
	s.calls = append(s.calls, Call{Method: r.Method, Path: path, Body: body, At: time.Now()})
	bucket := r.Method + strings.Join(strings.Split(path, "/")[:min(3, len(strings.Split(path, "/")))], "/")
	w.Header().Set("X-RateLimit-Bucket", fmt.Sprintf("%x", bucket))
	w.Header().Set("X-RateLimit-Limit", "5")
	w.Header().Set("X-RateLimit-Remaining", "4")
	w.Header().Set("X-RateLimit-Reset-After", "1")
	for prefix, n := range s.limits {
		if n > 0 && strings.HasPrefix(route, prefix) {
			s.limits[prefix] = n - 1
			w.Header().Set("Retry-After", "1")
			writeJSON(w, 429, map[string]any{"message": "You are being rate limited.", "retry_after": s.RetryAfter, "global": false})
			return
		}
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case route == "GET /users/@me":
		writeJSON(w, 200, map[string]any{"id": BotID, "username": "agentgate", "bot": true, "discriminator": "0"})
	case route == "GET /gateway" || route == "GET /gateway/bot":
		writeJSON(w, 200, map[string]any{"url": "ws" + strings.TrimPrefix(s.URL, "http") + "/gateway", "shards": 1})
	case r.Method == "GET" && len(parts) == 2 && parts[0] == "channels":
		ch := map[string]any{"id": parts[1], "type": 0, "guild_id": GuildID}
		if parent, ok := s.threads[parts[1]]; ok {
			ch["type"], ch["parent_id"] = 11, parent
		}
		writeJSON(w, 200, ch)
	case r.Method == "POST" && len(parts) == 3 && parts[0] == "channels" && parts[2] == "messages":
		content, _ := body["content"].(string)
		if len([]rune(content)) > 2000 {
			writeJSON(w, 400, map[string]any{"message": "Invalid Form Body", "code": 50035})
			return
		}
		uploads, code, refusal := attached(body, files)
		if refusal != "" {
			writeJSON(w, code, map[string]any{"message": refusal, "code": map[int]int{400: 50035, 413: 40005}[code]})
			return
		}
		m := &Message{ID: s.ID(), ChannelID: parts[1], Content: content, Files: uploads}
		m.Components, _ = body["components"].([]any)
		s.messages[m.ID] = m
		s.order = append(s.order, m.ID)
		out := map[string]any{"id": m.ID, "channel_id": m.ChannelID, "content": m.Content, "attachments": []any{}}
		if len(uploads) > 0 {
			var atts []any
			for _, f := range uploads {
				atts = append(atts, s.addAttachment(m.ChannelID, f))
			}
			out["attachments"] = atts
		}
		writeJSON(w, 200, out)
	case r.Method == "POST" && len(parts) == 3 && parts[0] == "channels" && parts[2] == "typing":
		w.WriteHeader(204) // Trigger Typing Indicator: the calls record it
	case r.Method == "PATCH" && len(parts) == 4 && parts[0] == "channels" && parts[2] == "messages":
		m, ok := s.messages[parts[3]]
		if !ok {
			writeJSON(w, 404, map[string]any{"message": "Unknown Message", "code": 10008})
			return
		}
		if c, ok := body["content"].(string); ok {
			m.Content = c
		}
		if c, ok := body["components"].([]any); ok {
			m.Components = c
		}
		m.Edits++
		writeJSON(w, 200, map[string]any{"id": m.ID, "channel_id": m.ChannelID, "content": m.Content})
	case r.Method == "POST" && len(parts) == 5 && parts[0] == "channels" && parts[4] == "threads":
		if _, ok := s.threads[parts[3]]; ok {
			writeJSON(w, 400, map[string]any{"message": "A thread has already been created for this message", "code": 160004})
			return
		}
		s.threads[parts[3]] = parts[1]
		writeJSON(w, 201, map[string]any{"id": parts[3], "type": 11, "parent_id": parts[1], "guild_id": GuildID, "name": body["name"]})
	case r.Method == "POST" && len(parts) == 4 && parts[0] == "interactions" && parts[3] == "callback":
		s.responses = append(s.responses, Call{Method: r.Method, Path: path, Body: body})
		w.WriteHeader(204)
	case r.Method == "POST" && len(parts) == 3 && parts[0] == "webhooks":
		s.followups = append(s.followups, Call{Method: r.Method, Path: path, Body: body})
		writeJSON(w, 200, map[string]any{"id": s.ID(), "channel_id": "0", "content": body["content"]})
	case r.Method == "PUT" && len(parts) == 3 && parts[0] == "applications" && parts[2] == "commands":
		var cmds []any
		_ = json.Unmarshal(raw, &cmds)
		s.commands = cmds
		writeJSON(w, 200, cmds)
	default:
		writeJSON(w, 404, map[string]any{"message": "404: Not Found (fake: " + route + ")", "code": 0})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// gateway speaks the Gateway: op 10 hello, op 2 identify → READY, op 1
// heartbeat → op 11 ack; Dispatch sends events.
func (s *Server) gateway(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	wmu := &sync.Mutex{}
	send := func(v any) error { wmu.Lock(); defer wmu.Unlock(); return c.WriteJSON(v) }
	if send(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": 45000}}) != nil {
		return
	}
	for {
		var p struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if err := c.ReadJSON(&p); err != nil {
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			return
		}
		switch p.Op {
		case 1:
			_ = send(map[string]any{"op": 11})
		case 2, 6:
			var d map[string]any
			_ = json.Unmarshal(p.D, &d)
			s.mu.Lock()
			s.seq++
			seq := s.seq
			s.conns[c] = wmu
			s.mu.Unlock()
			_ = send(map[string]any{"op": 0, "t": "READY", "s": seq, "d": map[string]any{
				"v": 10, "session_id": "fake-session", "resume_gateway_url": "ws" + strings.TrimPrefix(s.URL, "http") + "/gateway",
				"user": map[string]any{"id": BotID, "username": "agentgate", "bot": true}, "guilds": []any{},
				"application": map[string]any{"id": AppID},
			}})
			select {
			case s.identify <- d:
			default:
			}
		}
	}
}

// Identified returns the identify payload of the next connection, or nil
// after d.
func (s *Server) Identified(d time.Duration) map[string]any {
	select {
	case v := <-s.identify:
		return v
	case <-time.After(d):
		return nil
	}
}

// Dispatch sends event t with data d to every identified connection.
func (s *Server) Dispatch(t string, d any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	for c, wmu := range s.conns {
		wmu.Lock()
		_ = c.WriteJSON(map[string]any{"op": 0, "t": t, "s": s.seq, "d": d})
		wmu.Unlock()
	}
}

// MessageCreate is the MESSAGE_CREATE payload of text by user in channel
// (guild "" for a DM), mentioning the bot when mention is set.
func (s *Server) MessageCreate(channel, guild, user, text string, mention bool) map[string]any {
	m := map[string]any{
		"id": s.ID(), "channel_id": channel, "content": text, "type": 0, "tts": false,
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "mention_everyone": false, "mention_roles": []any{},
		"author":   map[string]any{"id": user, "username": "user" + user[len(user)-3:], "discriminator": "0", "global_name": nil},
		"mentions": []any{}, "attachments": []any{}, "embeds": []any{}, "pinned": false, "flags": 0,
	}
	if guild != "" {
		m["guild_id"] = guild
		m["member"] = map[string]any{"roles": []any{}, "joined_at": "2024-01-01T00:00:00Z", "deaf": false, "mute": false}
	}
	if mention {
		m["content"] = "<@" + BotID + "> " + text
		m["mentions"] = []any{map[string]any{"id": BotID, "username": "agentgate", "bot": true, "discriminator": "0"}}
	}
	return m
}

// Interaction is an interaction payload of type typ (2 command, 3 button)
// by user with roles in channel of the fake guild, with data.
func (s *Server) Interaction(typ int, channel, user string, roles []string, data map[string]any) map[string]any {
	if roles == nil {
		roles = []string{}
	}
	return map[string]any{
		"id": s.ID(), "application_id": AppID, "type": typ, "token": "itoken-" + s.ID(), "version": 1,
		"guild_id": GuildID, "channel_id": channel, "data": data, "locale": "en-US", "guild_locale": "en-US",
		"app_permissions": "0",
		"member": map[string]any{"user": map[string]any{"id": user, "username": "u" + user, "discriminator": "0"},
			"roles": roles, "permissions": "0", "joined_at": "2024-01-01T00:00:00Z", "deaf": false, "mute": false},
	}
}

// Button is the data of a click on the button custom_id of message.
func Button(customID string) map[string]any {
	return map[string]any{"custom_id": customID, "component_type": 2}
}

// ModalSubmit is the data of the submission of modal customID whose text
// input inputID holds value.
func ModalSubmit(customID, inputID, value string) map[string]any {
	return map[string]any{"custom_id": customID, "components": []any{
		map[string]any{"type": 1, "components": []any{map[string]any{"type": 4, "custom_id": inputID, "value": value}}},
	}}
}

// Command is the data of /agentgate sub with string options.
func Command(sub string, opts map[string]string) map[string]any {
	var o []any
	for k, v := range opts {
		o = append(o, map[string]any{"name": k, "type": 3, "value": v})
	}
	return map[string]any{"id": "444444444444444444", "name": "agentgate", "type": 1,
		"options": []any{map[string]any{"name": sub, "type": 1, "options": o}}}
}

// Key is an application's Ed25519 key pair.
type Key struct {
	Public  ed25519.PublicKey
	private ed25519.PrivateKey
}

// NewKey makes a key pair.
func NewKey() Key {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return Key{Public: pub, private: priv}
}

// PublicHex is the public key as DISCORD_PUBLIC_KEY takes it.
func (k Key) PublicHex() string { return hex.EncodeToString(k.Public) }

// Sign sets Discord's signature headers on r for body, signed now.
func (k Key) Sign(r *http.Request, body []byte) { k.SignAt(r, body, time.Now()) }

// SignAt sets Discord's signature headers on r for body, signed at at.
func (k Key) SignAt(r *http.Request, body []byte, at time.Time) {
	ts := strconv.FormatInt(at.Unix(), 10)
	r.Header.Set("X-Signature-Timestamp", ts)
	r.Header.Set("X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(k.private, append([]byte(ts), body...))))
}

// Post sends v, signed with k (unless k is zero), to url as Discord does.
func (k Key) Post(url string, v any) (*http.Response, []byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Discord-Interactions/1.0 (+https://discord.com)")
	if k.private != nil {
		k.Sign(req, body)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp, out, err
}
