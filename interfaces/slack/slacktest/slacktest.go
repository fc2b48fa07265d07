// Package slacktest is a fake Slack Web API for tests. It speaks Slack's wire format
// (form-encoded or JSON bodies under /api/<method>, bearer or body token, HTTP 200 with
// {"ok":false,"error":"..."} for API errors, 429 with Retry-After for rate limits), records
// every call, keeps the messages it was asked to post, and can be told to fail.
//
// Point a client at it with the base URL: slack.OptionAPIURL(srv.URL+"/api/"), or
// SLACK_API_URL=srv.URL.
package slacktest

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Defaults the fake answers auth.test with.
const (
	DefaultToken  = "xoxb-test-token"
	DefaultTeamID = "T0AGENTGATE"
	DefaultBotID  = "B0AGENTGATE"
	DefaultUserID = "U0AGENTGATE"
	// DefaultAppToken is the app-level token apps.connections.open accepts.
	DefaultAppToken = "xapp-1-test-token"
)

// Call is one request the fake received, whatever it answered.
type Call struct {
	Method string            // Web API method, e.g. "chat.postMessage"
	Args   map[string]string // arguments from the form or the top-level JSON fields; non-string JSON values as raw JSON
	Blocks json.RawMessage   // the "blocks" argument, nil when absent
	JSON   bool              // the body was application/json
	Bearer bool              // the token came in an Authorization: Bearer header
	Status int               // HTTP status answered
	Error  string            // the "error" of an ok:false answer, "" otherwise
}

// Message is the latest state of a message the fake holds.
type Message struct {
	Channel   string
	TS        string
	ThreadTS  string // "" for a top-level message
	Text      string // text, or the markdown streamed so far for a streamed message
	Blocks    json.RawMessage
	Streaming bool   // started with chat.startStream and not yet stopped
	Edits     int    // chat.update and chat.appendStream calls applied
	Files     []File // files shared with the message (files.completeUploadExternal)
}

// Ephemeral is a message only one user saw.
type Ephemeral struct {
	Channel  string
	User     string
	ThreadTS string
	TS       string
	Text     string
	Blocks   json.RawMessage
}

// View is a modal opened with views.open.
type View struct {
	TriggerID string
	View      json.RawMessage
}

// Fault is an injected failure for one call.
type Fault struct {
	Status     int    // HTTP status to answer; 0 means 200
	RetryAfter int    // seconds, sent as Retry-After (with Status 429)
	Error      string // ok:false error code to answer with (with Status 0 or 200)
	// Commit applies the call's effect before failing, as when Slack posted but the answer
	// was lost: a 5xx or timeout after the message exists.
	Commit bool
}

type msgKey struct{ channel, ts string }

// Server is a fake Slack Web API on an httptest server.
type Server struct {
	URL   string // base URL; the Web API is under URL+"/api/"
	Token string // bot token the fake accepts; DefaultToken unless changed before the first call
	// AppToken is the app-level token (Socket Mode) apps.connections.open
	// accepts; DefaultAppToken unless changed before the first call.
	AppToken string

	srv    *httptest.Server
	socket socketHub // Socket Mode connections, envelopes and acks (socketmode.go)

	mu         sync.Mutex
	calls      []Call
	msgs       map[msgKey]*Message
	order      []msgKey
	ephemerals []Ephemeral
	faults     map[string][]Fault
	channels   map[string]bool // nil: every channel exists
	views      []View
	groups     map[string][]string // user group id → user ids
	statuses   map[msgKey]string   // channel and thread → assistant thread status
	files      map[string]*File    // file id → file (files.go)
	pending    map[string]*pendingUpload
	uploads    []Upload
	seq        int64
	fileSeq    int64
}

// New starts a fake closed when the test ends.
func New(tb interface{ Cleanup(func()) }) *Server {
	s := NewServer()
	tb.Cleanup(s.Close)
	return s
}

