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
// run's thread, edited to the outcome with the buttons removed. Every
// message goes through the outbox, once.
type Notifier chat.Poster[*Client]

// NewNotifier checks cfg and returns the notifier.
func NewNotifier(cfg chat.NotifierConfig[*Client]) (*Notifier, error) {
	p, err := cfg.Poster(chat.PlatformDiscord, ErrMaybePosted)
	if err != nil {
		return nil, err
	}
	n := Notifier(p)
	return &n, nil
}

// PostCard implements chat.ApprovalRenderer: the card in b's channel.
func (n *Notifier) PostCard(ctx context.Context, key string, b core.Binding, a core.Approval, r core.Run) (chat.Sent, error) {
	return n.postOnce(ctx, key, b.Channel, ApprovalMessage(chat.Card(a, r, Approvers)))
}

// EditCard implements chat.ApprovalRenderer.
func (n *Notifier) EditCard(ctx context.Context, id string, b core.Binding, a core.Approval, r core.Run) error {
	return n.Client.Edit(ctx, b.Channel, id, ApprovalMessage(chat.Card(a, r, Approvers)))
}

// postOnce posts m in channel under key unless an earlier attempt did or
// may have (chat.Sender). A refusal (nothing posted) is returned as an
// error and the key can be claimed again.
func (n *Notifier) postOnce(ctx context.Context, key, channel string, m Message) (chat.Sent, error) {
	return n.PostOnce(ctx, key, func(ctx context.Context) (string, error) { return n.Client.Post(ctx, channel, m) })
}

// postText posts text split into messages of at most MaxMessage
// characters, each under key:i, once.
func (n *Notifier) postText(ctx context.Context, key, channel, text string) error {
	for i, part := range Split(text, MaxMessage) {
		if _, err := n.postOnce(ctx, key+":"+itoa(i), channel, Message{Content: part}); err != nil {
			return err
		}
	}
	return nil
}

// DeliverResult implements routine.ChatDeliverer: text (Markdown) is posted
// in b's channel, split at 2,000 characters, each part once.
func (n *Notifier) DeliverResult(ctx context.Context, b core.Binding, key, text string) error {
	return n.postText(ctx, "discord:"+key, b.Channel, text)
}
