package mcp

import (
	"context"
	"encoding/json"
	"errors"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/agentgate/agentgate/core"
)

// permission is approval_prompt's answer, as Claude Code's
// --permission-prompt-tool expects it in the text content.
type permission struct {
	Behavior     string          `json:"behavior"` // allow or deny
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	Message      string          `json:"message,omitempty"`
}

// approvalPrompt asks a person to approve the calling agent's tool call: it
// submits an external run (its approval is listed, announced and expires
// like any other) and waits until the run has the decision. A repeated call
// with the same tool_use_id waits on the same approval. When the client stops
// waiting (it went away or cancelled the call) and no other call waits on the
// approval here, the approval is cancelled: nobody would act on its decision.
func (h *handlers) approvalPrompt(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	name, bad := required(req, "tool_name")
	if bad != nil {
		return bad, nil
	}
	var args struct {
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
	}
	if err := req.BindArguments(&args); err != nil || len(args.Input) == 0 || args.Input[0] != '{' {
		return mcpgo.NewToolResultError(`input: required, the tool's input as a JSON object, e.g. {"command":"ls"}`), nil
	}
	who := caller(ctx)
	x := core.ExternalCall{
		Agent: clientAgent(ctx), UserID: who, Binding: h.cfg.ApprovalsTo,
		Call: core.ToolCall{ID: args.ToolUseID, Name: name, Arguments: args.Input},
	}
	if sid := sessionID(ctx); sid != "" {
		x.SessionID = "mcp-" + sid
	}
	if args.ToolUseID != "" {
		x.Platform, x.DedupeKey = Via, who+":"+args.ToolUseID
	}
	run, err := h.cfg.Engine.SubmitExternal(ctx, x)
	var dup *core.DuplicateError
	if errors.As(err, &dup) && dup.RunID != "" {
		run, err = h.cfg.Store.GetRun(ctx, dup.RunID)
	}
	if err != nil {
		return failure(err), nil
	}
	updates, unsub := h.cfg.Engine.Hub().Subscribe(run.ID)
	defer unsub()
	release := h.await(run.ID)
	run, err = h.follow(ctx, run.ID, updates, newProgress(ctx, h.srv, req), func(r core.Run) bool { return r.Status.Terminal() })
	last := release()
	if err != nil && ctx.Err() != nil {
		if !last {
			return nil, err
		}
		if _, cerr := h.cfg.Engine.Cancel(context.WithoutCancel(ctx), run.ID, who, "the MCP client stopped waiting for the decision"); cerr != nil && !errors.Is(cerr, core.ErrRunFinished) {
			h.cfg.Logger.Warn("cancel the approval of a client that went away", "run", run.ID, "err", cerr)
		}
		return nil, err
	}
	if err != nil {
		return failure(err), nil
	}
	answer := permission{Behavior: "deny", Message: "agentgate: " + run.Output}
	switch run.Status {
	case core.RunCompleted:
		p, err := h.cfg.Store.ListApprovals(ctx, core.ApprovalFilter{RunID: run.ID, Status: core.ApprovalApproved})
		if err != nil {
			return failure(err), nil
		}
		if len(p.Items) == 1 {
			answer = permission{Behavior: "allow", UpdatedInput: args.Input}
		}
	case core.RunCancelled:
		answer.Message = "agentgate: the approval request was cancelled"
	default:
		answer.Message = "agentgate: the approval request failed: " + run.Error
	}
	b, _ := json.Marshal(answer) // our own struct always marshals
	return mcpgo.NewToolResultText(string(b)), nil
}

// await counts a call waiting on run id until the returned func is called;
// that reports whether it was the last one.
func (h *handlers) await(id string) (release func() (last bool)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiting == nil {
		h.waiting = map[string]int{}
	}
	h.waiting[id]++
	return func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.waiting[id]--
		if h.waiting[id] > 0 {
			return false
		}
		delete(h.waiting, id)
		return true
	}
}
