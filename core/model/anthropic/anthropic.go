// Package anthropic is a core.Model for Anthropic's Messages API, built on
// the official anthropic-sdk-go client.
package anthropic

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

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/model/internal/conns"
)

// Config configures a Model. The zero value of every optional field is its
// default.
type Config struct {
	// Model is the model name sent with every request, e.g.
	// "claude-sonnet-4-5". Required.
	Model string
	// BaseURL is the API root, without /v1, e.g. a proxy's. Default: the
	// client's default, https://api.anthropic.com. The environment's
	// ANTHROPIC_BASE_URL is not used.
	BaseURL string
	// APIKey is sent as the x-api-key header. Empty sends none (a proxy may
	// add its own); the environment's ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN
	// and ANTHROPIC_PROFILE are deliberately not used, so a key is never sent
	// to a server it was not configured for.
	APIKey string
	// Timeout bounds each HTTP attempt, including reading the whole stream.
	// Default 120s.
	Timeout time.Duration
	// MaxRetries is how often a request is retried after a connection error,
	// 408, 409, 429 or 5xx (529 overloaded included), with backoff
	// (honouring Retry-After). Default 2; negative disables retries.
	MaxRetries int
	// MaxTokens caps the tokens of one answer; the API requires a cap.
	// Default 4096.
	MaxTokens int64
	// HTTPClient sends the requests. Default: one that keeps a connection
	// per call in flight (conns.MaxIdlePerHost per host).
	HTTPClient *http.Client
}

// Defaults.
const (
	DefaultTimeout    = 120 * time.Second
	DefaultMaxRetries = 2
	DefaultMaxTokens  = 4096
)

func (c Config) validate() error {
	if strings.TrimSpace(c.Model) == "" {
		return errors.New("anthropic: model: required")
	}
	if c.Timeout < 0 {
		return fmt.Errorf("anthropic: timeout: must not be negative, got %s", c.Timeout)
	}
	if c.MaxTokens < 0 {
		return fmt.Errorf("anthropic: max_tokens: must not be negative, got %d", c.MaxTokens)
	}
	return nil
}

// Model calls the Messages API. It is safe for concurrent use.
type Model struct {
	model     string
	maxTokens int64
	client    anthropic.Client
	ownAPI    bool // no BaseURL: Anthropic's own API
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
	maxTokens := cfg.MaxTokens
	if maxTokens == 0 {
		maxTokens = DefaultMaxTokens
	}
	opts := []option.RequestOption{
		// Nothing from the environment: no key, token, profile, base URL or
		// custom headers.
		option.WithoutEnvironmentDefaults(),
		option.WithRequestTimeout(timeout),
		option.WithMaxRetries(retries),
	}
	if cfg.APIKey != "" {
		// Not option.WithAPIKey, which sends the key as a bearer token.
		opts = append(opts, option.WithHeader("X-Api-Key", cfg.APIKey))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = conns.Client()
	}
	opts = append(opts, option.WithHTTPClient(httpClient))
	return &Model{model: cfg.Model, maxTokens: maxTokens, client: anthropic.NewClient(opts...), ownAPI: cfg.BaseURL == ""}, nil
}

// Generate streams one assistant turn, calling onDelta (when not nil) with
// each text fragment as it arrives.
func (m *Model) Generate(ctx context.Context, req core.ModelRequest, onDelta func(text string)) (core.ModelResponse, error) {
	params, err := m.params(req)
	if err != nil {
		return core.ModelResponse{}, m.wrap(err)
	}
	var res *http.Response
	stream := m.client.Messages.NewStreaming(ctx, params, option.WithResponseInto(&res))
	defer stream.Close()
	t := turn{onDelta: onDelta}
	for !t.stopped && stream.Next() {
		if err := t.add(stream.Current()); err != nil {
			return core.ModelResponse{}, m.wrap(err)
		}
	}
	if err := stream.Err(); err != nil {
		return core.ModelResponse{}, m.wrap(err)
	}
	if err := ctx.Err(); err != nil {
		return core.ModelResponse{}, m.wrap(err)
	}
	// A stream cut short ends like a complete one but for message_stop. A
	// truncated turn must not be journaled as whole.
	if !t.stopped {
		return core.ModelResponse{}, m.wrap(errors.New("stream: ended before the model finished its turn"))
	}
	drain(res)
	return t.response(), nil
}

// Limits of draining a response after message_stop (see drain).
const (
	drainWait = 100 * time.Millisecond
	maxDrain  = 4 << 10
)

// drain reads what is left of res's body after message_stop, which the API
// sends just before it ends the response: the transport reuses an HTTP/1
// connection only when its body was read to the end, and drops it when it
// was closed early. A server that keeps the response open is not waited for
// long.
func drain(res *http.Response) {
	if res == nil || res.Body == nil {
		return
	}
	stop := time.AfterFunc(drainWait, func() { _ = res.Body.Close() })
	defer stop.Stop()
	_, _ = io.CopyN(io.Discard, res.Body, maxDrain)
}

