// Package fakeanthropic is an Anthropic Messages API server for tests. It
// speaks the real wire format — JSON messages, and server-sent event streams
// of message_start, content blocks with text and tool-input deltas split over
// several events, ping, message_delta and message_stop — answers from a
// script, rejects what the API rejects (a tool_use without its tool_result
// in the next message, an image of another type), and records every request
// it gets.
//
//	srv := fakeanthropic.New()
//	srv.Script(func(req fakeanthropic.Request) fakeanthropic.Reply {
//		return fakeanthropic.Reply{Text: "hello there"}
//	})
//	baseURL := srv.Start() // http://127.0.0.1:port, like https://api.anthropic.com
//	defer srv.Close()
package fakeanthropic

import (
	"bytes"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"

	"github.com/agentgate/agentgate/core/model/internal/pieces"
)

// Block is one decoded content block of a request's message.
type Block struct {
	Type string // text, image, tool_use or tool_result
	// Text is a text block's text, or a tool_result's content (its text
	// blocks joined).
	Text string
	// MediaType and Data are an image's, Data decoded from base64.
	MediaType string
	Data      []byte
	// ID, Name and Input are a tool_use's, Input as sent.
	ID    string
	Name  string
	Input json.RawMessage
	// ToolUseID and IsError are a tool_result's.
	ToolUseID string
	IsError   bool
}

// Message is one decoded message of a request. Content given as a string
// is one text block.
type Message struct {
	Role    string // user or assistant
	Content []Block
}

// Text returns the message's text blocks joined.
func (m Message) Text() string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// Blocks returns the message's blocks of type typ.
func (m Message) Blocks(typ string) []Block {
	var out []Block
	for _, c := range m.Content {
		if c.Type == typ {
			out = append(out, c)
		}
	}
	return out
}

// Tool is a custom tool offered in a request.
type Tool struct {
	Name        string
	Description string
	InputSchema json.RawMessage // as sent
}

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte // the raw JSON body

	Model     string
	MaxTokens int64
	System    string // text blocks joined
	Messages  []Message
	Tools     []Tool
	Stream    bool
}

// LastMessage returns the last message, or the zero Message when there is none.
func (r Request) LastMessage() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// LastUserText returns the text of the last user message that has text.
func (r Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" && len(m.Blocks("text")) > 0 {
			return m.Text()
		}
	}
	return ""
}

// ToolCall is a tool_use block of a Reply.
type ToolCall struct {
	ID    string // empty gets a generated toolu_ id
	Name  string
	Input string // JSON object text, streamed in pieces; empty is {}
}

// Usage is the token count the server reports.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Error is an error as the API reports it, in a JSON body
// {"type":"error","error":{"type":..,"message":..}} or an error event.
type Error struct {
	Type    string `json:"type"`    // e.g. overloaded_error; default from the status
	Message string `json:"message"` // default from the status
}

// Reply is what the script answers to one request.
type Reply struct {
	// Text is the assistant's text block, streamed a word at a time.
	Text string
	// ToolCalls are tool_use blocks after the text.
	ToolCalls []ToolCall
	// StopReason defaults to "tool_use" with tool calls, "end_turn" without.
	StopReason string
	// Usage overrides the token counts; zero means an estimate of about
	// four characters per token.
	Usage Usage

	// Status is the HTTP status; 0 means 200. Anything else answers with
	// Error in Anthropic's error body, its empty fields filled in from the
	// status.
	Status int
	Error  Error
	// StreamError, when set, ends a stream with an error event after the
	// text deltas, as the API does when it fails mid-answer.
	StreamError *Error
	// Header is added to the response, e.g. Retry-After on a 429.
	Header http.Header
}

