package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/api"
)

// runState is run_agent's multi round-trip state: the run, and the
// approvals its user was already asked about (never asked twice in one call).
type runState struct {
	RunID string   `json:"run_id"`
	Asked []string `json:"asked,omitempty"`
}

// runAgent submits the input (or, on a retry carrying the user's answers,
// records them) and waits until the run finishes or pauses. A pause on
// approvals the user was not asked about yet asks them through elicitation
// when the client can; otherwise the run is answered with its pending
// approvals.
func (h *handlers) runAgent(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	var st runState
	var submit *core.SubmitRequest
	if req.Params.RequestState != "" {
		if err := json.Unmarshal([]byte(req.Params.RequestState), &st); err != nil || st.RunID == "" {
			return mcpgo.NewToolResultError("requestState: not one this server handed out; call run_agent again"), nil
		}
		// The state comes back from the client: the run is checked as
		// get_run checks it.
		run, err := h.cfg.Store.GetRun(ctx, st.RunID)
		if err != nil {
			return failure(err), nil
		}
		if bad := mayUse(ctx, run.AgentID); bad != nil {
			return bad, nil
		}
	} else {
		agent, bad := required(req, "agent")
		if bad != nil {
			return bad, nil
		}
		input, bad := required(req, "input")
		if bad != nil {
			return bad, nil
		}
		if bad := mayUse(ctx, agent); bad != nil {
			return bad, nil
		}
		if bad := h.mayContinue(ctx, req.GetString("session_id", "")); bad != nil {
			return bad, nil
		}
		p := caller(ctx)
		submit = &core.SubmitRequest{RunID: core.NewID("run"), AgentID: agent, Input: input,
			SessionID: req.GetString("session_id", ""), UserID: p.ID, StartedBy: p.ID, Type: core.RunTypeMCP}
		k, bad := idempotencyKey(req)
		if bad != nil {
			return bad, nil
		}
		if k != "" {
			submit.Platform, submit.DedupeKey = "api", api.RunDedupeKey(p.ID, k)
		}
		st.RunID = submit.RunID
	}
	// Listen before the run starts or moves on, so no step and no streamed
	// word is missed.
	updates, unsub := h.cfg.Engine.Hub().Subscribe(st.RunID)
	defer func() { unsub() }()
	var notes []string
	if submit == nil {
		notes = h.applyAnswers(ctx, st.RunID, st.Asked, req.Params.InputResponses)
	} else if _, err := h.cfg.Engine.Submit(ctx, *submit); err != nil {
		dup, ok := errors.AsType[*core.DuplicateError](err)
		if !ok || dup.RunID == "" {
			return failure(err), nil
		}
		// A retried call: follow the run the first one started.
		first, err := api.Replay(ctx, h.cfg.Store, dup, submit.AgentID, submit.Input)
		if err != nil {
			return failure(err), nil
		}
		unsub()
		updates, unsub = h.cfg.Engine.Hub().Subscribe(first.ID)
		st.RunID = first.ID
	}
	wctx, cancel := context.WithTimeout(ctx, h.cfg.MaxWait)
	defer cancel()
	run, err := h.follow(wctx, st.RunID, updates, newProgress(ctx, h.srv, req), settled)
	if err != nil && wctx.Err() == nil {
		return failure(err), nil
	}
	v, err := api.ViewRun(ctx, h.cfg.Store, run)
	if err != nil {
		return failure(err), nil
	}
	if _, caps := client(ctx); caps.Elicitation != nil {
		ask := server.NewInputRequestBuilder("")
		asking := false
		for _, a := range v.PendingApprovals {
			if !slices.Contains(st.Asked, a.ID) {
				ask.Elicit(a.ID, elicitation(run, a))
				st.Asked = append(st.Asked, a.ID)
				asking = true
			}
		}
		if asking {
			b, _ := json.Marshal(st) // strings always marshal
			return ask.RequestState(string(b)).ToolResult(), nil
		}
	}
	return mcpgo.NewToolResultStructured(v, runSummary(v, notes)), nil
}

