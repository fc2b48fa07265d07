package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/api"
)

// handlers are the server's tools, resources and prompt.
type handlers struct {
	cfg Config
	srv *server.MCPServer

	mu      sync.Mutex
	waiting map[string]int // approval_prompt calls waiting, by run
}

// readOnly marks a tool that only reads the gateway's state.
func readOnly(t *mcpgo.Tool) {
	for _, o := range []mcpgo.ToolOption{mcpgo.WithReadOnlyHintAnnotation(true), mcpgo.WithDestructiveHintAnnotation(false),
		mcpgo.WithIdempotentHintAnnotation(true), mcpgo.WithOpenWorldHintAnnotation(false)} {
		o(t)
	}
}

var cursorArg = mcpgo.WithString("cursor", mcpgo.Description("next_cursor of the previous page; omit it for the first page"))

func (h *handlers) register(s *server.MCPServer) {
	agentIDs := []string{}
	for _, a := range h.cfg.Engine.Agents() {
		agentIDs = append(agentIDs, a.ID)
	}
	s.AddTool(mcpgo.NewTool("list_agents",
		mcpgo.WithDescription("List the agents this gateway runs, with their description, model and tools (and whether a tool needs a person's approval)."),
		readOnly,
	), h.need(approval.RoleViewer, h.listAgents))
	s.AddTool(mcpgo.NewTool("run_agent",
		mcpgo.WithDescription("Send input to an agent and wait for its answer. The run is durable: when the agent wants to use a tool that needs approval, the run pauses. "+
			"If this client can ask its user (elicitation), the user is asked to approve or deny right here and the run continues; "+
			"otherwise the result lists the pending approvals, to decide with decide_approval. Pass session_id to continue a conversation."),
		mcpgo.WithString("agent", mcpgo.Required(), mcpgo.Enum(agentIDs...), mcpgo.Description("agent id, from list_agents")),
		mcpgo.WithString("input", mcpgo.Required(), mcpgo.MinLength(1), mcpgo.Description("what to tell the agent")),
		mcpgo.WithString("session_id", mcpgo.Description("continue this session (a session_id of an earlier run); omit it to start a new one")),
		idempotencyArg,
		mcpgo.WithDestructiveHintAnnotation(false), mcpgo.WithOpenWorldHintAnnotation(true),
	), h.need(approval.RoleOperator, h.runAgent))
	s.AddTool(mcpgo.NewTool("get_run",
		mcpgo.WithDescription("Show a run: its status (queued, running, paused, completed, failed, cancelled), input, output or error, and its pending approvals."),
		mcpgo.WithString("run_id", mcpgo.Required(), mcpgo.Description("run id, e.g. run_…")),
		readOnly,
	), h.need(approval.RoleViewer, h.getRun))
	s.AddTool(mcpgo.NewTool("list_approvals",
		mcpgo.WithDescription("List approvals: tool calls of agents that wait for (or got) a person's decision, with the tool, its arguments, who asked and when it expires."),
		mcpgo.WithString("status", mcpgo.Enum("pending", "approved", "denied", "expired", "cancelled", "all"), mcpgo.DefaultString("pending"),
			mcpgo.Description("which approvals; default pending")),
		mcpgo.WithString("run_id", mcpgo.Description("only the approvals of this run")),
		cursorArg,
		readOnly,
	), h.need(approval.RoleViewer, h.listApprovals))
	s.AddTool(mcpgo.NewTool("decide_approval",
		mcpgo.WithDescription("Approve or deny a pending approval. The first decision wins; the paused run then resumes (an approved tool runs, a denied one does not). "+
			"The decision is recorded with this API key's identity and the channel mcp."),
		mcpgo.WithString("approval_id", mcpgo.Required(), mcpgo.Description("approval id, e.g. apr_…")),
		mcpgo.WithString("decision", mcpgo.Required(), mcpgo.Enum("approve", "deny")),
		mcpgo.WithString("reason", mcpgo.Description("why; shown to the agent and to the team")),
		mcpgo.WithString("args_sha256", mcpgo.Description("the approval's args_sha256 as you were shown it: the decision is refused if the arguments changed")),
		mcpgo.WithDestructiveHintAnnotation(true), mcpgo.WithIdempotentHintAnnotation(false), mcpgo.WithOpenWorldHintAnnotation(true),
	), h.need(approval.RoleApprover, h.decideApproval))
	if h.cfg.Routines != nil {
		s.AddTool(mcpgo.NewTool("list_routines",
			mcpgo.WithDescription("List routines: standing jobs for agents (a schedule or on demand), with their schedule, next and last fire and whether they are enabled."),
			cursorArg,
			readOnly,
		), h.need(approval.RoleViewer, h.listRoutines))
		s.AddTool(mcpgo.NewTool("trigger_routine",
			mcpgo.WithDescription("Fire a routine now, whatever its schedule; returns the run it started (follow it with get_run)."),
			mcpgo.WithString("routine_id", mcpgo.Required(), mcpgo.Description("routine id, from list_routines")),
			mcpgo.WithString("input", mcpgo.Description("extra input appended to the routine's own")),
			idempotencyArg,
			mcpgo.WithDestructiveHintAnnotation(false), mcpgo.WithOpenWorldHintAnnotation(true),
		), h.need(approval.RoleOperator, h.triggerRoutine))
	}
	s.AddTool(mcpgo.NewTool("list_sessions",
		mcpgo.WithDescription("List sessions (conversations with one agent), oldest first."),
		mcpgo.WithString("agent_id", mcpgo.Description("only this agent's sessions")),
		mcpgo.WithString("user_id", mcpgo.Description("only this user's sessions")),
		cursorArg,
		readOnly,
	), h.need(approval.RoleViewer, h.listSessions))
	s.AddTool(mcpgo.NewTool("get_session_messages",
		mcpgo.WithDescription("Read a session's conversation in order: each run's input (role user) and answer (role assistant), or how the run ended when it has no answer."),
		mcpgo.WithString("session_id", mcpgo.Required(), mcpgo.Description("session id, from list_sessions or a run")),
		cursorArg,
		readOnly,
	), h.need(approval.RoleViewer, h.sessionMessages))
	s.AddTool(mcpgo.NewTool("approval_prompt",
		mcpgo.WithDescription("Ask a person to approve a tool call of a coding agent before it runs, through the gateway's approval flow (chat buttons, API, CLI). "+
			"Blocks until the approval is decided or expires. Made for Claude Code: claude -p --permission-prompt-tool mcp__agentgate__approval_prompt. "+
			`Answers {"behavior":"allow","updatedInput":{…}} or {"behavior":"deny","message":"…"} as JSON text.`),
		mcpgo.WithString("tool_name", mcpgo.Required(), mcpgo.Description("the tool the agent wants to call, e.g. Bash")),
		mcpgo.WithObject("input", mcpgo.Required(), mcpgo.Description("the tool's input, as the agent would call it")),
		mcpgo.WithString("tool_use_id", mcpgo.Description("the agent's id for this call; a repeated call with the same id waits on the same approval")),
		mcpgo.WithDestructiveHintAnnotation(false), mcpgo.WithOpenWorldHintAnnotation(true),
	), h.need(approval.RoleOperator, h.approvalPrompt))
	h.registerResources(s)
}