// NewServer starts a fake; call Close when done.
func NewServer() *Server {
	s := &Server{
		Token:    DefaultToken,
		AppToken: DefaultAppToken,
		groups:   map[string][]string{},
		statuses: map[msgKey]string{},
		msgs:     map[msgKey]*Message{},
		faults:   map[string][]Fault{},
		files:    map[string]*File{},
		pending:  map[string]*pendingUpload{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// APIURL is the Web API base with its trailing slash, for slack.OptionAPIURL.
func (s *Server) APIURL() string { return s.URL + "/api/" }

// Channels limits the channels that exist; calls for any other answer channel_not_found.
func (s *Server) Channels(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels = map[string]bool{}
	for _, id := range ids {
		s.channels[id] = true
	}
}

// Fail makes the next times calls of method answer with f.
func (s *Server) Fail(method string, f Fault, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range times {
		s.faults[method] = append(s.faults[method], f)
	}
}

// RateLimit makes the next times calls of method answer 429 with Retry-After: retryAfter.
func (s *Server) RateLimit(method string, retryAfter, times int) {
	s.Fail(method, Fault{Status: http.StatusTooManyRequests, RetryAfter: retryAfter}, times)
}

// ServerError makes the next times calls of method answer status (5xx) with an HTML body,
// without applying the call.
func (s *Server) ServerError(method string, status, times int) {
	s.Fail(method, Fault{Status: status}, times)
}

// Error makes the next times calls of method answer {"ok":false,"error":code}.
func (s *Server) Error(method, code string, times int) {
	s.Fail(method, Fault{Error: code}, times)
}

// Calls returns the calls received, all of them or only those of the given methods.
func (s *Server) Calls(methods ...string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if len(methods) == 0 || slices.Contains(methods, c.Method) {
			c.Args = maps.Clone(c.Args)
			out = append(out, c)
		}
	}
	return out
}

// Message returns the latest state of the message (channel, ts).
func (s *Server) Message(channel, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.msgs[msgKey{channel, ts}]
	if !ok {
		return Message{}, false
	}
	return m.clone(), true
}

// Messages returns the messages of a channel ("" for all) in the order they were posted.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, k := range s.order {
		if channel == "" || k.channel == channel {
			out = append(out, s.msgs[k].clone())
		}
	}
	return out
}

// Replies returns the messages posted in the thread threadTS of channel, oldest first.
func (s *Server) Replies(channel, threadTS string) []Message {
	var out []Message
	for _, m := range s.Messages(channel) {
		if m.ThreadTS == threadTS {
			out = append(out, m)
		}
	}
	return out
}

// UserGroup sets the members of user group id (usergroups.users.list).
func (s *Server) UserGroup(id string, users ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[id] = slices.Clone(users)
}

// Views returns the modals opened with views.open, oldest first.
func (s *Server) Views() []View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.views)
}

// Status returns the assistant thread status set in channel's thread
// (assistant.threads.setStatus); ok is false when none was.
func (s *Server) Status(channel, thread string) (status string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	status, ok = s.statuses[msgKey{channel, thread}]
	return status, ok
}

// Ephemerals returns the ephemeral messages sent, oldest first.
func (s *Server) Ephemerals() []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ephemerals)
}

// response is a JSON object answered to a call.
type response map[string]any

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == socketPath:
		s.serveSocket(w, r)
		return
	case strings.HasPrefix(r.URL.Path, filesPath):
		s.serveFile(w, r)
		return
	case strings.HasPrefix(r.URL.Path, uploadPath):
		s.serveUpload(w, r)
		return
	}
	method, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if !ok || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	call, token, err := parseCall(method, r)
	if err != nil {
		s.answer(w, call, http.StatusOK, nil, response{"ok": false, "error": "invalid_form_data"})
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	if token == "" {
		s.answer(w, call, http.StatusOK, nil, response{"ok": false, "error": "not_authed"})
		return
	}
	if want := s.Token; token != want && (method != "apps.connections.open" || token != s.AppToken) {
		s.answer(w, call, http.StatusOK, nil, response{"ok": false, "error": "invalid_auth"})
		return
	}

	var fault *Fault
	if fs := s.faults[method]; len(fs) > 0 {
		fault = &fs[0]
		s.faults[method] = fs[1:]
	}
	if fault != nil && !fault.Commit {
		s.fail(w, call, *fault)
		return
	}
	resp := s.apply(call)
	if fault != nil {
		s.fail(w, call, *fault)
		return
	}
	s.answer(w, call, http.StatusOK, nil, resp)
}

