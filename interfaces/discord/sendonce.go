package discord

import (
	"context"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// sender posts messages through the outbox, once (chat.Sender).
type sender chat.Poster[*Client]

// postOnce posts m in channel under key unless an earlier attempt did or
// may have (chat.Sender). A refusal (nothing posted) is returned as an
// error and the key can be claimed again.
func (s sender) postOnce(ctx context.Context, key, channel string, m Message) (chat.Sent, error) {
	once := s.Sender
	return once.PostOnce(ctx, key, func(ctx context.Context) (string, error) { return s.Client.Post(ctx, channel, m) })
}

// postText posts text split into messages of at most MaxMessage
// characters, each under key:i, once.
func (s sender) postText(ctx context.Context, key, channel, text string) error {
	for i, part := range Split(text, MaxMessage) {
		if _, err := s.postOnce(ctx, key+":"+itoa(i), channel, Message{Content: part}); err != nil {
			return err
		}
	}
	return nil
}
