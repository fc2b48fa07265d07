package core

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentgate/agentgate/core/tool/schema"
)

// ExternalCall is a tool call that an agent outside the gateway (a coding
// agent such as Claude Code) asks a person to approve before it runs it.
type ExternalCall struct {
	// Agent names the outside agent, e.g. "claude-code"; lowercase letters,
	// digits, _ and - (it is shown as the approval's agent). It need not be
	// configured.
	Agent string
	// SessionID groups the outside agent's calls (e.g. one per MCP
	// session); empty starts a new session. Like any session's runs, its
	// calls are decided one after the other.
	SessionID string
	// UserID is who asks (the approval's requester): the principal.
	UserID string
	// Call is the tool call: ID (the outside agent's id for it), Name and
	// Arguments (a JSON object).
	Call ToolCall
	// Binding places the session in a chat conversation, so a chat adapter
	// renders the approval there with its buttons; empty for none.
	Binding Binding
	// Platform and DedupeKey make the submission idempotent, as in
	// SubmitRequest: a second call with the same pair starts nothing and
	// fails with a *DuplicateError naming the first run.
	Platform  string
	DedupeKey string
}

var externalAgentPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// SubmitExternal stores a run of type external for x. The engine pauses it
// on an approval for x.Call under EngineConfig.ExternalApproval, like any
// tool call that needs one (the approval is listed, announced to chat and
// expires the same way), and completes it once the approval is decided,
// expired or cancelled, with the outcome as its output. It never runs a
// model or a tool: the outside agent acts on the decision.
func (e *Engine) SubmitExternal(ctx context.Context, x ExternalCall) (Run, error) {
	switch {
	case !externalAgentPattern.MatchString(x.Agent):
		return Run{}, &InputError{Msg: fmt.Sprintf("agent: use lowercase letters, digits, _ and - (at most 64), got %q", x.Agent)}
	case strings.TrimSpace(x.Call.Name) == "":
		return Run{}, &InputError{Msg: "tool name: required"}
	case x.Call.ID == "":
		x.Call.ID = NewID("call")
	}
	canon, err := schema.Canonical(x.Call.Arguments)
	if err == nil && (len(canon) == 0 || canon[0] != '{') {
		err = fmt.Errorf("must be a JSON object, got %.40s", x.Call.Arguments)
	}
	if err != nil {
		return Run{}, &InputError{Msg: "arguments: " + err.Error()}
	}
	x.Call.Arguments = canon
	return e.submit(ctx, SubmitRequest{
		AgentID: x.Agent, SessionID: x.SessionID, UserID: x.UserID, StartedBy: x.UserID, Type: RunTypeExternal, Binding: x.Binding,
		Input: fmt.Sprintf("%s asks to call %s with %s", x.Agent, x.Call.Name, canon), Platform: x.Platform, DedupeKey: x.DedupeKey,
	}, NewEvent(EventModelResponse, ModelResponse{ToolCalls: []ToolCall{x.Call}}))
}

// externalStep advances an external run: its journal holds the outside
// agent's one tool call (as a model response); the run pauses on its
// approval and completes with the decision's outcome as its output.
func (r *runner) externalStep(ctx context.Context) (bool, error) {
	s := &r.state
	if s.last == nil || len(s.last.ToolCalls) != 1 {
		return true, r.finish(ctx, RunFailed, "", "external run: the journal holds no single tool call", s.usage)
	}
	call := s.last.ToolCalls[0]
	req, asked := s.requested[call.ID]
	if !asked {
		canon, err := schema.Canonical(call.Arguments)
		if err != nil {
			return true, r.finish(ctx, RunFailed, "", "external run: arguments: "+err.Error(), s.usage)
		}
		return true, r.requestApproval(ctx, call, &AgentTool{Approval: r.e.cfg.ExternalApproval}, canon)
	}
	d, decided := s.decided[req.ApprovalID]
	if !decided {
		return false, fmt.Errorf("run %s: approval %s has no decision in the journal", r.run.ID, req.ApprovalID)
	}
	return true, r.finish(ctx, RunCompleted, outcome(d.ApprovalDecided), "", s.usage)
}

// outcome says in one line how an approval ended, e.g. "approved by ana via
// slack", "denied by bob via api: freeze week", "expired: nobody decided
// within 15m0s".
func outcome(d ApprovalDecided) string {
	msg := string(d.Status)
	if d.Status != ApprovalExpired {
		if cmp.Or(d.DecidedByName, d.DecidedBy) != "" {
			msg += " by " + cmp.Or(d.DecidedByName, d.DecidedBy)
		}
		if d.Via != "" && d.Via != d.DecidedBy {
			msg += " via " + d.Via
		}
	}
	if d.Reason != "" {
		msg += ": " + d.Reason
	}
	return msg
}
