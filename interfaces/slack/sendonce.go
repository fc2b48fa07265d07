package slack

import (
	"context"

	slackapi "github.com/slack-go/slack"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// sender posts messages through the outbox, once (chat.Sender): the intent
// is recorded before chat.postMessage and the ts after it.
type sender chat.Poster[*Client]

// postOnce posts the message named key unless an earlier attempt did or
// may have; the result's Ref is the message's ts. A refusal (nothing
// posted) is returned as an error and the key can be claimed again.
func (s sender) postOnce(ctx context.Context, key, channel, thread, text string, blocks []slackapi.Block) (chat.Sent, error) {
	once := s.Sender
	return once.PostOnce(ctx, key, func(ctx context.Context) (string, error) {
		return s.Client.Post(ctx, channel, thread, text, blocks)
	})
}
