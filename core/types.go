// Package core holds agentgate's domain model (sessions, runs, the run journal,
// approvals), the interfaces it consumes (Store, Queue, Model, Tool) and the run
// engine that drives runs from their journal.
package core

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// RunStatus is the lifecycle state of a run.
type RunStatus string

// Run statuses. queued → running → (paused → queued →)* completed|failed|cancelled.
const (
	RunQueued    RunStatus = "queued"
	RunRunning   RunStatus = "running"
	RunPaused    RunStatus = "paused"
	RunCompleted RunStatus = "completed"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
)

// Terminal reports whether a run in this status will never change again.
func (s RunStatus) Terminal() bool {
	return s == RunCompleted || s == RunFailed || s == RunCancelled
}

// Valid reports whether s is one of the known statuses.
func (s RunStatus) Valid() bool {
	switch s {
	case RunQueued, RunRunning, RunPaused, RunCompleted, RunFailed, RunCancelled:
		return true
	}
	return false
}

// RunType says where a run came from.
type RunType string

// Run types.
const (
	RunTypeChat    RunType = "chat"
	RunTypeAPI     RunType = "api"
	RunTypeRoutine RunType = "routine"
	RunTypeMCP     RunType = "mcp"
	RunTypeSub     RunType = "sub"
	// RunTypeExternal holds one tool call of an agent outside the gateway (a
	// coding agent asking whether it may run a command) until a person
	// decides it; the gateway runs no model and no tool for it (see
	// Engine.SubmitExternal).
	RunTypeExternal RunType = "external"
)

// Binding ties a session to a place on a platform (empty for API sessions).
type Binding struct {
	Platform  string `json:"platform,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	Channel   string `json:"channel,omitempty"`
	Thread    string `json:"thread,omitempty"`
}

// Session is a conversation with one agent; its runs execute one at a time in
// the order they were created.
type Session struct {
	ID        string    `json:"id"`
	AgentID   string    `json:"agent_id"`
	UserID    string    `json:"user_id"`
	Binding   Binding   `json:"binding"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Usage counts model tokens.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Add returns the sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens}
}

// Run is one agent execution for one input. Its progress lives in the journal
// (Events); the row carries the summary the API shows.
type Run struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	AgentID   string `json:"agent_id"`
	UserID    string `json:"user_id"`
	// StartedBy is the principal that started the run, from its credential
	// (key:<name>, slack:<team>/<user>, discord:<user>, telegram:<user>,
	// routine:<id> for a schedule); the requester of its approvals.
	StartedBy   string     `json:"started_by"`
	Type        RunType    `json:"run_type"`
	Status      RunStatus  `json:"status"`
	ParentRunID string     `json:"parent_run_id,omitempty"`
	RoutineID   string     `json:"routine_id,omitempty"`
	Input       string     `json:"input"`
	Output      string     `json:"output"`
	Error       string     `json:"error"`
	Usage       Usage      `json:"usage"`
	LastSeq     int64      `json:"last_seq"`
	CreatedAt   time.Time  `json:"created_at"`
	StartedAt   *time.Time `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	// Conversation is where the run was asked (its session's binding, as
	// it was created with it): chat hooks route by it without reading
	// the session. Empty for runs outside a conversation, and for runs
	// stored before it was recorded.
	Conversation Binding `json:"-"`
}

// EventType names a journal entry.
type EventType string

// Journal entry types. Each has a payload struct below.
const (
	EventUserMessage       EventType = "user_message"
	EventModelResponse     EventType = "model_response"
	EventToolStarted       EventType = "tool_started"
	EventToolResult        EventType = "tool_result"
	EventApprovalRequested EventType = "approval_requested"
	EventApprovalDecided   EventType = "approval_decided"
	EventStatus            EventType = "status"
)

// Event is one append-only journal entry of a run; (RunID, Seq) is unique and
// Seq starts at 1 with no gaps.
type Event struct {
	RunID     string          `json:"run_id"`
	Seq       int64           `json:"seq"`
	Type      EventType       `json:"type"`
	Data      json.RawMessage `json:"data"`
	CreatedAt time.Time       `json:"created_at"`
}

// NewEvent builds an unsequenced event with payload v marshalled as JSON.
//
// <, > and & are kept as they are, not escaped as json.Marshal does: a
// tool's arguments are replayed from the journal, and reach the tool (an
// endpoint that signs its body, say) as the model wrote them.
func NewEvent(t EventType, v any) Event {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Payloads are our own structs; failing to marshal one is a programming error.
		panic("core: marshal event " + string(t) + ": " + err.Error())
	}
	return Event{Type: t, Data: bytes.TrimSuffix(b.Bytes(), []byte("\n"))}
}

// UserMessage is the payload of EventUserMessage.
type UserMessage struct {
	Text        string       `json:"text"`
	UserID      string       `json:"user_id,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
}

