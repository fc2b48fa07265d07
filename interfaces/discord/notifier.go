package discord

import (
	"context"
	"errors"
	"log/slog"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// NotifierStore is what the notifier reads and records.
type NotifierStore interface {
	GetApproval(ctx context.Context, id string) (core.Approval, error)
	core.Outbox
}

// NotifierConfig configures a Notifier.
type NotifierConfig struct {
	Store  NotifierStore // required
	Client *Client       // required
	Clock  core.Clock
	Logger *slog.Logger
}

// Notifier posts what the engine has to say in Discord outside a run's
// answer: routine results (routine.ChatDeliverer) and approval cards
// (chat.ApprovalRenderer), a message with Approve and Deny buttons in the
// run's thread while pending, edited to the outcome — whoever decided,
// through whatever channel, or the expiry — with the buttons removed. The
// card is posted through the outbox, once.
type Notifier struct {
	cfg NotifierConfig
	sender
}

// NewNotifier checks cfg and returns the notifier.
func NewNotifier(cfg NotifierConfig) (*Notifier, error) {
	if cfg.Store == nil || cfg.Client == nil {
		return nil, errors.New("discord: the notifier needs a store and a client")
	}
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{cfg: cfg, sender: sender{outbox: cfg.Store, client: cfg.Client, clock: cfg.Clock, log: cfg.Logger}}, nil
}

// RenderApproval implements chat.ApprovalRenderer.
func (n *Notifier) RenderApproval(ctx context.Context, b core.Binding, a core.Approval, r core.Run) error {
	key := "discord:approval:" + a.ID
	state, id, err := n.outbox.SendRef(ctx, key)
	switch {
	case errors.Is(err, core.ErrNotFound) || err == nil && state == core.SendFailed:
		res, err := n.postOnce(ctx, key, b.Channel, ApprovalMessage(chat.Card(a, r, Approvers)))
		if err != nil || !res.Posted || a.Status != core.ApprovalPending {
			return err
		}
		// Decided while the card was being posted: show the outcome now.
		now, err := n.cfg.Store.GetApproval(ctx, a.ID)
		if err != nil || now.Status == core.ApprovalPending {
			return err
		}
		return n.cfg.Client.Edit(ctx, b.Channel, res.Ref, ApprovalMessage(chat.Card(now, r, Approvers)))
	case err != nil:
		return err
	case state == core.SendSent:
		if a.Status == core.ApprovalPending {
			return nil // the card is up
		}
		return n.cfg.Client.Edit(ctx, b.Channel, id, ApprovalMessage(chat.Card(a, r, Approvers)))
	case state == core.SendSending && a.Status == core.ApprovalPending:
		n.log.Warn("discord approval card outcome unknown after an earlier attempt; not posting it again", "approval", a.ID, "channel", b.Channel)
		return n.outbox.SetSendState(ctx, key, core.SendUncertain, "", n.now())
	}
	return nil // being posted by another worker (which edits it after), or uncertain
}

// DeliverResult implements routine.ChatDeliverer: text (Markdown) is posted
// in b's channel, split at 2,000 characters, each part once.
func (n *Notifier) DeliverResult(ctx context.Context, b core.Binding, key, text string) error {
	return n.postText(ctx, "discord:"+key, b.Channel, text)
}
