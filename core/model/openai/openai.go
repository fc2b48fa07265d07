// Package openai is a core.Model for any OpenAI-compatible Chat Completions
// API — OpenAI itself, Ollama, vLLM, LM Studio, OpenRouter and others reached
// through Config.BaseURL — built on the official openai-go client.
package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/model/internal/conns"
)

// Config configures a Model. The zero value of every optional field is its
// default.
type Config struct {
	// Model is the model name sent with every request, e.g. "gpt-4.1-mini"
	// or "llama3.2". Required.
	Model string
	// BaseURL is the API root, e.g. "http://localhost:11434/v1" for Ollama.
	// Default: the client's default, https://api.openai.com/v1 (or
	// OPENAI_BASE_URL when the environment sets it).
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <APIKey>". Empty sends no
	// Authorization header (local servers need none); the environment's
	// OPENAI_API_KEY is deliberately not used, so a key is never sent to a
	// server it was not configured for.
	APIKey string
	// Timeout bounds each HTTP attempt, including reading the whole stream.
	// Default 120s.
	Timeout time.Duration
	// MaxRetries is how often a request is retried after a connection error,
	// 408, 409, 429 or 5xx, with backoff (honouring Retry-After). Default 2;
	// negative disables retries.
	MaxRetries int
	// HTTPClient sends the requests. Default: one that keeps a connection
	// per call in flight (conns.MaxIdlePerHost per host).
	HTTPClient *http.Client
}

// Defaults.
const (
	DefaultTimeout    = 120 * time.Second
	DefaultMaxRetries = 2
)

func (c Config) validate() error {
	if strings.TrimSpace(c.Model) == "" {
		return errors.New("openai: model: required")
	}
	if c.Timeout < 0 {
		return fmt.Errorf("openai: timeout: must not be negative, got %s", c.Timeout)
	}
	return nil
}

// Model calls a Chat Completions API. It is safe for concurrent use.
//
// Besides OPENAI_BASE_URL, the client reads OPENAI_ORG_ID, OPENAI_PROJECT_ID
// and OPENAI_CUSTOM_HEADERS from the environment and sends them with every
// request.
type Model struct {
	model  string
	client openai.Client
	ownAPI bool // no BaseURL: OpenAI's own API
}

var _ core.Model = (*Model)(nil)

// New returns a Model for cfg.
func New(cfg Config) (*Model, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	opts := []option.RequestOption{
		option.WithAPIKey(cfg.APIKey), // overrides OPENAI_API_KEY, even when empty
		option.WithRequestTimeout(timeout),
		option.WithMaxRetries(retries),
		option.WithMiddleware(errorBodies),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = conns.Client()
	}
	opts = append(opts, option.WithHTTPClient(httpClient))
	return &Model{model: cfg.Model, client: openai.NewClient(opts...), ownAPI: cfg.BaseURL == ""}, nil
}

// Generate streams one assistant turn, calling onDelta (when not nil) with
// each text fragment as it arrives.
func (m *Model) Generate(ctx context.Context, req core.ModelRequest, onDelta func(text string)) (core.ModelResponse, error) {
	params, err := m.params(req)
	if err != nil {
		return core.ModelResponse{}, m.wrap(err)
	}
	// NewStreaming sends the request as the client streams one: stream: true,
	// the endpoint's auth (never OPENAI_ADMIN_KEY, which a plain Post falls
	// back to), retries, and an *openai.Error for an error status. Its body
	// is read by turn.read, not by the stream (see stream.go), which is only
	// closed.
	var res *http.Response
	stream := m.client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&res))
	defer stream.Close()
	if err := stream.Err(); err != nil {
		return core.ModelResponse{}, m.wrap(err)
	}
	t := turn{onDelta: onDelta}
	if err := t.read(res); err != nil {
		return core.ModelResponse{}, m.wrap(err)
	}
	if err := ctx.Err(); err != nil {
		return core.ModelResponse{}, m.wrap(err)
	}
	// A stream cut short ends like a complete one; only the finish reason
	// tells them apart. A truncated turn must not be journaled as whole.
	if !t.finished {
		return core.ModelResponse{}, m.wrap(errors.New("stream: ended before the model finished its turn"))
	}
	return t.response(), nil
}

// arguments turns the model's argument text into JSON: empty becomes {}, and
// text that is not JSON (small models produce it) becomes a JSON string, so
// the turn can still be journaled and the tool can reject the arguments in a
// way the model is told about.
func arguments(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return json.RawMessage(`{}`)
	case json.Valid([]byte(s)):
		return json.RawMessage(s)
	default:
		b, _ := json.Marshal(s) // a string always marshals
		return b
	}
}