func (s *Server) fail(w http.ResponseWriter, call Call, f Fault) {
	switch {
	case f.Status == http.StatusTooManyRequests:
		h := http.Header{}
		if f.RetryAfter > 0 {
			h.Set("Retry-After", strconv.Itoa(f.RetryAfter))
		}
		s.answer(w, call, f.Status, h, response{"ok": false, "error": "ratelimited"})
	case f.Status != 0 && f.Status != http.StatusOK:
		call.Status = f.Status
		s.calls = append(s.calls, call)
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(f.Status)
		_, _ = fmt.Fprintf(w, "<html><body>%d %s</body></html>", f.Status, http.StatusText(f.Status))
	default:
		s.answer(w, call, http.StatusOK, nil, response{"ok": false, "error": f.Error})
	}
}

// answer records call and writes resp as JSON. The caller holds s.mu.
func (s *Server) answer(w http.ResponseWriter, call Call, status int, h http.Header, resp response) {
	call.Status = status
	if ok, _ := resp["ok"].(bool); !ok {
		call.Error, _ = resp["error"].(string)
	}
	s.calls = append(s.calls, call)
	maps.Copy(w.Header(), h)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(resp)
}

// nextTS returns a fresh, increasing message timestamp. The caller holds s.mu.
func (s *Server) nextTS() string {
	s.seq++
	return fmt.Sprintf("%d.%06d", 1700000000+s.seq/1000000, s.seq%1000000)
}

// apply performs call and returns the answer. The caller holds s.mu.
func (s *Server) apply(c Call) response {
	a := c.Args
	if c.Method == "auth.test" {
		return response{"ok": true, "url": "https://agentgate-test.slack.com/", "team": "agentgate test",
			"user": "agentgate", "team_id": DefaultTeamID, "user_id": DefaultUserID, "bot_id": DefaultBotID}
	}
	switch c.Method {
	case "apps.connections.open":
		return response{"ok": true, "url": "ws" + strings.TrimPrefix(s.URL, "http") + socketPath}
	case "views.open":
		if a["trigger_id"] == "" {
			return response{"ok": false, "error": "invalid_trigger_id"}
		}
		if a["view"] == "" {
			return response{"ok": false, "error": "invalid_arguments"}
		}
		s.views = append(s.views, View{TriggerID: a["trigger_id"], View: json.RawMessage(a["view"])})
		return response{"ok": true, "view": response{"id": fmt.Sprintf("V%08d", len(s.views))}}
	case "assistant.threads.setStatus":
		if a["channel_id"] == "" || a["thread_ts"] == "" {
			return response{"ok": false, "error": "invalid_arguments"}
		}
		if s.channels != nil && !s.channels[a["channel_id"]] {
			return response{"ok": false, "error": "channel_not_found"}
		}
		s.statuses[msgKey{a["channel_id"], a["thread_ts"]}] = a["status"]
		return response{"ok": true}
	case "files.getUploadURLExternal":
		return s.getUploadURL(a)
	case "files.completeUploadExternal":
		return s.completeUpload(c)
	case "usergroups.users.list":
		users, ok := s.groups[a["usergroup"]]
		if !ok {
			return response{"ok": false, "error": "no_such_subteam"}
		}
		return response{"ok": true, "users": users}
	case "chat.postMessage", "chat.update", "chat.postEphemeral",
		"chat.startStream", "chat.appendStream", "chat.stopStream":
	default:
		return response{"ok": false, "error": "unknown_method"}
	}
	channel := a["channel"]
	if channel == "" || (s.channels != nil && !s.channels[channel]) {
		return response{"ok": false, "error": "channel_not_found"}
	}
	switch c.Method {
	case "chat.postMessage":
		if a["text"] == "" && len(c.Blocks) == 0 {
			return response{"ok": false, "error": "no_text"}
		}
		m := s.add(&Message{Channel: channel, TS: s.nextTS(), ThreadTS: a["thread_ts"], Text: a["text"], Blocks: c.Blocks})
		return response{"ok": true, "channel": channel, "ts": m.TS, "message": wireMessage(m)}
	case "chat.update":
		m, ok := s.msgs[msgKey{channel, a["ts"]}]
		if !ok {
			return response{"ok": false, "error": "message_not_found"}
		}
		if a["text"] == "" && len(c.Blocks) == 0 {
			return response{"ok": false, "error": "no_text"}
		}
		if _, ok := a["text"]; ok {
			m.Text = a["text"]
		}
		if c.Blocks != nil {
			m.Blocks = c.Blocks
		}
		m.Edits++
		return response{"ok": true, "channel": channel, "ts": m.TS, "text": m.Text, "message": wireMessage(m)}
	case "chat.postEphemeral":
		if a["user"] == "" {
			return response{"ok": false, "error": "user_not_found"}
		}
		if a["text"] == "" && len(c.Blocks) == 0 {
			return response{"ok": false, "error": "no_text"}
		}
		e := Ephemeral{Channel: channel, User: a["user"], ThreadTS: a["thread_ts"], TS: s.nextTS(), Text: a["text"], Blocks: c.Blocks}
		s.ephemerals = append(s.ephemerals, e)
		return response{"ok": true, "message_ts": e.TS}
	case "chat.startStream":
		m := s.add(&Message{Channel: channel, TS: s.nextTS(), ThreadTS: a["thread_ts"], Text: a["markdown_text"], Streaming: true})
		return response{"ok": true, "channel": channel, "ts": m.TS}
	default: // chat.appendStream, chat.stopStream
		m, ok := s.msgs[msgKey{channel, a["ts"]}]
		if !ok {
			return response{"ok": false, "error": "message_not_found"}
		}
		if !m.Streaming {
			return response{"ok": false, "error": "message_not_in_streaming_state"}
		}
		if c.Method == "chat.appendStream" && a["markdown_text"] == "" {
			return response{"ok": false, "error": "no_text"}
		}
		m.Text += a["markdown_text"]
		m.Edits++
		if c.Method == "chat.stopStream" {
			m.Streaming = false
			if c.Blocks != nil {
				m.Blocks = c.Blocks
			}
			return response{"ok": true, "channel": channel, "ts": m.TS, "message": wireMessage(m)}
		}
		return response{"ok": true, "channel": channel, "ts": m.TS}
	}
}