// ToolCall is a model's request to call a tool.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ModelResponse is the payload of EventModelResponse.
type ModelResponse struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Usage     Usage      `json:"usage,omitzero"`
	// StopReason is the provider's reason the turn ended, as it named it:
	// "end_turn", "tool_use" or "max_tokens" from Anthropic, "stop",
	// "tool_calls" or "length" from OpenAI. Empty when it gave none.
	StopReason string `json:"stop_reason,omitempty"`
}

// ToolStarted is the payload of EventToolStarted: journaled before the tool is
// called so a resumed run calls it again with the same idempotency key.
type ToolStarted struct {
	ToolCallID     string `json:"tool_call_id"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotency_key"`
}

// ToolResult is the payload of EventToolResult.
type ToolResult struct {
	ToolCallID string `json:"tool_call_id"`
	Tool       string `json:"tool"`
	Content    string `json:"content"`
	IsError    bool   `json:"is_error,omitempty"`
	// Files the tool returned (FileTool), stored in the blob store.
	Files []Attachment `json:"files,omitempty"`
}

// ApprovalRequested is the payload of EventApprovalRequested.
type ApprovalRequested struct {
	ApprovalID string          `json:"approval_id"`
	ToolCallID string          `json:"tool_call_id"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
	ExpiresAt  time.Time       `json:"expires_at"`
	// Origin is the tool's AgentTool.Origin: "mcp:<server>", or "agent"
	// for the agent's own tool; "" in journals from before it was kept.
	Origin string `json:"origin,omitempty"`
}

// Server is the name of the MCP server whose tool approval a is about, ""
// for the agent's own tool.
func (a Approval) Server() string {
	if s, ok := strings.CutPrefix(a.Origin, "mcp:"); ok {
		return s
	}
	return ""
}

// ApprovalDecided is the payload of EventApprovalDecided.
type ApprovalDecided struct {
	ApprovalID string         `json:"approval_id"`
	ToolCallID string         `json:"tool_call_id"`
	Status     ApprovalStatus `json:"status"`
	DecidedBy  string         `json:"decided_by,omitempty"`
	// DecidedByName is how the decider is shown (to the model, in outcomes).
	DecidedByName string `json:"decided_by_name,omitempty"`
	Via           string `json:"via,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// StatusChange is the payload of EventStatus.
type StatusChange struct {
	Status RunStatus `json:"status"`
	Error  string    `json:"error,omitempty"`
}

// ApprovalStatus is the state of an approval request.
type ApprovalStatus string

// Approval statuses; pending moves at most once to one of the others.
const (
	ApprovalPending   ApprovalStatus = "pending"
	ApprovalApproved  ApprovalStatus = "approved"
	ApprovalDenied    ApprovalStatus = "denied"
	ApprovalExpired   ApprovalStatus = "expired"
	ApprovalCancelled ApprovalStatus = "cancelled"
)

// Valid reports whether s is one of the known statuses.
func (s ApprovalStatus) Valid() bool {
	switch s {
	case ApprovalPending, ApprovalApproved, ApprovalDenied, ApprovalExpired, ApprovalCancelled:
		return true
	}
	return false
}

// ApprovalPolicy says who may decide an approval.
type ApprovalPolicy struct {
	// Approvers lists who may decide: user ids, group ids, or "requester" for
	// whoever started the run. Empty: anyone who can reach the approval.
	Approvers []string `json:"approvers,omitempty"`
	// ExcludeRequester forbids the run's own user from deciding.
	ExcludeRequester bool `json:"exclude_requester,omitempty"`
}

// Approval is a pending or decided request to run one tool call.
type Approval struct {
	ID         string `json:"id"`
	RunID      string `json:"run_id"`
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
	Tool       string `json:"tool"`
	// Origin is where the tool comes from, as ApprovalRequested.Origin:
	// "mcp:<server>", or "agent" for the agent's own tool; "" on approvals
	// from before it was kept.
	Origin      string          `json:"origin,omitempty"`
	Arguments   json.RawMessage `json:"arguments"`
	ArgsSHA256  string          `json:"args_sha256"`
	Policy      ApprovalPolicy  `json:"policy"`
	RequestedBy string          `json:"requested_by"`
	Status      ApprovalStatus  `json:"status"`
	// DecidedBy is the principal that decided (key:<name>, slack:<team>/<user>,
	// …), never a name a caller wrote; DecidedByName is how cards show it
	// (a person's name from people:, or the platform handle).
	DecidedBy     string     `json:"decided_by"`
	DecidedByName string     `json:"decided_by_name,omitempty"`
	DecidedVia    string     `json:"decided_via"`
	Reason        string     `json:"reason"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiresAt     time.Time  `json:"expires_at"`
	DecidedAt     *time.Time `json:"decided_at"`
}