// jsonResult answers v as structured content, with its JSON as the text.
func jsonResult(v any) *mcpgo.CallToolResult {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return mcpgo.NewToolResultErrorf("encode result: %v", err)
	}
	return mcpgo.NewToolResultStructured(v, string(b))
}

// failure turns err into a tool error the model can read.
func failure(err error) *mcpgo.CallToolResult {
	var ie *core.InputError
	var np *core.NotPendingError
	var na *approval.NotAllowedError
	var nc *approval.NotCallerError
	var reused *core.KeyReusedError
	switch {
	case errors.As(err, &nc):
		return mcpgo.NewToolResultError(nc.Error())
	case errors.As(err, &reused):
		return mcpgo.NewToolResultError(reused.Named("idempotency_key"))
	case errors.As(err, &ie):
		return mcpgo.NewToolResultError(ie.Msg)
	case errors.As(err, &np):
		return mcpgo.NewToolResultErrorf("approval %s is already %s; nothing was changed", np.ID, np.Status)
	case errors.As(err, &na):
		return mcpgo.NewToolResultError(na.Error())
	case errors.Is(err, core.ErrArgsMismatch):
		return mcpgo.NewToolResultError("the approval's arguments differ from the ones you were shown (args_sha256); list it again")
	case errors.Is(err, core.ErrSessionAgent):
		return mcpgo.NewToolResultError("the session belongs to another agent; start a new session or use that agent")
	case errors.Is(err, core.ErrNotFound), errors.Is(err, core.ErrInvalidCursor):
		return mcpgo.NewToolResultError(err.Error())
	}
	return mcpgo.NewToolResultErrorf("the gateway could not complete the request; try again: %v", err)
}

