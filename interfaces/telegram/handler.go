package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/go-telegram/bot/models"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// MaxBodyBytes caps the body of a webhook request.
const MaxBodyBytes = 1 << 20

// SecretHeader carries the webhook's secret token (setWebhook secret_token).
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// HandlerConfig configures the Handler.
type HandlerConfig struct {
	// WebhookSecret checks webhook requests (TELEGRAM_WEBHOOK_SECRET).
	// Empty: updates come by long polling and every webhook request is
	// refused.
	WebhookSecret string
	Parser        Parser
	// Engine, Inbox (updates are stored before they are acknowledged),
	// DefaultAgent (for chats not in Chats), Blobs (photos and documents;
	// MaxFileBytes defaults to the most the Bot API lets a bot download),
	// NodeID, Clock, Logger.
	chat.Intake
	Client    *Client             // required: answers commands and clicks
	Outbox    core.Outbox         // required: command answers are posted once
	Approvals chat.Decider        // clicks are ignored without it
	Store     chat.ApprovalLister // with Approvals
	Routines  chat.RoutineRunner  // /run and /routines answer "not available" without it
	// Chats routes a chat id to an agent.
	Chats map[string]string
}

// Handler takes Telegram updates, from the webhook (ServeHTTP) or the
// poller (Ingest), into the durable inbox, and acts on them from there
// (Start): a message starts a run, a command is answered, a click decides
// an approval.
type Handler struct {
	cfg   HandlerConfig
	log   *slog.Logger
	inbox *chat.Inbox
}

// NewHandler checks cfg and returns the handler.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if err := cfg.Check(chat.PlatformTelegram); err != nil {
		return nil, err
	}
	if cfg.Client == nil || cfg.Outbox == nil {
		return nil, errors.New("telegram: the handler needs a client and an outbox")
	}
	h := &Handler{cfg: cfg, log: cfg.Logger}
	var err error
	h.inbox, err = chat.NewIntakeInbox(cfg.Intake, chat.PlatformTelegram, h.process)
	return h, err
}

// Start runs the inbox writer and processor until ctx ends. Stop the HTTP
// server and the poller first.
func (h *Handler) Start(ctx context.Context) error { return h.inbox.Run(ctx) }

// ServeHTTP serves POST /telegram/webhook.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !chat.PostOnly(w, r) {
		return
	}
	got := r.Header.Get(SecretHeader)
	if h.cfg.WebhookSecret == "" || subtle.ConstantTimeCompare([]byte(got), []byte(h.cfg.WebhookSecret)) != 1 {
		h.log.Warn("telegram webhook request rejected: wrong or missing secret token")
		http.Error(w, "invalid secret token", http.StatusUnauthorized)
		return
	}
	body, ok := chat.ReadBody(w, r, MaxBodyBytes)
	if !ok {
		return
	}
	var u models.Update
	if err := json.Unmarshal(body, &u); err != nil || u.ID == 0 {
		h.log.Warn("telegram update malformed", "err", err)
		http.Error(w, "malformed update", http.StatusBadRequest)
		return
	}
	if err := h.Ingest(r.Context(), u); err != nil {
		h.log.Error("telegram update", "update", u.ID, "err", err)
		http.Error(w, "could not accept the update; Telegram will retry", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// inboxEntry is what the inbox keeps of an update.
type inboxEntry struct {
	Request Request `json:"request"`
}

// Ingest stores u in the inbox if it asks something of the bot and returns
// once it is durable; an update stored before (same update_id) is not
// stored again. An error means it was not stored.
func (h *Handler) Ingest(ctx context.Context, u models.Update) error {
	switch { // cards and answers name them as Telegram just did
	case u.Message != nil:
		h.cfg.Client.saw(u.Message.From)
	case u.CallbackQuery != nil:
		h.cfg.Client.saw(&u.CallbackQuery.From)
	}
	req := h.cfg.Parser.Parse(u)
	if req.Kind == KindIgnored {
		return nil
	}
	return h.inbox.Append(ctx, req.Key, inboxEntry{Request: req})
}

// process acts on a stored update.
func (h *Handler) process(ctx context.Context, key string, e inboxEntry) error {
	req := e.Request
	switch {
	case req.Kind == KindMessage && req.Message != nil:
		return h.start(ctx, key, *req.Message)
	case req.Kind == KindCommand && req.Command != nil:
		if err := h.command(ctx, key, req); err != nil {
			return err
		}
	case req.Kind == KindCallback && req.Action != nil:
		if err := h.callback(ctx, key, req); err != nil {
			return err
		}
	case req.Kind == KindAnonymous:
		h.log.Info("telegram message on behalf of a chat refused", "chat", req.Chat, "update", key)
		if err := h.tell(ctx, "telegram:"+key+":anonymous", req.Chat, req.Thread, Escape(anonymousNote)); err != nil {
			return err
		}
	case req.Kind == KindReason && req.Action != nil:
		prompt, err := h.isPrompt(ctx, req)
		if err != nil {
			return err
		}
		if prompt {
			if err := h.callback(ctx, key, req); err != nil {
				return err
			}
		} else if req.Message != nil { // a reply to the bot like any other
			return h.start(ctx, key, *req.Message)
		}
	}
	return fmt.Errorf("telegram %s: %w", key, core.ErrInboxSkip)
}

// AgentFor returns the agent that answers in chat.
func (h *Handler) AgentFor(chat string) string {
	if a, ok := h.cfg.Chats[chat]; ok {
		return a
	}
	return h.cfg.DefaultAgent
}

// start starts the run of a message for the bot.
func (h *Handler) start(ctx context.Context, key string, in chat.Inbound) error {
	agent := h.AgentFor(in.Channel)
	sid, err := h.sessionFor(ctx, agent, in)
	if err != nil {
		return err
	}
	files := h.cfg.Files(chat.FetchRef(h.cfg.Client.Download), func(ctx context.Context, text string) {
		if err := h.tell(ctx, "telegram:"+key+":too-large", in.Channel, in.Thread, Escape(text)); err != nil {
			h.log.Warn("telegram: telling of a file too large", "chat", in.Channel, "err", err)
		}
	})
	return chat.Start(ctx, h.cfg.Engine, files, agent, sid, key, in, core.Binding{Channel: in.Channel, Thread: in.Thread})
}

// SessionID is the session of a Telegram message: one per private chat,
// group, or forum topic ({agent}:telegram::{chat}:{topic}); chat.SessionID.
func SessionID(agent string, in chat.Inbound) string {
	in.DirectMessage = true // no reply threads: a chat (or topic) is one conversation
	return chat.SessionID(agent, in)
}

// tell posts a short answer in chat (and topic), once per key.
func (h *Handler) tell(ctx context.Context, key, channel, thread, text string) error {
	id, err := ChatID(channel)
	if err != nil {
		return err
	}
	s := h.sender()
	_, err = s.postOnce(ctx, key, id, threadID(thread), text, nil)
	return err
}
