package slack

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Notifier posts what the engine has to say in Slack: runs' answers, live
// while they are written (chat.Platform), routine results
// (routine.ChatDeliverer) and approval cards (chat.ApprovalRenderer): a
// Block Kit card with Approve and Deny buttons in the run's thread, edited
// to the outcome with the buttons removed. Every message goes through the
// outbox, once.
type Notifier struct {
	sender
	streamRefused sync.Map // channel → true: Slack refused chat.startStream there
	statusRefused sync.Map // channel → true: Slack refused assistant.threads.setStatus there
}

var (
	_ chat.Platform         = (*Notifier)(nil)
	_ chat.Typer            = (*Notifier)(nil)
	_ chat.ApprovalRenderer = (*Notifier)(nil)
)

// NewNotifier checks cfg and returns the notifier.
func NewNotifier(cfg chat.NotifierConfig[*Client]) (*Notifier, error) {
	p, err := cfg.Poster(chat.PlatformSlack, ErrMaybePosted)
	if err != nil {
		return nil, err
	}
	return &Notifier{sender: sender(p)}, nil
}

// PostCard implements chat.ApprovalRenderer: the card in b's thread.
func (c *Notifier) PostCard(ctx context.Context, key string, b core.Binding, a core.Approval, r core.Run) (chat.Sent, error) {
	card := chat.Card(a, r, Approvers)
	return c.postOnce(ctx, key, b.Channel, b.Thread, ApprovalText(card), ApprovalBlocks(card, time.UTC))
}

// EditCard implements chat.ApprovalRenderer.
func (c *Notifier) EditCard(ctx context.Context, ts string, b core.Binding, a core.Approval, r core.Run) error {
	card := chat.Card(a, r, Approvers)
	return c.Client.Update(ctx, b.Channel, ts, ApprovalText(card), ApprovalBlocks(card, time.UTC))
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