// required reads a required string argument.
func required(req mcpgo.CallToolRequest, name string) (string, *mcpgo.CallToolResult) {
	v, err := req.RequireString(name)
	if err == nil && strings.TrimSpace(v) == "" {
		err = errors.New("must not be empty")
	}
	if err != nil {
		return "", mcpgo.NewToolResultErrorf("%s: required (%v)", name, err)
	}
	return v, nil
}

func page(req mcpgo.CallToolRequest) core.ListOptions {
	return core.ListOptions{Cursor: req.GetString("cursor", "")}
}

func (h *handlers) listAgents(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	return jsonResult(core.Page[api.AgentView]{Items: api.ViewAgents(h.cfg.Engine.Agents())}), nil
}

func (h *handlers) getRun(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	id, bad := required(req, "run_id")
	if bad != nil {
		return bad, nil
	}
	run, err := h.cfg.Store.GetRun(ctx, id)
	if err != nil {
		return failure(err), nil
	}
	if bad := mayUse(ctx, run.AgentID); bad != nil {
		return bad, nil
	}
	v, err := api.ViewRun(ctx, h.cfg.Store, run)
	if err != nil {
		return failure(err), nil
	}
	return jsonResult(v), nil
}

func (h *handlers) listApprovals(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	st := core.ApprovalStatus(req.GetString("status", "pending"))
	switch {
	case st == "all":
		st = ""
	case !st.Valid():
		return mcpgo.NewToolResultError("status: must be one of pending, approved, denied, expired, cancelled, all"), nil
	}
	return pageResult(h.cfg.Store.ListApprovals(ctx, core.ApprovalFilter{
		Status: st, RunID: req.GetString("run_id", ""), AgentIDs: caller(ctx).Agents, ListOptions: page(req),
	}))
}

func (h *handlers) decideApproval(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	id, bad := required(req, "approval_id")
	if bad != nil {
		return bad, nil
	}
	decision := req.GetString("decision", "")
	if decision != "approve" && decision != "deny" {
		return mcpgo.NewToolResultError(`decision: must be "approve" or "deny"`), nil
	}
	a, err := h.decide(ctx, id, decision == "approve", req.GetString("reason", ""), req.GetString("args_sha256", ""))
	if err != nil {
		return failure(err), nil
	}
	return jsonResult(a), nil
}

// decide records a decision made through MCP, as the caller.
func (h *handlers) decide(ctx context.Context, id string, approve bool, reason, argsSHA string) (core.Approval, error) {
	return h.cfg.Approvals.Decide(ctx, id, approval.Request{
		Approve: approve, Principal: caller(ctx), Reason: reason, ArgsSHA256: argsSHA,
	})
}

// need lets only callers with at least role use a tool; others get a tool
// error and an audit entry.
func (h *handlers) need(role approval.Role, next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		p := caller(ctx)
		if p.Role < role {
			why := fmt.Sprintf("the key's role %s may not call %s; it needs %s or above", p.Role, req.Params.Name, role)
			h.audit(ctx, core.AuditEntry{Principal: p.ID, Route: Via, Action: core.AuditForbidden, Target: "tool " + req.Params.Name,
				Outcome: core.AuditDenied, Detail: why})
			return mcpgo.NewToolResultError(why), nil
		}
		return next(ctx, req)
	}
}

// audit appends e to the audit log (the store fills in its time and the
// outcome ok); a failure is logged.
func (h *handlers) audit(ctx context.Context, e core.AuditEntry) {
	if err := h.cfg.Store.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		h.cfg.Logger.Error("audit log", "action", e.Action, "target", e.Target, "err", err)
	}
}

