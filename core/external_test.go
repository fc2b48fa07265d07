package core_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/sqlite"
)

// An external run pauses on one approval for the outside agent's call and
// completes with the outcome, without calling any model or tool.
func TestExternalRunOutcomes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		decide func(h *harness, a core.Approval)
		status core.ApprovalStatus
		output string
	}{
		{"approved", func(h *harness, a core.Approval) {
			if _, err := h.aps.Decide(h.t.Context(), a.ID, approval.Request{Approve: true, Principal: keyP("bob")}); err != nil {
				h.t.Fatal(err)
			}
		}, core.ApprovalApproved, "approved by bob (API key) via api"},
		{"denied", func(h *harness, a core.Approval) {
			if _, err := h.aps.Decide(h.t.Context(), a.ID, approval.Request{Principal: keyP("bob"), Reason: "not on main"}); err != nil {
				h.t.Fatal(err)
			}
		}, core.ApprovalDenied, "denied by bob (API key) via api: not on main"},
		{"expired", func(h *harness, a core.Approval) {
			h.clock.Advance(16 * time.Minute)
			if n, err := h.aps.ExpireDue(h.t.Context()); err != nil || n != 1 {
				h.t.Fatalf("ExpireDue = %d, %v; want 1 expired", n, err)
			}
		}, core.ApprovalExpired, "expired: nobody decided within 15m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := &scriptModel{Func: func(int, core.ModelRequest) (core.ModelResponse, error) {
				return core.ModelResponse{Text: "the model must not be called"}, nil
			}}
			h := newHarness(t, map[string]*core.Agent{"ops": {Model: m}}, sqlite.Options{})
			run, err := h.eng.SubmitExternal(t.Context(), core.ExternalCall{
				Agent: "claude-code", SessionID: "mcp-1", UserID: "key-1234",
				Call: core.ToolCall{ID: "toolu_1", Name: "Bash", Arguments: json.RawMessage(`{"description":"list","command":"ls"}`)},
			})
			if err != nil {
				t.Fatal(err)
			}
			if run.Type != core.RunTypeExternal || run.AgentID != "claude-code" {
				t.Fatalf("run = %+v, want an external run of claude-code", run)
			}
			h.waitStatus(run.ID, core.RunPaused)
			p := h.pending(run.ID)
			if len(p) != 1 {
				t.Fatalf("pending approvals = %+v, want one", p)
			}
			a := p[0]
			if a.Tool != "Bash" || string(a.Arguments) != `{"command":"ls","description":"list"}` ||
				a.ToolCallID != "toolu_1" || a.RequestedBy != "key-1234" || !a.ExpiresAt.Equal(a.CreatedAt.Add(15*time.Minute)) {
				t.Fatalf("approval = %+v", a)
			}
			tc.decide(h, a)
			done := h.waitStatus(run.ID, core.RunCompleted)
			if done.Output != tc.output {
				t.Fatalf("output = %q, want %q", done.Output, tc.output)
			}
			if got, _ := h.db.GetApproval(t.Context(), a.ID); got.Status != tc.status {
				t.Fatalf("approval status = %s, want %s", got.Status, tc.status)
			}
			if n := len(m.requests()); n != 0 {
				t.Fatalf("the model was called %d times", n)
			}
			if got := eventTypes(h.events(run.ID)); got != "user_message,model_response,status,approval_requested,status,approval_decided,status,status" {
				t.Fatalf("journal = %s", got)
			}
		})
	}
}

func TestSubmitExternalChecksAndDedupes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]*core.Agent{"ops": {Model: &scriptModel{}}}, sqlite.Options{})
	call := core.ExternalCall{Agent: "claude-code", Call: core.ToolCall{ID: "toolu_9", Name: "Edit", Arguments: json.RawMessage(`{"file":"a.go"}`)},
		Platform: "mcp", DedupeKey: "key-1:toolu_9"}
	first, err := h.eng.SubmitExternal(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.eng.SubmitExternal(t.Context(), call)
	var dup *core.DuplicateError
	if !errors.As(err, &dup) || dup.RunID != first.ID {
		t.Fatalf("second submit: err = %v, want a duplicate of %s", err, first.ID)
	}
	for name, bad := range map[string]core.ExternalCall{
		"agent":     {Agent: "Claude Code", Call: core.ToolCall{Name: "Bash", Arguments: json.RawMessage(`{}`)}},
		"tool":      {Agent: "cc", Call: core.ToolCall{Arguments: json.RawMessage(`{}`)}},
		"arguments": {Agent: "cc", Call: core.ToolCall{Name: "Bash", Arguments: json.RawMessage(`[1]`)}},
	} {
		var ie *core.InputError
		if _, err := h.eng.SubmitExternal(t.Context(), bad); !errors.As(err, &ie) {
			t.Errorf("%s: err = %v, want an input error", name, err)
		}
	}
}