// params builds the request body for req. Messages of one role in a row,
// such as the results of one turn's tool calls, are sent as one message: the
// API wants every tool_result of a turn in the user message right after it.
func (m *Model) params(req core.ModelRequest) (anthropic.MessageNewParams, error) {
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(m.model),
		MaxTokens: m.maxTokens,
	}
	if req.Instructions != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.Instructions}}
	}
	var (
		role   core.Role // of the message being built, user or assistant
		blocks []anthropic.ContentBlockParamUnion
	)
	flush := func() {
		switch {
		case len(blocks) == 0:
		case role == core.RoleAssistant:
			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(blocks...))
		default:
			p.Messages = append(p.Messages, anthropic.NewUserMessage(blocks...))
		}
		blocks = nil
	}
	for i, msg := range req.Messages {
		r := msg.Role
		switch r {
		case core.RoleUser, core.RoleAssistant:
		case core.RoleTool:
			r = core.RoleUser // tool results travel in a user message
		default:
			return p, fmt.Errorf("messages[%d]: unknown role %q", i, msg.Role)
		}
		b := contentBlocks(msg)
		if len(b) == 0 {
			continue // nothing to send, e.g. the empty answer of a run that failed
		}
		if r != role {
			flush()
			role = r
		}
		blocks = append(blocks, b...)
	}
	flush()
	for i, t := range req.Tools {
		schema, err := inputSchema(t.Parameters)
		if err != nil {
			return p, fmt.Errorf("tools[%d] %s: parameters: %w", i, t.Name, err)
		}
		tool := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	return p, nil
}

// contentBlocks is msg as content blocks. The API rejects empty text
// blocks, so empty text sends none.
func contentBlocks(msg core.Message) []anthropic.ContentBlockParamUnion {
	if msg.Role == core.RoleTool {
		result := anthropic.ToolResultBlockParam{ToolUseID: msg.ToolCallID}
		if msg.Content != "" {
			result.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: msg.Content}}}
		}
		return []anthropic.ContentBlockParamUnion{{OfToolResult: &result}}
	}
	var blocks []anthropic.ContentBlockParamUnion
	switch msg.Role {
	case core.RoleUser:
		if msg.Content != "" {
			blocks = append(blocks, anthropic.NewTextBlock(msg.Content))
		}
		for _, f := range msg.Files {
			if image(f.MIME) {
				blocks = append(blocks, anthropic.NewImageBlockBase64(f.MIME, base64.StdEncoding.EncodeToString(f.Data)))
			}
		}
		return blocks
	default: // assistant
		if msg.Content != "" {
			blocks = append(blocks, anthropic.NewTextBlock(msg.Content))
		}
		for _, tc := range msg.ToolCalls {
			blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, input(tc.Arguments), tc.Name))
		}
		return blocks
	}
}

// image reports whether the API takes a file of type mime as an image.
func image(mime string) bool {
	switch mime {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// input is a tool call's arguments as a tool_use block's input, which the
// API accepts only as a JSON object: anything else (no arguments, or what a
// model wrote that was not an object) is sent as {}.
func input(args json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(args); len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return t
	}
	return json.RawMessage(`{}`)
}

// inputSchema is a tool's JSON Schema as the API takes it, sent byte for
// byte. No schema becomes an empty object schema.
func inputSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		t = []byte(`{"type":"object","properties":{}}`)
	}
	if err := json.Unmarshal(t, new(map[string]json.RawMessage)); err != nil {
		return anthropic.ToolInputSchemaParam{}, fmt.Errorf("must be a JSON Schema object: %w", err)
	}
	return param.Override[anthropic.ToolInputSchemaParam](json.RawMessage(t)), nil
}

// arguments turns a tool call's streamed input into JSON: empty becomes {},
// and text that is not JSON (an answer cut off at max_tokens) becomes a JSON
// string, so the turn can still be journaled and the tool can reject the
// arguments in a way the model is told about.
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

// maxErrorMessage bounds how much of the API's error message an error
// carries.
const maxErrorMessage = 1000

// apiError is an error the API answered, said as a user can act on it:
// "401 authentication_error: invalid x-api-key". It wraps the client's
// *anthropic.Error, whose own text is the request URL and the raw body.
type apiError struct {
	msg string
	err *anthropic.Error
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.err }

// wrap adds the model name and, for an API error, its status, type and
// message.
func (m *Model) wrap(err error) error {
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("anthropic %s: %w", m.model, err)
	}
	msg := strings.Join(strings.Fields(apiErr.Message), " ")
	if msg == "" && apiErr.StatusCode >= 400 {
		msg = http.StatusText(apiErr.StatusCode) // the body was not the API's: a proxy's page
	}
	if len(msg) > maxErrorMessage {
		cut := maxErrorMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	var b strings.Builder
	if apiErr.StatusCode >= 400 {
		fmt.Fprint(&b, apiErr.StatusCode)
		if t := apiErr.Type(); t != "" {
			fmt.Fprintf(&b, " %s", t)
		}
	} else { // an error event, in a stream that began with 200
		b.WriteString("stream")
		if t := apiErr.Type(); t != "" {
			fmt.Fprintf(&b, ": %s", t)
		}
	}
	if msg != "" {
		fmt.Fprintf(&b, ": %s", msg)
	}
	wrapped := fmt.Errorf("anthropic %s: %w", m.model, &apiError{msg: b.String(), err: apiErr})
	if apiErr.Response != nil { // still limited after the client's retries: the step waits as asked
		wrapped = core.WithRetryAfter(wrapped, core.RetryAfterHeader(apiErr.Response.Header, time.Now()))
	}
	return wrapped
}
