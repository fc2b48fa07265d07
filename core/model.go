package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Role of a message sent to a model.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of the conversation sent to a model. System
// instructions travel separately in ModelRequest.Instructions.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"` // assistant only
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"` // tool name, tool messages only
	// Files are images given with a user message, for a model that takes
	// images (Agent.Images); other attachments are described in Content.
	Files []File `json:"files,omitempty"`
}

// ToolSpec describes a tool to a model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON Schema of the arguments
}

// ModelRequest is one model call.
type ModelRequest struct {
	Instructions string
	Messages     []Message
	Tools        []ToolSpec
}

// Model generates the next assistant turn. Generate calls onDelta with text
// fragments as they stream (it may never call it); the returned response is
// the whole turn. Errors are treated as transient: the step is retried.
type Model interface {
	Generate(ctx context.Context, req ModelRequest, onDelta func(text string)) (ModelResponse, error)
}

// ModelChecker is a Model that can check, cheaply and without generating,
// that its provider accepts its key and knows its model. The gateway checks
// at start: an error wrapping ErrModelRefused stops it (waiting will not
// help); any other error is logged (the provider may come back).
type ModelChecker interface {
	Check(ctx context.Context) error
}

// ErrModelRefused marks a check that failed for good: the provider refused
// the key, or does not have the model (see ModelRefused).
var ErrModelRefused = errors.New("the model provider refused")

// ModelRefused is a check's failure for good, saying why ("the API key was
// refused") before the provider's error; it is ErrModelRefused.
func ModelRefused(why string, err error) error { return &refusedError{why: why, err: err} }

// CheckFailure is a model check's error for the HTTP status the provider
// answered (0: none): a refused key (401, 403) is a refusal, and so is an
// unknown model (404) on the provider's own API (ownAPI), where a
// compatible server or proxy may lack the route or take any name.
func CheckFailure(status int, ownAPI bool, model string, err error) error {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ModelRefused("the API key was refused", err)
	case status == http.StatusNotFound && ownAPI:
		return ModelRefused(fmt.Sprintf("no model named %q", model), err)
	}
	return err
}

type refusedError struct {
	why string
	err error
}

func (e *refusedError) Error() string   { return e.why + ": " + e.err.Error() }
func (e *refusedError) Unwrap() []error { return []error{ErrModelRefused, e.err} }

// Tool executes one tool call. Content is what the model sees. A tool that
// answered with a failure returns a *ToolError (the model sees its message);
// any other error is a transport failure and the call is retried with the
// same idempotency key.
type Tool interface {
	Call(ctx context.Context, args json.RawMessage, idempotencyKey string) (content string, err error)
}

// FileTool is a Tool that may return files with its result (a chart, a
// report). The engine stores them (EngineConfig.Blobs), journals them with
// the result, describes them to the model, and the chat reply uploads them
// to the conversation.
type FileTool interface {
	Tool
	CallFiles(ctx context.Context, args json.RawMessage, idempotencyKey string) (content string, files []File, err error)
}

// ToolError is a failure the tool itself reported; the model is told.
type ToolError struct{ Message string }

func (e *ToolError) Error() string { return e.Message }

// Clock tells the time; tests inject a fake one.
type Clock interface{ Now() time.Time }

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// maxRetryAfter caps the wait an error may ask for, as the queue's backoff
// is capped.
const maxRetryAfter = 5 * time.Minute

// WithRetryAfter marks err as asking for its step to be retried after d
// (a provider's Retry-After); d <= 0 returns err as is.
func WithRetryAfter(err error, d time.Duration) error {
	if err == nil || d <= 0 {
		return err
	}
	return &retryAfterError{err: err, after: min(d, maxRetryAfter)}
}

// RetryAfter is how long err asks to wait before its step is retried; 0
// when it does not say (the queue's backoff applies).
func RetryAfter(err error) time.Duration {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return ra.after
	}
	return 0
}

type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfterHeader reads how long a response asks to wait: retry-after-ms
// (OpenAI's), else Retry-After in seconds or as an HTTP date; 0 when it
// does not say.
func RetryAfterHeader(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("Retry-After")
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs > 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
