package slack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// MaxBodyBytes caps the body of a request to /slack/events.
const MaxBodyBytes = 1 << 20

// Submitter starts runs; *core.Engine is one.
type Submitter interface {
	Submit(ctx context.Context, req core.SubmitRequest) (core.Run, error)
}

// SessionGetter finds sessions; core.Store is one.
type SessionGetter interface {
	GetSession(ctx context.Context, id string) (core.Session, error)
}

// HandlerConfig configures the Events API handler.
type HandlerConfig struct {
	// SigningSecret verifies requests (SLACK_SIGNING_SECRET). Required.
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
	// Now is the clock for the signature's time window; default time.Now.
	Now func() time.Time
}

// Handler serves POST /slack/events: it verifies the request, turns a
// message for the bot into a run (the inbox dedupes Slack's retries and the
// app_mention + message pair of one post) and acknowledges at once; the
// answer is posted later by the Replier.
type Handler struct {
	cfg HandlerConfig
	log *slog.Logger
}

// NewHandler checks cfg and returns the handler.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	switch {
	case cfg.SigningSecret == "":
		return nil, errors.New("slack: signing secret is empty: set SLACK_SIGNING_SECRET to the app's signing secret")
	case cfg.Engine == nil || cfg.Sessions == nil:
		return nil, errors.New("slack: handler needs an engine and a session store")
	case cfg.DefaultAgent == "":
		return nil, errors.New("slack: handler needs a default agent")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{cfg: cfg, log: cfg.Logger}, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
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

// message starts a run for a message meant for the bot; others are dropped.
func (h *Handler) message(ctx context.Context, req Request) error {
	in := *req.Message
	if in.FromBot && h.cfg.IgnoreBots {
		return nil
	}
	agent := h.cfg.DefaultAgent
	if a, ok := h.cfg.Channels[in.Channel]; ok {
		agent = a
	}
	sid := SessionID(agent, in)
	if !in.Mentioned && !in.DirectMessage {
		if !h.cfg.ThreadFollowUps || in.Thread == in.MessageID {
			return nil // a channel message not addressed to the bot
		}
		if _, err := h.cfg.Sessions.GetSession(ctx, sid); errors.Is(err, core.ErrNotFound) {
			return nil // a thread the bot is not part of
		} else if err != nil {
			return err
		}
	}
	run, err := h.cfg.Engine.Submit(ctx, core.SubmitRequest{
		AgentID:   agent,
		Input:     in.Text,
		SessionID: sid,
		UserID:    in.UserID,
		Type:      core.RunTypeChat,
		Binding: core.Binding{Platform: chat.PlatformSlack, Workspace: in.Workspace,
			Channel: in.Channel, Thread: in.Thread},
		Platform:  chat.PlatformSlack,
		DedupeKey: req.DedupeKey,
	})
	var inputErr *core.InputError
	switch {
	case errors.Is(err, core.ErrDuplicate):
		h.log.Debug("slack message already accepted", "key", req.DedupeKey)
		return nil
	case errors.As(err, &inputErr):
		return nil // a bare mention: nothing to answer
	case err != nil:
		return err
	}
	h.log.Info("slack message accepted", "run", run.ID, "session", sid, "agent", agent)
	return nil
}

var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// SessionID is the session of a Slack message: chat.SessionKey, or, when
// that is not a valid API session id (too long, odd characters in the agent
// id), a stable hash of it.
func SessionID(agent string, in chat.Inbound) string {
	key := chat.SessionKey(agent, in)
	if sessionIDPattern.MatchString(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "slack_" + hex.EncodeToString(sum[:16])
}
