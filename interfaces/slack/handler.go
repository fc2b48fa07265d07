package slack

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// MaxBodyBytes caps the body of a request to /slack/events.
const MaxBodyBytes = 1 << 20

// Submitter and SessionGetter are the chat seams (package chat).
type (
	Submitter     = chat.Submitter
	SessionGetter = chat.SessionGetter
)

// HandlerConfig configures the Events API handler.
type HandlerConfig struct {
	// SigningSecret verifies HTTP requests (SLACK_SIGNING_SECRET). Empty
	// when events come over Socket Mode only: then every HTTP request is
	// refused.
	SigningSecret string
	// Parser knows the bot's ids, to tell its own messages and mentions.
	Parser   Parser
	Engine   Submitter     // required
	Sessions SessionGetter // required
	// DefaultAgent answers in channels not in Channels. Required.
	DefaultAgent string
	// Channels routes a channel id to an agent.
	Channels map[string]string
	// ThreadFollowUps: a message without a mention in a thread the bot
	// already has a session for continues that session.
	ThreadFollowUps bool
	// IgnoreBots drops messages of other bots (the bot's own are always
	// dropped).
	IgnoreBots bool
	Logger     *slog.Logger
	// Interact serves approval clicks and slash commands (interact.go).
	Interact InteractConfig
	// Blobs keeps the files people share with the bot (downloaded with
	// Interact.Client); nil: the agent only reads their names. Files over
	// MaxFileBytes (default chat.DefaultMaxFileBytes) are not stored.
	Blobs        core.Blobs
	MaxFileBytes int64
	// Inbox is where messages for the bot are stored before they are
	// acknowledged (required): concurrent requests in one transaction,
	// retries and the app_mention + message pair of one post stored once;
	// Start's processor starts their runs afterwards.
	Inbox core.Inbox
	// NodeID names this node in inbox claims (AGENTGATE_NODE_ID); a
	// restarted node that keeps its name takes its claimed messages back at
	// once. Default "local".
	NodeID string
	// Now is the clock for the signature's time window; default time.Now.
	Now func() time.Time
}

// Handler serves POST /slack/events: it verifies the request, stores a
// message for the bot in the durable inbox (which dedupes Slack's retries and
// the app_mention + message pair of one post) and acknowledges at once; its
// inbox processor (Start) turns the message into a run, and the Notifier
// posts the answer.
type Handler struct {
	cfg   HandlerConfig
	log   *slog.Logger
	inbox *chat.Inbox
}

// NewHandler checks cfg and returns the handler.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	switch {
	case cfg.Engine == nil || cfg.Sessions == nil || cfg.Inbox == nil:
		return nil, errors.New("slack: handler needs an engine, a session store and an inbox")
	case cfg.DefaultAgent == "":
		return nil, errors.New("slack: handler needs a default agent")
	}
	chat.Defaults(nil, &cfg.Logger)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Handler{cfg: cfg, log: cfg.Logger}
	var err error
	h.inbox, err = chat.NewInbox(chat.InboxConfig{Inbox: cfg.Inbox, Platform: chat.PlatformSlack, Owner: cfg.NodeID, Logger: h.log,
		Handle: chat.Entries(chat.PlatformSlack, func(ctx context.Context, key string, e inboxEntry) error {
			return h.start(ctx, key, e.Message)
		})})
	return h, err
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !chat.PostOnly(w, r) {
		return
	}
	if h.cfg.SigningSecret == "" {
		http.Error(w, "Slack requests over HTTP are off (Socket Mode): set SLACK_SIGNING_SECRET to accept them", http.StatusUnauthorized)
		return
	}
	// The headers are checked before a byte of the body is read, so an
	// unsigned request costs no more than its headers.
	if err := CheckHeaders(r.Header, h.cfg.Now()); err != nil {
		h.log.Warn("slack request rejected", "err", err)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	body, ok := chat.ReadBody(w, r, MaxBodyBytes)
	if !ok {
		return
	}
	if err := Verify(h.cfg.SigningSecret, r.Header, body, h.cfg.Now()); err != nil {
		h.log.Warn("slack request rejected", "err", err)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	req, err := h.cfg.Parser.Parse(r.Header, body)
	if err != nil {
		h.log.Warn("slack request malformed", "err", err)
		http.Error(w, "malformed request", http.StatusBadRequest)
		return
	}
	if req.Kind == KindURLVerification {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, req.Challenge)
		return
	}
	ack, err := h.Dispatch(r.Context(), req)
	if err != nil {
		h.log.Error("slack request", "kind", req.Kind, "key", req.DedupeKey, "err", err)
		http.Error(w, "could not accept the request; Slack will retry", http.StatusInternalServerError)
		return
	}
	if ack == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ack)
}

// Dispatch acts on a verified, parsed request, whichever way it arrived
// (HTTP or Socket Mode), and returns what to acknowledge it with: nil for a
// bare acknowledgement, or a message (a slash command's ephemeral answer).
// An error means nothing was accepted and Slack should send it again.
func (h *Handler) Dispatch(ctx context.Context, req Request) (any, error) {
	switch req.Kind {
	case KindMessage:
		return nil, h.message(ctx, req)
	case KindAction:
		return nil, h.action(ctx, req)
	case KindCommand:
		return h.command(ctx, req)
	}
	h.log.Debug("slack request ignored", "kind", req.Kind, "reason", req.Ignored)
	return nil, nil
}

// message stores a message meant for the bot for the inbox processor;
// others are dropped.
func (h *Handler) message(ctx context.Context, req Request) error {
	in := req.Message
	switch {
	case in.FromBot && h.cfg.IgnoreBots:
		return nil
	case !in.Mentioned && !in.DirectMessage && (!h.cfg.ThreadFollowUps || in.Thread == in.MessageID):
		return nil // a channel message not addressed to the bot
	case strings.TrimSpace(in.Text) == "" && len(in.Files) == 0:
		return nil // a bare mention: nothing to answer
	}
	return h.inbox.Append(ctx, req.DedupeKey, inboxEntry{EventID: req.EventID, Message: *req.Message})
}

// start starts the run of a message for the bot: it picks the agent and, for
// a follow-up in a thread, checks that the bot is part of it. The message's
// key dedupes the run (and marks its inbox message processed). Errors are
// as an InboxHandler's: ErrInboxSkip, ErrDuplicate, PermanentError, or
// another to retry.
func (h *Handler) start(ctx context.Context, key string, in chat.Inbound) error {
	agent, sid, err := chat.Route(ctx, h.cfg.Sessions, h.cfg.Channels, in.Channel, h.cfg.DefaultAgent, in)
	if err != nil {
		return err
	}
	return chat.Start(ctx, h.cfg.Engine, h.files(in), agent, sid, key, in, core.Binding{Workspace: in.Workspace, Channel: in.Channel, Thread: in.Thread})
}

// files fetches the files shared with in with the bot's token; the sharer
// alone is told of one too large.
func (h *Handler) files(in chat.Inbound) chat.Files {
	f := chat.Files{Blobs: h.cfg.Blobs, Max: h.cfg.MaxFileBytes, Logger: h.log,
		TooLarge: func(_ context.Context, text string) { h.tell(in.Channel, in.Thread, in.UserID, escapeMrkdwn(text)) }}
	if c := h.cfg.Interact.Client; c != nil {
		f.Fetcher = chat.FetchRef(c.Download)
	}
	return f
}

// SessionID is the session of a Slack message (chat.SessionID).
func SessionID(agent string, in chat.Inbound) string { return chat.SessionID(agent, in) }
