// Package fakeopenai is an OpenAI-compatible Chat Completions server for tests
// and benchmarks. It speaks the real wire format — JSON responses and
// server-sent chat.completion.chunk streams with tool-call deltas split over
// several chunks — answers from a script, and records every request it gets.
//
//	srv := fakeopenai.New()
//	srv.Script(func(req fakeopenai.Request) fakeopenai.Reply {
//		return fakeopenai.Reply{Text: "hello there"}
//	})
//	baseURL := srv.Start() // http://127.0.0.1:port/v1
//	defer srv.Close()
package fakeopenai

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentgate/agentgate/core/model/internal/pieces"
)

// ToolCall is a tool call in a request's assistant message or in a Reply.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text, exactly as sent or to be sent
}

// Message is one decoded message of a request.
type Message struct {
	Role    string // system, developer, user, assistant or tool
	Content string // text; array content is joined from its text parts
	// Images are the URLs of the message's image_url parts (data URLs for
	// images sent inline).
	Images     []string
	ToolCalls  []ToolCall
	ToolCallID string
	Name       string
}

// Tool is a function tool offered in a request.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON Schema, as sent
}

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte // the raw JSON body

	Model        string
	Messages     []Message
	Tools        []Tool
	Stream       bool
	IncludeUsage bool // stream_options.include_usage
}

// LastMessage returns the last message, or the zero Message when there is none.
func (r Request) LastMessage() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// LastUserText returns the content of the last user message.
func (r Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// Usage is the token count the server reports.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
}

// Reply is what the script answers to one request.
type Reply struct {
	// Text is the assistant's content; for a non-200 Status it is the error
	// message (default: the status text).
	Text      string
	ToolCalls []ToolCall // an empty ID gets a generated one
	// Status is the HTTP status; 0 means 200. Anything else answers with an
	// OpenAI-style error body {"error":{"message":..,"type":..}}.
	Status int
	// ErrorType is the error body's type (default from Status, e.g.
	// "invalid_request_error" or "server_error").
	ErrorType string
	// Header is added to the response, e.g. Retry-After-Ms on a 429 or 500.
	Header http.Header
	// Usage overrides the token counts; zero means an estimate of about four
	// characters per token.
	Usage Usage
}

// Quirks reproduce ways real OpenAI-compatible servers deviate from OpenAI.
type Quirks struct {
	// NoUsage never sends usage, even when stream_options.include_usage asks.
	NoUsage bool
	// UnstableChunkIDs gives every stream chunk its own id (llama.cpp and
	// Foundry Local have done this).
	UnstableChunkIDs bool
}

// Server is a scripted OpenAI-compatible server. Set APIKey and Quirks before
// it serves its first request; Script may be called at any time.
type Server struct {
	// APIKey, when set, must arrive as "Authorization: Bearer <APIKey>";
	// other requests get a 401 invalid_api_key error.
	APIKey string
	Quirks Quirks
	// Models, when set, are the only models GET /v1/models/{id} knows;
	// by default it knows every name. Those requests are not recorded.
	Models []string

	mu       sync.Mutex
	script   func(Request) Reply
	requests []Request
	n        int
	ts       *httptest.Server
}

var _ http.Handler = (*Server)(nil)

// New returns a server with the default script (see DefaultScript).
func New() *Server {
	return &Server{script: DefaultScript}
}

// DefaultScript answers a tool result with "done: <tool content>" and
// anything else with "echo: <last user text>".
func DefaultScript(req Request) Reply {
	if last := req.LastMessage(); last.Role == "tool" {
		return Reply{Text: "done: " + last.Content}
	}
	return Reply{Text: "echo: " + req.LastUserText()}
}

// Script sets the function that answers every following request. It is
// called from the server's goroutines, one call per request.
func (s *Server) Script(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = f
}

// Requests returns a copy of every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	copy(out, s.requests)
	return out
}

// Start serves on a loopback port and returns the base URL to configure a
// client with, ending in /v1 like https://api.openai.com/v1.
func (s *Server) Start() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ts == nil {
		s.ts = httptest.NewServer(s)
	}
	return s.ts.URL + "/v1"
}

// Close stops a started server and waits for its requests to finish.
func (s *Server) Close() {
	s.mu.Lock()
	ts := s.ts
	s.mu.Unlock()
	if ts != nil {
		ts.Close()
	}
}

