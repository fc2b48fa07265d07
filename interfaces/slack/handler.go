package slack

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// MaxBodyBytes caps the body of a request to /slack/events.
const MaxBodyBytes = 1 << 20

// HandlerConfig configures the Events API handler.
type HandlerConfig struct {
	// SigningSecret verifies HTTP requests (SLACK_SIGNING_SECRET). Empty
	// when events come over Socket Mode only: then every HTTP request is
	// refused.
	SigningSecret string
	// Parser knows the bot's ids, to tell its own messages and mentions.
	Parser Parser
	// Engine, Inbox (concurrent requests stored in one transaction, the
	// app_mention + message pair of one post once), DefaultAgent (for
	// channels not in Channels), Blobs (files downloaded with
	// Interact.Client), NodeID, Clock (also the signature's time window).
	chat.Intake
	// Sessions (required), Channels, ThreadFollowUps, IgnoreBots.
	chat.Threads
	// Interact serves approval clicks and slash commands (interact.go).
	Interact InteractConfig
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
	if err := cfg.Check(chat.PlatformSlack); err != nil {
		return nil, err
	}
	if cfg.Sessions == nil {
		return nil, errors.New("slack: the handler needs a session store")
	}
	h := &Handler{cfg: cfg, log: cfg.Logger}
	var err error
	h.inbox, err = chat.NewIntakeInbox(cfg.Intake, chat.PlatformSlack, func(ctx context.Context, key string, e inboxEntry) error {
		return h.start(ctx, key, e.Message)
	})
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
	if err := CheckHeaders(r.Header, h.cfg.Clock.Now()); err != nil {
		h.log.Warn("slack request rejected", "err", err)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	body, ok := chat.ReadBody(w, r, MaxBodyBytes)
	if !ok {
		return
	}
	if err := Verify(h.cfg.SigningSecret, r.Header, body, h.cfg.Clock.Now()); err != nil {
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
	agent, sid, err := h.cfg.Route(ctx, in.Channel, h.cfg.DefaultAgent, in)
	if err != nil {
		return err
	}
	return chat.Start(ctx, h.cfg.Engine, h.files(in), agent, sid, key, in, core.Binding{Workspace: in.Workspace, Channel: in.Channel, Thread: in.Thread})
}

// files fetches the files shared with in with the bot's token; the sharer
// alone is told of one too large.
func (h *Handler) files(in chat.Inbound) chat.Files {
	var fetch chat.Fetcher
	if c := h.cfg.Interact.Client; c != nil {
		fetch = chat.FetchRef(c.Download)
	}
	return h.cfg.Files(fetch, func(_ context.Context, text string) { h.tell(in.Channel, in.Thread, in.UserID, escapeMrkdwn(text)) })
}