// mayUse reports whether the caller's key may act on agent's runs.
func mayUse(ctx context.Context, agent string) *mcpgo.CallToolResult {
	if caller(ctx).MayUseAgent(agent) {
		return nil
	}
	return mcpgo.NewToolResultErrorf("the key is limited to other agents than %s", agent)
}

// idempotencyArg makes a retried call safe: the same key (from the same
// API key) answers with the run the first call started.
var idempotencyArg = mcpgo.WithString("idempotency_key", mcpgo.Description(
	"optional: a retried call with the same key answers with the run the first one started instead of starting another (1-255 visible ASCII characters, e.g. a UUID)"))

// idempotencyKey is the call's idempotency_key ("" when none), or the
// error result for one that breaks api.IdempotencyKeyRule.
func idempotencyKey(req mcpgo.CallToolRequest) (string, *mcpgo.CallToolResult) {
	k := req.GetString("idempotency_key", "")
	if k != "" && !api.ValidIdempotencyKey(k) {
		return "", mcpgo.NewToolResultError("idempotency_key: " + api.IdempotencyKeyRule)
	}
	return k, nil
}

func (h *handlers) listRoutines(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	p, err := h.cfg.Routines.List(ctx, core.RoutineFilter{AgentIDs: caller(ctx).Agents, ListOptions: page(req)})
	api.RedactFor(caller(ctx), p.Items)
	return pageResult(p, err)
}

func (h *handlers) triggerRoutine(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	id, bad := required(req, "routine_id")
	if bad != nil {
		return bad, nil
	}
	k, bad := idempotencyKey(req)
	if bad != nil {
		return bad, nil
	}
	dedupe := ""
	if k != "" {
		dedupe = api.TriggerDedupeKey(caller(ctx).ID, id, k)
	}
	run, err := h.cfg.Approvals.Trigger(ctx, h.cfg.Routines, caller(ctx), id, req.GetString("input", ""), core.Binding{}, dedupe)
	_, err = core.Replayed(run, err) // a retry: the first call's run
	if err != nil {
		return failure(err), nil
	}
	return jsonResult(run), nil
}

func (h *handlers) listSessions(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	return pageResult(h.cfg.Store.ListSessions(ctx, core.SessionFilter{
		AgentID: req.GetString("agent_id", ""), UserID: req.GetString("user_id", ""), AgentIDs: caller(ctx).Agents,
		ListOptions: page(req),
	}))
}

// message is one turn of a session's conversation.
type message struct {
	Role   string         `json:"role"` // user or assistant
	Text   string         `json:"text"`
	RunID  string         `json:"run_id"`
	Status core.RunStatus `json:"status,omitempty"` // the run's, on assistant turns
}

func (h *handlers) sessionMessages(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	id, bad := required(req, "session_id")
	if bad != nil {
		return bad, nil
	}
	ses, err := h.cfg.Store.GetSession(ctx, id)
	if err != nil {
		return failure(err), nil
	}
	if bad := mayUse(ctx, ses.AgentID); bad != nil {
		return bad, nil
	}
	runs, err := h.cfg.Store.ListRuns(ctx, core.RunFilter{SessionID: id, ListOptions: page(req)})
	if err != nil {
		return failure(err), nil
	}
	out := core.Page[message]{Items: []message{}, NextCursor: runs.NextCursor}
	for _, r := range runs.Items {
		out.Items = append(out.Items, message{Role: "user", Text: r.Input, RunID: r.ID})
		text := r.Output
		switch {
		case r.Status == core.RunFailed:
			text = "(failed: " + r.Error + ")"
		case text == "" && r.Status != core.RunCompleted:
			text = fmt.Sprintf("(%s)", r.Status)
		}
		out.Items = append(out.Items, message{Role: "assistant", Text: text, RunID: r.ID, Status: r.Status})
	}
	return jsonResult(out), nil
}

// pageResult answers a page of a list, or the error that stopped it.
func pageResult[T any](p core.Page[T], err error) (*mcpgo.CallToolResult, error) {
	if err != nil {
		return failure(err), nil
	}
	if p.Items == nil {
		p.Items = []T{}
	}
	return jsonResult(p), nil
}