// ServeHTTP answers POST /v1/chat/completions and /chat/completions, and
// GET /v1/models/{id}.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if id, ok := strings.CutPrefix(r.URL.Path, "/v1/models/"); ok && r.Method == http.MethodGet {
		s.model(w, r, id)
		return
	}
	if r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/chat/completions" {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "Unknown request URL: "+r.Method+" "+r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "", "Method not allowed: "+r.Method)
		return
	}
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "read body: "+err.Error())
		return
	}
	req, err := decodeRequest(body.Bytes())
	req.Method, req.Path, req.Header, req.Body = r.Method, r.URL.Path, r.Header.Clone(), body.Bytes()

	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.n++
	n := s.n
	script := s.script
	s.mu.Unlock()

	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		return
	}

	reply := script(req)
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		msg, typ := reply.Text, reply.ErrorType
		if msg == "" {
			msg = http.StatusText(reply.Status)
		}
		if typ == "" {
			typ = errorType(reply.Status)
		}
		writeError(w, reply.Status, typ, "", msg)
		return
	}
	for i := range reply.ToolCalls {
		if reply.ToolCalls[i].ID == "" {
			reply.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", n, i)
		}
	}
	if reply.Usage == (Usage{}) {
		reply.Usage = estimateUsage(req, reply)
	}
	c := completion{id: fmt.Sprintf("chatcmpl-fake%d", n), created: time.Now().Unix(), model: req.Model}
	if req.Stream {
		s.stream(w, c, req, reply)
		return
	}
	s.respond(w, c, reply)
}

// model answers GET /v1/models/{id} as OpenAI does.
func (s *Server) model(w http.ResponseWriter, r *http.Request, id string) {
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
		return
	}
	if len(s.Models) > 0 && !slices.Contains(s.Models, id) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", fmt.Sprintf("The model '%s' does not exist", id))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":%q,"object":"model","created":1686935002,"owned_by":"fake"}`, id)
}

// authorized reports whether r carries APIKey (always, when none is set).
func (s *Server) authorized(r *http.Request) bool {
	if s.APIKey == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.APIKey)) == 1
}

type completion struct {
	id      string
	created int64
	model   string
}

// Wire types, in OpenAI's field order.

type wireToolCall struct {
	Index    *int         `json:"index,omitempty"` // chunks only
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type wireUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

func (u Usage) wire() *wireUsage {
	return &wireUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
}

type wireMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type wireChoice struct {
	Index        int         `json:"index"`
	Message      wireMessage `json:"message"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
}

type wireCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   *wireUsage   `json:"usage,omitempty"`
}

type wireDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type wireChunkChoice struct {
	Index        int       `json:"index"`
	Delta        wireDelta `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type wireChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []wireChunkChoice `json:"choices"`
	// Usage is null on every chunk but the last when include_usage is set,
	// and absent otherwise.
	Usage json.RawMessage `json:"usage,omitempty"`
}

func finishReason(reply Reply) string {
	if len(reply.ToolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func (s *Server) respond(w http.ResponseWriter, c completion, reply Reply) {
	msg := wireMessage{Role: "assistant"}
	if reply.Text != "" || len(reply.ToolCalls) == 0 {
		msg.Content = &reply.Text
	}
	for _, tc := range reply.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, wireToolCall{ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: tc.Arguments}})
	}
	out := wireCompletion{
		ID: c.id, Object: "chat.completion", Created: c.created, Model: c.model,
		Choices: []wireChoice{{Message: msg, FinishReason: finishReason(reply)}},
	}
	if !s.Quirks.NoUsage {
		out.Usage = reply.Usage.wire()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// argumentFragment is the largest piece of tool-call arguments one chunk
// carries, so that arguments of any real size span several chunks.
const argumentFragment = 8

func (s *Server) stream(w http.ResponseWriter, c completion, req Request, reply Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)

	includeUsage := req.IncludeUsage && !s.Quirks.NoUsage
	seq := 0
	send := func(choices []wireChunkChoice, usage json.RawMessage) {
		seq++
		id := c.id
		if s.Quirks.UnstableChunkIDs {
			id = fmt.Sprintf("%s-%d", c.id, seq)
		}
		chunk := wireChunk{ID: id, Object: "chat.completion.chunk", Created: c.created, Model: c.model, Choices: choices, Usage: usage}
		if includeUsage && usage == nil {
			chunk.Usage = json.RawMessage("null")
		}
		b, _ := json.Marshal(chunk) // plain structs: cannot fail
		fmt.Fprintf(w, "data: %s\n\n", b)
		_ = rc.Flush()
	}
	delta := func(d wireDelta) {
		send([]wireChunkChoice{{Delta: d}}, nil)
	}

	empty := ""
	delta(wireDelta{Role: "assistant", Content: &empty})
	for _, piece := range pieces.Words(reply.Text) {
		delta(wireDelta{Content: &piece})
	}
	for i, tc := range reply.ToolCalls {
		delta(wireDelta{ToolCalls: []wireToolCall{{Index: &i, ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name}}}})
		for _, piece := range pieces.Runes(tc.Arguments, argumentFragment) {
			delta(wireDelta{ToolCalls: []wireToolCall{{Index: &i, Function: wireFunction{Arguments: piece}}}})
		}
	}
	reason := finishReason(reply)
	send([]wireChunkChoice{{Delta: wireDelta{}, FinishReason: &reason}}, nil)
	if includeUsage {
		u, _ := json.Marshal(reply.Usage.wire())
		send([]wireChunkChoice{}, u)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

func estimateUsage(req Request, reply Reply) Usage {
	tokens := func(s string) int64 { return int64(len(s)+3) / 4 }
	var u Usage
	for _, m := range req.Messages {
		u.PromptTokens += 4 + tokens(m.Content)
		for _, tc := range m.ToolCalls {
			u.PromptTokens += tokens(tc.Name) + tokens(tc.Arguments)
		}
	}
	for _, t := range req.Tools {
		u.PromptTokens += tokens(t.Name) + tokens(t.Description) + tokens(string(t.Parameters))
	}
	u.CompletionTokens = tokens(reply.Text)
	for _, tc := range reply.ToolCalls {
		u.CompletionTokens += tokens(tc.Name) + tokens(tc.Arguments)
	}
	if u.CompletionTokens == 0 {
		u.CompletionTokens = 1
	}
	return u
}

func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "invalid_request_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	var body struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	body.Error.Message, body.Error.Type = msg, typ
	if code != "" {
		body.Error.Code = &code
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// Request decoding.

type rawRequest struct {
	Model         string       `json:"model"`
	Messages      []rawMessage `json:"messages"`
	Tools         []rawTool    `json:"tools"`
	Stream        bool         `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type rawMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []wireToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
}

type rawTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// decodeRequest decodes what it can; the error says what a real server
// would reject.
func decodeRequest(body []byte) (Request, error) {
	var raw rawRequest
	if err := json.Unmarshal(body, &raw); err != nil {
		return Request{}, fmt.Errorf("We could not parse the JSON body of your request: %v", err)
	}
	req := Request{Model: raw.Model, Stream: raw.Stream}
	if raw.StreamOptions != nil {
		req.IncludeUsage = raw.StreamOptions.IncludeUsage
	}
	for i, rm := range raw.Messages {
		content, images, err := decodeContent(rm.Content)
		if err != nil {
			return req, fmt.Errorf("Invalid 'messages[%d].content': %v", i, err)
		}
		if len(images) > 0 && rm.Role != "user" {
			return req, fmt.Errorf("Invalid 'messages[%d].content': image_url parts are only allowed in user messages", i)
		}
		m := Message{Role: rm.Role, Content: content, Images: images, ToolCallID: rm.ToolCallID, Name: rm.Name}
		for _, tc := range rm.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		req.Messages = append(req.Messages, m)
	}
	for _, rt := range raw.Tools {
		req.Tools = append(req.Tools, Tool{Name: rt.Function.Name, Description: rt.Function.Description, Parameters: rt.Function.Parameters})
	}
	if raw.Model == "" {
		return req, fmt.Errorf("you must provide a model parameter")
	}
	if len(raw.Messages) == 0 {
		return req, fmt.Errorf("Invalid 'messages': empty array. Expected an array with minimum length 1.")
	}
	return req, nil
}

// decodeContent accepts a string, null, or an array of content parts whose
// text parts it joins.
func decodeContent(raw json.RawMessage) (text string, images []string, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil, nil
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, fmt.Errorf("expected a string or an array of content parts")
	}
	var b strings.Builder
	for i, p := range parts {
		switch p.Type {
		case "text":
			b.WriteString(p.Text)
		case "image_url":
			if p.ImageURL == nil || !strings.HasPrefix(p.ImageURL.URL, "data:image/") && !strings.HasPrefix(p.ImageURL.URL, "https://") {
				return "", nil, fmt.Errorf("part %d: image_url.url must be an https URL or a data:image/ URL", i)
			}
			images = append(images, p.ImageURL.URL)
		}
	}
	return b.String(), images, nil
}
