// Package mcp serves agentgate to MCP clients: desktop assistants (Claude
// Desktop, ChatGPT, Cursor) run agents, see and decide approvals, trigger
// routines and read sessions; coding agents (Claude Code) route their own
// permission requests to the same approval flow through approval_prompt. It
// speaks streamable HTTP (Handler, mounted at /mcp behind the API keys) and,
// for clients that launch a command, stdio relayed to that endpoint (Bridge).
//
// Every decision made through MCP is recorded with the route "mcp" and the
// caller's API key (key:<name>, api.PrincipalFrom), key:local when the API is
// open. Tools check the key's role as the REST routes do.
package mcp

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/api"
)

// Via is the channel recorded with decisions made through MCP.
const Via = "mcp"

// Config configures the MCP server. Engine, Store and Approvals are required.
type Config struct {
	Engine    *core.Engine
	Store     core.Store
	Approvals *approval.Service
	// Routines serves list_routines and trigger_routine; nil leaves them out.
	Routines api.Routines
	Logger   *slog.Logger
	// Version is the server version clients see. Default "dev".
	Version string
	// Authenticated says that requests reach the handler only with a valid
	// API key. When false (the API is open on loopback), a request that came
	// over loopback with a Host other than a loopback name is refused, so a
	// web page cannot reach the server through DNS rebinding.
	Authenticated bool
	// MaxWait caps how long run_agent waits for a run to finish or pause; a
	// run still working then is returned as it is (get_run follows it).
	// Default 60s.
	MaxWait time.Duration
	// PollInterval is how often waiting calls re-read the store in case
	// another replica changed the run. Default 1s.
	PollInterval time.Duration
	// KeepAlive is how often approval_prompt tells a waiting client that it
	// still waits (a progress notification, or a log message without a
	// progress token). Default 25s.
	KeepAlive time.Duration
	// ApprovalsTo places the sessions of approval_prompt in a chat
	// conversation, so that its adapter posts their approvals there with
	// buttons; empty = none (they are decided through MCP, the API or the CLI).
	ApprovalsTo core.Binding
}

func (c *Config) defaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 60 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = 25 * time.Second
	}
}

const instructions = `agentgate runs AI agents durably and holds their risky tool calls for a person's approval.
Use list_agents to see the agents, run_agent to talk to one (a run may pause with pending approvals),
list_approvals and decide_approval to see and decide approvals, get_run to follow a run,
list_routines and trigger_routine for scheduled jobs, list_sessions and get_session_messages for history.
approval_prompt is for coding agents (Claude Code's --permission-prompt-tool): it asks a person to approve a tool call.`

// NewServer returns the MCP server with every tool, the agents as
// resources and the review_approvals prompt.
func NewServer(cfg Config) *server.MCPServer {
	cfg.defaults()
	s := server.NewMCPServer("agentgate", cfg.Version,
		server.WithInstructions(instructions),
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithPromptCapabilities(false),
		server.WithLogging(),
		server.WithRecovery(),
		server.WithLogger(cfg.Logger),
	)
	h := &handlers{cfg: cfg, srv: s}
	h.register(s)
	return s
}

// Handler serves MCP over streamable HTTP at path /mcp. Mount it behind the
// API keys (api.Config.Protected): a session belongs to the key that opened
// it (session.go).
func Handler(cfg Config) http.Handler {
	cfg.defaults()
	return ownSessionsOnly(server.NewStreamableHTTPServer(NewServer(cfg),
		server.WithEndpointPath("/mcp"),
		server.WithStreamableHTTPLogger(cfg.Logger),
		server.WithDisableLocalhostProtection(cfg.Authenticated),
		server.WithSessionIdManagerResolver(keySessionIDs{}),
	))
}

// caller is who calls: the API key's principal (key:local, an admin, when
// the API is open), on the route mcp.
func caller(ctx context.Context) approval.Principal {
	p, ok := api.PrincipalFrom(ctx)
	if !ok {
		// Reached without the auth middleware (a test server): nobody.
		return approval.Principal{Route: Via}
	}
	p.Route = Via
	return p
}

// client returns what the client told about itself and what it can do.
func client(ctx context.Context) (mcpgo.Implementation, mcpgo.ClientCapabilities) {
	if p := server.RequestProtocolInfoFromContext(ctx); p != nil && p.Modern {
		var info mcpgo.Implementation
		var caps mcpgo.ClientCapabilities
		if p.ClientInfo != nil {
			info = *p.ClientInfo
		}
		if p.ClientCapabilities != nil {
			caps = *p.ClientCapabilities
		}
		return info, caps
	}
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		return s.GetClientInfo(), s.GetClientCapabilities()
	}
	return mcpgo.Implementation{}, mcpgo.ClientCapabilities{}
}

var nameRunes = regexp.MustCompile(`[^a-z0-9_-]+`)

// clientAgent names the client as an outside agent ("claude-code"), for the
// approvals it asks for.
func clientAgent(ctx context.Context) string {
	info, _ := client(ctx)
	name := strings.Trim(nameRunes.ReplaceAllString(strings.ToLower(info.Name), "-"), "-_")
	if len(name) > 64 {
		name = name[:64]
	}
	if name == "" {
		return "mcp-client"
	}
	return name
}

// sessionID is the MCP session of the request, "" when it has none.
func sessionID(ctx context.Context) string {
	if server.IsModernRequest(ctx) {
		return ""
	}
	if s := server.ClientSessionFromContext(ctx); s != nil {
		return s.SessionID()
	}
	return ""
}
