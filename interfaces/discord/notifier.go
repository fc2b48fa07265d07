package discord

import (
	"context"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Notifier posts what the engine has to say in Discord: runs' answers, live
// while they are written and split at 2,000 characters (chat.Platform),
// routine results (routine.ChatDeliverer) and approval cards
// (chat.ApprovalRenderer), a message with Approve and Deny buttons in the
// run's thread while pending, edited to the outcome — whoever decided,
// through whatever channel, or the expiry — with the buttons removed. The
// card is posted through the outbox, once.
type Notifier struct {
	sender
	approvals chat.NotifierStore
}

// NewNotifier checks cfg and returns the notifier.
func NewNotifier(cfg chat.NotifierConfig[*Client]) (*Notifier, error) {
	p, err := cfg.Poster(chat.PlatformDiscord, ErrMaybePosted)
	if err != nil {
		return nil, err
	}
	return &Notifier{sender: sender(p), approvals: cfg.Store}, nil
}

// RenderApproval implements chat.ApprovalRenderer (see chat.CardFlow).
func (n *Notifier) RenderApproval(ctx context.Context, b core.Binding, a core.Approval, r core.Run) error {
	flow := chat.CardFlow{Sender: n.Sender, Approvals: n.approvals,
		Post: func(ctx context.Context, key string, a core.Approval) (chat.Sent, error) {
			return n.postOnce(ctx, key, b.Channel, ApprovalMessage(chat.Card(a, r, Approvers)))
		},
		Edit: func(ctx context.Context, id string, a core.Approval) error {
			return n.Client.Edit(ctx, b.Channel, id, ApprovalMessage(chat.Card(a, r, Approvers)))
		},
	}
	return flow.Render(ctx, core.CardKey(chat.PlatformDiscord, a.ID), a)
}

// DeliverResult implements routine.ChatDeliverer: text (Markdown) is posted
// in b's channel, split at 2,000 characters, each part once.
func (n *Notifier) DeliverResult(ctx context.Context, b core.Binding, key, text string) error {
	return n.postText(ctx, "discord:"+key, b.Channel, text)
}
