package slack

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// NotifierStore is what the notifier reads and records.
type NotifierStore interface {
	GetApproval(ctx context.Context, id string) (core.Approval, error)
	core.Outbox
}

// NotifierConfig configures Cards.
type NotifierConfig struct {
	Store  NotifierStore // required
	Client *Client       // required
	Clock  core.Clock
	Logger *slog.Logger
	// Location is the time zone of the fallback text of times (Slack shows
	// each reader their own); default UTC.
	Location *time.Location
}

// Notifier posts what the engine has to say in Slack outside a run's answer:
// routine results (routine.ChatDeliverer) and approval cards
// (chat.ApprovalRenderer): a Block Kit card with Approve and Deny buttons in
// the run's thread while pending, edited to the outcome — whoever decided,
// through whatever channel, or the expiry or cancellation — with the buttons
// removed. The card is posted through the outbox, once.
type Notifier struct {
	cfg NotifierConfig
	sender
}

// NewNotifier checks cfg and returns the renderer.
func NewNotifier(cfg NotifierConfig) (*Notifier, error) {
	if cfg.Store == nil || cfg.Client == nil {
		return nil, errors.New("slack: approval cards need a store and a client")
	}
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{cfg: cfg, sender: sender{outbox: cfg.Store, client: cfg.Client, clock: cfg.Clock, log: cfg.Logger}}, nil
}

func cardKey(approvalID string) string { return "slack:approval:" + approvalID }

// RenderApproval implements chat.ApprovalRenderer.
func (c *Notifier) RenderApproval(ctx context.Context, b core.Binding, a core.Approval, r core.Run) error {
	key := cardKey(a.ID)
	state, ts, err := c.outbox.SendRef(ctx, key)
	switch {
	case errors.Is(err, core.ErrNotFound) || err == nil && state == core.SendFailed:
		return c.post(ctx, key, b, a, r)
	case err != nil:
		return err
	case state == core.SendSent:
		if a.Status == core.ApprovalPending {
			return nil // the card is up
		}
		return c.edit(ctx, b.Channel, ts, a, r)
	case state == core.SendSending && a.Status == core.ApprovalPending:
		// A retry of the post that crashed or lost Slack's answer: better no
		// card (the approval can still be decided elsewhere) than two.
		c.log.Warn("slack approval card outcome unknown after an earlier attempt; not posting it again", "approval", a.ID, "channel", b.Channel)
		return c.outbox.SetSendState(ctx, key, core.SendUncertain, "", c.now())
	case state == core.SendSending:
		// Another worker is posting the card right now; it looks at the
		// approval again once posted and edits the card to this outcome.
		return nil
	}
	c.log.Warn("slack approval card state unknown; not edited", "approval", a.ID, "status", a.Status, "state", state)
	return nil
}

// post posts the card as a is now; if a was decided meanwhile (a decision
// whose edit found the card still being posted), it edits it at once.
func (c *Notifier) post(ctx context.Context, key string, b core.Binding, a core.Approval, r core.Run) error {
	card := c.card(a, r)
	res, err := c.postOnce(ctx, key, b.Channel, b.Thread, ApprovalText(card), ApprovalBlocks(card, c.cfg.Location))
	if err != nil || !res.Posted || a.Status != core.ApprovalPending {
		return err
	}
	now, err := c.cfg.Store.GetApproval(ctx, a.ID)
	if err != nil || now.Status == core.ApprovalPending {
		return err
	}
	return c.edit(ctx, b.Channel, res.TS, now, r)
}

// edit replaces the card at ts by a's current state.
func (c *Notifier) edit(ctx context.Context, channel, ts string, a core.Approval, r core.Run) error {
	card := c.card(a, r)
	return c.client.Update(ctx, channel, ts, ApprovalText(card), ApprovalBlocks(card, c.cfg.Location))
}

func (c *Notifier) card(a core.Approval, r core.Run) chat.ApprovalCard {
	return chat.Card(a, r, Approvers)
}

// DeliverResult implements routine.ChatDeliverer: text (Markdown) is posted
// in b's channel (and thread), split at Slack's limits, each part once.
func (c *Notifier) DeliverResult(ctx context.Context, b core.Binding, key, text string) error {
	for i, sections := range Messages(Mrkdwn(text)) {
		k := "slack:" + key + ":" + strconv.Itoa(i)
		if _, err := c.postOnce(ctx, k, b.Channel, b.Thread, strings.Join(sections, "\n\n"), sectionBlocks(sections)); err != nil {
			return err
		}
	}
	return nil
}