// mayContinue refuses session id, when it exists, if it is of an agent the
// key may not use or a chat conversation (api.ChatSession), and an id the
// gateway names itself (api.GatewaySession).
func (h *handlers) mayContinue(ctx context.Context, id string) *mcpgo.CallToolResult {
	if id == "" {
		return nil
	}
	ses, err := h.cfg.Store.GetSession(ctx, id)
	switch {
	case errors.Is(err, core.ErrNotFound):
	case err != nil:
		return failure(err)
	default:
		if bad := mayUse(ctx, ses.AgentID); bad != nil {
			return bad
		}
	}
	if why := cmp.Or(api.ChatSession(ses), api.GatewaySession(id)); why != "" {
		return mcpgo.NewToolResultError(why)
	}
	return nil
}

func settled(r core.Run) bool { return r.Status.Terminal() || r.Status == core.RunPaused }

// elicitation asks the user to decide approval a of run.
func elicitation(run core.Run, a core.Approval) mcpgo.ElicitationParams {
	tool := a.Tool
	if s := a.Server(); s != "" {
		tool += " from MCP server " + s
	}
	return mcpgo.ElicitationParams{
		Message: fmt.Sprintf("Agent %s wants to call %s with %s (approval %s, expires %s). Approve it?",
			run.AgentID, tool, a.Arguments, a.ID, a.ExpiresAt.UTC().Format(time.RFC3339)),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"decision": map[string]any{"type": "string", "title": "Decision", "enum": []string{"approve", "deny"},
					"description": "approve runs the tool; deny refuses it"},
				"reason": map[string]any{"type": "string", "title": "Reason", "description": "optional; shown to the agent and the team"},
			},
			"required": []string{"decision"},
		},
	}
}

// applyAnswers records the user's answers to the approvals asked about: an
// accepted form decides as chosen, a declined one denies, a cancelled one
// leaves the approval pending. It returns notes on answers that changed
// nothing.
func (h *handlers) applyAnswers(ctx context.Context, runID string, asked []string, answers mcpgo.InputResponses) []string {
	var notes []string
	for _, id := range asked {
		res := server.ElicitationResponse(answers, id)
		if res == nil {
			continue
		}
		if a, err := h.cfg.Store.GetApproval(ctx, id); err != nil || a.RunID != runID {
			// The state came from the client: only the run's own
			// approvals are answered here.
			notes = append(notes, fmt.Sprintf("approval %s is not one of run %s's; decide it with decide_approval", id, runID))
			continue
		}
		var form struct {
			Decision string `json:"decision"`
			Reason   string `json:"reason"`
		}
		if b, err := json.Marshal(res.Content); err == nil {
			_ = json.Unmarshal(b, &form) // a malformed form is read as no decision
		}
		approve := false
		switch {
		case res.Action == mcpgo.ElicitationResponseActionAccept && form.Decision == "approve":
			approve = true
		case res.Action == mcpgo.ElicitationResponseActionAccept && form.Decision == "deny":
		case res.Action == mcpgo.ElicitationResponseActionDecline:
			if form.Reason == "" {
				form.Reason = "declined in the MCP client"
			}
		default:
			notes = append(notes, fmt.Sprintf("approval %s was left pending", id))
			continue
		}
		if _, err := h.decide(ctx, id, approve, form.Reason, ""); err != nil {
			notes = append(notes, fmt.Sprintf("approval %s: %s", id, failureText(err)))
		}
	}
	return notes
}

// runSummary says in words what became of the run, for the text content.
func runSummary(v api.RunView, notes []string) string {
	var b strings.Builder
	switch v.Status {
	case core.RunCompleted:
		b.WriteString(v.Output)
	case core.RunFailed:
		fmt.Fprintf(&b, "The run failed: %s", v.Error)
	case core.RunPaused:
		fmt.Fprintf(&b, "Run %s is paused until a person decides:", v.ID)
		for _, a := range v.PendingApprovals {
			fmt.Fprintf(&b, "\n- approval %s: %s wants to call %s with %s (expires %s)", a.ID, v.AgentID, a.Tool, a.Arguments, a.ExpiresAt.UTC().Format(time.RFC3339))
		}
		b.WriteString("\nDecide with decide_approval; then follow the run with get_run.")
	default:
		fmt.Fprintf(&b, "Run %s is %s; follow it with get_run.", v.ID, v.Status)
	}
	for _, n := range notes {
		b.WriteString("\nNote: " + n)
	}
	fmt.Fprintf(&b, "\n(run %s, session %s)", v.ID, v.SessionID)
	return b.String()
}