// userMessage is msg in the Chat Completions format: a string, or content
// parts with its images as data URLs.
func userMessage(msg core.Message) openai.ChatCompletionMessageParamUnion {
	if len(msg.Files) == 0 {
		return openai.UserMessage(msg.Content)
	}
	var parts []openai.ChatCompletionContentPartUnionParam
	if msg.Content != "" {
		parts = append(parts, openai.TextContentPart(msg.Content))
	}
	for _, f := range msg.Files {
		url := "data:" + f.MIME + ";base64," + base64.StdEncoding.EncodeToString(f.Data)
		parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}))
	}
	return openai.UserMessage(parts)
}

// params builds the request body for req.
func (m *Model) params(req core.ModelRequest) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(m.model),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if req.Instructions != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.Instructions))
	}
	for i, msg := range req.Messages {
		switch msg.Role {
		case core.RoleUser:
			p.Messages = append(p.Messages, userMessage(msg))
		case core.RoleAssistant:
			var a openai.ChatCompletionAssistantMessageParam
			// Content is optional next to tool calls, required otherwise.
			if msg.Content != "" || len(msg.ToolCalls) == 0 {
				a.Content.OfString = openai.String(msg.Content)
			}
			for _, tc := range msg.ToolCalls {
				args := string(tc.Arguments)
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: args},
					},
				})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case core.RoleTool:
			p.Messages = append(p.Messages, openai.ToolMessage(msg.Content, msg.ToolCallID))
		default:
			return p, fmt.Errorf("messages[%d]: unknown role %q", i, msg.Role)
		}
	}
	for i, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		schema, err := schema(t.Parameters)
		if err != nil {
			return p, fmt.Errorf("tools[%d] %s: parameters: %w", i, t.Name, err)
		}
		fn.Parameters = schema
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	return p, nil
}

// schema decodes a tool's JSON Schema into the client's map. Its members stay
// raw JSON, sent byte for byte: decoding them would turn integers into floats
// (the client marshals json.Number as a string). No schema becomes an empty
// object schema, which every server accepts (some reject a function without
// parameters).
func schema(raw json.RawMessage) (shared.FunctionParameters, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, fmt.Errorf("must be a JSON Schema object: %w", err)
	}
	s := make(shared.FunctionParameters, len(members))
	for k, v := range members {
		s[k] = v
	}
	return s, nil
}

// maxErrorMessage bounds how much of a server's error message an error
// carries.
const maxErrorMessage = 1000

// wrap adds the model name and, for an API error, the server's message: the
// client's own Error() gives only the status, and the message is what tells
// a user what to fix ("model not found", "context length exceeded").
func (m *Model) wrap(err error) error {
	wrapped := m.describe(err)
	var apiErr *openai.Error
	if errors.As(err, &apiErr) && apiErr.Response != nil { // still limited after the client's retries: the step waits as asked
		wrapped = core.WithRetryAfter(wrapped, core.RetryAfterHeader(apiErr.Response.Header, time.Now()))
	}
	return wrapped
}

func (m *Model) describe(err error) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		if msg := strings.Join(strings.Fields(apiErr.Message), " "); msg != "" {
			if len(msg) > maxErrorMessage {
				cut := maxErrorMessage
				for cut > 0 && !utf8.RuneStart(msg[cut]) {
					cut--
				}
				msg = msg[:cut] + "…"
			}
			return fmt.Errorf("openai %s: %w: %s", m.model, err, msg)
		}
	}
	return fmt.Errorf("openai %s: %w", m.model, err)
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// errorBodies rewrites error responses that are not OpenAI's
// {"error":{"message":..}} into that shape, so the client reports them as an
// *openai.Error with the status and the message. Compatible servers answer
// {"error":".."} (the client fails to decode it and loses the status),
// {"message":..} (vLLM), {"detail":..} (FastAPI servers) or plain text.
func errorBodies(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 || res.Body == nil {
		return res, err
	}
	body, readErr := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	_ = res.Body.Close()
	if readErr == nil {
		body = errorBody(body)
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	res.ContentLength = int64(len(body))
	return res, nil
}

func errorBody(body []byte) []byte {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	var msg string
	if err := json.Unmarshal(body, &v); err == nil {
		if t := bytes.TrimSpace(v.Error); len(t) > 0 && t[0] == '{' {
			return body // OpenAI's shape
		}
		for _, raw := range []json.RawMessage{v.Error, v.Message, v.Detail} {
			if len(raw) == 0 || string(raw) == "null" {
				continue
			}
			if json.Unmarshal(raw, &msg) != nil {
				msg = string(raw) // not a string, e.g. FastAPI's list of validation errors
			}
			if msg != "" {
				break
			}
		}
	} else if t := bytes.TrimSpace(body); len(t) > 0 && t[0] != '<' && utf8.Valid(t) {
		msg = string(t) // plain text; HTML error pages say nothing useful
	}
	if msg == "" {
		return body
	}
	out, _ := json.Marshal(map[string]map[string]string{"error": {"message": msg}})
	return out
}
