package slack

import (
	"context"

	slackapi "github.com/slack-go/slack"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// sender posts messages through the outbox: the intent is recorded before
// chat.postMessage and the ts after it, so a retried job never posts a
// message twice. A message whose earlier outcome is unknown is not posted
// again (it is marked uncertain and logged): a missing message is better
// than a doubled one.
type sender chat.Poster[*Client]

// sendResult says what postOnce did.
type sendResult struct {
	Posted bool   // this call posted the message
	State  string // the outbox state after the call
	TS     string // the message's ts when known
}

// postOnce posts the message named key unless an earlier attempt did or
// may have (chat.Sender). A refusal (nothing posted) is returned as an
// error and the key can be claimed again.
func (s sender) postOnce(ctx context.Context, key, channel, thread, text string, blocks []slackapi.Block) (sendResult, error) {
	once := s.Sender
	res, err := once.PostOnce(ctx, key, func(ctx context.Context) (string, error) {
		return s.Client.Post(ctx, channel, thread, text, blocks)
	})
	return sendResult{Posted: res.Posted, State: res.State, TS: res.Ref}, err
}