// failureText is the message of failure(err).
func failureText(err error) string {
	if tc, ok := failure(err).Content[0].(mcpgo.TextContent); ok {
		return tc.Text
	}
	return err.Error()
}

// follow waits until done(run) holds or ctx ends (returning the latest run
// and ctx's error), reporting the run's journal and streamed text as
// progress on the way.
func (h *handlers) follow(ctx context.Context, id string, updates <-chan core.Update, p *progress, done func(core.Run) bool) (core.Run, error) {
	tick := time.NewTicker(h.cfg.PollInterval)
	defer tick.Stop()
	var after int64
	for {
		rctx := context.WithoutCancel(ctx) // the latest state, even when ctx just ended
		if p.enabled() {
			evs, err := h.cfg.Store.Events(rctx, id, after, 0)
			if err != nil {
				return core.Run{}, err
			}
			for _, ev := range evs {
				p.event(ev)
				after = ev.Seq
			}
		}
		run, err := h.cfg.Store.GetRun(rctx, id)
		if err != nil || done(run) {
			return run, err
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return run, ctx.Err()
			case u := <-updates:
				if u.Delta != "" {
					p.say(u.Delta)
					continue
				}
				waiting = false
			case <-tick.C:
				waiting = false
			}
		}
	}
}

// progress sends notifications/progress for one request, when its client
// asked for them (a progress token).
type progress struct {
	ctx   context.Context
	srv   *server.MCPServer
	token mcpgo.ProgressToken
	n     float64
}

func newProgress(ctx context.Context, srv *server.MCPServer, req mcpgo.CallToolRequest) *progress {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return nil
	}
	return &progress{ctx: ctx, srv: srv, token: req.Params.Meta.ProgressToken}
}

func (p *progress) enabled() bool { return p != nil }

// say sends one progress step with message msg. Progress is best effort:
// mcp-go v1.2.1 may drop a notification sent just before the call answers.
func (p *progress) say(msg string) {
	if p == nil {
		return
	}
	p.n++
	_ = p.srv.SendNotificationToClient(p.ctx, string(mcpgo.MethodNotificationProgress), map[string]any{
		"progressToken": p.token, "progress": p.n, "message": msg,
	})
}

// event reports a journal entry in words.
func (p *progress) event(ev core.Event) {
	var msg string
	switch ev.Type {
	case core.EventUserMessage:
		return // the caller knows what it sent
	case core.EventStatus:
		var s core.StatusChange
		_ = json.Unmarshal(ev.Data, &s)
		msg = "run " + string(s.Status)
	case core.EventModelResponse:
		var m core.ModelResponse
		_ = json.Unmarshal(ev.Data, &m)
		names := make([]string, 0, len(m.ToolCalls))
		for _, c := range m.ToolCalls {
			names = append(names, c.Name)
		}
		msg = "model answered"
		if len(names) > 0 {
			msg = "model calls " + strings.Join(names, ", ")
		}
	case core.EventToolStarted:
		var t core.ToolStarted
		_ = json.Unmarshal(ev.Data, &t)
		msg = "tool " + t.Tool + " started"
	case core.EventToolResult:
		var t core.ToolResult
		_ = json.Unmarshal(ev.Data, &t)
		msg = "tool " + t.Tool + " returned"
	case core.EventApprovalRequested:
		var a core.ApprovalRequested
		_ = json.Unmarshal(ev.Data, &a)
		msg = fmt.Sprintf("waiting for a person to approve %s (approval %s)", a.Tool, a.ApprovalID)
	case core.EventApprovalDecided:
		var d core.ApprovalDecided
		_ = json.Unmarshal(ev.Data, &d)
		msg = fmt.Sprintf("approval %s %s", d.ApprovalID, d.Status)
	default:
		msg = string(ev.Type)
	}
	p.say(msg)
}
