package slack

import (
	"context"
	"errors"
	"log/slog"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// sender posts messages through the outbox: the intent is recorded before
// chat.postMessage and the ts after it, so a retried job never posts a
// message twice. A message whose earlier outcome is unknown is not posted
// again (it is marked uncertain and logged): a missing message is better
// than a doubled one.
type sender struct {
	outbox core.Outbox
	client *Client
	clock  core.Clock
	log    *slog.Logger
}

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
	once := s.once()
	res, err := once.PostOnce(ctx, key, func(ctx context.Context) (string, error) {
		return s.client.Post(ctx, channel, thread, text, blocks)
	})
	return sendResult{Posted: res.Posted, State: res.State, TS: res.Ref}, err
}

// once is the outbox's post-once for this platform.
func (s sender) once() chat.Sender {
	return chat.Sender{Outbox: s.outbox, Clock: s.clock, Logger: s.log, Platform: chat.PlatformSlack,
		MaybePosted: func(err error) bool { return errors.Is(err, ErrMaybePosted) }}
}

func (s sender) now() time.Time { return s.clock.Now().UTC() }