// clone copies m, its files too, so callers cannot change what the fake holds.
func (m *Message) clone() Message {
	c := *m
	c.Files = slices.Clone(m.Files)
	for i := range c.Files {
		c.Files[i].Data = slices.Clone(c.Files[i].Data)
	}
	return c
}

func (s *Server) add(m *Message) *Message {
	k := msgKey{m.Channel, m.TS}
	s.msgs[k] = m
	s.order = append(s.order, k)
	return m
}

func wireMessage(m *Message) response {
	out := response{"type": "message", "user": DefaultUserID, "bot_id": DefaultBotID, "ts": m.TS, "text": m.Text}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
	}
	if m.Blocks != nil {
		out["blocks"] = m.Blocks
	}
	return out
}

// parseCall reads the arguments of a Web API call and the token it carries.
func parseCall(method string, r *http.Request) (Call, string, error) {
	c := Call{Method: method, Args: map[string]string{}}
	token, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	c.Bearer = bearer && token != ""
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "application/json" {
		c.JSON = true
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return c, "", err
		}
		var fields map[string]json.RawMessage
		// An empty body is a call without arguments (slack-go's apps.connections.open).
		if err := json.Unmarshal(body, &fields); err != nil && len(strings.TrimSpace(string(body))) > 0 {
			return c, "", err
		}
		for k, v := range fields {
			var str string
			if json.Unmarshal(v, &str) == nil {
				c.Args[k] = str
			} else {
				c.Args[k] = string(v)
			}
		}
	} else {
		if err := r.ParseForm(); err != nil {
			return c, "", err
		}
		for k, v := range r.PostForm {
			c.Args[k] = v[0]
		}
	}
	if b, ok := c.Args["blocks"]; ok {
		c.Blocks = json.RawMessage(b)
	}
	if !c.Bearer {
		token = c.Args["token"] // Slack also takes the token as a body argument
	}
	delete(c.Args, "token")
	return c, token, nil
}