// Server is a scripted Anthropic Messages API server. Set APIKey before it
// serves its first request; Script and FailNext may be called at any time.
type Server struct {
	// APIKey, when set, must arrive as the x-api-key header; other requests
	// get a 401 authentication_error.
	APIKey string
	// Models, when set, are the only models GET /v1/models/{id} knows; by
	// default it knows every name. Those requests are not recorded.
	Models []string

	mu       sync.Mutex
	script   func(Request) Reply
	requests []Request
	n        int
	failures int
	failWith int
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
	if results := req.LastMessage().Blocks("tool_result"); len(results) > 0 {
		return Reply{Text: "done: " + results[len(results)-1].Text}
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

// FailNext makes the next n requests fail with status and the API's error
// for it (529: overloaded_error "Overloaded"), before the script is asked.
// They are recorded like any other.
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures, s.failWith = n, status
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
// client with: the API root, like https://api.anthropic.com, without /v1.
func (s *Server) Start() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ts == nil {
		s.ts = httptest.NewServer(s)
	}
	return s.ts.URL
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

// authorized answers 401 and reports false unless r carries APIKey (when
// one is set).
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.APIKey == "" {
		return true
	}
	key := r.Header.Get("X-Api-Key")
	switch {
	case key == "":
		writeError(w, http.StatusUnauthorized, Error{Type: "authentication_error", Message: "x-api-key header is required"})
		return false
	case subtle.ConstantTimeCompare([]byte(key), []byte(s.APIKey)) != 1:
		writeError(w, http.StatusUnauthorized, Error{Type: "authentication_error", Message: "invalid x-api-key"})
		return false
	}
	return true
}

// model answers GET /v1/models/{id} as the Models API does.
func (s *Server) model(w http.ResponseWriter, r *http.Request, id string) {
	if !s.authorized(w, r) {
		return
	}
	if len(s.Models) > 0 && !slices.Contains(s.Models, id) {
		writeError(w, http.StatusNotFound, Error{Type: "not_found_error", Message: "model: " + id})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"type":"model","id":%q,"display_name":%q,"created_at":"2025-09-29T00:00:00Z"}`, id, id)
}

// ServeHTTP answers POST /v1/messages.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if id, ok := strings.CutPrefix(r.URL.Path, "/v1/models/"); ok && r.Method == http.MethodGet {
		s.model(w, r, id)
		return
	}
	if r.URL.Path != "/v1/messages" {
		writeError(w, http.StatusNotFound, Error{Type: "not_found_error", Message: "Not Found"})
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, Error{Type: "invalid_request_error", Message: "Method Not Allowed"})
		return
	}
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		writeError(w, http.StatusBadRequest, Error{Type: "invalid_request_error", Message: "read body: " + err.Error()})
		return
	}
	req, err := decodeRequest(body.Bytes())
	req.Method, req.Path, req.Header, req.Body = r.Method, r.URL.Path, r.Header.Clone(), body.Bytes()

	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.n++
	n := s.n
	script := s.script
	fail := 0
	if s.failures > 0 {
		s.failures--
		fail = s.failWith
	}
	s.mu.Unlock()

	w.Header().Set("request-id", fmt.Sprintf("req_fake%d", n))
	if fail != 0 {
		writeError(w, fail, Error{})
		return
	}
	if !s.authorized(w, r) {
		return
	}
	if r.Header.Get("Anthropic-Version") == "" {
		writeError(w, http.StatusBadRequest, Error{Type: "invalid_request_error", Message: "anthropic-version: header is required"})
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, Error{Type: "invalid_request_error", Message: err.Error()})
		return
	}

	reply := script(req)
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		writeError(w, reply.Status, reply.Error)
		return
	}
	for i := range reply.ToolCalls {
		if reply.ToolCalls[i].ID == "" {
			reply.ToolCalls[i].ID = fmt.Sprintf("toolu_fake%d_%d", n, i)
		}
		if reply.ToolCalls[i].Input == "" {
			reply.ToolCalls[i].Input = "{}"
		}
	}
	if reply.StopReason == "" {
		reply.StopReason = "end_turn"
		if len(reply.ToolCalls) > 0 {
			reply.StopReason = "tool_use"
		}
	}
	if reply.Usage == (Usage{}) {
		reply.Usage = estimateUsage(req, reply)
	}
	msg := wireMessage{ID: fmt.Sprintf("msg_fake%d", n), Type: "message", Role: "assistant", Model: req.Model, Content: []json.RawMessage{}}
	if req.Stream {
		stream(w, msg, reply)
		return
	}
	respond(w, msg, reply)
}

// Wire types, in the API's field order.

type wireUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

type wireMessage struct {
	ID           string            `json:"id"`
	Type         string            `json:"type"`
	Role         string            `json:"role"`
	Model        string            `json:"model"`
	Content      []json.RawMessage `json:"content"`
	StopReason   *string           `json:"stop_reason"`
	StopSequence *string           `json:"stop_sequence"`
	Usage        wireUsage         `json:"usage"`
}

type wireText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type wireToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type wireError struct {
	Type  string `json:"type"`
	Error Error  `json:"error"`
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("fakeanthropic: " + err.Error()) // our own wire types always marshal
	}
	return b
}

func respond(w http.ResponseWriter, msg wireMessage, reply Reply) {
	if reply.Text != "" {
		msg.Content = append(msg.Content, mustJSON(wireText{Type: "text", Text: reply.Text}))
	}
	for _, tc := range reply.ToolCalls {
		msg.Content = append(msg.Content, mustJSON(wireToolUse{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: json.RawMessage(tc.Input)}))
	}
	msg.StopReason = &reply.StopReason
	msg.Usage = wireUsage{InputTokens: reply.Usage.InputTokens, OutputTokens: reply.Usage.OutputTokens}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(mustJSON(msg))
}

// inputFragment is the largest piece of a tool's input one
// input_json_delta carries, so that inputs of any real size span several.
const inputFragment = 8

// stream writes reply as the API streams a message.
func stream(w http.ResponseWriter, msg wireMessage, reply Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(event string, data any) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, mustJSON(data))
		_ = rc.Flush()
	}
	type obj = map[string]any
	ping := func() { send("ping", obj{"type": "ping"}) }

	msg.Usage = wireUsage{InputTokens: reply.Usage.InputTokens, OutputTokens: 1}
	send("message_start", obj{"type": "message_start", "message": msg})
	index := 0
	if reply.Text != "" || reply.StreamError != nil {
		send("content_block_start", obj{"type": "content_block_start", "index": index, "content_block": wireText{Type: "text"}})
		ping()
		for _, piece := range pieces.Words(reply.Text) {
			send("content_block_delta", obj{"type": "content_block_delta", "index": index, "delta": obj{"type": "text_delta", "text": piece}})
		}
		if e := reply.StreamError; e != nil {
			send("error", wireError{Type: "error", Error: *e})
			return
		}
		send("content_block_stop", obj{"type": "content_block_stop", "index": index})
		index++
	}
	for _, tc := range reply.ToolCalls {
		send("content_block_start", obj{"type": "content_block_start", "index": index,
			"content_block": wireToolUse{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: json.RawMessage("{}")}})
		if index == 0 {
			ping()
		}
		// The API's first input_json_delta of a tool is empty.
		for _, piece := range append([]string{""}, pieces.Runes(tc.Input, inputFragment)...) {
			send("content_block_delta", obj{"type": "content_block_delta", "index": index, "delta": obj{"type": "input_json_delta", "partial_json": piece}})
		}
		send("content_block_stop", obj{"type": "content_block_stop", "index": index})
		index++
	}
	send("message_delta", obj{"type": "message_delta",
		"delta": obj{"stop_reason": reply.StopReason, "stop_sequence": nil},
		"usage": obj{"output_tokens": reply.Usage.OutputTokens}})
	send("message_stop", obj{"type": "message_stop"})
}

func estimateUsage(req Request, reply Reply) Usage {
	tokens := func(s string) int64 { return int64(len(s)+3) / 4 }
	u := Usage{InputTokens: tokens(req.System)}
	for _, m := range req.Messages {
		u.InputTokens += 4
		for _, b := range m.Content {
			u.InputTokens += tokens(b.Text) + tokens(b.Name) + tokens(string(b.Input))
			if b.Type == "image" {
				u.InputTokens += 1000
			}
		}
	}
	for _, t := range req.Tools {
		u.InputTokens += tokens(t.Name) + tokens(t.Description) + tokens(string(t.InputSchema))
	}
	u.OutputTokens = tokens(reply.Text)
	for _, tc := range reply.ToolCalls {
		u.OutputTokens += tokens(tc.Name) + tokens(tc.Input)
	}
	if u.OutputTokens == 0 {
		u.OutputTokens = 1
	}
	return u
}

// statusError is the error the API answers status with.
func statusError(status int) Error {
	switch status {
	case http.StatusBadRequest:
		return Error{"invalid_request_error", "Invalid request"}
	case http.StatusUnauthorized:
		return Error{"authentication_error", "invalid x-api-key"}
	case http.StatusPaymentRequired:
		return Error{"billing_error", "Your credit balance is too low to access the Anthropic API."}
	case http.StatusForbidden:
		return Error{"permission_error", "Your API key does not have permission to use the specified resource."}
	case http.StatusNotFound:
		return Error{"not_found_error", "Not Found"}
	case http.StatusRequestEntityTooLarge:
		return Error{"request_too_large", "Request exceeds the maximum allowed number of bytes."}
	case http.StatusTooManyRequests:
		return Error{"rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."}
	case http.StatusGatewayTimeout:
		return Error{"timeout_error", "Request timed out"}
	case 529:
		return Error{"overloaded_error", "Overloaded"}
	}
	if status >= 500 {
		return Error{"api_error", "Internal server error"}
	}
	return Error{"invalid_request_error", http.StatusText(status)}
}

// writeError answers status with e, its empty fields filled from the status.
func writeError(w http.ResponseWriter, status int, e Error) {
	def := statusError(status)
	if e.Type == "" {
		e.Type = def.Type
	}
	if e.Message == "" {
		e.Message = def.Message
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(mustJSON(wireError{Type: "error", Error: e}))
}

// Request decoding.

type rawRequest struct {
	Model     string          `json:"model"`
	MaxTokens *int64          `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []rawMessage    `json:"messages"`
	Tools     []rawTool       `json:"tools"`
	Stream    bool            `json:"stream"`
}

type rawMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type rawBlock struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"`
}

type rawTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// decodeRequest decodes what it can; the error says what the API would
// reject, in its words.
func decodeRequest(body []byte) (Request, error) {
	var raw rawRequest
	if err := json.Unmarshal(body, &raw); err != nil {
		return Request{}, fmt.Errorf("There was an issue with your request body: %v", err)
	}
	req := Request{Model: raw.Model, Stream: raw.Stream}
	if raw.MaxTokens != nil {
		req.MaxTokens = *raw.MaxTokens
	}
	system, err := decodeContent(raw.System)
	if err != nil {
		return req, fmt.Errorf("system: %v", err)
	}
	for _, b := range system {
		if b.Type != "text" {
			return req, fmt.Errorf("system: Input should be a valid list of text blocks")
		}
		req.System += b.Text
	}
	for i, rm := range raw.Messages {
		if rm.Role != "user" && rm.Role != "assistant" {
			return req, fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		content, err := decodeContent(rm.Content)
		if err != nil {
			return req, fmt.Errorf("messages.%d.content.%v", i, err)
		}
		req.Messages = append(req.Messages, Message{Role: rm.Role, Content: content})
	}
	for i, rt := range raw.Tools {
		if rt.Type != "" && rt.Type != "custom" {
			return req, fmt.Errorf("tools.%d.type: only custom tools are served by this fake, got %q", i, rt.Type)
		}
		var schema struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(rt.InputSchema, &schema) != nil || schema.Type != "object" {
			return req, fmt.Errorf("tools.%d.custom.input_schema.type: Input should be 'object'", i)
		}
		req.Tools = append(req.Tools, Tool{Name: rt.Name, Description: rt.Description, InputSchema: rt.InputSchema})
	}
	switch {
	case raw.Model == "":
		return req, fmt.Errorf("model: Field required")
	case raw.MaxTokens == nil:
		return req, fmt.Errorf("max_tokens: Field required")
	case *raw.MaxTokens < 1:
		return req, fmt.Errorf("max_tokens: Input should be greater than or equal to 1")
	case len(raw.Messages) == 0:
		return req, fmt.Errorf("messages: at least one message is required")
	}
	return req, checkMessages(req.Messages)
}

// decodeContent decodes a string, null, or an array of content blocks. An
// error starts with the index of the block it is about.
func decodeContent(raw json.RawMessage) ([]Block, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []Block{{Type: "text", Text: s}}, nil
	}
	var blocks []rawBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, fmt.Errorf("0: Input should be a valid string or a list of content blocks")
	}
	var out []Block
	for i, rb := range blocks {
		b := Block{Type: rb.Type, Text: rb.Text, ID: rb.ID, Name: rb.Name, Input: rb.Input, ToolUseID: rb.ToolUseID, IsError: rb.IsError}
		switch rb.Type {
		case "text":
			if rb.Text == "" {
				return nil, fmt.Errorf("%d.text: text content blocks must be non-empty", i)
			}
		case "image":
			if rb.Source == nil || rb.Source.Type != "base64" {
				return nil, fmt.Errorf("%d.image.source: only base64 sources are served by this fake", i)
			}
			switch rb.Source.MediaType {
			case "image/jpeg", "image/png", "image/gif", "image/webp":
			default:
				return nil, fmt.Errorf("%d.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", i)
			}
			data, err := base64.StdEncoding.DecodeString(rb.Source.Data)
			if err != nil || len(data) == 0 {
				return nil, fmt.Errorf("%d.image.source.base64.data: invalid base64 data", i)
			}
			b.MediaType, b.Data = rb.Source.MediaType, data
		case "tool_use":
			if t := bytes.TrimSpace(rb.Input); len(t) == 0 || t[0] != '{' {
				return nil, fmt.Errorf("%d.tool_use.input: Input should be a valid dictionary", i)
			}
		case "tool_result":
			content, err := decodeContent(rb.Content)
			if err != nil {
				return nil, fmt.Errorf("%d.tool_result.content.%v", i, err)
			}
			for _, c := range content {
				b.Text += c.Text
			}
		default:
			return nil, fmt.Errorf("%d.type: only text, image, tool_use and tool_result blocks are served by this fake, got %q", i, rb.Type)
		}
		out = append(out, b)
	}
	return out, nil
}

// checkMessages enforces what the API requires of tool use: the message
// after an assistant message with tool_use blocks is a user message with a
// tool_result for each of them, and each tool_result answers a tool_use of
// the message before it.
func checkMessages(msgs []Message) error {
	for i, m := range msgs {
		if len(m.Content) == 0 && (i < len(msgs)-1 || m.Role != "assistant") {
			return fmt.Errorf("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
		var uses map[string]bool
		if i > 0 && msgs[i-1].Role == "assistant" {
			uses = map[string]bool{}
			for _, b := range msgs[i-1].Blocks("tool_use") {
				uses[b.ID] = true
			}
		}
		for j, b := range m.Content {
			if b.Type != "tool_result" {
				continue
			}
			if m.Role != "user" || !uses[b.ToolUseID] {
				return fmt.Errorf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
			}
		}
		if m.Role != "assistant" {
			continue
		}
		var missing []string
		for _, u := range m.Blocks("tool_use") {
			answered := false
			if i+1 < len(msgs) {
				for _, r := range msgs[i+1].Blocks("tool_result") {
					answered = answered || r.ToolUseID == u.ID
				}
			}
			if !answered {
				missing = append(missing, u.ID)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, strings.Join(missing, ", "))
		}
	}
	return nil
}
