// Package chat is the platform-neutral model that chat adapters (Slack,
// Discord, Telegram) produce and consume: an inbound message, a button click, a
// slash command, and the approval card an adapter renders. Platform wire types
// stay inside their adapter; the router and engine only see these.
package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
)

// Platform names as they appear in session keys, bindings and decided_via.
const (
	PlatformSlack    = "slack"
	PlatformDiscord  = "discord"
	PlatformTelegram = "telegram"
)

// Button action ids carried by approval cards; every adapter uses the same two.
const (
	ActionApprove = "approve"
	ActionDeny    = "deny"
)

// Inbound is one message a person (or bot) posted where an agent can see it.
type Inbound struct {
	Platform  string // PlatformSlack, …
	Workspace string // Slack team id, Discord guild id, "" for Telegram
	Channel   string // channel, DM or chat id
	// Thread is the id of the thread's root message. For a top-level message
	// in a channel the adapter sets it to the message's own id (the reply opens
	// a thread there); for a top-level direct message it is empty, so a DM is
	// one continuous session.
	Thread string
	// MessageID is the platform's id for this message, used for inbox dedupe
	// (Slack: ts, unique within a channel).
	MessageID     string
	UserID        string
	UserName      string
	Text          string // the bot mention stripped
	Mentioned     bool   // the bot was mentioned
	FromBot       bool   // posted by a bot (this one or another)
	DirectMessage bool
	At            time.Time
	// Files are the message's attachments; Attach fetches them when the
	// message is processed.
	Files []InFile `json:",omitempty"`
}

// Action is a click on one of an approval card's buttons.
type Action struct {
	Platform  string
	Workspace string
	Channel   string
	// MessageRef identifies the message holding the buttons (Slack: ts), so
	// the adapter can edit it after the decision.
	MessageRef string
	// Thread is the thread the card was posted in, if any.
	Thread string
	UserID string
	// UserName is the clicker's handle or name as the platform sends it
	// (Telegram @username or first name); may be empty.
	UserName string
	// Groups are the clicking user's group/role ids when the platform sends
	// them with the click (Discord roles); adapters whose payload lacks them
	// (Slack user groups) leave this empty and the approver check looks them up.
	Groups     []string
	ActionID   string // ActionApprove or ActionDeny
	ApprovalID string
	// ResponseURL lets the adapter answer the click (Slack response_url,
	// Discord interaction token); TriggerID opens a dialog (Slack trigger_id).
	ResponseURL string
	TriggerID   string
	At          time.Time
	// Confirmed: the decision was confirmed in a dialog (Slack's deny
	// modal), with Reason as given there.
	Confirmed bool
	Reason    string
}

// Command is a slash command.
type Command struct {
	Platform  string
	Workspace string
	Channel   string
	UserID    string
	UserName  string
	Name      string // without the leading slash: "agentgate"
	Text      string // everything after the command name
	// ResponseURL answers the command later (ephemeral or in channel);
	// TriggerID opens a dialog.
	ResponseURL string
	TriggerID   string
}

// ApprovalCard is what an adapter renders for an approval, pending or decided.
type ApprovalCard struct {
	ApprovalID  string
	Agent       string
	Tool        string
	Server      string // the MCP server whose tool it is; "" for the agent's own
	Arguments   string // pretty-printed JSON
	Approvers   string // who may approve, as text: "<@U1>, requester" or "anyone in this conversation"
	RequestedBy string // principal id of whoever started the run (slack:T/U, discord:U, key:name), may be empty
	ExpiresAt   time.Time

	// Decided state; Status is "pending" until a decision.
	Status    string // core.ApprovalStatus values: pending|approved|denied|expired|cancelled
	DecidedBy string // platform user id, or a free-form name for other channels
	Reason    string
	DecidedAt time.Time
}

// Pending reports whether the card still awaits a decision.
func (c ApprovalCard) Pending() bool { return c.Status == "" || c.Status == "pending" }

// SessionKey is the session a chat message belongs to:
// {agent}:{platform}:{workspace}:{channel}:{thread-or-root}. A message
// outside any thread keys on its own id (the bot's reply opens the thread),
// except a top-level direct message, which keys on the empty thread so the
// whole DM is one session.
func SessionKey(agent string, in Inbound) string {
	thread := in.Thread
	if thread == "" && !in.DirectMessage {
		thread = in.MessageID
	}
	return strings.Join([]string{agent, in.Platform, in.Workspace, in.Channel, thread}, ":")
}

// ReplyText is the Markdown posted for a finished run: its output, or a
// short line for a failure; nothing for a cancelled run.
func ReplyText(run core.Run) string {
	switch run.Status {
	case core.RunCompleted:
		if strings.TrimSpace(run.Output) == "" {
			return "_(no answer)_"
		}
		return run.Output
	case core.RunFailed:
		msg, _, _ := strings.Cut(strings.TrimSpace(run.Error), "\n")
		if r := []rune(msg); len(r) > 300 {
			msg = string(r[:299]) + "…"
		}
		return "Sorry, I could not finish this: " + msg
	}
	return ""
}

// SessionID is the session of a chat message: SessionKey, or, when
// that is not a valid API session id (too long, odd characters in the agent
// id), a stable hash of it.
func SessionID(agent string, in Inbound) string {
	return core.SessionIDFor(SessionKey(agent, in), in.Platform)
}

// Threads configures a platform whose conversations are threads in
// channels (Slack, Discord).
type Threads struct {
	Sessions SessionGetter // required
	// Channels routes a channel id (on Discord a thread's parent channel)
	// to an agent.
	Channels map[string]string
	// ThreadFollowUps: a message without a mention in a thread the bot
	// already has a session for continues that session.
	ThreadFollowUps bool
	// IgnoreBots drops messages of other bots (the bot's own are always
	// dropped).
	IgnoreBots bool
}

// Route picks the agent of a message — Channels[place] (a channel, a
// thread's parent) when set, else def — and its session. A message that
// neither mentions the bot nor is direct continues a thread only where the
// bot already has that session: elsewhere it is skipped (ErrInboxSkip).
func (t Threads) Route(ctx context.Context, place, def string, in Inbound) (agent, session string, err error) {
	agent = def
	if a, ok := t.Channels[place]; ok {
		agent = a
	}
	session = SessionID(agent, in)
	if !in.Mentioned && !in.DirectMessage {
		if _, err := t.Sessions.GetSession(ctx, session); errors.Is(err, core.ErrNotFound) {
			return "", "", fmt.Errorf("a thread the bot is not part of: %w", core.ErrInboxSkip)
		} else if err != nil {
			return "", "", err
		}
	}
	return agent, session, nil
}

// Author is the principal id of whoever wrote in: the requester of the
// approvals of the run it starts.
func Author(in Inbound) string {
	return approval.ChatPrincipal(in.Platform, in.Workspace, in.UserID, "").ID
}
