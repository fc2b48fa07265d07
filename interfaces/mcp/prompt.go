package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/tool/schema"
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
	if args.ToolUseID != "" && len(args.ToolUseID) > 256 {
		return mcpgo.NewToolResultError("tool_use_id: at most 256 characters"), nil
	}
	canon, err := schema.Canonical(args.Input)
	if err != nil {
		return mcpgo.NewToolResultErrorf("input: %v", err), nil
	}
	who := caller(ctx)
	agent := clientAgent(ctx)
	if bad := mayUse(ctx, agent); bad != nil {
		// The client names its agent: a key limited to some agents asks
		// only as one of them.
		return bad, nil
	}
	x := core.ExternalCall{
		Agent: agent, UserID: who.ID, Binding: h.cfg.ApprovalsTo,
		Call: core.ToolCall{ID: args.ToolUseID, Name: name, Arguments: canon},
	}
	if sid := sessionID(ctx); sid != "" {
		// One session per MCP session; named by a hash, since session ids
		// are listed to every key that may read sessions.
		sum := sha256.Sum256([]byte(sid))
		x.SessionID = "mcp-" + hex.EncodeToString(sum[:12])
	}
	if args.ToolUseID != "" {
		// A repeat waits on the same approval only for the same caller,
		// call id, tool and input: anything else is asked again.
		x.Platform, x.DedupeKey = Via, who.ID+":"+args.ToolUseID+":"+schema.SHA256([]byte(name+"\x00"+string(canon)))
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
	stop := h.keepAlive(ctx, req, run.ID)
	run, err = h.follow(ctx, run.ID, updates, newProgress(ctx, h.srv, req), func(r core.Run) bool { return r.Status.Terminal() })
	stop()
	last := release()
	if err != nil && ctx.Err() != nil {
		if !last {
			return nil, err
		}
		if _, cerr := h.cfg.Engine.Cancel(context.WithoutCancel(ctx), run.ID, core.Cancel{By: who.ID, Reason: "the MCP client stopped waiting for the decision"}); cerr != nil && !errors.Is(cerr, core.ErrRunFinished) {
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
		// Allow exactly what was approved: its tool and its arguments.
		if len(p.Items) == 1 && p.Items[0].Tool == name && p.Items[0].ArgsSHA256 == schema.SHA256(canon) {
			answer = permission{Behavior: "allow", UpdatedInput: p.Items[0].Arguments}
		}
	case core.RunCancelled:
		answer.Message = "agentgate: the approval request was cancelled"
	default:
		answer.Message = "agentgate: the approval request failed: " + run.Error
	}
	b, _ := json.Marshal(answer) // our own struct always marshals
	return mcpgo.NewToolResultText(string(b)), nil
}

// keepAlive sends a notification every KeepAlive while the call waits for
// a person, so that clients which drop a silent call (Claude Code over
// streamable HTTP, after 5 minutes) keep waiting: a progress notification
// when the call carries a progress token, else a log message. The returned
// func stops it.
func (h *handlers) keepAlive(ctx context.Context, req mcpgo.CallToolRequest, runID string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(h.cfg.KeepAlive)
		defer t.Stop()
		p := newProgress(ctx, h.srv, req)
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			msg := "still waiting for a person to decide (run " + runID + ")"
			if p.enabled() {
				p.say(msg)
				continue
			}
			_ = h.srv.SendNotificationToClient(ctx, string(mcpgo.MethodNotificationMessage), map[string]any{
				"level": "info", "logger": "agentgate", "data": msg,
			})
		}
	}()
	return func() { cancel(); <-done }
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
